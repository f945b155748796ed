// Reclamation of records whose owner process died (outside the lock).
// One waiter at a time, the watcher, polls for deaths every kWatchPeriodNs;
// an acquire that finds no permit and may not wait polls once more. Both are
// rate-limited through core.last_reclaim_ns, so at most one pass runs per
// period across all processes however long the queue is.
#ifndef SHMSEM_SRC_RECLAIM_H
#define SHMSEM_SRC_RECLAIM_H

#include "handle.h"
#include "limit.h"

namespace shmsem::detail {

inline constexpr uint64_t kWatchPeriodNs = 1'000'000;  // 1 ms, the floor
// The watcher's period is kPassBudget times what its last pass cost, within
// [kWatchPeriodNs, kMaxWatchPeriodNs] (core.watch_period_ns).
inline constexpr uint64_t kPassBudget = 200;
inline constexpr uint64_t kMaxWatchPeriodNs = 10'000'000'000;  // 10 s

// A full pass now: returns the number of leases plus slots reclaimed. With
// a limit (the caller's deadline, cancel handle) the pass stops early once
// the limit is reached and it has run for kPassFloorNs: owners not judged
// yet are left for the next pass (a pass judges them in the same order, and
// the ones it reclaimed are gone, so passes make progress).
int reclaim(shmsem_t *s, const Limit *limit);
// reclaim() unless another pass started less than one period ago.
int maybe_reclaim(shmsem_t *s, const Limit *limit);
inline constexpr uint64_t kPassFloorNs = 1'000'000;
// The current watch period (core.watch_period_ns, clamped).
uint64_t watch_period(shmsem_t *s);

// The backup check: a waiter that is not the watcher sleeps at most
// kBackupPeriodNs times the queue length (so the whole queue wakes about
// 1/kBackupPeriodNs times a second however long it is), and takes over
// when the watcher's heartbeat (core.last_reclaim_ns) is older than
// kStaleNs: the watcher itself died or lost its role.
inline constexpr uint64_t kBackupPeriodNs = 4'000'000;  // 4 ms
inline constexpr uint64_t kStaleNs = 20'000'000;        // 20 ms

inline bool is_watcher(shmsem_t *s, uint32_t slot) {
  return s->core->watcher.load(std::memory_order_relaxed) == slot;
}

// One step of a queued waiter's watch duty: polls for deaths if it is (or
// becomes) the watcher. Returns the real CLOCK_MONOTONIC time at which the
// waiter should wake up next for the following step.
uint64_t watch_step(shmsem_t *s, uint32_t slot, const Limit *limit);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RECLAIM_H
