// The rate limit of a Redis pool on the client's side. The GCRA itself
// runs on the server, on the server's clock (shmsem.lua: rate_wait,
// rate_take); here are the configuration, checked as a local semaphore's
// is, the bucket as shmsem_stat shows it, and the head's wait for its
// token: the server tells a head that has its permits but no token how
// long until it has one ("R us" in its mailbox), once; the head sleeps
// that long on its own clock and asks again (shmsem_wait_renew).
// docs/REDIS.md, "The rate limit".
#ifndef SHMSEM_SRC_REDIS_RATE_H
#define SHMSEM_SRC_REDIS_RATE_H

#include <shmsem/shmsem.h>
#include <stdint.h>

#include <string>

namespace shmsem::detail {

// A rate limit after its defaults (shmsem.h): rate 0 is none.
struct RateConfig {
  uint32_t rate = 0, burst = 0;
  uint64_t period_ns = 0, interval_ns = 0;  // interval: period / rate
};

// cfg's rate limit, as shmsem_create(3) states it for every backend: 0, or
// -EINVAL (a burst or period without a rate, a burst above
// SHMSEM_MAX_BURST, an interval outside 1 ns..a day, a refill above 2^62 ns).
int rate_config(const shmsem_config *cfg, RateConfig *out);

// The rate words of an inspect reply (shmsem.lua's f_inspect), unchecked:
// numbers read as such, and the period's digits (a uint64 may not fit
// the reply's integers).
struct RateWords {
  int64_t rate, burst, interval_ns, tat_us, tat_ns, now_us;
  std::string period;
};

// The rate fields of `st` from `w` at the server's now_us, which is `mono`
// here (CLOCK_MONOTONIC). 0, or kBadReply for words out of range.
int rate_stat(const RateWords &w, uint64_t mono, struct shmsem_stat *st);

// A mailbox message "R us": true with *token_at (mono_ns) set; false for
// any other message.
bool rate_message(const std::string &m, uint64_t *token_at);

// The head waits for its token at token_at (mono_ns). Far from it, the
// next BLPOP is shortened (*block_ms) to end early enough (a BLPOP's
// timeout fires up to 1000/hz ms late: 100 ms at hz 10), and false;
// near it, a local sleep up to it, or *block_ms if that is shorter (then
// *block_ms becomes 0: look at the deadline and cancel again). true: the
// token is due now, ask the server for the grant.
bool rate_step(uint64_t token_at, uint64_t *block_ms);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_REDIS_RATE_H
