#include "support/manual_clock.h"

#include <atomic>

#include "testing.h"

namespace shmsem::test {
namespace {
std::atomic<uint64_t> g_now{0};
uint64_t read_now() { return g_now.load(std::memory_order_acquire); }
}  // namespace

ManualClock::ManualClock() {
  g_now.store(1000ull * 1'000'000'000ull);
  testing::set_clock(&read_now);
}
ManualClock::~ManualClock() { testing::set_clock(nullptr); }
uint64_t ManualClock::now() const { return read_now(); }
void ManualClock::advance(uint64_t ns) { g_now.fetch_add(ns); }
timespec ManualClock::deadline_in(uint64_t ns) const {
  uint64_t t = now() + ns;
  timespec ts;
  ts.tv_sec = time_t(t / 1'000'000'000ull);
  ts.tv_nsec = long(t % 1'000'000'000ull);
  return ts;
}

}  // namespace shmsem::test
