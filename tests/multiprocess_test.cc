// Real processes on a real named segment: the concurrency limit, FIFO across
// processes, and a randomized stress run ending with the invariant intact.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>
#include <unistd.h>

#include <atomic>
#include <random>

#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

TEST(MultiProcess, ConcurrencyLimitIsNeverExceeded) {
  constexpr uint32_t kPermits = 2;
  constexpr int kProcs = 6, kRounds = 300;
  Segment seg(kPermits);
  struct Board {
    std::atomic<int> inside{0}, max_inside{0}, errors{0};
  };
  Shared<Board> board;
  Children kids;
  for (int p = 0; p < kProcs; p++)
    kids.spawn([&] {
      shmsem_t *s = seg.open_again();
      for (int i = 0; i < kRounds; i++) {
        shmsem_lease_t l;
        if (shmsem_acquire(s, &l) != 0) return 1;
        int now = ++board->inside;
        int m = board->max_inside.load();
        while (now > m && !board->max_inside.compare_exchange_weak(m, now)) {
        }
        for (volatile int k = 0; k < 200; k = k + 1) {
        }
        --board->inside;
        if (shmsem_release(s, &l) != 0) return 2;
      }
      shmsem_detach(s);
      return 0;
    });
  EXPECT_TRUE(kids.wait_all_ok());
  EXPECT_LE(board->max_inside.load(), int(kPermits));
  EXPECT_GE(board->max_inside.load(), 1);
  EXPECT_COUNTS(seg.get(), kPermits, 0, 0, 0);
  struct shmsem_stat st;
  shmsem_stat(seg.get(), &st);
  EXPECT_EQ(st.acquisitions, uint64_t(kProcs * kRounds));
  EXPECT_INVARIANTS(seg.get());
}

TEST(MultiProcess, FifoOrderHoldsAcrossProcesses) {
  constexpr int kProcs = 5;
  Segment seg(1);
  shmsem_t *s = seg.get();
  struct Log {
    std::atomic<int> n{0};
    int order[kProcs];
  };
  Shared<Log> log;
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  Children kids;
  for (int p = 0; p < kProcs; p++) {
    kids.spawn([&, p] {
      shmsem_t *c = seg.open_again();
      shmsem_lease_t l;
      if (shmsem_acquire(c, &l) != 0) return 1;
      log->order[log->n++] = p;
      return shmsem_release(c, &l) == 0 ? 0 : 2;
    });
    ASSERT_TRUE(
        wait_until([&] { return counts(s).waiting == uint32_t(p + 1); }));
    EXPECT_INVARIANTS(s);
  }
  ASSERT_EQ(shmsem_release(s, &held), 0);
  EXPECT_TRUE(kids.wait_all_ok());
  ASSERT_EQ(log->n.load(), kProcs);
  for (int p = 0; p < kProcs; p++) EXPECT_EQ(log->order[p], p);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Several processes doing random acquire / timed acquire / try / release,
// with the checker run concurrently; nothing lost, nothing created.
TEST(MultiProcess, RandomizedStressKeepsTheInvariant) {
  constexpr uint32_t kPermits = 3;
  constexpr int kProcs = 5;
  const auto kRun = std::chrono::milliseconds(1500);
  Segment seg(kPermits, 8);
  struct Tally {
    std::atomic<uint64_t> grants{0}, timeouts{0}, busy{0};
    std::atomic<int> errors{0}, inside{0}, over{0};
  };
  Shared<Tally> tally;
  auto end = std::chrono::steady_clock::now() + kRun;
  Children kids;
  for (int p = 0; p < kProcs; p++)
    kids.spawn([&, p] {
      shmsem_t *s = seg.open_again();
      std::mt19937 rng(unsigned(p) * 7919u + 1);
      while (std::chrono::steady_clock::now() < end) {
        shmsem_lease_t l;
        int r;
        switch (rng() % 3) {
          case 0:
            r = shmsem_acquire(s, &l);
            break;
          case 1:
            r = shmsem_try_acquire(s, &l);
            break;
          default: {
            timespec d;
            clock_gettime(CLOCK_MONOTONIC, &d);
            d.tv_nsec += long(rng() % 300'000);
            if (d.tv_nsec >= 1'000'000'000) {
              d.tv_sec++;
              d.tv_nsec -= 1'000'000'000;
            }
            r = shmsem_acquire_until(s, &d, &l);
          }
        }
        if (r == -EAGAIN || r == -ETIMEDOUT) {
          tally->timeouts++;
          continue;
        }
        if (r == -EBUSY) {
          tally->busy++;
          continue;
        }
        if (r != 0) {
          tally->errors++;
          continue;
        }
        tally->grants++;
        if (++tally->inside > int(kPermits)) tally->over++;
        for (volatile unsigned k = 0, n = rng() % 2000; k < n; k = k + 1) {
        }
        --tally->inside;
        if (shmsem_release(s, &l) != 0) tally->errors++;
        if (rng() % 16 == 0 && shmsem_release(s, &l) != -EALREADY)
          tally->errors++;
      }
      shmsem_detach(s);
      return 0;
    });
  int checks = 0;
  while (std::chrono::steady_clock::now() < end) {
    ASSERT_INVARIANTS(seg.get());
    checks++;
  }
  EXPECT_TRUE(kids.wait_all_ok());
  EXPECT_EQ(tally->errors.load(), 0);
  EXPECT_EQ(tally->over.load(), 0);
  EXPECT_GT(tally->grants.load(), 100u);
  EXPECT_GT(checks, 10);
  EXPECT_COUNTS(seg.get(), kPermits, 0, 0, 0);
  struct shmsem_stat st;
  shmsem_stat(seg.get(), &st);
  EXPECT_EQ(st.acquisitions, tally->grants.load());
  EXPECT_INVARIANTS(seg.get());
}

}  // namespace
}  // namespace shmsem::test
