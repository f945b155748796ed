// Issue 24: a co-user with a writable mapping of the segment could still
// make the library write out of bounds (a chain re-read after it was
// checked), release a lease twice, leave a caller that got an error owning
// permits, trust counters over the records, stop for ever, lose a permit
// behind the process-record mark, and leave a check that fails after
// repair. One test per finding, named for the promise it pins.
//
// Each case corrupts a real segment through the test's own mapping, as a
// second process would; where the finding is a race (a link changed
// between two reads), the write is made at the hook point between them, so
// the race is won every time. The victim makes ordinary calls through the
// public API; where a bad write would land out of bounds it runs in a
// forked child, so that the write shows as a signal (or an ASan report),
// not as silently scribbled memory. Afterwards: no crash, `shmsem_check`
// passes once the writer stopped and a repair ran (after
// `shmsem_recover`), the counts add up, every permit can be taken again
// and no more than the capacity, and a caller that got an error owns
// nothing.
#include <gtest/gtest.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <vector>

#include "handle.h"
#include "layout.h"
#include "support/hook_gate.h"
#include "support/manual_clock.h"
#include "support/process.h"
#include "support/segment.h"
#include "support/waiter_thread.h"
#include "testing.h"

namespace shmsem::test {
namespace {

using detail::kNone;
constexpr uint32_t kFar = 0x4000'0000u;  // 64 GiB past a lease table
constexpr uint64_t kMs = 1'000'000;

// Runs body() in a child; it must exit 0 (not die of SIGSEGV/SIGBUS).
void in_child(const std::function<int()> &body) {
  Children kids;
  pid_t p = kids.spawn(body);
  EXPECT_EQ(kids.wait(p, std::chrono::seconds(30)), 0)
      << "128+11 is SIGSEGV, 128+7 SIGBUS, 1 an ASan report, -1 a hang; "
         "others name the step of the child that failed";
}

// A real CLOCK_MONOTONIC deadline `ms` from now.
timespec in_ms(long ms) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1'000'000;
  if (ts.tv_nsec >= 1'000'000'000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1'000'000'000;
  }
  return ts;
}

// A lock word with flags but no tid: no holder writes that, so the next
// caller to lock takes it over and runs the repair of a dead holder.
void force_takeover(shmsem_t *s) {
  s->core->lock_word.store(detail::kLockWaiters | detail::kLockTakeover);
}

// The first slot whose word is `word`, or kNone.
uint32_t slot_in(shmsem_t *s, uint32_t word) {
  for (uint32_t w = 0; w < s->max_waiters; w++)
    if (s->slots[w].word.load() == word) return w;
  return kNone;
}

// The last record of the chain from `first` (the one whose link is kNone),
// or kNone if the chain leaves the table or is longer than the table.
uint32_t chain_end(shmsem_t *s, uint32_t first) {
  uint32_t x = first;
  for (uint32_t i = 0; i < s->permits && x < s->permits; i++) {
    uint32_t next = s->leases[x].link;
    if (next == kNone) return x;
    x = next;
  }
  return kNone;
}

// The hooks of the writer: through the mapping in g_target, at the first
// time their point is reached (g_scribbles counts the points reached).
shmsem_t *g_target;
uint32_t g_lease;  // the record a hook looks for, where it needs one
std::atomic<int> g_scribbles{0};

// Takes every permit with try_acquire (at most `max` tries); returns them.
std::vector<shmsem_lease_t> take_all(shmsem_t *s, int max) {
  std::vector<shmsem_lease_t> got;
  for (int i = 0; i < max; i++) {
    shmsem_lease_t l;
    if (shmsem_try_acquire(s, &l) == 0) got.push_back(l);
  }
  return got;
}

void release_all(shmsem_t *s, std::vector<shmsem_lease_t> *ls) {
  for (auto &l : *ls) EXPECT_EQ(shmsem_release(s, &l), 0);
  ls->clear();
}

// A waiter of this process whose blocking wait was cancelled through its
// handle (its slot CANCELLED), parked at WAIT_WOKEN before it has seen
// that: the slot stays CANCELLED until finish(). Every permit must be held
// when it starts, so that it queues.
class CancelledWaiter {
 public:
  explicit CancelledWaiter(shmsem_t *s) : s_(s) {
    shmsem_cancel_init(&cancel_);
    pause_ = gate_.arm(HookPoint::WAIT_WOKEN, kTag);
    t_.start(kTag, [this](shmsem_lease_t *l) {
      timespec d = in_ms(20'000);
      return shmsem_acquire_ex(s_, &d, &cancel_, 0, l);
    });
  }
  ~CancelledWaiter() { (void)finish(); }
  CancelledWaiter(const CancelledWaiter &) = delete;
  CancelledWaiter &operator=(const CancelledWaiter &) = delete;

  // Parked (so queued, its handle armed), then cancelled: true if its slot
  // is CANCELLED now.
  bool cancel() {
    if (!gate_.wait_arrived(pause_)) return false;
    shmsem_cancel(&cancel_);  // under the lock: WAITING -> CANCELLED
    slot_ = slot_in(s_, detail::kSlotCancelled);
    return slot_ != kNone;
  }
  uint32_t slot() const { return slot_; }
  // Lets it go on; its result (it must own nothing unless 0).
  int finish() {
    gate_.resume(pause_);
    if (t_.t.joinable()) t_.join();
    return t_.result;
  }

 private:
  static constexpr int kTag = 24;
  shmsem_t *s_;
  shmsem_cancel_t cancel_{};
  HookGate gate_;
  int pause_ = 0;
  WaiterThread t_;
  uint32_t slot_ = kNone;
};

// --- 1. a reservation link changed during repair ----------------------------

// At REPAIR_CHAINS_READ (the reservations rebuilt from the records, not yet
// acted on): the CANCELLED slot's reservation now names a record far past
// the table.
void scribble_cancelled_reservation(HookPoint p, void *) {
  if (p != HookPoint::REPAIR_CHAINS_READ || g_scribbles++) return;
  uint32_t w = slot_in(g_target, detail::kSlotCancelled);
  if (w != kNone) g_target->slots[w].lease = kFar;
}

// orphan_reservation() walked a CANCELLED slot's chain again from the
// segment after step 1 had rebuilt it: a lease index stored there in
// between made repair write a lease record far past the mapping (into the
// victim's own memory; 5 of 5). The victim only called shmsem_stat, which
// took a flags-only lock word over and repaired.
TEST(Untrusted, ReservationLinkChangedDuringRepairIsNeverFollowed) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  CancelledWaiter waiter(s);
  ASSERT_TRUE(waiter.cancel());
  g_scribbles = 0;
  in_child([&] {
    testing::set_hook(scribble_cancelled_reservation, nullptr);
    g_target = s;  // the mapping inherited from the parent
    shmsem_t *v = seg.open_again();
    force_takeover(v);
    struct shmsem_stat st;
    if (shmsem_stat(v, &st) != 0) return 2;  // takes the lock over: repair
    testing::set_hook(nullptr, nullptr);
    if (g_scribbles == 0) return 3;  // the race was not run
    // The writer has stopped: after a repair, the invariants hold.
    force_takeover(v);
    if (shmsem_stat(v, &st) != 0) return 4;
    if (shmsem_recover(v) < 0) return 5;
    return shmsem_check(v) == 0 ? 0 : 6;
  });
  EXPECT_LT(waiter.finish(), 0) << "its wait was cancelled";
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// --- 2. a granted chain's link changed between the two walks
// ------------------

// At WAIT_CHAIN_READ (the granted chain walked and found whole, its
// records not yet HELD): its last record now links far past the table.
void scribble_granted_chain(HookPoint p, void *) {
  if (p != HookPoint::WAIT_CHAIN_READ || g_scribbles++) return;
  uint32_t w = slot_in(g_target, detail::kSlotGranted);
  if (w == kNone) return;
  uint32_t end = chain_end(g_target, g_target->slots[w].lease);
  if (end != kNone) g_target->leases[end].link = kFar;
}

// finish_slot() checked the granted chain in one walk and followed the
// links again in a second one that writes `owner`, `slot` and a HELD word:
// a link changed in between made a weighted waiter's own call write those
// far past the mapping (5 of 5). The waiter here is asynchronous, alone in
// its process: its poll consumes the grant.
TEST(Untrusted, LinkChangedBetweenTwoReadsOfAGrantIsNeverFollowed) {
  Segment seg(2);
  g_scribbles = 0;
  in_child([&] {
    shmsem_t *s = seg.open_again();
    g_target = s;
    shmsem_lease_t held, got;
    if (shmsem_acquire_n(s, 2, &held) != 0) return 2;
    shmsem_waiter_t w;
    timespec d = in_ms(5000);
    if (shmsem_waiter_start_n(s, &w, 2, &d, &got) != SHMSEM_QUEUED) return 3;
    if (shmsem_release(s, &held) != 0) return 4;  // granted to w
    testing::set_hook(scribble_granted_chain, nullptr);
    int r = shmsem_waiter_poll(&w, &got);
    testing::set_hook(nullptr, nullptr);
    if (g_scribbles == 0) return 5;  // the race was not run
    if (r == 0 && shmsem_release(s, &got) != 0) return 6;
    if (r == -EINPROGRESS) return 7;
    // Granted and released, or an error that left it owning nothing:
    // both permits are free either way.
    if (shmsem_recover(s) < 0) return 8;
    if (shmsem_check(s) != 0) return 9;
    shmsem_lease_t all;
    if (shmsem_try_acquire_n(s, 2, &all) != 0) return 10;
    if (shmsem_release(s, &all) != 0) return 11;
    return shmsem_check(s) == 0 ? 0 : 12;
  });
  EXPECT_COUNTS(seg.get(), 2, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// --- 3. a looped weighted chain ---------------------------------------------

// At RELEASE_CHAIN_READ (the lease's chain read, its permits not passed
// on): the last record of lease g_lease links back to its second.
void scribble_weighted_loop(HookPoint p, void *) {
  if (p != HookPoint::RELEASE_CHAIN_READ || g_scribbles++) return;
  uint32_t second = g_target->leases[g_lease].link;
  uint32_t end = chain_end(g_target, g_lease);
  if (second < g_target->permits && end != kNone && end != second)
    g_target->leases[end].link = second;
}

// A lease of 3 whose chain was bent into a loop was released with 0 while
// `held` wrapped to 2^32 - 1 and a record stayed HELD with no token
// (lease_chain() counted visits, not records), and nothing repaired it.
// The chain is bent (its last record linked back to its second) before the
// release, and again between the release's read of the chain and its
// hand-on (then the second record was passed on twice: pushed twice on the
// free list, one permit too many available, and nothing repaired it while
// another lease was held): either way each record is released once, and
// the lease's three permits come back. A second lease, of 2, is held all
// along.
TEST(Untrusted, LoopedWeightedChainIsReleasedOnce) {
  for (bool during : {false, true}) {
    SCOPED_TRACE(during ? "looped during the release" : "looped before it");
    Segment seg(8);
    shmsem_t *s = seg.get();
    shmsem_lease_t three, other;
    ASSERT_EQ(shmsem_acquire_n(s, 3, &three), 0);
    ASSERT_EQ(shmsem_acquire_n(s, 2, &other), 0);
    g_scribbles = 0;
    g_target = s;
    g_lease = three.index;
    if (during) {
      testing::set_hook(scribble_weighted_loop, nullptr);
    } else {
      uint32_t second = s->leases[three.index].link;
      ASSERT_LT(second, s->permits);
      uint32_t end = chain_end(s, three.index);
      ASSERT_NE(end, kNone);
      s->leases[end].link = second;  // end -> second -> ... -> end
    }
    EXPECT_EQ(shmsem_release(s, &three), 0);
    testing::set_hook(nullptr, nullptr);
    if (during) {
      EXPECT_GE(g_scribbles.load(), 1) << "the race was not run";
    }
    EXPECT_COUNTS(s, 6, 2, 0, 0);
    EXPECT_EQ(shmsem_release(s, &three), -EALREADY) << "released once";
    EXPECT_EQ(shmsem_release(s, &other), 0);
    EXPECT_GE(shmsem_recover(s), 0);
    EXPECT_INVARIANTS(s);
    shmsem_lease_t all;
    int r = shmsem_try_acquire_n(s, 8, &all);
    EXPECT_EQ(r, 0) << "every permit is back";
    if (r == 0) {
      EXPECT_EQ(shmsem_release(s, &all), 0);
    }
    EXPECT_COUNTS(s, 8, 0, 0, 0);
    EXPECT_INVARIANTS(s);
  }
}

// --- 4. a looped reservation
// ---------------------------------------------------

// A granted reservation of 3 bent into a loop before its waiter consumed
// it: the waiter got -EUCLEAN, but repair rebuilt its slot as GRANTED with
// the 3 records RESERVED while its thread lived, so nobody could take them
// and shmsem_recover reclaimed nothing. "In every error case the caller
// owns nothing": the permits are free as soon as the error is returned,
// the caller's thread alive (the waiter is asynchronous: this thread).
TEST(Untrusted, LoopedReservationLeavesTheWaiterOwningNothing) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  shmsem_lease_t held, got;
  ASSERT_EQ(shmsem_acquire_n(s, 3, &held), 0);
  shmsem_waiter_t w;
  timespec d = in_ms(5000);
  ASSERT_EQ(shmsem_waiter_start_n(s, &w, 3, &d, &got), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_release(s, &held), 0);  // granted to w
  uint32_t slot = slot_in(s, detail::kSlotGranted);
  ASSERT_NE(slot, kNone);
  uint32_t first = s->slots[slot].lease;
  ASSERT_LT(first, s->permits);
  uint32_t end = chain_end(s, first);
  ASSERT_NE(end, kNone);
  s->leases[end].link = first;  // a loop
  int r = shmsem_waiter_poll(&w, &got);
  ASSERT_NE(r, -EINPROGRESS);
  if (r == 0) {
    EXPECT_EQ(shmsem_release(s, &got), 0);
  }
  // Granted and released, or an error: all four permits are free.
  shmsem_lease_t all;
  int ra = shmsem_try_acquire_n(s, 4, &all);
  EXPECT_EQ(ra, 0) << "the waiter got " << r << " and still owns permits";
  if (ra == 0) {
    EXPECT_EQ(shmsem_release(s, &all), 0);
  }
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_INVARIANTS(s);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
}

// --- 5. capacity counters
// -----------------------------------------------------

// core.retired = N (no record RETIRED): shmsem_set_permits(2) returned 0
// while every permit could still be taken, later shrinks did nothing, and
// shmsem_check failed for ever.
TEST(Untrusted, RetiredCounterIsRecountedFromTheRecords) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  s->core->retired.store(4);
  ASSERT_EQ(shmsem_set_permits(s, 2), 0);
  std::vector<shmsem_lease_t> got = take_all(s, 4);
  EXPECT_EQ(got.size(), 2u) << "a capacity of 2";
  EXPECT_EQ(stat_of(s).permits, 2u);
  release_all(s, &got);
  ASSERT_EQ(shmsem_set_permits(s, 1), 0);  // a later shrink
  got = take_all(s, 4);
  EXPECT_EQ(got.size(), 1u) << "a capacity of 1";
  release_all(s, &got);
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_INVARIANTS(s);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
}

// core.retiring = 2^31 - 1 (no shrink waiting): every release retired its
// permit, until none was left. The first round may go degraded (the
// counter is found wrong and repaired); after it, the capacity of 2 is
// whole, and stays so.
TEST(Untrusted, RetiringCounterAboveTheGeometryIsRepaired) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  s->core->retiring.store(0x7fff'ffffu);
  std::vector<shmsem_lease_t> got = take_all(s, 2);
  release_all(s, &got);
  for (int round = 0; round < 3; round++) {
    got = take_all(s, 3);
    EXPECT_EQ(got.size(), 2u) << "round " << round;
    release_all(s, &got);
  }
  struct shmsem_stat st = stat_of(s);
  EXPECT_EQ(st.permits, 2u);
  EXPECT_EQ(st.retiring, 0u);
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_INVARIANTS(s);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
}

// --- 6. the rate state
// ---------------------------------------------------------

// rate_tat_ns = 2^64 - 1, written once, stopped every acquisition for good:
// the clamp in rate.h was recomputed from "now" at each read and never
// stored. The trust model: a writer stops it for no more than a burst
// (burst x interval) after it stops writing. On the manual clock.
TEST(Untrusted, RateStateFarAheadStopsForNoMoreThanABurst) {
  ManualClock clock;
  Segment seg(rated(1, 10, 2));  // one every 100 ms, 2 at once
  shmsem_t *s = seg.get();
  s->core->rate_tat_ns.store(~uint64_t{0});
  int first = take_token(s);  // denied, most likely: not asserted
  EXPECT_TRUE(first == 0 || first == -EAGAIN) << first;
  clock.advance(2 * 100 * kMs);  // a burst's time
  EXPECT_EQ(take_token(s), 0) << "still stopped a burst's time later";
  clock.advance(10'000 * kMs);
  EXPECT_EQ(take_token(s), 0);
  EXPECT_EQ(take_token(s), 0) << "a full bucket holds 2";
  EXPECT_INVARIANTS(s);
}

// --- 7. the process-record mark ---------------------------------------------

// A child held the only permit lock-free (HELD_FAST under its process
// record) and was SIGKILLed; core.procs_hwm was then lowered to that
// record. Reclamation scanned only below the mark and repair never
// recomputed it: acquire_until(+3 s) timed out and shmsem_recover gave 0.
TEST(Untrusted, ProcessRecordAboveALoweredMarkIsStillReclaimed) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  // This process's record first (the lowest): it stays below the mark, so
  // that this process never registers (and raises the mark) again.
  shmsem_lease_t mine;
  ASSERT_EQ(shmsem_acquire(s, &mine), 0);
  ASSERT_EQ(shmsem_release(s, &mine), 0);
  int ready[2], hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  Children kids;
  pid_t holder = kids.spawn([&] {
    close(hold[1]);
    shmsem_lease_t l;
    if (shmsem_acquire(s, &l) != 0) return 1;
    if (write(ready[1], "x", 1) != 1) return 2;
    char c;
    return read(hold[0], &c, 1) == 0 ? 0 : 3;  // until killed
  });
  close(hold[0]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const uint64_t word = s->leases[0].word.load();
  ASSERT_EQ(detail::word_state(word), uint32_t{detail::kLeaseHeldFast})
      << "held lock-free, under the child's process record";
  const uint32_t rec = detail::word_proc(word);
  ASSERT_LT(rec, s->max_procs);
  ASSERT_EQ(kill(holder, SIGKILL), 0);
  EXPECT_EQ(kids.wait(holder), 128 + SIGKILL);
  close(hold[1]);
  close(ready[0]);
  close(ready[1]);
  s->core->procs_hwm.store(rec);  // the dead holder's record at the mark
  timespec d = in_ms(3000);
  shmsem_lease_t l;
  int r = shmsem_acquire_until(s, &d, &l);
  EXPECT_EQ(r, 0) << "the dead holder's permit was never reclaimed";
  if (r == 0) {
    EXPECT_EQ(shmsem_release(s, &l), 0);
  }
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_INVARIANTS(s);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
}

// --- 8. repair and check agree ---------------------------------------------

// After a takeover's repair of garbage in a held lease's link, or of a
// CANCELLED slot's weight of 0 or 2^32 - 1, shmsem_check still failed for
// ever ("link is out of range", "chain is broken", "weight or count out of
// range"). The invariant: after a repair (once the writer stopped),
// shmsem_check returns 0.
TEST(Untrusted, RepairLeavesACheckThatPasses) {
  // A held lease of 2: its token's link far out of range, or its second
  // record's link back to the first.
  for (bool far : {true, false}) {
    SCOPED_TRACE(far ? "held link out of range" : "held chain looped");
    Segment seg(4);
    shmsem_t *s = seg.get();
    shmsem_lease_t two;
    ASSERT_EQ(shmsem_acquire_n(s, 2, &two), 0);
    const uint32_t second = s->leases[two.index].link;
    ASSERT_LT(second, s->permits);
    if (far)
      s->leases[two.index].link = kFar;
    else
      s->leases[second].link = two.index;
    force_takeover(s);
    EXPECT_GE(stat_of(s).repairs, 1u);  // took the lock over: repaired
    EXPECT_GE(shmsem_recover(s), 0);
    EXPECT_INVARIANTS(s);
    EXPECT_EQ(shmsem_release(s, &two), 0);
    Counts c = counts(s);
    EXPECT_EQ(c.available + c.held + c.reserved, 4u);
    EXPECT_INVARIANTS(s);
  }
  // A CANCELLED slot whose owner has not seen it yet, its weight 0 or
  // 2^32 - 1.
  for (uint32_t weight : {0u, 0xffff'ffffu}) {
    SCOPED_TRACE(::testing::Message() << "cancelled slot of weight " << weight);
    Segment seg(1);
    shmsem_t *s = seg.get();
    shmsem_lease_t held;
    ASSERT_EQ(shmsem_acquire(s, &held), 0);
    CancelledWaiter waiter(s);
    ASSERT_TRUE(waiter.cancel());
    s->slots[waiter.slot()].weight = weight;
    force_takeover(s);
    EXPECT_GE(stat_of(s).repairs, 1u);
    EXPECT_GE(shmsem_recover(s), 0);
    EXPECT_INVARIANTS(s);
    EXPECT_LT(waiter.finish(), 0) << "its wait was cancelled";
    EXPECT_EQ(shmsem_release(s, &held), 0);
    EXPECT_COUNTS(s, 1, 0, 0, 0);
    EXPECT_INVARIANTS(s);
  }
}

// --- 9. the waiting count ----------------------------------------------------

// core.waiting above max_waiters with nobody queued: every acquire found
// "someone queued" (INV-NOBYPASS), try failed for good, shmsem_check said
// -EUCLEAN, and nothing repaired it. The first call may go degraded; an
// acquire within a deadline gets the permit, and tries work again.
TEST(Untrusted, WaitingCountWithNobodyQueuedIsRepaired) {
  Segment seg(1, 4);
  shmsem_t *s = seg.get();
  s->core->waiting.store(5);
  shmsem_lease_t l;
  int r = shmsem_try_acquire(s, &l);
  EXPECT_TRUE(r == 0 || r == -EAGAIN) << r;
  if (r != 0) {
    timespec d = in_ms(2000);
    r = shmsem_acquire_until(s, &d, &l);
  }
  ASSERT_EQ(r, 0) << "nobody queued, a permit free, and none granted";
  EXPECT_EQ(shmsem_release(s, &l), 0);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(shmsem_try_acquire(s, &l), 0) << i;
    EXPECT_EQ(shmsem_release(s, &l), 0);
  }
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_INVARIANTS(s);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
}

// --- also seen: inspect and stat -------------------------------------------

// Lease words HELD_FAST under a process record beyond the table (0xffe,
// with 64 records): shmsem_inspect returned 0 with no holders while
// shmsem_stat showed 2 held. It may call the segment damaged, or show the
// holders; it must not disagree with the stat silently.
TEST(Untrusted, InspectOfAHolderBeyondTheProcessTableDoesNotHideIt) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  shmsem_lease_t a, b;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  ASSERT_EQ(shmsem_acquire(s, &b), 0);
  ASSERT_LT(s->max_procs, 0xffeu);
  for (const shmsem_lease_t *t : {&a, &b}) {
    detail::LeaseRecord &rec = s->leases[t->index];
    const uint64_t w = rec.word.load();
    ASSERT_EQ(detail::word_state(w), uint32_t{detail::kLeaseHeldFast});
    rec.word.store(
        detail::lease_word(detail::kLeaseHeldFast, 0xffe, detail::word_gen(w)));
  }
  struct shmsem_inspection in;
  std::vector<shmsem_holder> holders(8);
  int r = shmsem_inspect(s, &in, holders.data(), uint32_t(holders.size()),
                         nullptr, 0);
  uint32_t shown = 0;
  for (uint32_t i = 0; i < in.nholders && i < holders.size(); i++)
    shown += holders[i].weight;
  EXPECT_TRUE(r == -EUCLEAN || (r == 0 && shown == in.stat.held))
      << "inspect returned " << r << " with " << shown
      << " permits held by its holders, its stat " << in.stat.held;
  EXPECT_EQ(shmsem_release(s, &a), 0);
  EXPECT_EQ(shmsem_release(s, &b), 0);
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_INVARIANTS(s);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
}

// --- from the adversarial pass ---------------------------------------------

// A pid that names no process now: a child that has exited and been reaped.
pid_t exited_pid() {
  Children kids;
  pid_t p = kids.spawn([] { return 0; });
  EXPECT_EQ(kids.wait(p), 0);
  return p;
}

// One write made this process's record look dead; reclamation freed it
// and another process (which then exited) took it. This process kept
// acquiring lock-free under the record, now the other's: once that one
// was found dead, a recover passed our permit on while we held it, and a
// third process held the one permit with us. The record is checked at
// every lock-free step; the locked path registers the process again.
TEST(Untrusted, ProcessRecordTakenOverByAnotherIsNotUsedLockFree) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(s, &l), 0);  // registers our record
  ASSERT_EQ(shmsem_release(s, &l), 0);
  const uint32_t mine = s->fast_proc.load();
  ASSERT_LT(mine, s->max_procs);
  s->procs[mine].owner.pid = exited_pid();  // the writer, once
  EXPECT_GE(shmsem_recover(s), 0);          // frees our record
  ASSERT_EQ(s->procs[mine].state.load(), detail::kProcFree);
  in_child([&] {  // another process takes the record, then exits
    shmsem_t *c = seg.open_again();
    shmsem_lease_t x;
    if (shmsem_acquire(c, &x) != 0 || shmsem_release(c, &x) != 0) return 1;
    return c->fast_proc.load() == mine ? 0 : 2;
  });
  ASSERT_EQ(shmsem_acquire(s, &l), 0);
  EXPECT_NE(s->fast_proc.load(), mine) << "still under the other's record";
  in_child([&] {  // a third: after a recover, the one permit is still ours
    shmsem_t *d = seg.open_again();
    if (shmsem_recover(d) < 0) return 1;
    shmsem_lease_t y;
    int r = shmsem_try_acquire(d, &y);
    return r == -EAGAIN ? 0 : 10 + (r == 0);
  });
  EXPECT_EQ(shmsem_release(s, &l), 0);
  EXPECT_INVARIANTS(s);
}

// A slot the writer made WAITING, its owner all zeros (pid 0 names no
// process), became the head and took the permits for ever: pid 0 was
// "unknown", which counts as alive. It names nobody: reclaimed, and after
// a recover every permit can be taken again.
TEST(Untrusted, ForgedWaiterNamingNoProcessIsReclaimed) {
  Segment seg(2, 8);
  shmsem_t *s = seg.get();
  s->slots[5].word.store(detail::kSlotWaiting);  // never used: owner zeros
  s->slots[5].weight = 2;
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_INVARIANTS(s);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  shmsem_lease_t both;
  EXPECT_EQ(shmsem_try_acquire_n(s, 2, &both), 0);
  EXPECT_EQ(shmsem_release(s, &both), 0);
}

// A semaphore created without a rate, its rate interval set by a writer
// to a day: clamped and stored, it allowed one acquisition a day for good
// (the fuzzer's find). The rate is the creator's, copied at open: put back.
TEST(Untrusted, RateAWriterSetIsRestoredToTheCreators) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  s->core->rate_interval_ns.store(86'400'000'000'000ull);
  s->core->rate_burst.store(1);
  shmsem_lease_t a, b, c;
  ASSERT_EQ(shmsem_try_acquire(s, &a), 0);
  ASSERT_EQ(shmsem_try_acquire(s, &b), 0);
  EXPECT_EQ(shmsem_try_acquire(s, &c), -EAGAIN);
  EXPECT_EQ(s->core->rate_interval_ns.load(), 0u);
  EXPECT_EQ(shmsem_release(s, &a), 0);
  EXPECT_EQ(shmsem_release(s, &b), 0);
  EXPECT_INVARIANTS(s);
}

}  // namespace
}  // namespace shmsem::test
