#include "support/segment.h"

#include <sys/random.h>
#include <unistd.h>

#include <cstdio>

#include <atomic>

#include "check.h"
#include "support/process.h"

namespace shmsem::test {

// The pid alone is not unique over a run: with pid_max at 32768 and
// compilers running beside the suite, pids come round within minutes, and a
// name left behind by a killed test would make a later one's SHMSEM_EXCL
// create fail. A random number drawn once per process (per fork child too:
// the pid is part of the key) makes a collision negligible.
std::string unique_name(const char *tag) {
  static std::atomic<int> n{0};
  static thread_local pid_t drawn_for = 0;
  static thread_local uint32_t nonce = 0;
  if (drawn_for != getpid()) {
    drawn_for = getpid();
    if (getrandom(&nonce, sizeof nonce, 0) != sizeof nonce) nonce = 0;
  }
  char hex[9];
  snprintf(hex, sizeof hex, "%08x", nonce);
  return "/shmsem-test-" + std::to_string(getpid()) + "-" + hex + "-" +
         std::to_string(n.fetch_add(1)) + "-" + tag;
}

Segment::Segment(uint32_t permits, uint32_t max_waiters, const char *tag)
    : name_(unique_name(tag)) {
  shmsem_config cfg{};
  cfg.permits = permits;
  cfg.max_waiters = max_waiters;
  int r = shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &s_);
  if (r != 0) ADD_FAILURE() << "shmsem_create: " << shmsem_strerror(r);
}

Segment::Segment(const shmsem_config &cfg, const char *tag)
    : name_(unique_name(tag)) {
  shmsem_config c = cfg;
  if (!c.max_waiters) c.max_waiters = 64;
  int r = shmsem_create(name_.c_str(), &c, SHMSEM_EXCL, &s_);
  if (r != 0) ADD_FAILURE() << "shmsem_create: " << shmsem_strerror(r);
}

Segment::~Segment() {
  shmsem_detach(s_);
  shmsem_unlink(name_.c_str());
}

shmsem_t *Segment::open_again(int flags) const {
  shmsem_t *s = nullptr;
  int r = shmsem_open(name_.c_str(), flags, &s);
  if (r != 0) ADD_FAILURE() << "shmsem_open: " << shmsem_strerror(r);
  return s;
}

std::string invariant_violation(shmsem_t *s) {
  char msg[160];
  int r = detail::check(s, msg, sizeof msg);
  return r == 0 ? "" : msg;
}

Counts counts(shmsem_t *s) {
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  return {st.available, st.held, st.reserved, st.waiting};
}

struct shmsem_stat stat_of(shmsem_t *s) {
  struct shmsem_stat st {};
  EXPECT_EQ(shmsem_stat(s, &st), 0);
  return st;
}

bool waiting_is(shmsem_t *s, uint32_t n) {
  return wait_until([&] { return counts(s).waiting == n; });
}

shmsem_config rated(uint32_t permits, uint32_t rate, uint32_t burst,
                    uint64_t period_ns) {
  shmsem_config c{};
  c.permits = permits;
  c.rate = rate;
  c.burst = burst;
  c.rate_period_ns = period_ns;
  return c;
}

int take_token(shmsem_t *s) {
  shmsem_lease_t l;
  int r = shmsem_try_acquire(s, &l);
  if (r == 0) {
    EXPECT_EQ(shmsem_release(s, &l), 0);
  }
  return r;
}

}  // namespace shmsem::test
