#include "clock.h"

#include <atomic>

#include "testing_state.h"

namespace shmsem::detail {

uint64_t real_mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts_to_ns(ts);
}

uint64_t real_coarse_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts_to_ns(ts);
}

#ifdef SHMSEM_TESTING
// A manual clock replaces both: hold times and ages are then exact.
uint64_t coarse_ns() {
  auto fn = g_clock.load(std::memory_order_acquire);
  return fn ? fn() : real_coarse_ns();
}
uint64_t mono_ns() {
  auto fn = g_clock.load(std::memory_order_acquire);
  return fn ? fn() : real_mono_ns();
}
bool clock_is_manual() {
  return g_clock.load(std::memory_order_acquire) != nullptr;
}
#else
uint64_t coarse_ns() { return real_coarse_ns(); }
uint64_t mono_ns() { return real_mono_ns(); }
bool clock_is_manual() { return false; }
#endif

}  // namespace shmsem::detail
