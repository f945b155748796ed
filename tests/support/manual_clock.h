// A manual CLOCK_MONOTONIC for the core: deadlines fire when the test says.
#ifndef SHMSEM_TESTS_SUPPORT_MANUAL_CLOCK_H
#define SHMSEM_TESTS_SUPPORT_MANUAL_CLOCK_H

#include <time.h>

#include <cstdint>

namespace shmsem::test {

class ManualClock {
 public:
  ManualClock();   // installs itself, starting at 1000 s
  ~ManualClock();  // restores the real clock
  uint64_t now() const;
  void advance(uint64_t ns);
  // An absolute deadline `ns` after now, as the API takes it.
  timespec deadline_in(uint64_t ns) const;
};

}  // namespace shmsem::test

#endif  // SHMSEM_TESTS_SUPPORT_MANUAL_CLOCK_H
