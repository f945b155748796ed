// The census of the records (census.h).
#include "census.h"

#include <algorithm>

#include "tables.h"

namespace shmsem::detail {

namespace {

void count_leases(const shmsem_t *s, Census *cs) {
  for (uint32_t l = 0; l < s->permits; l++) {
    switch (lease_state(s->leases[l])) {
      case kLeaseFree:
        cs->free++;
        break;
      case kLeaseHeld:
        cs->held++;
        break;
      case kLeaseReserved:
        cs->reserved++;
        break;
      case kLeaseLoose:
        cs->loose++;
        break;
      case kLeaseHeldFast:
        cs->fast++;
        break;
      case kLeaseRetired:
        cs->retired++;
        break;
      default:
        cs->bad++;
    }
  }
}

void count_slots(const shmsem_t *s, Census *cs) {
  for (uint32_t w = 0; w < s->max_waiters; w++) {
    switch (s->slots[w].word.load(std::memory_order_relaxed)) {
      case kSlotFree:
        cs->slots_free++;
        break;
      case kSlotWaiting:
      case kSlotLeftQueued:
        cs->slots_queued++;
        break;
      case kSlotGranted:
      case kSlotCancelled:
      case kSlotClosed:
      case kSlotLeft:
        cs->slots_other++;
        break;
      default:
        cs->slots_bad++;
    }
  }
}

}  // namespace

Census census(const shmsem_t *s) {
  Census cs{};
  count_leases(s, &cs);
  count_slots(s, &cs);
  for (uint32_t p = 0; p < s->max_procs; p++)
    if (s->procs[p].state.load(std::memory_order_relaxed) == kProcUsed) {
      cs.procs_used++;
      cs.procs_hwm = p + 1;
    }
  return cs;
}

void store_counters(shmsem_t *s, const Census &cs) {
  Core *c = s->core;
  const uint32_t n = s->permits;
  c->available.store(cs.free, std::memory_order_relaxed);
  c->held.store(cs.held, std::memory_order_relaxed);
  c->reserved.store(cs.reserved, std::memory_order_relaxed);
  c->retired.store(cs.retired, std::memory_order_relaxed);
  const uint32_t cap = std::min(c->capacity.load(std::memory_order_relaxed), n);
  c->capacity.store(cap, std::memory_order_relaxed);
  const uint32_t want = n - cap;
  c->retiring.store(want > cs.retired ? want - cs.retired : 0,
                    std::memory_order_relaxed);
  c->procs_hwm.store(cs.procs_hwm, std::memory_order_relaxed);
}

bool counters_plausible(const shmsem_t *s) {
  const Core *c = s->core;
  const uint64_t n = s->permits;
  const uint64_t avail = c->available.load(std::memory_order_relaxed),
                 held = c->held.load(std::memory_order_relaxed),
                 reserved = c->reserved.load(std::memory_order_relaxed),
                 cap = c->capacity.load(std::memory_order_relaxed),
                 retired = c->retired.load(std::memory_order_relaxed),
                 retiring = c->retiring.load(std::memory_order_relaxed);
  const uint32_t waiting = c->waiting.load(std::memory_order_relaxed);
  const uint32_t head = c->head, tail = c->tail;
  return avail + held + reserved + retired <= n &&
         cap + retired + retiring == n && waiting <= s->max_waiters &&
         (head == kNone) == (waiting == 0) &&
         (tail == kNone) == (waiting == 0) && link_ok(s, head) &&
         link_ok(s, tail) &&
         c->procs_hwm.load(std::memory_order_relaxed) <= s->max_procs &&
         c->closed.load(std::memory_order_relaxed) <= 1;
}

}  // namespace shmsem::detail
