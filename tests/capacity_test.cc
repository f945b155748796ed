// The capacity at run time (shmsem_set_permits): a grow hands the new
// permits to the waiters in FIFO order, a shrink takes free permits at once
// and retires the rest as they are released, never revoking a lease.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>

#include <atomic>
#include <thread>

#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

shmsem_config config(uint32_t permits, uint32_t max_permits) {
  shmsem_config c{};
  c.permits = permits;
  c.max_permits = max_permits;
  return c;
}

TEST(Capacity, ZeroConfigIsAPlainSemaphoreAtItsMaximum) {
  Segment seg(3);
  struct shmsem_stat st = stat_of(seg.get());
  EXPECT_EQ(st.permits, 3u);
  EXPECT_EQ(st.max_permits, 3u);
  EXPECT_EQ(st.retiring, 0u);
  EXPECT_EQ(st.rate, 0u);
  EXPECT_EQ(shmsem_set_permits(seg.get(), 4), -EINVAL);
  EXPECT_EQ(shmsem_set_permits(seg.get(), 3), 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Capacity, StartsBelowItsMaximumAndGrowsToIt) {
  Segment seg(config(2, 5));
  shmsem_t *s = seg.get();
  struct shmsem_stat st = stat_of(s);
  EXPECT_EQ(st.permits, 2u);
  EXPECT_EQ(st.max_permits, 5u);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_set_permits(s, 5), 0);
  EXPECT_COUNTS(s, 5, 0, 0, 0);
  EXPECT_EQ(stat_of(s).permits, 5u);
  EXPECT_EQ(shmsem_set_permits(s, 6), -EINVAL);
  EXPECT_INVARIANTS(s);
}

TEST(Capacity, GrowHandsTheNewPermitsToWaitersInFifoOrder) {
  Segment seg(config(1, 3));
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  std::atomic<int> a_done{0}, b_done{0};
  shmsem_lease_t la, lb;
  std::thread a([&] {
    if (shmsem_acquire(s, &la) == 0) a_done = 1;
  });
  ASSERT_TRUE(waiting_is(s, 1));
  std::thread b([&] {
    if (shmsem_acquire(s, &lb) == 0) b_done = 1;
  });
  ASSERT_TRUE(waiting_is(s, 2));
  ASSERT_EQ(shmsem_set_permits(s, 2), 0);  // one more: the head's
  a.join();
  EXPECT_EQ(a_done.load(), 1);
  EXPECT_EQ(b_done.load(), 0);
  EXPECT_COUNTS(s, 0, 2, 0, 1);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_set_permits(s, 3), 0);
  b.join();
  EXPECT_EQ(b_done.load(), 1);
  EXPECT_COUNTS(s, 0, 3, 0, 0);
  for (shmsem_lease_t *l : {&held, &la, &lb})
    ASSERT_EQ(shmsem_release(s, l), 0);
  EXPECT_COUNTS(s, 3, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Capacity, ShrinkBelowTheHeldCountRetiresPermitsAsTheyAreReleased) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  shmsem_lease_t l[3];
  for (auto &x : l) ASSERT_EQ(shmsem_acquire(s, &x), 0);
  ASSERT_EQ(shmsem_set_permits(s, 1), 0);
  // The free one is retired at once; two held above the capacity.
  struct shmsem_stat st = stat_of(s);
  EXPECT_EQ(st.permits, 1u);
  EXPECT_EQ(st.retiring, 2u);
  EXPECT_COUNTS(s, 0, 3, 0, 0);
  EXPECT_INVARIANTS(s);
  shmsem_lease_t x;
  EXPECT_EQ(shmsem_try_acquire(s, &x), -EAGAIN);
  // Never revoked: every release succeeds, the first two retire.
  ASSERT_EQ(shmsem_release(s, &l[0]), 0);
  EXPECT_EQ(stat_of(s).retiring, 1u);
  EXPECT_COUNTS(s, 0, 2, 0, 0);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &l[1]), 0);
  EXPECT_EQ(stat_of(s).retiring, 0u);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &l[2]), 0);  // the capacity holds again
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Capacity, LockFreeReleaseDuringAShrinkRetiresItsPermit) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  // Twice: the second acquire and release are the lock-free ones.
  ASSERT_EQ(shmsem_acquire(s, &l), 0);
  ASSERT_EQ(shmsem_release(s, &l), 0);
  ASSERT_EQ(shmsem_acquire(s, &l), 0);
  ASSERT_EQ(shmsem_set_permits(s, 0), 0);
  EXPECT_EQ(stat_of(s).retiring, 1u);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &l), 0);
  EXPECT_EQ(stat_of(s).retiring, 0u);
  EXPECT_COUNTS(s, 0, 0, 0, 0);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_set_permits(s, 2), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Capacity, ShrinkToZeroDrainsAndGrowingBackServesTheWaiters) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  ASSERT_EQ(shmsem_set_permits(s, 0), 0);
  EXPECT_COUNTS(s, 0, 0, 0, 0);
  shmsem_lease_t x;
  EXPECT_EQ(shmsem_try_acquire(s, &x), -EAGAIN);
  std::atomic<int> r1{1}, r2{1};
  shmsem_lease_t l1, l2;
  std::thread a([&] { r1 = shmsem_acquire(s, &l1); });
  ASSERT_TRUE(waiting_is(s, 1));
  std::thread b([&] { r2 = shmsem_acquire_n(s, 2, &l2); });  // above 0: waits
  ASSERT_TRUE(waiting_is(s, 2));
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_set_permits(s, 2), 0);
  a.join();
  EXPECT_EQ(r1.load(), 0);
  // B needs both; the one left is reserved for it.
  EXPECT_COUNTS(s, 0, 1, 1, 1);
  ASSERT_EQ(shmsem_release(s, &l1), 0);
  b.join();
  EXPECT_EQ(r2.load(), 0);
  ASSERT_EQ(shmsem_release(s, &l2), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Capacity, AShrinkTakesAReleasedPermitBeforeTheQueue) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  shmsem_lease_t l[2];
  for (auto &x : l) ASSERT_EQ(shmsem_acquire(s, &x), 0);
  std::atomic<int> r{1};
  shmsem_lease_t lw;
  std::thread w([&] { r = shmsem_acquire(s, &lw); });
  ASSERT_TRUE(waiting_is(s, 1));
  ASSERT_EQ(shmsem_set_permits(s, 1), 0);
  ASSERT_EQ(shmsem_release(s, &l[0]), 0);  // retired, not granted
  EXPECT_COUNTS(s, 0, 1, 0, 1);
  EXPECT_EQ(stat_of(s).retiring, 0u);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &l[1]), 0);  // within the capacity: granted
  w.join();
  EXPECT_EQ(r.load(), 0);
  ASSERT_EQ(shmsem_release(s, &lw), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Capacity, GrowCancelsAPendingShrinkFirst) {
  Segment seg(3);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire_n(s, 3, &l), 0);
  ASSERT_EQ(shmsem_set_permits(s, 1), 0);
  EXPECT_EQ(stat_of(s).retiring, 2u);
  ASSERT_EQ(shmsem_set_permits(s, 2), 0);
  EXPECT_EQ(stat_of(s).retiring, 1u);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &l), 0);  // one of three retires
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_EQ(stat_of(s).permits, 2u);
  EXPECT_INVARIANTS(s);
}

TEST(Capacity, ReadOnlyHandleCannotResize) {
  Segment seg(2);
  shmsem_t *ro = seg.open_again(SHMSEM_RDONLY);
  ASSERT_NE(ro, nullptr);
  EXPECT_EQ(shmsem_set_permits(ro, 1), -EBADF);
  EXPECT_EQ(shmsem_set_permits(nullptr, 1), -EINVAL);
  shmsem_detach(ro);
}

TEST(Capacity, CreateWithTheSameConfigOpensAResizedSemaphore) {
  shmsem_config c = config(2, 4);
  Segment seg(c);
  ASSERT_EQ(shmsem_set_permits(seg.get(), 4), 0);
  shmsem_t *again = nullptr;
  ASSERT_EQ(shmsem_create(seg.name().c_str(), &c, 0, &again), 0);
  EXPECT_EQ(stat_of(again).permits, 4u);
  shmsem_detach(again);
  shmsem_config other = config(4, 4);
  EXPECT_EQ(shmsem_create(seg.name().c_str(), &other, 0, &again), -EEXIST);
}

TEST(Capacity, BadConfigurationsAreInvalid) {
  std::string name = unique_name("cap");
  shmsem_t *s = nullptr;
  shmsem_config c = config(3, 2);  // max below permits
  EXPECT_EQ(shmsem_create(name.c_str(), &c, 0, &s), -EINVAL);
  c = config(0, 4);  // no limit of any kind
  EXPECT_EQ(shmsem_create(name.c_str(), &c, 0, &s), -EINVAL);
  c = config(1, SHMSEM_MAX_PERMITS + 1);
  EXPECT_EQ(shmsem_create(name.c_str(), &c, 0, &s), -EINVAL);
  EXPECT_EQ(shmsem_unlink(name.c_str()), -ENOENT);
}

// Killed in the middle of a resize (fault injection): the next lock holder
// repairs, finishing the resize from the committed capacity.
TEST(Capacity, ResizeKilledAtEachStepIsFinishedByRepair) {
  for (auto point :
       {testing::HookPoint::CAPACITY_SET, testing::HookPoint::CAPACITY_ONE}) {
    for (uint32_t target : {1u, 4u}) {
      Segment seg(config(2, 4));
      shmsem_t *s = seg.get();
      shmsem_lease_t held;
      ASSERT_EQ(shmsem_acquire(s, &held), 0);
      if (target == 1) {
        ASSERT_EQ(shmsem_set_permits(s, 4), 0);
      }
      Children kids;
      pid_t p = kids.spawn([&, point] {
        shmsem_t *c = seg.open_again();
        static testing::HookPoint at;
        at = point;
        testing::set_hook(
            [](testing::HookPoint hp, void *) {
              if (hp == at) raise(SIGKILL);
            },
            nullptr);
        shmsem_set_permits(c, target);
        return 0;
      });
      EXPECT_EQ(kids.wait(p), 128 + SIGKILL) << testing::hook_name(point);
      struct shmsem_stat st = stat_of(s);  // takes the lock: repair
      EXPECT_EQ(st.permits, target);
      EXPECT_GE(st.repairs, 1u);
      EXPECT_INVARIANTS(s);
      ASSERT_EQ(shmsem_release(s, &held), 0);
      EXPECT_COUNTS(s, target, 0, 0, 0);
      EXPECT_INVARIANTS(s);
    }
  }
}

}  // namespace
}  // namespace shmsem::test
