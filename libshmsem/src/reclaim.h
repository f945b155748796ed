// Reclamation of records whose owner process died (outside the lock).
// One waiter at a time, the watcher, polls for deaths every kWatchPeriodNs;
// an acquire that finds no permit and may not wait polls once more. Both are
// rate-limited through core.last_reclaim_ns, so at most one pass runs per
// period across all processes however long the queue is.
#ifndef SHMSEM_SRC_RECLAIM_H
#define SHMSEM_SRC_RECLAIM_H

#include "handle.h"

namespace shmsem::detail {

inline constexpr uint64_t kWatchPeriodNs = 1'000'000;  // 1 ms

// A full pass now: returns the number of leases plus slots reclaimed.
int reclaim(shmsem_t *s);
// reclaim() unless another pass started less than kWatchPeriodNs ago.
int maybe_reclaim(shmsem_t *s);

inline bool is_watcher(shmsem_t *s, uint32_t slot) {
  return s->core->watcher.load(std::memory_order_relaxed) == slot;
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RECLAIM_H
