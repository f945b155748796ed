// shmsem_stat and shmsem_inspect of a Redis pool: one call
// (shmsem_inspect in shmsem.lua) returns the counters, the time on the
// server, the leases and the queue in order; every field is checked before
// it is used. Times on the server's clock become durations, then
// CLOCK_MONOTONIC times of this process (since = now - duration).
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "ops.h"
#include "pool.h"
#include "rate.h"

namespace shmsem::detail {
namespace {

constexpr uint64_t kMs = 1000000;
enum StatField {
  kPermits = 1,
  kMaxWaiters,
  kHeld,
  kClosed,
  kMaxPermits,
  kAcquisitions,
  kTimeouts,
  kCancellations,
  kQueueFull,
  kShutdownFailures,
  kReclaimedHolders,
  kReclaimedWaiters,
  kWaitSum,
  kHoldSum,
  kCreated,
  kCreatedPermits,
  kSeq,
  kTtl,
  kQueueLen,
  kNow,
  kRate,  // the rate limit (shmsem.lua's f_inspect)
  kBurst,
  kPeriod,  // digits of a uint64: read apart
  kInterval,
  kTatUs,
  kTatNs,
  kNowUs,
  kNumHolders
};

struct Raw {
  int64_t v[kNumHolders + 1];
};

// The rate words (rate.h) of the reply.
int read_rate(const Reply &r, const Raw &raw, struct shmsem_stat *st) {
  const int64_t *v = raw.v;
  RateWords w{v[kRate],  v[kBurst], v[kInterval], v[kTatUs], v[kTatNs],
              v[kNowUs], ""};
  if (!r.str(kPeriod, &w.period)) return kBadReply;
  return rate_stat(w, mono_ns(), st);
}

int read_stat(const Reply &r, Raw *raw, struct shmsem_stat *st) {
  if (r.status() != "ok") return status_errno(r.status());
  for (int i = kPermits; i <= kNumHolders; i++)
    if (i != kPeriod && !r.num(size_t(i), 0, INT64_MAX / 2, &raw->v[i]))
      return kBadReply;
  const int64_t *v = raw->v;
  if (v[kPermits] > SHMSEM_MAX_PERMITS || v[kMaxPermits] > SHMSEM_MAX_PERMITS ||
      v[kHeld] > v[kMaxPermits] || v[kMaxWaiters] > SHMSEM_MAX_WAITERS ||
      v[kQueueLen] > SHMSEM_MAX_WAITERS)
    return kBadReply;
  memset(st, 0, sizeof *st);
  st->permits = uint32_t(v[kPermits]);
  st->max_waiters = uint32_t(v[kMaxWaiters]);
  st->held = uint32_t(v[kHeld]);
  st->available = v[kPermits] > v[kHeld] ? uint32_t(v[kPermits] - v[kHeld]) : 0;
  st->retiring = v[kHeld] > v[kPermits] ? uint32_t(v[kHeld] - v[kPermits]) : 0;
  st->waiting = uint32_t(v[kQueueLen]);
  st->closed = v[kClosed] ? 1 : 0;
  st->max_permits = uint32_t(v[kMaxPermits]);
  st->acquisitions = uint64_t(v[kAcquisitions]);
  st->timeouts = uint64_t(v[kTimeouts]);
  st->cancellations = uint64_t(v[kCancellations]);
  st->queue_full = uint64_t(v[kQueueFull]);
  st->shutdown_failures = uint64_t(v[kShutdownFailures]);
  st->reclaimed_holders = uint64_t(v[kReclaimedHolders]);
  st->reclaimed_waiters = uint64_t(v[kReclaimedWaiters]);
  st->wait_sum_ns = uint64_t(v[kWaitSum]) * kMs;
  st->hold_sum_ns = uint64_t(v[kHoldSum]) * kMs;
  return read_rate(r, *raw, st);
}

// A server time (ms) as this process's CLOCK_MONOTONIC, and the age.
void since(uint64_t server_now, uint64_t t, uint64_t mono, uint64_t *since_ns,
           uint64_t *age_ns) {
  // At most a year: a garbage time must not overflow.
  constexpr uint64_t kMaxAgeMs = 365ull * 86400 * 1000;
  uint64_t age_ms = server_now > t ? server_now - t : 0;
  if (age_ms > kMaxAgeMs) age_ms = kMaxAgeMs;
  const uint64_t age = age_ms * kMs;
  *age_ns = age;
  *since_ns = mono > age ? mono - age : 0;
}

int read_holder(const std::string &s, uint64_t now, uint64_t mono,
                shmsem_holder *h) {
  uint64_t v[7];
  if (!parse_numbers(s, v, 7)) return kBadReply;
  const uint64_t idx = v[0], gen = v[1], n = v[3], t = v[4], pid = v[5],
                 decl = v[6];
  if (idx >= SHMSEM_MAX_PERMITS || n > SHMSEM_MAX_PERMITS || pid > INT32_MAX ||
      decl > SHMSEM_MAX_DECLARED_NS / kMs)
    return kBadReply;
  memset(h, 0, sizeof *h);
  h->lease = uint32_t(idx);
  h->weight = uint32_t(n);
  h->pid = int32_t(pid);
  h->liveness = SHMSEM_OWNER_UNKNOWN;  // on another host, maybe
  h->gen = gen;
  h->declared_ns = decl * kMs;
  since(now, t, mono, &h->since_ns, &h->held_ns);
  if (h->declared_ns && h->held_ns > h->declared_ns)
    h->flags |= SHMSEM_HOLDER_OVERDUE;
  return 0;
}

int read_waiter(const std::string &s, uint32_t pos, uint64_t now, uint64_t mono,
                shmsem_waiter_info *w) {
  uint64_t v[4];
  if (!parse_numbers(s, v, 4)) return kBadReply;
  const uint64_t ticket = v[0], n = v[1], t = v[2], pid = v[3];
  if (n > SHMSEM_MAX_PERMITS || pid > INT32_MAX) return kBadReply;
  memset(w, 0, sizeof *w);
  w->position = pos;
  w->ticket = ticket;
  w->weight = uint32_t(n);
  w->pid = int32_t(pid);
  w->liveness = SHMSEM_OWNER_UNKNOWN;
  since(now, t, mono, &w->since_ns, &w->waited_ns);
  return 0;
}

int call_inspect(shmsem_t *s, uint32_t mh, uint32_t mw, Reply *r) {
  if (!s) return -EINVAL;
  Pool *p = pool_of(s);
  pool_enter(p);
  return pool_call(p, "shmsem_inspect",
                   {std::to_string(mh), std::to_string(mw)}, r);
}

// The lists after the counters: holders, then waiters; fills `out`.
int read_lists(const Reply &r, const Raw &raw, shmsem_inspection *out,
               shmsem_holder *holders, uint32_t mh, shmsem_waiter_info *waiters,
               uint32_t mw) {
  const uint64_t now = uint64_t(raw.v[kNow]), mono = mono_ns();
  const uint64_t nh = uint64_t(raw.v[kNumHolders]);
  const uint64_t got_h = nh < mh ? nh : mh;
  size_t at = kNumHolders + 1;
  std::string s;
  for (uint64_t i = 0; i < got_h; i++, at++) {
    if (!r.str(at, &s) || read_holder(s, now, mono, &holders[i]) < 0)
      return kBadReply;
    if (holders[i].flags & SHMSEM_HOLDER_OVERDUE) {
      out->overdue++;
      out->overdue_permits += holders[i].weight;
    }
  }
  int64_t nw;
  if (!r.num(at++, 0, mw, &nw)) return kBadReply;
  for (int64_t i = 0; i < nw; i++, at++)
    if (!r.str(at, &s) ||
        read_waiter(s, uint32_t(i + 1), now, mono, &waiters[i]) < 0)
      return kBadReply;
  out->nholders = uint32_t(nh);
  out->nwaiters = uint32_t(raw.v[kQueueLen]);
  out->now_ns = mono;
  out->now_coarse_ns = mono;
  out->created_realtime_ns = uint64_t(raw.v[kCreated]) * kMs;
  out->created_permits = uint32_t(raw.v[kCreatedPermits]);
  if (nw > 0) out->oldest_wait_since_ns = waiters[0].since_ns;
  for (uint64_t i = 0; i < got_h; i++)
    if (!out->oldest_lease_since_ns ||
        holders[i].since_ns < out->oldest_lease_since_ns)
      out->oldest_lease_since_ns = holders[i].since_ns;
  return (nh > mh && mh) || (out->nwaiters > mw && mw) ? -ENOBUFS : 0;
}

}  // namespace

int redis_stat(shmsem_t *s, struct shmsem_stat *st) {
  if (!st) return -EINVAL;
  Reply r;
  int e = call_inspect(s, 0, 0, &r);
  if (e < 0) return e;
  Raw raw;
  return read_stat(r, &raw, st);
}

int redis_inspect(shmsem_t *s, struct shmsem_inspection *out,
                  struct shmsem_holder *holders, uint32_t max_holders,
                  struct shmsem_waiter_info *waiters, uint32_t max_waiters) {
  if (!out || (!holders && max_holders) || (!waiters && max_waiters))
    return -EINVAL;
  Reply r;
  int e = call_inspect(s, max_holders, max_waiters, &r);
  if (e < 0) return e;
  memset(out, 0, sizeof *out);
  Raw raw;
  e = read_stat(r, &raw, &out->stat);
  if (e < 0) return e;
  if (raw.v[kTtl] > int64_t(UINT32_MAX)) return kBadReply;
  out->lease_ttl_ms = uint32_t(raw.v[kTtl]);
  return read_lists(r, raw, out, holders, max_holders, waiters, max_waiters);
}

}  // namespace shmsem::detail
