// Strict FIFO: tickets, hand-off to the head, no bypass, no starvation,
// bounded queue.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "support/hook_gate.h"
#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

TEST(Fifo, OnePermitEightWaitersAreServedInArrivalOrder) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; i++) {
    threads.emplace_back([&, i] {
      shmsem_lease_t l;
      ASSERT_EQ(shmsem_acquire(s, &l), 0);
      {
        std::lock_guard<std::mutex> g(mu);
        order.push_back(i);
      }
      ASSERT_EQ(shmsem_release(s, &l), 0);
    });
    ASSERT_TRUE(waiting_is(s, uint32_t(i + 1)));  // i is queued behind i-1
    EXPECT_COUNTS(s, 0, 1, 0, i + 1);
    EXPECT_INVARIANTS(s);
  }
  uint64_t tickets[8];
  ASSERT_EQ(testing::queue_tickets(s, tickets, 8), 8);
  for (int i = 1; i < 8; i++) EXPECT_LT(tickets[i - 1], tickets[i]);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  for (auto &t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Fifo, SeveralPermitsQueueOnlyWhenAllAreHeld) {
  Segment seg(3);
  shmsem_t *s = seg.get();
  shmsem_lease_t l[3];
  for (auto &x : l) ASSERT_EQ(shmsem_acquire(s, &x), 0);
  EXPECT_COUNTS(s, 0, 3, 0, 0);
  std::atomic<int> got{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; i++)
    threads.emplace_back([&] {
      shmsem_lease_t x;
      ASSERT_EQ(shmsem_acquire(s, &x), 0);
      got++;
      // Keep it until the main thread has seen both grants.
      wait_until([&] { return got.load() == 2; });
      ASSERT_EQ(shmsem_release(s, &x), 0);
    });
  ASSERT_TRUE(waiting_is(s, 2));
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &l[0]), 0);
  ASSERT_EQ(shmsem_release(s, &l[1]), 0);
  for (auto &t : threads) t.join();
  EXPECT_EQ(got.load(), 2);
  ASSERT_EQ(shmsem_release(s, &l[2]), 0);
  EXPECT_COUNTS(s, 3, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// The release hands its permit to the head in the same step that frees it:
// paused after the grant and before the wake, a newcomer finds nothing.
TEST(Fifo, NewcomerCannotTakeAPermitBeingHandedToTheHead) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  HookGate gate;
  int granted = gate.arm(HookPoint::RELEASE_GRANTED, 2);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_lease_t wl;
  std::thread waiter([&] { ASSERT_EQ(shmsem_acquire(s, &wl), 0); });
  ASSERT_TRUE(waiting_is(s, 1));
  std::thread releaser([&] {
    HookGate::tag_this_thread(2);
    ASSERT_EQ(shmsem_release(s, &held), 0);
  });
  ASSERT_TRUE(gate.wait_arrived(granted));
  shmsem_lease_t nl;
  EXPECT_EQ(shmsem_try_acquire(s, &nl), -EAGAIN);
  auto c = counts(s);
  EXPECT_EQ(c.available + c.reserved + c.held, 1u);
  EXPECT_EQ(c.available, 0u) << "never incremented while a waiter exists";
  EXPECT_INVARIANTS(s);
  gate.resume(granted);
  releaser.join();
  waiter.join();
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &wl), 0);
  EXPECT_INVARIANTS(s);
}

// A waiter behind callers that acquire and release in a tight loop is
// served after each of them once, not after "whoever is fastest".
TEST(Fifo, LongWaiterIsNotStarvedByAStreamOfNewcomers) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  constexpr int kChurners = 3;
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  for (int i = 0; i < kChurners; i++)
    churn.emplace_back([&] {
      while (!stop.load()) {
        shmsem_lease_t l;
        if (shmsem_acquire(s, &l) == 0) shmsem_release(s, &l);
      }
    });
  ASSERT_TRUE(waiting_is(s, kChurners));
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  const uint64_t before = st.acquisitions;
  uint64_t at_grant = 0;
  std::thread longw([&] {
    shmsem_lease_t l;
    ASSERT_EQ(shmsem_acquire(s, &l), 0);
    struct shmsem_stat g;
    shmsem_stat(s, &g);
    at_grant = g.acquisitions;
    shmsem_release(s, &l);
  });
  ASSERT_TRUE(waiting_is(s, kChurners + 1));
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  longw.join();
  stop = true;
  for (auto &t : churn) t.join();
  // Ahead of it: each churner once (they re-queue behind it), then itself.
  EXPECT_EQ(at_grant - before, uint64_t(kChurners + 1));
  EXPECT_INVARIANTS(s);
}

TEST(Fifo, FullQueueFailsAtOnceWithEbusy) {
  Segment seg(1, 2);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; i++)
    threads.emplace_back([&] {
      shmsem_lease_t l;
      ASSERT_EQ(shmsem_acquire(s, &l), 0);
      shmsem_release(s, &l);
    });
  ASSERT_TRUE(waiting_is(s, 2));
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_acquire(s, &l), -EBUSY);
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  EXPECT_EQ(st.queue_full, 1u);
  EXPECT_COUNTS(s, 0, 1, 0, 2);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  for (auto &t : threads) t.join();
  EXPECT_COUNTS(s, 1, 0, 0, 0);
}

}  // namespace
}  // namespace shmsem::test
