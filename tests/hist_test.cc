// The log-linear wait and hold histograms: the bucket scheme, quantiles
// within the stated error on known inputs, and waits and holds recorded on
// the manual clock through every release path.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>

#include <math.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "support/manual_clock.h"
#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

constexpr uint64_t kUs = 1'000, kMs = 1'000'000, kSec = 1'000'000'000;

// The quantile as shmsem_hist_quantile defines it: the smallest value with
// at least q of all values at or below it.
uint64_t true_quantile(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = size_t(ceil(q * double(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

std::vector<uint64_t> histogram_of(const std::vector<uint64_t> &values) {
  std::vector<uint64_t> h(SHMSEM_HIST_BUCKETS, 0);
  for (uint64_t v : values) h[shmsem_hist_bucket(v)]++;
  return h;
}

TEST(Hist, BucketsTileTheRangeEachWithinAnEighthOfItsLowerBound) {
  EXPECT_EQ(shmsem_hist_lower_ns(0), 0u);
  for (unsigned b = 0; b < SHMSEM_HIST_BUCKETS; b++) {
    const uint64_t lo = shmsem_hist_lower_ns(b), hi = shmsem_hist_upper_ns(b);
    ASSERT_LT(lo, hi) << b;
    EXPECT_EQ(shmsem_hist_bucket(lo), b);
    if (b + 1 < SHMSEM_HIST_BUCKETS) {
      EXPECT_EQ(shmsem_hist_bucket(hi - 1), b);
      EXPECT_EQ(shmsem_hist_lower_ns(b + 1), hi) << "no gap, no overlap";
      if (b >= 8) {
        EXPECT_LE(hi - lo, lo / 8) << b;
      }
    }
  }
  EXPECT_EQ(shmsem_hist_upper_ns(SHMSEM_HIST_BUCKETS - 1), UINT64_MAX);
  EXPECT_EQ(shmsem_hist_lower_ns(SHMSEM_HIST_BUCKETS - 1), 15ull << 40);
  EXPECT_EQ(shmsem_hist_bucket(UINT64_MAX), SHMSEM_HIST_BUCKETS - 1);
  EXPECT_EQ(shmsem_hist_lower_ns(SHMSEM_HIST_BUCKETS), UINT64_MAX);
  EXPECT_EQ(shmsem_hist_upper_ns(SHMSEM_HIST_BUCKETS), UINT64_MAX);
}

// The example: a 200 ms wait read as "p99 <= 268 ms" with
// power-of-two buckets, a sub-microsecond one as "<= 1 ns".
TEST(Hist, TwoHundredMillisecondsReadsWithinAnEighth) {
  std::vector<uint64_t> v(100, 200 * kMs);
  auto h = histogram_of(v);
  uint64_t p99 = shmsem_hist_quantile(h.data(), 0.99);
  EXPECT_GE(p99, 200 * kMs);
  EXPECT_LE(p99, 225 * kMs);
  std::vector<uint64_t> fast(100, 700);
  h = histogram_of(fast);
  EXPECT_GE(shmsem_hist_quantile(h.data(), 0.5), 700u);
  EXPECT_LE(shmsem_hist_quantile(h.data(), 0.5), 787u);
}

// p50, p90 and p99 of several known distributions from 1 us to an hour:
// never below the true value, at most 12.5% above it (the issue asks for
// about 15%).
TEST(Hist, QuantilesAreWithinAnEighthFromAMicrosecondToAnHour) {
  std::mt19937_64 rng(20261202);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double lo = log(double(kUs)), hi = log(3600.0 * double(kSec));
  std::vector<std::vector<uint64_t>> sets;
  std::vector<uint64_t> log_uniform;
  for (int i = 0; i < 20000; i++)
    log_uniform.push_back(uint64_t(exp(lo + (hi - lo) * unit(rng))));
  sets.push_back(log_uniform);
  std::vector<uint64_t> bimodal;  // fast grants and a slow tail
  for (int i = 0; i < 9000; i++) bimodal.push_back(3 * kUs + rng() % (2 * kUs));
  for (int i = 0; i < 1000; i++) bimodal.push_back(90 * kSec + rng() % kSec);
  sets.push_back(bimodal);
  std::vector<uint64_t> steps;  // exact bucket edges and their neighbours
  for (uint64_t x = kUs; x < 3600 * kSec; x = x * 3 / 2)
    for (uint64_t d : {x - 1, x, x + 1}) steps.push_back(d);
  sets.push_back(steps);
  for (const auto &v : sets) {
    auto h = histogram_of(v);
    for (double q : {0.5, 0.9, 0.99, 1.0}) {
      const uint64_t truth = true_quantile(v, q);
      const uint64_t got = shmsem_hist_quantile(h.data(), q);
      EXPECT_GE(got, truth) << "q " << q;
      EXPECT_LE(double(got), double(truth) * 1.125)
          << "q " << q << " of " << truth;
    }
  }
}

TEST(Hist, QuantileOfNothingOrOutOfRangeIsZero) {
  std::vector<uint64_t> h(SHMSEM_HIST_BUCKETS, 0);
  EXPECT_EQ(shmsem_hist_quantile(h.data(), 0.5), 0u);
  h[shmsem_hist_bucket(5 * kMs)] = 1;
  EXPECT_EQ(shmsem_hist_quantile(h.data(), 0.0), 0u);
  EXPECT_EQ(shmsem_hist_quantile(h.data(), 1.5), 0u);
  EXPECT_EQ(shmsem_hist_quantile(h.data(), NAN), 0u);
  EXPECT_EQ(shmsem_hist_quantile(nullptr, 0.5), 0u);
}

// The hold bucket that counts `ns`: (bound(b - 1), bound(b)].
unsigned hold_bucket(uint64_t ns) {
  unsigned b = 0;
  while (ns > shmsem_hold_bound_ns(b)) b++;
  return b;
}

TEST(Hist, HoldBoundsRiseToInfinity) {
  for (unsigned b = 1; b < SHMSEM_HOLD_BUCKETS; b++)
    EXPECT_LT(shmsem_hold_bound_ns(b - 1), shmsem_hold_bound_ns(b));
  EXPECT_EQ(shmsem_hold_bound_ns(0), kMs);
  EXPECT_EQ(shmsem_hold_bound_ns(SHMSEM_HOLD_BUCKETS - 1), UINT64_MAX);
  EXPECT_EQ(shmsem_hold_bound_ns(SHMSEM_HOLD_BUCKETS), UINT64_MAX);
  EXPECT_EQ(hold_bucket(0), 0u);
  EXPECT_EQ(hold_bucket(kMs), 0u) << "bounds are inclusive, as le";
  EXPECT_EQ(hold_bucket(kMs + 1), 1u);
}

// The hold quantile is the bound (inclusive, as Prometheus' le) of the
// bucket the q-quantile falls in: 90 holds of 3 ms, 9 of 2 s, one of two
// hours.
TEST(Hist, HoldQuantileIsTheBoundOfItsBucket) {
  struct shmsem_stat st {};
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 0.5), 0u) << "no holds";
  EXPECT_EQ(shmsem_stat_hold_quantile(nullptr, 0.5), 0u);
  st.hold_hist[hold_bucket(3 * kMs)] = 90;
  st.hold_hist[hold_bucket(2 * kSec)] = 9;
  st.hold_hist[hold_bucket(7200 * kSec)] = 1;
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 0.5), 5 * kMs);
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 0.9), 5 * kMs) << "the 90th is 3 ms";
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 0.91), 2500 * kMs);
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 0.99), 2500 * kMs);
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 1.0), UINT64_MAX) << "above an hour";
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 0.0), 0u);
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 1.5), 0u);
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, NAN), 0u);
  // Counts a writer of the segment made huge: summed without wrapping (to
  // "no holds") or saturating (the first bucket reading as all of them,
  // a bound below the quantile; the review found 1 ms here).
  st = {};
  st.hold_hist[0] = UINT64_MAX;
  st.hold_hist[3] = UINT64_MAX;
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 0.25), kMs);
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 1.0), 25 * kMs);
  std::vector<uint64_t> h(SHMSEM_HIST_BUCKETS, 0);
  h[shmsem_hist_bucket(kMs)] = UINT64_MAX;
  h[shmsem_hist_bucket(kSec)] = UINT64_MAX;
  EXPECT_GE(shmsem_hist_quantile(h.data(), 1.0), kSec) << "waits alike";
}

struct shmsem_stat stat_now(shmsem_t *s) {
  struct shmsem_stat st;
  EXPECT_EQ(shmsem_stat(s, &st), 0);
  return st;
}

uint64_t total(const uint64_t *h, unsigned buckets = SHMSEM_HIST_BUCKETS) {
  uint64_t n = 0;
  for (unsigned b = 0; b < buckets; b++) n += h[b];
  return n;
}
uint64_t holds(const struct shmsem_stat &st) {
  return total(st.hold_hist, SHMSEM_HOLD_BUCKETS);
}

// A queued acquire granted 200 ms (manual clock) after it queued counts
// 200 ms exactly; one that did not wait counts 0.
TEST(Hist, WaitOfAQueuedAcquireIsRecordedExactly) {
  ManualClock clock;
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held, got;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  std::atomic<int> r{1};
  std::thread waiter([&] { r = shmsem_acquire(s, &got); });
  ASSERT_TRUE(wait_until([&] { return counts(s).waiting == 1; }));
  clock.advance(200 * kMs);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  waiter.join();
  ASSERT_EQ(r.load(), 0);
  struct shmsem_stat st = stat_now(s);
  EXPECT_EQ(st.wait_hist[shmsem_hist_bucket(200 * kMs)], 1u);
  EXPECT_EQ(st.wait_hist[0], 1u) << "the first acquire did not wait";
  EXPECT_EQ(st.wait_sum_ns, 200 * kMs);
  EXPECT_EQ(total(st.wait_hist), st.acquisitions);
  EXPECT_EQ(shmsem_stat_wait_quantile(&st, 1.0),
            shmsem_hist_upper_ns(shmsem_hist_bucket(200 * kMs)) - 1);
  ASSERT_EQ(shmsem_release(s, &got), 0);
}

// Every release path records the lease's hold time once: the lock-free
// release, the locked one (someone queued), and a weighted lease of 3
// (one hold, not three).
TEST(Hist, HoldIsRecordedOnceByEveryReleasePath) {
  ManualClock clock;
  Segment seg(3);
  shmsem_t *s = seg.get();
  shmsem_lease_t a;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  clock.advance(1500 * kMs);
  ASSERT_EQ(shmsem_release(s, &a), 0);  // lock-free
  struct shmsem_stat st = stat_now(s);
  EXPECT_EQ(st.hold_hist[hold_bucket(1500 * kMs)], 1u);
  EXPECT_EQ(st.hold_sum_ns, 1500 * kMs);

  shmsem_lease_t w3, queued;
  ASSERT_EQ(shmsem_acquire_n(s, 3, &w3), 0);
  std::atomic<int> r{1};
  std::thread waiter([&] { r = shmsem_acquire(s, &queued); });
  ASSERT_TRUE(wait_until([&] { return counts(s).waiting == 1; }));
  clock.advance(40 * kMs);
  ASSERT_EQ(shmsem_release(s, &w3), 0);  // locked: hands one to the waiter
  waiter.join();
  ASSERT_EQ(r.load(), 0);
  clock.advance(7 * kSec);
  ASSERT_EQ(shmsem_release(s, &queued), 0);
  st = stat_now(s);
  EXPECT_EQ(st.hold_hist[hold_bucket(40 * kMs)], 1u) << "one lease of 3";
  EXPECT_EQ(st.hold_hist[hold_bucket(7 * kSec)], 1u);
  EXPECT_EQ(holds(st), 3u);
  EXPECT_EQ(st.hold_sum_ns, 1500 * kMs + 40 * kMs + 7 * kSec);
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 0.5), 2500 * kMs) << "1.5 s";
  EXPECT_EQ(shmsem_stat_hold_quantile(&st, 1.0), 10 * kSec) << "7 s";
}

// A lock-free release counts in its thread's lane; when the process is
// gone and its record reclaimed, the lane's holds join the core's: nothing
// lost, nothing counted twice.
TEST(Hist, LaneHoldsOfAnExitedProcessSurviveItsReclamation) {
  ManualClock clock;
  Segment seg(2);
  Children kids;
  pid_t pid = kids.spawn([&] {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t l;
    if (shmsem_acquire(s, &l) != 0) return 1;
    clock.advance(3 * kSec);  // the child's copy of the manual clock
    return shmsem_release(s, &l) == 0 ? 0 : 2;
  });
  ASSERT_EQ(kids.wait(pid), 0);
  struct shmsem_stat st = stat_now(seg.get());
  ASSERT_EQ(holds(st), 1u);
  EXPECT_EQ(st.hold_hist[hold_bucket(3 * kSec)], 1u);
  EXPECT_EQ(st.hold_sum_ns, 3 * kSec);
  ASSERT_GE(shmsem_recover(seg.get()), 0);  // frees its process record
  st = stat_now(seg.get());
  EXPECT_EQ(holds(st), 1u);
  EXPECT_EQ(st.hold_hist[hold_bucket(3 * kSec)], 1u);
  EXPECT_EQ(st.hold_sum_ns, 3 * kSec);
  EXPECT_EQ(shmsem_check(seg.get()), 0);
}

// A second release of the same token changes nothing: no second hold.
TEST(Hist, RefusedReleaseRecordsNoHold) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t a;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  ASSERT_EQ(shmsem_release(s, &a), 0);
  ASSERT_EQ(shmsem_release(s, &a), -EALREADY);
  EXPECT_EQ(holds(stat_now(s)), 1u);
}

}  // namespace
}  // namespace shmsem::test
