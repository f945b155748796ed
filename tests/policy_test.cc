// The bounded policy (SHMSEM_POLICY_BOUNDED, docs/DESIGN.md section 14): a
// newcomer may take a free permit past the queue while the head has waited
// less than max_bypass_ns; past that, permits go to the queue in order. The
// head's bound is driven by the manual clock; the head is an async waiter
// where the test must decide when it looks, a thread where it must be woken.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>

#include <time.h>

#include <atomic>
#include <thread>

#include "support/manual_clock.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

constexpr uint64_t kMs = 1'000'000;

shmsem_config bounded(uint32_t permits, uint64_t bound_ns) {
  shmsem_config cfg{};
  cfg.permits = permits;
  cfg.max_waiters = 16;
  cfg.policy = SHMSEM_POLICY_BOUNDED;
  cfg.max_bypass_ns = bound_ns;
  return cfg;
}

uint32_t hand_off(shmsem_t *s) { return stat_of(s).hand_off; }

// An async waiter queued for `n` permits: SHMSEM_QUEUED, or the test fails.
void queue_async(shmsem_t *s, shmsem_waiter_t *w, uint32_t n = 1) {
  shmsem_lease_t none;
  ASSERT_EQ(shmsem_waiter_start_n(s, w, n, nullptr, &none), SHMSEM_QUEUED);
}

TEST(Policy, StatShowsThePolicyAndItsDefaultBound) {
  Segment seg(bounded(1, 0));
  struct shmsem_stat st = stat_of(seg.get());
  EXPECT_EQ(st.policy, SHMSEM_POLICY_BOUNDED);
  EXPECT_EQ(st.max_bypass_ns, SHMSEM_DEFAULT_MAX_BYPASS_NS);
  EXPECT_EQ(st.hand_off, 0u);
  Segment fifo(1);
  st = stat_of(fifo.get());
  EXPECT_EQ(st.policy, SHMSEM_POLICY_FIFO);
  EXPECT_EQ(st.max_bypass_ns, 0u);
}

TEST(Policy, ADifferentPolicyOrBoundOnOpenIsEexist) {
  Segment seg(bounded(2, 5 * kMs));
  shmsem_t *s = nullptr;
  shmsem_config cfg = bounded(2, 5 * kMs);
  ASSERT_EQ(shmsem_create(seg.name().c_str(), &cfg, 0, &s), 0);
  shmsem_detach(s);
  cfg.max_bypass_ns = 6 * kMs;
  EXPECT_EQ(shmsem_create(seg.name().c_str(), &cfg, 0, &s), -EEXIST);
  cfg = bounded(2, 0);
  cfg.policy = SHMSEM_POLICY_FIFO;
  EXPECT_EQ(shmsem_create(seg.name().c_str(), &cfg, 0, &s), -EEXIST);
  cfg.max_bypass_ns = SHMSEM_MAX_BYPASS_NS + 1;
  cfg.policy = SHMSEM_POLICY_BOUNDED;
  EXPECT_EQ(shmsem_create(seg.name().c_str(), &cfg, 0, &s), -EINVAL);
}

TEST(Policy, ANewcomerOvertakesAHeadWithinItsBound) {
  ManualClock clock;
  Segment seg(bounded(1, 10 * kMs));
  shmsem_t *s = seg.get();
  shmsem_lease_t a, c;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  shmsem_waiter_t b;
  queue_async(s, &b);
  ASSERT_EQ(shmsem_release(s, &a), 0);
  // The permit is free for whoever comes first; the head has not looked.
  EXPECT_INVARIANTS(s);
  clock.advance(9 * kMs);
  EXPECT_EQ(shmsem_try_acquire(s, &c), 0) << "a newcomer within the bound";
  EXPECT_EQ(hand_off(s), 0u);
  shmsem_lease_t lb;
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), -EINPROGRESS);  // nothing free
  ASSERT_EQ(shmsem_release(s, &c), 0);
  // The head, polled, races for the pool and wins.
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), 0);
  EXPECT_EQ(stat_of(s).waiting, 0u);
  ASSERT_EQ(shmsem_release(s, &lb), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Policy, NoNewcomerTakesAPermitPastAHeadOlderThanItsBound) {
  ManualClock clock;
  Segment seg(bounded(1, 10 * kMs));
  shmsem_t *s = seg.get();
  shmsem_lease_t a, c, lb;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  shmsem_waiter_t b;
  queue_async(s, &b);
  // The head wakes at the end of its bound (a real time: the manual
  // clock's 10 ms from now, at most).
  timespec at, real;
  ASSERT_EQ(shmsem_waiter_wake_by(&b, &at), 0);
  clock_gettime(CLOCK_MONOTONIC, &real);
  const int64_t in =
      (at.tv_sec - real.tv_sec) * 1'000'000'000 + (at.tv_nsec - real.tv_nsec);
  EXPECT_GT(in, 0);
  EXPECT_LE(in, int64_t(10 * kMs));
  clock.advance(10 * kMs);
  // At its bound the head looks, and turns the hand-off on.
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), -EINPROGRESS);
  EXPECT_EQ(hand_off(s), 1u);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &a), 0);
  EXPECT_EQ(shmsem_try_acquire(s, &c), -EAGAIN) << "a newcomer got past";
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), 0) << "the release went to the head";
  // The queue is empty: newcomers may take permits again.
  EXPECT_EQ(hand_off(s), 0u);
  ASSERT_EQ(shmsem_release(s, &lb), 0);
  EXPECT_EQ(shmsem_try_acquire(s, &c), 0);
  ASSERT_EQ(shmsem_release(s, &c), 0);
  EXPECT_INVARIANTS(s);
}

TEST(Policy, AHeadPastItsBoundTakesWhatIsFree) {
  ManualClock clock;
  Segment seg(bounded(1, 10 * kMs));
  shmsem_t *s = seg.get();
  shmsem_lease_t a, lb;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  shmsem_waiter_t b;
  queue_async(s, &b);
  ASSERT_EQ(shmsem_release(s, &a), 0);  // free, the head not polled
  clock.advance(11 * kMs);
  // The head looks at the end of its bound (its wake_by) and takes it.
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), 0);
  EXPECT_EQ(stat_of(s).waiting, 0u);
  ASSERT_EQ(shmsem_release(s, &lb), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Policy, ALockedNewcomerSeesTheBoundWithoutTheHeadsHelp) {
  ManualClock clock;
  Segment seg(bounded(2, 10 * kMs));
  shmsem_t *s = seg.get();
  shmsem_lease_t a, c, lb;
  // Two permits as one lease: released under the lock, into the pool.
  ASSERT_EQ(shmsem_acquire_n(s, 2, &a), 0);
  shmsem_waiter_t b;
  queue_async(s, &b, 2);
  ASSERT_EQ(shmsem_release(s, &a), 0);
  clock.advance(10 * kMs);
  // The head has not looked; a section sees its bound passed on entry,
  // and the pool goes to it.
  EXPECT_EQ(shmsem_try_acquire(s, &c), -EAGAIN);
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), 0);
  ASSERT_EQ(shmsem_release(s, &lb), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Policy, AHandOffEndsWhenTheNextHeadIsWithinItsBound) {
  ManualClock clock;
  Segment seg(bounded(1, 10 * kMs));
  shmsem_t *s = seg.get();
  shmsem_lease_t a, lb, lc, d;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  shmsem_waiter_t b, c;
  queue_async(s, &b);
  clock.advance(20 * kMs);
  queue_async(s, &c);          // C enqueues now: within its bound
  EXPECT_EQ(hand_off(s), 1u);  // B is past its own
  ASSERT_EQ(shmsem_release(s, &a), 0);
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), 0);
  // C, the head now, is within its bound: newcomers may pass it again.
  EXPECT_EQ(hand_off(s), 0u);
  ASSERT_EQ(shmsem_release(s, &lb), 0);
  EXPECT_EQ(shmsem_try_acquire(s, &d), 0);
  ASSERT_EQ(shmsem_release(s, &d), 0);
  EXPECT_EQ(shmsem_waiter_poll(&c, &lc), 0);
  ASSERT_EQ(shmsem_release(s, &lc), 0);
  EXPECT_INVARIANTS(s);
}

TEST(Policy, ASleepingHeadIsNudgedByALockFreeRelease) {
  ManualClock clock;  // no bound passes: only a nudge can wake the head
  Segment seg(bounded(1, 10 * kMs));
  shmsem_t *s = seg.get();
  shmsem_lease_t a, lb;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  std::atomic<int> rb{1};
  std::thread t([&] { rb = shmsem_acquire(s, &lb); });
  ASSERT_TRUE(waiting_is(s, 1));
  ASSERT_EQ(shmsem_release(s, &a), 0);
  t.join();
  EXPECT_EQ(rb.load(), 0);
  EXPECT_EQ(hand_off(s), 0u);
  ASSERT_EQ(shmsem_release(s, &lb), 0);
  EXPECT_INVARIANTS(s);
}

TEST(Policy, ASleepingHeadIsNudgedByALockedRelease) {
  ManualClock clock;
  Segment seg(bounded(2, 10 * kMs));
  shmsem_t *s = seg.get();
  shmsem_lease_t a, lb;
  // A lease of two is released under the lock.
  ASSERT_EQ(shmsem_acquire_n(s, 2, &a), 0);
  std::atomic<int> rb{1};
  std::thread t([&] { rb = shmsem_acquire(s, &lb); });
  ASSERT_TRUE(waiting_is(s, 1));
  ASSERT_EQ(shmsem_release(s, &a), 0);
  t.join();
  EXPECT_EQ(rb.load(), 0);
  ASSERT_EQ(shmsem_release(s, &lb), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Policy, AWeightedHeadIsPassedWithinItsBoundAndServedAfter) {
  ManualClock clock;
  Segment seg(bounded(2, 10 * kMs));
  shmsem_t *s = seg.get();
  shmsem_lease_t a, c, lb;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  shmsem_waiter_t b;
  queue_async(s, &b, 2);  // one is free: not enough
  EXPECT_EQ(shmsem_try_acquire(s, &c), 0) << "one permit past a head of two";
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), -EINPROGRESS);
  clock.advance(10 * kMs);
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), -EINPROGRESS);
  EXPECT_EQ(hand_off(s), 1u);
  ASSERT_EQ(shmsem_release(s, &a), 0);  // reserved for the head
  shmsem_lease_t d;
  EXPECT_EQ(shmsem_try_acquire(s, &d), -EAGAIN);
  ASSERT_EQ(shmsem_release(s, &c), 0);
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), 0);
  EXPECT_EQ(stat_of(s).held, 2u);
  ASSERT_EQ(shmsem_release(s, &lb), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Policy, CancelTimeoutAndShutdownKeepTheirPromises) {
  ManualClock clock;
  Segment seg(bounded(1, 10 * kMs));
  shmsem_t *s = seg.get();
  shmsem_lease_t a, lb;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  // A timeout within the bound.
  timespec dl = clock.deadline_in(5 * kMs);
  std::atomic<int> rt{1};
  std::thread t([&] { rt = shmsem_acquire_until(s, &dl, &lb); });
  ASSERT_TRUE(waiting_is(s, 1));
  clock.advance(5 * kMs);
  t.join();
  EXPECT_EQ(rt.load(), -ETIMEDOUT);
  // A cancel past the bound (the hand-off on).
  shmsem_waiter_t b;
  queue_async(s, &b);
  clock.advance(20 * kMs);
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), -EINPROGRESS);
  EXPECT_EQ(hand_off(s), 1u);
  EXPECT_EQ(shmsem_waiter_cancel(&b, &lb), -ECANCELED);
  EXPECT_EQ(hand_off(s), 0u);
  // Shutdown fails the queue; the held lease releases normally.
  queue_async(s, &b);
  EXPECT_EQ(shmsem_shutdown(s), 1);
  EXPECT_EQ(shmsem_waiter_poll(&b, &lb), -ESHUTDOWN);
  ASSERT_EQ(shmsem_release(s, &a), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

}  // namespace
}  // namespace shmsem::test
