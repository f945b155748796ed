// Statistics: a snapshot of the counters and the wait-time histogram.
#include "stat.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <algorithm>

#include "handle.h"
#include "clock.h"
#include "hist.h"
#include "section.h"
#include "rate.h"

namespace shmsem::detail {
void stat_fill(shmsem_t *s, struct shmsem_stat *st) {
  const Core *c = s->core;
  auto r32 = [](const std::atomic<uint32_t> &a) {
    return a.load(std::memory_order_relaxed);
  };
  auto r64 = [](const std::atomic<uint64_t> &a) {
    return a.load(std::memory_order_relaxed);
  };
  memset(st, 0, sizeof *st);
  st->permits = std::min(r32(c->capacity), s->permits);
  st->max_permits = s->permits;
  st->retiring = r32(c->retiring);
  // The rate as created (the header: display only), and the bucket now.
  const Header *h = s->hdr;
  st->rate = __atomic_load_n(&h->rate, __ATOMIC_RELAXED);
  st->burst = __atomic_load_n(&h->burst, __ATOMIC_RELAXED);
  st->rate_period_ns = __atomic_load_n(&h->rate_period_ns, __ATOMIC_RELAXED);
  if (r64(c->rate_interval_ns)) {
    const uint64_t now = mono_ns();
    st->rate_tokens = rate_tokens(s, now);
    st->rate_next_ns = std::max(rate_start(rate_read(s, now)), now);
    if (st->rate_tokens) st->rate_next_ns = now;
  }
  // The policy as this handle follows it (copied at open: handle.h).
  st->policy = s->bound_ns ? SHMSEM_POLICY_BOUNDED : SHMSEM_POLICY_FIFO;
  st->max_bypass_ns = s->bound_ns;
  st->hand_off = r32(c->hand_off) ? 1 : 0;
  st->max_waiters = s->max_waiters;
  st->available = r32(c->available);
  st->held = r32(c->held);
  st->reserved = r32(c->reserved);
  st->waiting = r32(c->waiting);
  st->closed = r32(c->closed);
  st->acquisitions = r64(c->acquisitions);
  st->timeouts = r64(c->timeouts);
  st->cancellations = r64(c->cancellations);
  st->queue_full = r64(c->queue_full);
  st->shutdown_failures = r64(c->shutdown_failures);
  st->reclaimed_holders = r64(c->reclaimed_holders);
  st->reclaimed_waiters = r64(c->reclaimed_waiters);
  st->repairs = r64(c->repairs);
  for (int b = 0; b < SHMSEM_HIST_BUCKETS; b++)
    st->wait_hist[b] = r64(c->wait_hist[b]);
  for (int b = 0; b < SHMSEM_HOLD_BUCKETS; b++)
    st->hold_hist[b] = r64(c->hold_hist[b]);
  st->wait_sum_ns = r64(c->wait_sum_ns);
  st->hold_sum_ns = r64(c->hold_sum_ns);
  // The lock-free path's part, which the counters above do not hold: its
  // LOOSE leases are available and its HELD_FAST ones held (one scan), and
  // its acquisitions (waits of zero) are counted in the lanes.
  for (uint32_t l = 0; l < s->permits; l++) {
    uint32_t state =
        word_state(s->leases[l].word.load(std::memory_order_relaxed));
    st->available += state == kLeaseLoose;
    st->held += state == kLeaseHeldFast;
  }
  uint64_t fast = 0;
  uint32_t hwm = r32(c->procs_hwm);
  for (uint32_t p = 0; p < hwm && p < s->max_procs; p++) {
    if (s->procs[p].state.load(std::memory_order_relaxed) != kProcUsed)
      continue;
    for (const Lane &ln : s->procs[p].lanes) fast += r64(ln.acquisitions);
    for (uint32_t ln = 0; ln < kLanes; ln++) {
      const LaneHold &lh = s->holds[p * kLanes + ln];
      st->hold_sum_ns += r64(lh.sum_ns);
      for (int b = 0; b < SHMSEM_HOLD_BUCKETS; b++)
        st->hold_hist[b] += r64(lh.hist[b]);
    }
  }
  st->acquisitions += fast;
  st->wait_hist[0] += fast;
}

int stat(shmsem_t *s, struct shmsem_stat *st) {
  if (!s || !st) return -EINVAL;
  if (s->rdonly) {
    stat_fill(s, st);  // read-only mappings cannot take the lock: may be torn
    return 0;
  }
  Section sec(s);
  stat_fill(s, st);
  return 0;
}

namespace {

// The bucket of `hist` (n counts) that holds the q-quantile, the smallest
// value with at least q of all values at or below it; false if there are
// no values or q is outside (0, 1]. The counts come from the segment,
// where a writer may have put any value (docs/DESIGN.md §7a): the sums are
// 128-bit, which n (at most SHMSEM_HIST_BUCKETS) counts of 2^64 cannot
// overflow (saturating 64-bit sums made a forged total look reached in
// the first bucket, a bound below the quantile), and the rank is kept
// within the total before it leaves floating point (double(2^64 - 1) is
// 2^64, which does not convert back; found by the segment fuzzer).
bool quantile_bucket(const uint64_t *hist, unsigned n, double q,
                     unsigned *out) {
  if (!hist || !(q > 0) || q > 1) return false;
  using u128 = unsigned __int128;
  u128 total = 0;
  for (unsigned b = 0; b < n; b++) total += hist[b];
  if (!total) return false;
  const double r = ceil(q * double(total));
  u128 rank = r < double(total) ? u128(r) : total;
  if (rank == 0) rank = 1;
  u128 seen = 0;
  for (unsigned b = 0; b + 1 < n; b++) {
    seen += hist[b];
    if (seen >= rank) {
      *out = b;
      return true;
    }
  }
  *out = n - 1;
  return true;
}

}  // namespace

uint64_t hist_quantile(const uint64_t *hist, double q) {
  unsigned b;
  if (!quantile_bucket(hist, SHMSEM_HIST_BUCKETS, q, &b)) return 0;
  return b + 1 < SHMSEM_HIST_BUCKETS ? hist_upper(b) - 1 : ~uint64_t{0};
}

uint64_t hold_quantile(const uint64_t *hist, double q) {
  unsigned b;
  if (!quantile_bucket(hist, SHMSEM_HOLD_BUCKETS, q, &b)) return 0;
  return kHoldBoundNs[b];
}

}  // namespace shmsem::detail
