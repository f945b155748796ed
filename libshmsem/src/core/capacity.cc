#include "capacity.h"

#include <errno.h>

#include <algorithm>

#include "census.h"
#include "lanes.h"
#include "hooks.h"
#include "grant.h"
#include "section.h"

namespace shmsem::detail {

void settle_capacity(Locked s, Wakes *wk) {
  Core *c = s->core;
  const uint32_t n = s->permits;
  const uint32_t cap = std::min(c->capacity.load(std::memory_order_relaxed), n);
  // `retired` from the records (census.h: a count a writer left is never
  // trusted); `retiring`, a cache, within what is left.
  const uint32_t retired = census(s).retired;
  c->retired.store(retired, std::memory_order_relaxed);
  uint32_t retiring =
      std::min(c->retiring.load(std::memory_order_relaxed), n - retired);
  const uint32_t want = n - cap;  // retired + retiring, once settled
  if (retired + retiring < want) {
    retiring = want - retired;  // a shrink: more to retire
  } else if (retired + retiring > want) {
    // A grow: first what was still to retire, then RETIRED records.
    uint32_t d = retired + retiring - want;
    uint32_t x = std::min(d, retiring);
    retiring -= x;
    d -= x;
    c->retiring.store(retiring, std::memory_order_relaxed);
    for (uint32_t l = 0; l < n && d > 0; l++) {
      LeaseRecord &rec = s->leases[l];
      if (lease_state(rec) != kLeaseRetired) continue;
      counter_add(c->retired, -1);
      used_add(s, c->n_used_leases, s->used_leases, n, l, &rec.used_pos);
      pass_permit(s, l, wk);  // to the head waiter first
      SHMSEM_HOOK(CAPACITY_ONE);
      d--;
    }
  }
  c->retiring.store(retiring, std::memory_order_relaxed);
  // A shrink takes the free permits at once: the pool's here, those the
  // lock-free path left in lanes by the sweep (pass_permit retires first).
  for (uint32_t i = 0; i < n && c->retiring.load(std::memory_order_relaxed);
       i++) {
    uint32_t l = lease_pop(s);
    if (l == kNone) break;
    counter_add(c->available, -1);
    pass_permit(s, l, wk);
    SHMSEM_HOOK(CAPACITY_ONE);
  }
  if (c->retiring.load(std::memory_order_relaxed)) sweep_loose(s);
  // And the head's reservation, which nobody holds yet: granted later it
  // would be above the capacity (a head that waits for its start time has
  // all of it; found by an adversarial test: a lease of 6 granted after a
  // shrink to 2). Its records retire first; what is left goes back to it.
  uint32_t h = c->head;
  if (c->retiring.load(std::memory_order_relaxed) && h < s->max_waiters &&
      s->slots[h].lease != kNone)
    drop_reservation(s, h, wk);
}

int set_capacity(shmsem_t *s, uint32_t permits) {
  if (!s) return -EINVAL;
  if (s->rdonly) return -EBADF;
  if (permits > s->permits) return -EINVAL;
  Section sec(s);
  s->core->capacity.store(permits, std::memory_order_relaxed);  // commit
  SHMSEM_HOOK(CAPACITY_SET);
  settle_capacity(sec.locked(), sec.wakes());
  return 0;
}

}  // namespace shmsem::detail
