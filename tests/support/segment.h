// A semaphore with a unique name for one test, unlinked on teardown (also
// when the test fails), and the invariant assertion used after every step.
#ifndef SHMSEM_TESTS_SUPPORT_SEGMENT_H
#define SHMSEM_TESTS_SUPPORT_SEGMENT_H

#include <gtest/gtest.h>
#include <shmsem/shmsem.h>

#include <string>

namespace shmsem::test {

// "/shmsem-test-<pid>-<random>-<n>-<tag>", unique within the machine.
std::string unique_name(const char *tag = "t");

class Segment {
 public:
  explicit Segment(uint32_t permits, uint32_t max_waiters = 64,
                   const char *tag = "t");
  // Any configuration (max_permits, rate, ...); max_waiters 0 means 64.
  explicit Segment(const shmsem_config &cfg, const char *tag = "t");
  ~Segment();
  Segment(const Segment &) = delete;
  Segment &operator=(const Segment &) = delete;

  shmsem_t *get() const { return s_; }
  const std::string &name() const { return name_; }
  // Another handle on the same segment (e.g. in a forked child).
  shmsem_t *open_again(int flags = 0) const;

 private:
  std::string name_;
  shmsem_t *s_ = nullptr;
};

// Empty string if every invariant holds, else the broken one.
std::string invariant_violation(shmsem_t *s);

struct Counts {
  uint32_t available, held, reserved, waiting;
};
Counts counts(shmsem_t *s);

// The whole stat, expected to succeed (a gtest failure if it does not).
// Not for forked children: they report through CHILD_CHECK.
struct shmsem_stat stat_of(shmsem_t *s);

// Polls (bounded, see wait_until) until exactly n waiters are queued: for
// waiting on an observable state, never for ordering a race.
bool waiting_is(shmsem_t *s, uint32_t n);

// A configuration of `permits` with a rate limit: `rate` per period (a
// second if 0), `burst` at once.
shmsem_config rated(uint32_t permits, uint32_t rate, uint32_t burst,
                    uint64_t period_ns = 0);

// Takes one permit with try_acquire and gives it straight back (a gtest
// failure if the release fails): 0, or the try's error (-EAGAIN when the
// bucket is empty).
int take_token(shmsem_t *s);

}  // namespace shmsem::test

#define EXPECT_INVARIANTS(s) \
  EXPECT_EQ(::shmsem::test::invariant_violation(s), "")
#define ASSERT_INVARIANTS(s) \
  ASSERT_EQ(::shmsem::test::invariant_violation(s), "")

// available, held, reserved, waiting in one assertion.
#define EXPECT_COUNTS(s, a, h, r, w)                     \
  do {                                                   \
    auto c_ = ::shmsem::test::counts(s);                 \
    EXPECT_EQ(c_.available, uint32_t(a)) << "available"; \
    EXPECT_EQ(c_.held, uint32_t(h)) << "held";           \
    EXPECT_EQ(c_.reserved, uint32_t(r)) << "reserved";   \
    EXPECT_EQ(c_.waiting, uint32_t(w)) << "waiting";     \
  } while (0)

#endif  // SHMSEM_TESTS_SUPPORT_SEGMENT_H
