// Time: the monotonic clock every deadline is measured against. Test builds
// can replace it with a manual clock (testing.h).
#ifndef SHMSEM_SRC_CLOCK_H
#define SHMSEM_SRC_CLOCK_H

#include <stdint.h>
#include <time.h>

namespace shmsem::detail {

inline constexpr uint64_t kNsPerSec = 1'000'000'000ull;

inline uint64_t ts_to_ns(const timespec &ts) {
  return uint64_t(ts.tv_sec) * kNsPerSec + uint64_t(ts.tv_nsec);
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
// CLOCK_MONOTONIC_COARSE, cheap enough for the fast path (tick resolution).
uint64_t coarse_ns();

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CLOCK_H
