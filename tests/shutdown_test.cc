// Shutdown: new acquires and queued waiters fail, held leases still release.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>

#include <thread>
#include <vector>

#include "support/hook_gate.h"
#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

TEST(Shutdown, AcquireBeforeSucceedsAndAfterFails) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  shmsem_lease_t a, b;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  EXPECT_EQ(shmsem_shutdown(s), 0);
  EXPECT_EQ(shmsem_acquire(s, &b), -ESHUTDOWN);
  EXPECT_EQ(shmsem_try_acquire(s, &b), -ESHUTDOWN);
  timespec past{0, 0};
  EXPECT_EQ(shmsem_acquire_until(s, &past, &b), -ESHUTDOWN);
  EXPECT_EQ(shmsem_shutdown(s), 0) << "idempotent";
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  EXPECT_EQ(st.closed, 1u);
  EXPECT_EQ(shmsem_release(s, &a), 0);
  EXPECT_INVARIANTS(s);
}

TEST(Shutdown, QueuedWaitersFailAndHeldLeasesReleaseNormally) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  std::vector<int> results(3, 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; i++) {
    threads.emplace_back([&, i] {
      shmsem_lease_t l;
      results[size_t(i)] = shmsem_acquire(s, &l);
    });
    ASSERT_TRUE(
        wait_until([&] { return counts(s).waiting == uint32_t(i + 1); }));
  }
  EXPECT_EQ(shmsem_shutdown(s), 3);
  for (auto &t : threads) t.join();
  for (int r : results) EXPECT_EQ(r, -ESHUTDOWN);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_INVARIANTS(s);
  EXPECT_EQ(shmsem_release(s, &held), 0) << "release after close is accepted";
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_EQ(shmsem_release(s, &held), -EALREADY);
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  EXPECT_EQ(st.shutdown_failures, 3u);
  EXPECT_INVARIANTS(s);
}

// A waiter already granted when shutdown comes keeps its lease.
TEST(Shutdown, GrantedWaiterKeepsItsLease) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  HookGate gate;
  int granted = gate.arm(HookPoint::RELEASE_GRANTED, 2);
  shmsem_lease_t held, wl;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  int result = 1;
  std::thread w([&] { result = shmsem_acquire(s, &wl); });
  ASSERT_TRUE(wait_until([&] { return counts(s).waiting == 1; }));
  std::thread releaser([&] {
    HookGate::tag_this_thread(2);
    shmsem_release(s, &held);
  });
  ASSERT_TRUE(gate.wait_arrived(granted));
  EXPECT_EQ(shmsem_shutdown(s), 0) << "nobody is queued any more";
  gate.resume(granted);
  releaser.join();
  w.join();
  EXPECT_EQ(result, 0);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &wl), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

}  // namespace
}  // namespace shmsem::test
