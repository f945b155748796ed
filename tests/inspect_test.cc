// shmsem_inspect (<shmsem/inspect.h>) against real semaphores: holders and
// waiters in several processes, in queue order with their pids, weights
// and the reservation of a weighted head; a SIGKILLed holder shown DEAD
// until recovery; short buffers (-ENOBUFS with the counts); overdue leases
// on the manual clock; shmsem_declare_hold's errors; read-only and
// SHMSEM_SNAPSHOT handles. Corrupted segments: untrusted_test.cc.
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

#include "handle.h"
#include "layout.h"
#include "support/hook_gate.h"
#include "support/manual_clock.h"
#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

using namespace std::chrono_literals;

// The whole snapshot, with buffers the geometry says always suffice.
struct Inspection {
  int rc = 0;
  struct shmsem_inspection in = {};
  std::vector<struct shmsem_holder> holders;
  std::vector<struct shmsem_waiter_info> waiters;
};

Inspection inspect(shmsem_t *s) {
  Inspection r;
  struct shmsem_stat st;
  EXPECT_EQ(shmsem_stat(s, &st), 0);
  r.holders.resize(st.max_permits);
  r.waiters.resize(st.max_waiters);
  r.rc = shmsem_inspect(s, &r.in, r.holders.data(), uint32_t(r.holders.size()),
                        r.waiters.data(), uint32_t(r.waiters.size()));
  r.holders.resize(std::min<size_t>(r.holders.size(), r.in.nholders));
  r.waiters.resize(std::min<size_t>(r.waiters.size(), r.in.nwaiters));
  return r;
}

uint32_t waiting(shmsem_t *s) {
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  return st.waiting;
}

// A child that holds `n` permits as one lease until the parent writes a
// byte to `go` (or the child is killed); it says it holds by a byte on
// `ready`. (A byte, not the end of the file: later children inherit the
// write end.)
struct HeldPipe {
  int ready[2], go[2];
  HeldPipe() {
    EXPECT_EQ(pipe(ready), 0);
    EXPECT_EQ(pipe(go), 0);
  }
  ~HeldPipe() {
    for (int fd : {ready[0], ready[1], go[0], go[1]})
      if (fd >= 0) close(fd);
  }
  pid_t spawn_holder(Children &kids, const Segment &seg, uint32_t n) {
    pid_t p = kids.spawn([&, n] {
      shmsem_lease_t l;
      if (shmsem_acquire_n(seg.get(), n, &l) != 0) return 1;
      if (write(ready[1], "x", 1) != 1) return 2;
      char c;
      if (read(go[0], &c, 1) != 1) return 3;
      return shmsem_release(seg.get(), &l) == 0 ? 0 : 4;
    });
    char c;
    EXPECT_EQ(read(ready[0], &c, 1), 1);
    return p;
  }
  void let_go() { EXPECT_EQ(write(go[1], "x", 1), 1); }
};

// A child queued for `n` permits; exits 0 when shutdown fails it.
pid_t spawn_waiter(Children &kids, const Segment &seg, uint32_t n) {
  return kids.spawn([&seg, n] {
    shmsem_lease_t l;
    int r = shmsem_acquire_n(seg.get(), n, &l);
    return r == -ESHUTDOWN ? 0 : 10 - r;
  });
}

// Holders in two child processes and this one, waiters from three more:
// every lease once with its weight and pid, the waiters in queue order,
// and the permit released meanwhile reserved for the weighted head.
TEST(Inspect, HoldersAndWaitersOfSeveralProcessesInQueueOrder) {
  Segment seg(4, 16);
  Children kids;
  HeldPipe a, b;
  pid_t ha = a.spawn_holder(kids, seg, 2);  // a lease of 2
  pid_t hb = b.spawn_holder(kids, seg, 1);
  shmsem_lease_t mine;
  ASSERT_EQ(shmsem_acquire(seg.get(), &mine), 0);
  // All 4 held. Queue: w1 wants 3, w2 wants 1, w3 wants 2.
  pid_t w1 = spawn_waiter(kids, seg, 3);
  ASSERT_TRUE(wait_until([&] { return waiting(seg.get()) == 1; }));
  pid_t w2 = spawn_waiter(kids, seg, 1);
  ASSERT_TRUE(wait_until([&] { return waiting(seg.get()) == 2; }));
  pid_t w3 = spawn_waiter(kids, seg, 2);
  ASSERT_TRUE(wait_until([&] { return waiting(seg.get()) == 3; }));
  // My permit goes to w1, the head, which needs 3: reserved, not granted;
  // w2 (1) is not let past it.
  ASSERT_EQ(shmsem_release(seg.get(), &mine), 0);

  Inspection r = inspect(seg.get());
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.in.flags, 0u);
  EXPECT_EQ(r.in.stat.held, 3u);
  EXPECT_EQ(r.in.stat.waiting, 3u);
  ASSERT_EQ(r.in.nholders, 2u);
  ASSERT_EQ(r.holders.size(), 2u);
  std::vector<std::pair<int32_t, uint32_t>> leases;
  for (const auto &h : r.holders) {
    leases.emplace_back(h.pid, h.weight);
    EXPECT_EQ(h.liveness, SHMSEM_OWNER_ALIVE);
    EXPECT_EQ(h.flags, 0u);
    EXPECT_EQ(h.declared_ns, 0u);
    EXPECT_LE(h.since_ns, r.in.now_coarse_ns);
    EXPECT_GE(h.since_ns, r.in.oldest_lease_since_ns);
  }
  EXPECT_LT(r.holders[0].lease, r.holders[1].lease) << "by lease record";
  std::sort(leases.begin(), leases.end());
  std::vector<std::pair<int32_t, uint32_t>> want = {{ha, 2}, {hb, 1}};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(leases, want);

  ASSERT_EQ(r.in.nwaiters, 3u);
  ASSERT_EQ(r.waiters.size(), 3u);
  const pid_t pids[] = {w1, w2, w3};
  const uint32_t weights[] = {3, 1, 2};
  for (uint32_t i = 0; i < 3; i++) {
    const auto &w = r.waiters[i];
    EXPECT_EQ(w.position, i + 1);
    EXPECT_EQ(w.pid, pids[i]) << "position " << i + 1;
    EXPECT_EQ(w.tid, pids[i]) << "a single-threaded child";
    EXPECT_EQ(w.weight, weights[i]);
    EXPECT_EQ(w.reserved, i == 0 ? 1u : 0u) << "only the head gathers";
    EXPECT_EQ(w.liveness, SHMSEM_OWNER_ALIVE);
    EXPECT_LE(w.since_ns, r.in.now_ns);
    if (i) {
      EXPECT_GT(w.ticket, r.waiters[i - 1].ticket);
    }
  }
  EXPECT_EQ(r.in.oldest_wait_since_ns, r.waiters[0].since_ns);
  EXPECT_EQ(r.in.overdue, 0u);

  // The snapshot through a copy says the same.
  shmsem_t *copy = nullptr;
  ASSERT_EQ(shmsem_open(seg.name().c_str(), SHMSEM_SNAPSHOT, &copy), 0);
  Inspection c = inspect(copy);
  EXPECT_EQ(c.rc, 0);
  EXPECT_EQ(c.in.nholders, 2u);
  ASSERT_EQ(c.in.nwaiters, 3u);
  for (uint32_t i = 0; i < 3; i++) EXPECT_EQ(c.waiters[i].pid, pids[i]);
  shmsem_detach(copy);

  ASSERT_GE(shmsem_shutdown(seg.get()), 3);
  a.let_go();
  b.let_go();
  EXPECT_TRUE(kids.wait_all_ok(30s));
  EXPECT_INVARIANTS(seg.get());
}

// With nobody queued nothing reclaims a dead holder's permit by itself:
// the snapshot shows it DEAD (the judgement is the snapshot's own), and
// after shmsem_recover it is gone.
TEST(Inspect, KilledHolderIsDeadUntilRecovered) {
  Segment seg(2);
  Children kids;
  HeldPipe p;
  pid_t holder = p.spawn_holder(kids, seg, 1);
  Inspection r = inspect(seg.get());
  ASSERT_EQ(r.rc, 0);
  ASSERT_EQ(r.holders.size(), 1u);
  EXPECT_EQ(r.holders[0].pid, holder);
  EXPECT_EQ(r.holders[0].liveness, SHMSEM_OWNER_ALIVE);
  ASSERT_EQ(kill(holder, SIGKILL), 0);
  EXPECT_EQ(kids.wait(holder, 30s), 128 + SIGKILL);

  r = inspect(seg.get());
  ASSERT_EQ(r.rc, 0);
  ASSERT_EQ(r.holders.size(), 1u);
  EXPECT_EQ(r.holders[0].pid, holder);
  EXPECT_EQ(r.holders[0].liveness, SHMSEM_OWNER_DEAD);
  EXPECT_EQ(r.in.stat.held, 1u);
  EXPECT_EQ(shmsem_recover(seg.get()), 1);
  r = inspect(seg.get());
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.in.nholders, 0u);
  EXPECT_EQ(r.in.oldest_lease_since_ns, 0u);
  EXPECT_EQ(r.in.stat.reclaimed_holders, 1u);
  EXPECT_INVARIANTS(seg.get());
}

// A read that never agreed with itself (SHMSEM_INSPECT_TORN) may hold an
// owner read half-written, which looks dead: there, an owner found dead is
// UNKNOWN (counted alive), never DEAD. The same dead holder read whole is
// DEAD. The reads are torn on purpose: at each one's end the lease's start
// time moves, as a busy semaphore's records do.
TEST(Inspect, TornReadSaysUnknownNotDeadOfAnOwnerFoundDead) {
  Segment seg(2);
  Children kids;
  HeldPipe p;
  pid_t holder = p.spawn_holder(kids, seg, 1);
  ASSERT_EQ(kill(holder, SIGKILL), 0);
  EXPECT_EQ(kids.wait(holder, 30s), 128 + SIGKILL);
  shmsem_t *ro = seg.open_again(SHMSEM_RDONLY);
  ASSERT_NE(ro, nullptr);

  Inspection r = inspect(ro);
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.in.flags & SHMSEM_INSPECT_TORN, 0u);
  ASSERT_EQ(r.holders.size(), 1u);
  EXPECT_EQ(r.holders[0].liveness, SHMSEM_OWNER_DEAD) << "read whole";

  const uint32_t l = r.holders[0].lease;
  ASSERT_LT(l, 2u);
  std::atomic<int> reads{0};
  {
    HookGate gate;
    gate.on_every([&](HookPoint hp) {
      if (hp != HookPoint::INSPECT_SCANNED) return;
      reads++;
      seg.get()->leases[l].since_ns.fetch_add(1, std::memory_order_relaxed);
    });
    r = inspect(ro);
  }
  ASSERT_EQ(r.rc, 0);
  EXPECT_GE(reads.load(), 2) << "the hook must see every read";
  EXPECT_NE(r.in.flags & SHMSEM_INSPECT_TORN, 0u);
  ASSERT_EQ(r.holders.size(), 1u);
  EXPECT_EQ(r.holders[0].pid, holder);
  EXPECT_EQ(r.holders[0].liveness, SHMSEM_OWNER_UNKNOWN) << "torn read";

  r = inspect(ro);  // whole again
  ASSERT_EQ(r.holders.size(), 1u);
  EXPECT_EQ(r.holders[0].liveness, SHMSEM_OWNER_DEAD);
  shmsem_detach(ro);
  EXPECT_EQ(shmsem_recover(seg.get()), 1);
  EXPECT_INVARIANTS(seg.get());
}

// Buffers that are too small hold the first entries; the counts say how
// many there are, and everything else is filled in.
TEST(Inspect, ShortBuffersAreEnobufsWithTheCounts) {
  Segment seg(3, 8);
  shmsem_lease_t l[3];
  for (auto &x : l) ASSERT_EQ(shmsem_acquire(seg.get(), &x), 0);
  std::atomic<int> results[2] = {{1}, {1}};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; i++) {
    threads.emplace_back([&, i] {
      shmsem_lease_t w;
      results[i] = shmsem_acquire(seg.get(), &w);
    });
    ASSERT_TRUE(
        wait_until([&] { return waiting(seg.get()) == uint32_t(i + 1); }));
  }
  struct shmsem_inspection in;
  struct shmsem_holder h[1];
  struct shmsem_waiter_info w[1];
  EXPECT_EQ(shmsem_inspect(seg.get(), &in, h, 1, w, 1), -ENOBUFS);
  EXPECT_EQ(in.nholders, 3u);
  EXPECT_EQ(in.nwaiters, 2u);
  EXPECT_EQ(in.stat.held, 3u);
  EXPECT_EQ(h[0].lease, std::min({l[0].index, l[1].index, l[2].index}))
      << "the first by lease record";
  EXPECT_EQ(h[0].pid, getpid());
  EXPECT_EQ(w[0].position, 1u);
  EXPECT_NE(in.oldest_wait_since_ns, 0u);
  // The waiters alone (no holders asked for) are not short while anyone
  // holds: a kind with a maximum of 0 is only counted. (It was -ENOBUFS.)
  struct shmsem_waiter_info w2[2];
  EXPECT_EQ(shmsem_inspect(seg.get(), &in, nullptr, 0, w2, 2), 0);
  EXPECT_EQ(in.nholders, 3u);
  EXPECT_EQ(w2[1].position, 2u);
  // And the holders alone while two wait.
  EXPECT_EQ(shmsem_inspect(seg.get(), &in, h, 1, nullptr, 0), -ENOBUFS);
  struct shmsem_holder h3[3];
  EXPECT_EQ(shmsem_inspect(seg.get(), &in, h3, 3, nullptr, 0), 0);
  EXPECT_EQ(in.nwaiters, 2u);
  // Big enough.
  EXPECT_EQ(shmsem_inspect(seg.get(), &in, h3, 3, w2, 2), 0);
  // A NULL buffer with room claimed, or no output: -EINVAL.
  EXPECT_EQ(shmsem_inspect(seg.get(), &in, nullptr, 1, w2, 2), -EINVAL);
  EXPECT_EQ(shmsem_inspect(seg.get(), &in, h3, 3, nullptr, 1), -EINVAL);
  EXPECT_EQ(shmsem_inspect(seg.get(), nullptr, h3, 3, w2, 2), -EINVAL);
  EXPECT_EQ(shmsem_inspect(nullptr, &in, h3, 3, w2, 2), -EINVAL);

  ASSERT_EQ(shmsem_shutdown(seg.get()), 2);
  for (auto &t : threads) t.join();
  for (auto &x : results) EXPECT_EQ(x.load(), -ESHUTDOWN);
  for (auto &x : l) EXPECT_EQ(shmsem_release(seg.get(), &x), 0);
}

// A declared hold on the manual clock (the coarse clock follows it in
// tests): not overdue at its declared time, overdue one tick after; a
// weighted lease counts its permits; nothing else changes.
TEST(Inspect, LeaseIsOverdueAfterItsDeclaredTime) {
  ManualClock clock;
  Segment seg(4);
  shmsem_lease_t one, two, plain;
  ASSERT_EQ(shmsem_acquire(seg.get(), &one), 0);
  ASSERT_EQ(shmsem_acquire_n(seg.get(), 2, &two), 0);
  ASSERT_EQ(shmsem_acquire(seg.get(), &plain), 0);
  ASSERT_EQ(shmsem_declare_hold(seg.get(), &one, 5'000'000), 0);
  ASSERT_EQ(shmsem_declare_hold(seg.get(), &two, 20'000'000), 0);

  clock.advance(5'000'000);
  Inspection r = inspect(seg.get());
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.in.overdue, 0u) << "held exactly as long as declared";
  ASSERT_EQ(r.holders.size(), 3u);

  clock.advance(1'000'000);
  r = inspect(seg.get());
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.in.overdue, 1u);
  EXPECT_EQ(r.in.overdue_permits, 1u);
  for (const auto &h : r.holders) {
    EXPECT_EQ(h.held_ns, 6'000'000u);
    if (h.lease == one.index) {
      EXPECT_EQ(h.declared_ns, 5'000'000u);
      EXPECT_EQ(h.flags, uint32_t(SHMSEM_HOLDER_OVERDUE));
    } else if (h.lease == two.index) {
      EXPECT_EQ(h.declared_ns, 20'000'000u);
      EXPECT_EQ(h.weight, 2u);
      EXPECT_EQ(h.flags, 0u);
    } else {
      EXPECT_EQ(h.declared_ns, 0u) << "never declared: never overdue";
      EXPECT_EQ(h.flags, 0u);
    }
  }

  clock.advance(60'000'000);
  r = inspect(seg.get());
  EXPECT_EQ(r.in.overdue, 2u);
  EXPECT_EQ(r.in.overdue_permits, 3u);
  // A new declaration counts (from the grant); 0 withdraws it.
  ASSERT_EQ(shmsem_declare_hold(seg.get(), &two, 1'000'000'000), 0);
  ASSERT_EQ(shmsem_declare_hold(seg.get(), &one, 0), 0);
  r = inspect(seg.get());
  EXPECT_EQ(r.in.overdue, 0u);
  EXPECT_EQ(r.in.stat.held, 4u) << "reporting only";

  // A released lease's declaration is not inherited by the record's next
  // holder.
  ASSERT_EQ(shmsem_declare_hold(seg.get(), &plain, 1'000'000), 0);
  ASSERT_EQ(shmsem_release(seg.get(), &plain), 0);
  shmsem_lease_t again;
  ASSERT_EQ(shmsem_acquire(seg.get(), &again), 0);
  clock.advance(10'000'000);
  r = inspect(seg.get());
  for (const auto &h : r.holders) {
    if (h.lease == again.index) {
      EXPECT_EQ(h.declared_ns, 0u);
    }
  }
  EXPECT_EQ(r.in.overdue, 0u);
  for (auto *l : {&one, &two, &again})
    EXPECT_EQ(shmsem_release(seg.get(), l), 0);
}

TEST(Inspect, DeclareHoldErrors) {
  Segment seg(2);
  Segment other(1, 64, "other");
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &l), 0);
  EXPECT_EQ(shmsem_declare_hold(seg.get(), &l, SHMSEM_MAX_DECLARED_NS), 0);
  EXPECT_EQ(shmsem_declare_hold(seg.get(), &l, SHMSEM_MAX_DECLARED_NS + 1),
            -EINVAL)
      << "too long";
  shmsem_lease_t bad = l;
  bad.gen = 0;
  EXPECT_EQ(shmsem_declare_hold(seg.get(), &bad, 1000), -EINVAL);
  bad = l;
  bad.index = 1u << 30;
  EXPECT_EQ(shmsem_declare_hold(seg.get(), &bad, 1000), -EINVAL);
  bad = l;
  bad.__reserved = 1;
  EXPECT_EQ(shmsem_declare_hold(seg.get(), &bad, 1000), -EINVAL);
  EXPECT_EQ(shmsem_declare_hold(other.get(), &l, 1000), -EINVAL)
      << "a token of another semaphore";
  EXPECT_EQ(shmsem_declare_hold(seg.get(), nullptr, 1000), -EINVAL);
  EXPECT_EQ(shmsem_declare_hold(nullptr, &l, 1000), -EINVAL);

  shmsem_t *ro = seg.open_again(SHMSEM_RDONLY);
  ASSERT_NE(ro, nullptr);
  EXPECT_EQ(shmsem_declare_hold(ro, &l, 1000), -EBADF);
  shmsem_detach(ro);
  shmsem_t *copy = nullptr;
  ASSERT_EQ(shmsem_open(seg.name().c_str(), SHMSEM_SNAPSHOT, &copy), 0);
  EXPECT_EQ(shmsem_declare_hold(copy, &l, 1000), -EBADF);
  shmsem_detach(copy);

  ASSERT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_EQ(shmsem_declare_hold(seg.get(), &l, 1000), -EALREADY);
}

// A read-only handle reads the live mapping without the lock: a quiet
// semaphore reads the same twice, so nothing is torn. A SHMSEM_SNAPSHOT
// handle keeps the moment of its open.
TEST(Inspect, ReadOnlyAndSnapshotHandles) {
  Segment seg(3);
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire_n(seg.get(), 2, &l), 0);
  ASSERT_EQ(shmsem_declare_hold(seg.get(), &l, 1'000'000'000), 0);
  shmsem_t *ro = seg.open_again(SHMSEM_RDONLY);
  ASSERT_NE(ro, nullptr);
  shmsem_t *copy = nullptr;
  ASSERT_EQ(shmsem_open(seg.name().c_str(), SHMSEM_SNAPSHOT, &copy), 0);
  for (shmsem_t *h : {ro, copy}) {
    Inspection r = inspect(h);
    ASSERT_EQ(r.rc, 0);
    EXPECT_EQ(r.in.flags, 0u);
    ASSERT_EQ(r.holders.size(), 1u);
    EXPECT_EQ(r.holders[0].lease, l.index);
    EXPECT_EQ(r.holders[0].weight, 2u);
    EXPECT_EQ(r.holders[0].pid, getpid());
    EXPECT_EQ(r.holders[0].declared_ns, 1'000'000'000u);
    EXPECT_EQ(r.in.created_permits, 3u);
    EXPECT_EQ(r.in.file_uid, geteuid());
    EXPECT_EQ(r.in.file_mode, 0600u);
    EXPECT_NE(r.in.created_realtime_ns, 0u);
  }
  ASSERT_EQ(shmsem_release(seg.get(), &l), 0);
  Inspection live = inspect(ro), then = inspect(copy);
  EXPECT_EQ(live.in.nholders, 0u);
  EXPECT_EQ(then.in.nholders, 1u) << "the copy is of the open";
  EXPECT_EQ(then.in.stat.held, 2u);
  shmsem_detach(ro);
  shmsem_detach(copy);
}

}  // namespace
}  // namespace shmsem::test
