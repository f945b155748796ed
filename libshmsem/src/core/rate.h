// The rate limit: a GCRA token bucket kept in three words of the core
// (layout.h), read and changed under the lock. One acquisition per
// `interval` ns, up to `burst` at once: an acquisition at `now` conforms
// when tat <= now + (burst - 1) * interval, and moves tat to
// max(tat, now) + interval. docs/DESIGN.md section 13.
#ifndef SHMSEM_SRC_RATE_H
#define SHMSEM_SRC_RATE_H

#include <shmsem/shmsem.h>

#include <algorithm>

#include "handle.h"

namespace shmsem::detail {

// kMaxRateIntervalNs, kMaxRateWindowNs: layout.h.

struct Rate {
  uint64_t interval;  // 0: no rate limit
  uint64_t window;    // (burst - 1) * interval
  uint64_t tat;       // within [0, now + burst * interval]
};

// The rate state as read now, each value clamped: a writer may have left
// anything there, and a tat beyond what any grant sets would stop the
// semaphore for ever.
inline Rate rate_read(const shmsem_t *s, uint64_t now) {
  const Core *c = s->core;
  Rate r{};
  r.interval = c->rate_interval_ns.load(std::memory_order_relaxed);
  if (!r.interval) return r;
  if (r.interval > kMaxRateIntervalNs) r.interval = kMaxRateIntervalNs;
  const uint64_t burst = std::clamp<uint64_t>(
      c->rate_burst.load(std::memory_order_relaxed), 1, SHMSEM_MAX_BURST);
  // At most 2^20 * 8.64e13 < 2^67: in 128 bits, then saturated.
  unsigned __int128 w = (unsigned __int128)(burst - 1) * r.interval;
  r.window = w > kMaxRateWindowNs ? kMaxRateWindowNs : uint64_t(w);
  uint64_t max_tat = now + r.window + r.interval;
  if (max_tat < now) max_tat = ~uint64_t{0};
  r.tat = c->rate_tat_ns.load(std::memory_order_relaxed);
  if (r.tat > max_tat) r.tat = max_tat;
  return r;
}

// The earliest time (mono_ns) an acquisition conforms: `now` or before if
// one does now.
inline uint64_t rate_start(const Rate &r) {
  return r.tat > r.window ? r.tat - r.window : 0;
}

// Under the lock: the rate words as rate_read() clamps them are stored,
// so that a writer's far-future tat stops the semaphore for no more than a
// burst's refill from the first time it is met, not for ever (the clamp
// moves with `now`), and check agrees with what every reader uses.
inline Rate rate_clamp(shmsem_t *s, uint64_t now) {
  Core *c = s->core;
  // The interval and burst are the creator's (copied at open): a writer's
  // are put back.
  if (c->rate_interval_ns.load(std::memory_order_relaxed) != s->rate_interval)
    c->rate_interval_ns.store(s->rate_interval, std::memory_order_relaxed);
  if (s->rate_interval &&
      c->rate_burst.load(std::memory_order_relaxed) != s->rate_burst)
    c->rate_burst.store(s->rate_burst, std::memory_order_relaxed);
  Rate r = rate_read(s, now);
  if (!r.interval) return r;
  if (c->rate_interval_ns.load(std::memory_order_relaxed) != r.interval)
    c->rate_interval_ns.store(r.interval, std::memory_order_relaxed);
  if (c->rate_tat_ns.load(std::memory_order_relaxed) != r.tat)
    c->rate_tat_ns.store(r.tat, std::memory_order_relaxed);
  return r;
}

// Under the lock: whether an acquisition conforms at `now`.
inline bool rate_ok(shmsem_t *s, uint64_t now) {
  Rate r = rate_clamp(s, now);
  return !r.interval || rate_start(r) <= now;
}

// Under the lock, with rate_ok(now): take a token.
inline void rate_take(shmsem_t *s, uint64_t now) {
  Rate r = rate_read(s, now);
  if (!r.interval) return;
  uint64_t base = r.tat > now ? r.tat : now;
  s->core->rate_tat_ns.store(base + r.interval, std::memory_order_relaxed);
}

// Tokens in the bucket at `now` (0..burst).
inline uint32_t rate_tokens(const shmsem_t *s, uint64_t now) {
  Rate r = rate_read(s, now);
  if (!r.interval) return 0;
  uint64_t ahead = r.tat > now ? r.tat - now : 0;  // <= window + interval
  uint64_t full = r.window + r.interval;
  return uint32_t((full - ahead) / r.interval);
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RATE_H
