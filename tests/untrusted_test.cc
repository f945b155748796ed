// The segment is input, not memory: another process with write access may
// have written anything into it. Every index, link and count is checked
// before use (tables.h); a bad one is never followed, the operation goes on
// degraded, and the state is repaired before the lock is released. Each
// case corrupts a real segment through the test's own mapping and then
// drives ordinary operations in a forked child, so that an out-of-bounds
// access shows up as a signal, not as silently scribbled memory.
#include <gtest/gtest.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "handle.h"
#include "layout.h"
#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

using detail::kNone;
constexpr uint32_t kFar = 0x4000'0000u;  // 64 GiB past a lease table

// Runs body() in a child; it must exit 0 (not die of SIGSEGV/SIGBUS).
void in_child(const std::function<int()> &body) {
  Children kids;
  pid_t p = kids.spawn(body);
  EXPECT_EQ(kids.wait(p, std::chrono::seconds(30)), 0)
      << "128+11 is SIGSEGV, 128+7 SIGBUS, -1 a hang";
}

// A thread of the calling process queued on `s`, and its outcome.
struct QueuedThread {
  std::atomic<int> r{1};
  shmsem_lease_t l{};
  std::thread t;
  void start(shmsem_t *s) {
    t = std::thread([this, s] { r = shmsem_acquire(s, &l); });
  }
};

TEST(Untrusted, OutOfRangeFreeListIndexIsRepairedNotFollowed) {
  Segment seg(2);
  seg.get()->core->free_lease = kFar;
  in_child([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t a, b;
    int r = shmsem_try_acquire(s, &a);  // degraded: no lease, then repaired
    if (r != 0 && r != -EAGAIN) return 1;
    if (r == -EAGAIN && shmsem_try_acquire(s, &a) != 0) return 2;
    if (shmsem_try_acquire(s, &b) != 0) return 3;
    if (shmsem_release(s, &a) || shmsem_release(s, &b)) return 4;
    return shmsem_check(s) == 0 ? 0 : 5;
  });
  EXPECT_COUNTS(seg.get(), 2, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// Repair orders the queued slots by ticket. It used to sort slot indices
// with a comparison that read the tickets from the segment, so a writer
// changing them during the sort made std::sort run off its array and
// corrupt the heap (an adversarial test crashed a process that only called
// try_acquire). A writer thread rewrites every ticket while this process
// forces repair after repair; under ASan any stray access fails the test.
TEST(Untrusted, TicketsRewrittenDuringRepairCannotCorruptMemory) {
  Segment seg(1, 1024);
  shmsem_t *s = seg.get();
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    while (!stop.load(std::memory_order_relaxed)) {
      for (uint32_t w = 0; w < s->max_waiters; w++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        s->slots[w].word.store(detail::kSlotWaiting, std::memory_order_relaxed);
        __atomic_store_n(&s->slots[w].ticket, x, __ATOMIC_RELAXED);
      }
    }
  });
  while (s->slots[0].word.load() != detail::kSlotWaiting) sched_yield();
  for (int i = 0; i < 5000; i++) {
    s->core->free_lease = kFar;  // out of range: the next unlock repairs
    shmsem_lease_t l;
    if (shmsem_try_acquire(s, &l) == 0) shmsem_release(s, &l);
  }
  stop = true;
  writer.join();
  struct shmsem_stat st;
  EXPECT_EQ(shmsem_stat(s, &st), 0);
  EXPECT_GE(st.repairs, 1u);
}

// A lock word with flags but no tid is never written by a holder (tids are
// above 0): a writer put it there, and it used to block every caller,
// deadlines included, since "tid 0" could not be judged. Found by the
// segment fuzzer's author.
TEST(Untrusted, LockWordWithFlagsButNoTidIsTakenOver) {
  Segment seg(1);
  seg.get()->core->lock_word.store(detail::kLockWaiters |
                                   detail::kLockTakeover);
  in_child([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t l;
    if (shmsem_try_acquire(s, &l) != 0) return 1;
    if (shmsem_release(s, &l) != 0) return 2;
    return shmsem_check(s) == 0 ? 0 : 3;
  });
  EXPECT_EQ(seg.get()->core->lock_word.load(), 0u);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Untrusted, OutOfRangeFreeListLinkIsRepairedNotFollowed) {
  Segment seg(3);
  seg.get()->leases[0].next_free = kFar;
  in_child([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t l[3];
    int got = 0;
    for (int i = 0; i < 6 && got < 3; i++)
      if (shmsem_try_acquire(s, &l[got]) == 0) got++;
    if (got != 3) return 1;
    for (auto &x : l)
      if (shmsem_release(s, &x)) return 2;
    return shmsem_check(s) == 0 ? 0 : 3;
  });
  EXPECT_INVARIANTS(seg.get());
}

TEST(Untrusted, OutOfRangeInUseCountsAreRepairedNotFollowed) {
  Segment seg(2);
  seg.get()->core->n_used_leases.store(kFar);
  seg.get()->core->n_used_slots.store(kFar);
  in_child([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t a;
    for (int i = 0; i < 3; i++) {
      if (shmsem_acquire(s, &a) != 0) return 1;
      if (shmsem_release(s, &a) != 0) return 2;
    }
    if (shmsem_recover(s) < 0) return 3;
    return shmsem_check(s) == 0 ? 0 : 4;
  });
  EXPECT_INVARIANTS(seg.get());
}

// The head of the queue names no queued slot: the released permit goes to
// the pool, and the repair before unlock hands it to the real head.
TEST(Untrusted, OutOfRangeQueueHeadStillGrantsTheRealHead) {
  for (uint32_t bad : {kFar, 5u /* a FREE slot */}) {
    Segment seg(1);
    in_child([&] {
      shmsem_t *s = seg.open_again();
      shmsem_lease_t held;
      if (shmsem_acquire(s, &held) != 0) return 1;
      QueuedThread q;
      q.start(s);
      if (!waiting_is(s, 1)) return 2;
      s->core->head = bad;
      if (shmsem_release(s, &held) != 0) return 3;
      q.t.join();
      if (q.r != 0) return 4;
      if (shmsem_release(s, &q.l) != 0) return 5;
      return shmsem_check(s) == 0 ? 0 : 6;
    });
    EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
    EXPECT_INVARIANTS(seg.get());
  }
}

TEST(Untrusted, OutOfRangeQueueLinksAreRepairedNotFollowed) {
  Segment seg(1);
  in_child([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t held;
    if (shmsem_acquire(s, &held) != 0) return 1;
    QueuedThread a, b;
    a.start(s);
    if (!waiting_is(s, 1)) return 2;
    b.start(s);
    if (!waiting_is(s, 2)) return 3;
    uint32_t head = s->core->head;
    s->slots[head].next = kFar;  // unlinking the head follows next
    s->core->tail = kFar;        // appending follows tail
    if (shmsem_release(s, &held) != 0) return 4;
    a.t.join();
    if (a.r != 0 || shmsem_release(s, &a.l) != 0) return 5;
    b.t.join();
    if (b.r != 0 || shmsem_release(s, &b.l) != 0) return 6;
    return shmsem_check(s) == 0 ? 0 : 7;
  });
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Untrusted, CyclicQueueDoesNotHangShutdown) {
  Segment seg(1);
  in_child([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t held;
    if (shmsem_acquire(s, &held) != 0) return 1;
    QueuedThread a, b;
    a.start(s);
    if (!waiting_is(s, 1)) return 2;
    b.start(s);
    if (!waiting_is(s, 2)) return 3;
    uint32_t head = s->core->head;
    s->slots[head].next = head;  // a loop
    s->slots[head].prev = head;
    if (shmsem_shutdown(s) < 0) return 4;
    a.t.join();
    b.t.join();
    if (a.r != -ESHUTDOWN || b.r != -ESHUTDOWN) return 5;
    if (shmsem_release(s, &held) != 0) return 6;
    return shmsem_check(s) == 0 ? 0 : 7;
  });
  EXPECT_INVARIANTS(seg.get());
}

// The handle keeps the geometry it validated at open: a header rewritten
// afterwards (2^20 permits over a small mapping) changes nothing it does.
TEST(Untrusted, HeaderRewrittenAfterOpenDoesNotChangeTheHandlesGeometry) {
  Segment seg(2, 4);
  in_child([&] {
    shmsem_t *s = seg.open_again();
    s->hdr->permits = SHMSEM_MAX_PERMITS;
    s->hdr->max_waiters = SHMSEM_MAX_WAITERS;
    shmsem_lease_t a, b;
    if (shmsem_acquire(s, &a) || shmsem_acquire(s, &b)) return 1;
    if (shmsem_try_acquire(s, &a) != -EAGAIN) return 2;
    if (shmsem_recover(s) < 0) return 3;
    struct shmsem_stat st;
    if (shmsem_stat(s, &st) || st.permits != 2 || st.max_waiters != 4) return 4;
    if (shmsem_release(s, &a) || shmsem_release(s, &b)) return 5;
    return shmsem_check(s) == 0 ? 0 : 6;
  });
  shmsem_t *again = nullptr;
  EXPECT_EQ(shmsem_open(seg.name().c_str(), 0, &again), -EBADMSG)
      << "a new opener validates the rewritten header";
}

// Garbage everywhere in the derived structures (free lists, links, counts,
// in-use arrays): the next locker's operations stay in bounds, and one
// repair brings back every invariant as long as the commit words are sane.
TEST(Untrusted, GarbageInEveryDerivedFieldIsRepairedNotFollowed) {
  Segment seg(4, 8);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  uint32_t x = 0x9e3779b9u;
  auto junk = [&x] { return x = x * 1664525u + 1013904223u; };
  detail::Core *c = s->core;
  c->free_lease = junk();
  c->free_slot = junk();
  c->head = junk();
  c->tail = junk();
  c->watcher.store(junk());
  c->n_used_leases.store(junk());
  c->n_used_slots.store(junk());
  for (uint32_t i = 0; i < s->permits; i++) {
    s->leases[i].next_free = junk();
    s->leases[i].used_pos = junk();
    s->leases[i].slot = junk();
  }
  for (uint32_t i = 0; i < s->max_waiters; i++) {
    s->slots[i].next_free = junk();
    s->slots[i].prev = junk();
    s->slots[i].next = junk();
    s->slots[i].used_pos = junk();
    s->slots[i].lease = junk();
  }
  for (uint32_t i = 0; i < s->permits + s->max_waiters; i++)
    s->used_leases[i].store(junk());
  in_child([&] {
    shmsem_t *h = seg.open_again();
    shmsem_lease_t l[4];
    int got = 0;
    for (int i = 0; i < 10 && got < 3; i++)
      if (shmsem_try_acquire(h, &l[got]) == 0) got++;
    if (got != 3) return 1;
    for (int i = 0; i < got; i++)
      if (shmsem_release(h, &l[i])) return 2;
    if (shmsem_recover(h) < 0) return 3;
    return shmsem_check(h) == 0 ? 0 : 4;
  });
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// The wait histogram is shared memory too: counts that add up past 2^64
// once wrapped the total to 0 ("no waits recorded"), and a total of about
// 2^64 made the rank a double that does not convert back to 64 bits
// (undefined behaviour; found by the segment fuzzer). Sums saturate now.
TEST(Untrusted, HugeWaitHistogramCountsStillGiveAQuantileBound) {
  Segment seg(1);
  seg.get()->core->wait_hist[shmsem_hist_bucket(40)].store(
      ~uint64_t{0});                                             // 40-43 ns
  seg.get()->core->wait_hist[shmsem_hist_bucket(100)].store(1);  // 96-103 ns
  in_child([&] {
    shmsem_t *s = seg.open_again();
    struct shmsem_stat st;
    if (shmsem_stat(s, &st) != 0) return 1;
    for (double q : {0.5, 0.99, 1.0}) {
      uint64_t b = shmsem_stat_wait_quantile(&st, q);
      if (b != 43 && b != 103) return 2;  // a bound of one of the buckets
    }
    return 0;
  });
}

// The counters are shared memory too: a count near 2^31 made the signed
// sum in counter_add() overflow (undefined behaviour: an abort under UBSan,
// so this fails in the sanitizer pass of `make test` without the fix;
// found by review, reproduced as a segment fuzzer input). They wrap as
// unsigned values; shmsem_check reports the mismatch (they are caches).
// A count no consistent state has (here `held` at the signed limit, which
// once overflowed a signed sum) is recounted from the records by the first
// lock holder, before it is used: it neither wraps nor stays.
TEST(Untrusted, CountsAtTheSignedLimitAreRecountedBeforeUse) {
  Segment seg(2);
  seg.get()->core->held.store(0x7fff'ffffu);
  in_child([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t l;
    if (shmsem_try_acquire(s, &l) != 0) return 1;
    if (shmsem_release(s, &l) != 0) return 2;
    struct shmsem_stat st;
    if (shmsem_stat(s, &st) != 0 || st.held != 0 || st.repairs != 1) return 3;
    return shmsem_check(s) == 0 ? 0 : 4;
  });
}

// The CLI's snapshot (now shmsem_inspect) remembered every owner it had
// judged for the life of the process: each distinct owner a writer put into
// the segment grew that memo without bound in a long-running caller (found
// while building the segment fuzzer), and a holder that died between two
// snapshots was still shown alive. It remembers within one call only.
TEST(Untrusted, InspectJudgesOwnersAfreshEachTime) {
  Segment seg(1);
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  Children kids;
  pid_t holder = kids.spawn([&] {
    close(go[1]);
    shmsem_lease_t l;
    if (shmsem_acquire(seg.get(), &l) != 0) return 1;
    if (write(ready[1], "x", 1) != 1) return 2;
    char c;
    return read(go[0], &c, 1) == 0 ? 0 : 3;  // until the parent closes it
  });
  close(go[0]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  struct shmsem_inspection in;
  struct shmsem_holder h;
  ASSERT_EQ(shmsem_inspect(seg.get(), &in, &h, 1, nullptr, 0), 0);
  ASSERT_EQ(in.nholders, 1u);
  EXPECT_EQ(h.pid, holder);
  EXPECT_EQ(h.liveness, SHMSEM_OWNER_ALIVE);
  close(go[1]);
  ASSERT_EQ(kids.wait(holder, std::chrono::seconds(30)), 0);
  ASSERT_EQ(shmsem_inspect(seg.get(), &in, &h, 1, nullptr, 0), 0);
  ASSERT_EQ(in.nholders, 1u);
  EXPECT_EQ(h.liveness, SHMSEM_OWNER_DEAD);
  close(ready[0]);
  close(ready[1]);
}

// Everything shmsem_inspect can read a segment through: the writable
// handle (under the lock), a read-only mapping (without it), and a copy.
// Each result of each, in a child: a crash is the finding.
int inspect_every_way(
    shmsem_t *s, const std::string &name,
    const std::function<int(int, const shmsem_inspection &,
                            const std::vector<shmsem_holder> &,
                            const std::vector<shmsem_waiter_info> &)> &check) {
  shmsem_t *ro = nullptr, *copy = nullptr;
  if (shmsem_open(name.c_str(), SHMSEM_RDONLY, &ro) != 0) return 90;
  if (shmsem_open(name.c_str(), SHMSEM_SNAPSHOT, &copy) != 0) return 91;
  int bad = 0;
  int k = 0;
  for (shmsem_t *h : {s, ro, copy}) {
    k++;
    // Buffers as large as the geometry: nothing real is left out.
    std::vector<shmsem_holder> holders(64);
    std::vector<shmsem_waiter_info> waiters(64);
    shmsem_inspection in;
    int r = shmsem_inspect(h, &in, holders.data(), uint32_t(holders.size()),
                           waiters.data(), uint32_t(waiters.size()));
    holders.resize(std::min<size_t>(holders.size(), in.nholders));
    waiters.resize(std::min<size_t>(waiters.size(), in.nwaiters));
    int e = check(r, in, holders, waiters);
    if (e && !bad) bad = 10 * k + e;
  }
  shmsem_detach(ro);
  shmsem_detach(copy);
  return bad;
}

// Queue links that loop: no hang, every waiter once, in ticket order (the
// order repair would use), and the result says the order was rebuilt.
TEST(Untrusted, InspectOfACyclicQueueRebuildsItsOrderFromTickets) {
  Segment seg(1);
  in_child([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t held;
    if (shmsem_acquire(s, &held) != 0) return 1;
    QueuedThread a, b;
    a.start(s);
    if (!waiting_is(s, 1)) return 2;
    b.start(s);
    if (!waiting_is(s, 2)) return 3;
    uint32_t head = s->core->head;
    s->slots[head].next = head;  // a loop
    s->slots[head].prev = head;
    int bad = inspect_every_way(
        s, seg.name(),
        [](int r, const shmsem_inspection &in,
           const std::vector<shmsem_holder> &holders,
           const std::vector<shmsem_waiter_info> &waiters) {
          if (r != 0) return 1;
          if (!(in.flags & SHMSEM_INSPECT_REBUILT)) return 2;
          if (waiters.size() != 2 || waiters[0].ticket >= waiters[1].ticket)
            return 3;
          if (waiters[0].position != 1 || waiters[1].position != 2) return 4;
          return holders.size() == 1 ? 0 : 5;
        });
    if (shmsem_shutdown(s) < 0) return 4;
    a.t.join();
    b.t.join();
    if (shmsem_release(s, &held) != 0) return 6;
    return bad ? 10 + bad : 0;
  });
}

// Lease links and slot leases far out of range or looping, and counters
// beyond the geometry: -EUCLEAN (a damaged segment) with what could be
// read, every index checked, never a crash; each record in at most one
// holder.
TEST(Untrusted, InspectOfOutOfRangeLinksAndCountsIsEucleanNotACrash) {
  Segment seg(4, 8);
  in_child([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t two, one;
    if (shmsem_acquire_n(s, 2, &two) != 0) return 1;
    if (shmsem_acquire(s, &one) != 0) return 2;
    s->leases[two.index].link = kFar;  // the weighted lease's chain
    s->leases[one.index].link = one.index;
    for (uint32_t i = 0; i < s->max_waiters; i++) {
      s->slots[i].lease = kFar;
      s->slots[i].next = kFar;
    }
    s->core->head = kFar;
    // Links alone: a degraded answer, not a damaged one.
    int bad =
        inspect_every_way(s, seg.name(),
                          [](int r, const shmsem_inspection &in,
                             const std::vector<shmsem_holder> &holders,
                             const std::vector<shmsem_waiter_info> &) {
                            if (r != 0) return 1;
                            uint32_t permits = 0;
                            for (const auto &h : holders) {
                              if (h.lease >= 4 || h.weight < 1 || h.weight > 4)
                                return 2;
                              permits += h.weight;
                            }
                            if (permits > 4) return 3;
                            return in.nwaiters == 0 ? 0 : 4;
                          });
    if (bad) return 10 + bad;
    // Counters past the geometry: somebody else wrote them. A reader
    // without the lock reports the damage; one that takes the lock (a
    // writable handle) repairs it first (census.h: counters no consistent
    // state has are recounted before anyone acts on them).
    bad = inspect_every_way(
        s, seg.name(),
        [&](int r, const shmsem_inspection &in,
            const std::vector<shmsem_holder> &holders,
            const std::vector<shmsem_waiter_info> &) {
          s->core->held.store(kFar);  // again, for the next reader
          s->core->waiting.store(kFar);
          if (r == 0) return in.stat.held <= 4 && holders.size() <= 4 ? 0 : 4;
          if (r != -EUCLEAN) return 1;
          if (in.stat.held < kFar) return 2;  // what was read, shown
          return holders.size() <= 4 ? 0 : 3;
        });
    if (bad) return 40 + bad;
    return 0;
  });
}

// A writer can name a live thread in the lock word (here a child of ours,
// asleep): nobody can prove it dead, so everybody waits for it, but no call
// waits past its own deadline, and a try not for long. Nothing changes.
TEST(Untrusted, LockWordNamingALiveThreadHoldsNoCallPastItsDeadline) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  Children kids;
  pid_t live = kids.spawn([&] {
    close(hold[1]);
    char c;
    return read(hold[0], &c, 1) == 0 ? 0 : 1;  // until the parent closes it
  });
  close(hold[0]);
  s->core->lock_word.store(uint32_t(live));
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_try_acquire(s, &l), -EAGAIN);
  timespec soon;
  clock_gettime(CLOCK_MONOTONIC, &soon);
  soon.tv_nsec = 0;
  soon.tv_sec += 1;
  EXPECT_EQ(shmsem_acquire_until(s, &soon, &l), -ETIMEDOUT);
  EXPECT_EQ(s->core->lock_word.load() & detail::kLockTidMask, uint32_t(live));
  s->core->lock_word.store(0);
  close(hold[1]);
  EXPECT_EQ(kids.wait(live), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Many distinct dead owners (a writer's, or a mass death): one pass judging
// every one of them took 3.6 s for 2^20 whatever the caller's deadline. A
// pass stops at the caller's limit; the next passes go on where it stopped.
std::atomic<int> g_judged{0};
shmsem_cancel_t *g_cancel_at_100;

void count_judged_hook(testing::HookPoint p, void *) {
  if (p != testing::HookPoint::RECLAIM_JUDGED) return;
  if (++g_judged == 100 && g_cancel_at_100) shmsem_cancel(g_cancel_at_100);
}

TEST(Untrusted, ManyDeadOwnersHoldNoAcquirePastItsLimit) {
  constexpr uint32_t kN = 1u << 16;
  Segment seg(kN);
  shmsem_t *s = seg.get();
  std::vector<shmsem_lease_t> held(kN);
  for (auto &l : held) ASSERT_EQ(shmsem_try_acquire(s, &l), 0);
  // Every lease now names a process that is gone: one pid (a reaped child
  // of ours), kN start times, so kN owners to judge.
  Children kids;
  pid_t gone = kids.spawn([] { return 0; });
  ASSERT_EQ(kids.wait(gone), 0);
  for (uint32_t i = 0; i < kN; i++)
    ASSERT_EQ(testing::set_lease_owner(s, held[i], gone, i + 1, 0), 0);
  // Passes alone: the death watch reclaims the owners it proves gone
  // (here a reaped pid) without a verdict of a pass, which these counts
  // would not see (tests/deathwatch_test.cc covers it).
  testing::limit_liveness(detail::kLimitNoUring);
  shmsem_cancel_t c;
  shmsem_cancel_init(&c);
  g_cancel_at_100 = &c;
  g_judged = 0;
  testing::set_hook(count_judged_hook, nullptr);
  // No deadline: the call queues, becomes the watcher and runs a pass;
  // the cancel fired from inside it withdraws the wait and ends the pass.
  shmsem_lease_t l;
  int r = shmsem_acquire_ex(s, nullptr, &c, 0, &l);
  int judged = g_judged.load();
  testing::set_hook(nullptr, nullptr);
  g_cancel_at_100 = nullptr;
  // The pass stopped soon after the cancel, having reclaimed what it had
  // judged by then (permits with nobody queued: back to the pool).
  EXPECT_EQ(r, -ECANCELED);
  EXPECT_GE(judged, 100);
  EXPECT_LE(judged, 100 + 16);
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(s, &st), 0);
  // (Up to three of the owners judged are this process, this thread and
  // this process's record, alive.)
  EXPECT_LE(st.reclaimed_holders, uint64_t(judged));
  EXPECT_GE(st.reclaimed_holders, uint64_t(judged - 3));
  EXPECT_EQ(st.available, st.reclaimed_holders);
  EXPECT_INVARIANTS(s);

  // A deadline alone (a try): take the permits reclaimed so far, then
  // a try's pass stops once the deadline has passed and it had its floor
  // of a millisecond, far short of all kN (it may even judge none if this
  // thread was preempted that long: then it times out).
  std::vector<shmsem_lease_t> mine(st.available);
  for (auto &m : mine) ASSERT_EQ(shmsem_try_acquire(s, &m), 0);
  g_judged = 0;
  testing::set_hook(count_judged_hook, nullptr);
  shmsem_lease_t l2;
  s->core->last_reclaim_ns.store(0);  // not rate-limited by the pass above
  const timespec past{0, 1};
  r = shmsem_acquire_until(s, &past, &l2);
  testing::set_hook(nullptr, nullptr);
  EXPECT_TRUE(r == 0 || r == -ETIMEDOUT) << r;
  if (r == 0) mine.push_back(l2);
  EXPECT_LT(g_judged.load(), int(kN / 4));
  EXPECT_INVARIANTS(s);

  // An unlimited pass (shmsem_recover) finishes the job.
  EXPECT_GT(shmsem_recover(s), 0);
  ASSERT_EQ(shmsem_stat(s, &st), 0);
  EXPECT_EQ(st.reclaimed_holders, uint64_t(kN));
  for (auto &m : mine) EXPECT_EQ(shmsem_release(s, &m), 0);
  EXPECT_COUNTS(s, kN, 0, 0, 0);
  EXPECT_INVARIANTS(s);
  testing::limit_liveness(0);
}

}  // namespace
}  // namespace shmsem::test
