// Time: the monotonic clock every deadline is measured against. Test builds
// can replace it with a manual clock (testing.h).
#ifndef SHMSEM_SRC_CLOCK_H
#define SHMSEM_SRC_CLOCK_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

namespace shmsem::detail {

inline constexpr uint64_t kNsPerSec = 1'000'000'000ull;

// Saturates: a time past 2^64 - 1 ns (year 2554 on a boot-relative clock)
// is "never" rather than a wrapped, early time. tv_sec < 0 counts as 0.
inline uint64_t ts_to_ns(const timespec &ts) {
  constexpr uint64_t kMaxSec = ~uint64_t{0} / kNsPerSec - 1;
  if (ts.tv_sec < 0) return 0;
  if (uint64_t(ts.tv_sec) > kMaxSec) return ~uint64_t{0};
  return uint64_t(ts.tv_sec) * kNsPerSec + uint64_t(ts.tv_nsec);
}

// The one check of a deadline the API receives: tv_nsec in [0, 1e9) and
// tv_sec >= 0, else -EINVAL; far-future times saturate (ts_to_ns).
inline int deadline_ns(const timespec *ts, uint64_t *out) {
  if (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= long(kNsPerSec))
    return -EINVAL;
  *out = ts_to_ns(*ts);
  return 0;
}
inline timespec ns_to_ts(uint64_t ns) {
  timespec ts;
  ts.tv_sec = time_t(ns / kNsPerSec);
  ts.tv_nsec = long(ns % kNsPerSec);
  return ts;
}

// The real CLOCK_MONOTONIC (vDSO, no system call).
uint64_t real_mono_ns();
// The clock deadlines are compared with: real_mono_ns(), or the manual clock.
uint64_t mono_ns();
// True when a test installed a manual clock: sleepers must then poll it.
bool clock_is_manual();
// With a manual clock the kernel cannot time a deadline for us, so
// sleepers re-read the manual clock this often (real time).
inline constexpr uint64_t kManualClockPollNs = 1'000'000;
// The real CLOCK_MONOTONIC time by which a sleeper must look at `deadline`
// (a mono_ns() time) again.
inline uint64_t deadline_wake_at(uint64_t deadline) {
  return clock_is_manual() ? real_mono_ns() + kManualClockPollNs : deadline;
}
// CLOCK_MONOTONIC_COARSE, cheap enough for the fast path (tick resolution);
// the manual clock instead when a test installed one.
uint64_t real_coarse_ns();
uint64_t coarse_ns();

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CLOCK_H
