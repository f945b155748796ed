// The census: the records counted by state, in one scan. Every counter of
// the core is a cache of this (docs/DESIGN.md §7a, "Counters are derived"):
// repair stores it, check compares the counters with it, a resize counts
// the RETIRED records with it, and every lock holder first checks the
// counters against the geometry (counters_plausible) and repairs when they
// cannot be right.
#ifndef SHMSEM_SRC_CENSUS_H
#define SHMSEM_SRC_CENSUS_H

#include "handle.h"

namespace shmsem::detail {

struct Census {
  // Lease records by state (layout.h LeaseState); `bad` is any other word.
  uint32_t free, held, reserved, loose, fast, retired, bad;
  // Waiter slots: FREE, queued (WAITING or LEFT_QUEUED), any other valid
  // state, and invalid words.
  uint32_t slots_free, slots_queued, slots_other, slots_bad;
  // Process records in use, and one past the highest of them.
  uint32_t procs_used, procs_hwm;
};

// One scan of the state words. Exact under the lock, except for the
// lock-free path's LOOSE and HELD_FAST words, which change by CAS at any
// time (a release moves one between the two).
Census census(const shmsem_t *s);

// Under the lock: the counters the census derives (available, held,
// reserved, retired, retiring, procs_hwm), stored. `retiring` is what the
// capacity still wants retired beyond the RETIRED records (a grow past
// them is settle_capacity's). Not `waiting`: the queue's rebuild counts it.
void store_counters(shmsem_t *s, const Census &cs);

// Whether the core's counters are what some consistent state has: each
// within the geometry, the permits adding up to no more than N, capacity +
// retired + retiring = N, a queue count with a head and only then. O(1).
bool counters_plausible(const shmsem_t *s);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CENSUS_H
