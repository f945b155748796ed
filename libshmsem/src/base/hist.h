// Log-linear histograms of times in ns (wait and hold times): 8 buckets per
// power of two, as HdrHistogram's, so a bucket's upper bound is within 12.5%
// of every value in it. Bucket b < 8 holds exactly b ns; bucket
// 8 + 8 * (e - 3) + k holds [(8 + k) << (e - 3), (9 + k) << (e - 3)) for the
// octave [2^e, 2^(e+1)), e = 3..43; the last bucket also holds everything
// from 2^44 ns on. docs/DESIGN.md §3.
#ifndef SHMSEM_SRC_HIST_H
#define SHMSEM_SRC_HIST_H

#include <stdint.h>

#include <shmsem/shmsem.h>

namespace shmsem::detail {

inline constexpr unsigned kHistSub = 8;      // buckets per power of two
inline constexpr unsigned kHistTopBit = 43;  // the last octave is [2^43, 2^44)
static_assert(kHistSub + kHistSub * (kHistTopBit - 2) == SHMSEM_HIST_BUCKETS);

inline unsigned hist_bucket(uint64_t ns) {
  if (ns < kHistSub) return unsigned(ns);
  unsigned e = 63u - unsigned(__builtin_clzll(ns));  // ns in [2^e, 2^(e+1))
  if (e > kHistTopBit) return SHMSEM_HIST_BUCKETS - 1;
  unsigned k = unsigned(ns >> (e - 3)) & (kHistSub - 1);
  return kHistSub + kHistSub * (e - 3) + k;
}

inline uint64_t hist_lower(unsigned b) {
  if (b < kHistSub) return b;
  unsigned e = (b - kHistSub) / kHistSub + 3, k = (b - kHistSub) % kHistSub;
  return uint64_t{kHistSub + k} << (e - 3);
}

// Exclusive upper bound of bucket b (b < SHMSEM_HIST_BUCKETS).
inline uint64_t hist_upper(unsigned b) {
  return b + 1 < SHMSEM_HIST_BUCKETS ? hist_lower(b + 1) : ~uint64_t{0};
}

// Hold times: fixed buckets, each counting (previous bound, bound] ns.
inline constexpr uint64_t kHoldBoundNs[SHMSEM_HOLD_BUCKETS] = {
    1'000'000,       5'000'000,         10'000'000,     25'000'000,
    50'000'000,      100'000'000,       250'000'000,    500'000'000,
    1'000'000'000,   2'500'000'000,     10'000'000'000, 60'000'000'000,
    300'000'000'000, 3'600'000'000'000, ~uint64_t{0}};

inline unsigned hold_bucket(uint64_t ns) {
  unsigned b = 0;
  while (ns > kHoldBoundNs[b]) b++;  // the last bound is the largest value
  return b;
}

// The q-quantile's bucket's largest value, from counts read out of the
// segment (any value: sums saturate). 0 if empty or q outside (0, 1].
uint64_t hist_quantile(const uint64_t *hist, double q);
// The same for hold times (SHMSEM_HOLD_BUCKETS counts): the bound of the
// q-quantile's bucket (kHoldBoundNs; UINT64_MAX for the last).
uint64_t hold_quantile(const uint64_t *hist, double q);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_HIST_H
