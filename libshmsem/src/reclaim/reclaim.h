// Reclamation of records whose owner process died (outside the lock).
// One waiter at a time, the watcher, looks for deaths: by events where the
// kernel allows (deathwatch.h), else every period; an acquire that finds no
// permit and may not wait looks once more (rate-limited through
// core.last_reclaim_ns, so at most one such pass runs per period across all
// processes however long the queue is).
#ifndef SHMSEM_SRC_RECLAIM_H
#define SHMSEM_SRC_RECLAIM_H

#include <vector>

#include "deathwatch.h"
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
// Reclaims only the records of processes proven gone (`gone`: pid, start,
// ino, as in the records): what the death watch runs when a pidfd reports
// an exit, without judging everyone else again.
int reclaim_exited(shmsem_t *s, const Limit *limit,
                   const std::vector<Owner> &gone);
// reclaim() unless another pass started less than one period ago.
int maybe_reclaim(shmsem_t *s, const Limit *limit);
inline constexpr uint64_t kPassFloorNs = 1'000'000;
// The current watch period (core.watch_period_ns, clamped).
uint64_t watch_period(shmsem_t *s);

// The backup check: a waiter that is not the watcher sleeps at most
// kBackupPeriodNs times the queue length while the watcher polls, and
// kBackupEventNs times it while the watcher sleeps on events (so the whole
// queue wakes about 1/kBackupPeriodNs, or 1/kBackupEventNs, times a second
// however long it is; no backup sleeps longer than kMaxBackupNapNs), and
// takes over once the watcher is kStaleNs late (core.watch_due_ns): the
// watcher itself died or lost its role.
inline constexpr uint64_t kBackupPeriodNs = 4'000'000;        // 4 ms
inline constexpr uint64_t kBackupEventNs = 200'000'000;       // 200 ms
inline constexpr uint64_t kMaxBackupNapNs = 120'000'000'000;  // 2 min
inline constexpr uint64_t kStaleNs = 20'000'000;              // 20 ms
// A watcher on events still passes this often: it covers what no pidfd
// reports (a waiting thread gone while its process lives on, e.g. exec; an
// owner queued after the watch was armed; a process whose identity could
// not be pinned).
inline constexpr uint64_t kEventSafetyNs = 1'000'000'000;  // 1 s

inline bool is_watcher(shmsem_t *s, uint32_t slot) {
  return s->core->watcher.load(std::memory_order_relaxed) == slot;
}

// What one queued call knows of its watch duty between two sleeps.
struct WatchState {
  EventWatch events;
  bool watching = false;    // held the watcher role at the last step
  bool use_events = false;  // events are armed: sleep in events.wait()
  bool complete = false;    // ... on every other owner process
  bool death = false;       // the watch reported: take its news at once
  bool broken = false;      // no watch: poll for the rest of the call
  uint64_t pass_at = 0;     // real monotonic time of the next pass
  // An async waiter's word, which the watch wakes when it reports (its
  // sleep is its caller's); null for a blocking waiter.
  std::atomic<uint32_t> *wake = nullptr;
};

struct WatchPlan {
  uint64_t wake_at;  // real CLOCK_MONOTONIC time to wake up at the latest
  bool events;       // sleep in st->events (a death wakes it) or on the word
};

// One step of a queued waiter's watch duty, before each sleep. A waiter
// that takes the watcher role (waiter.cc, watcher_leave()) arms its death
// watch at once, before its first sleep, where events_available(): it
// names the owners of the records in use to the process's watch
// (deathwatch.h; no pass, no /proc read and no pidfd in its own thread) and
// sleeps on events with only the kEventSafetyNs timer. A report reclaims
// the owners proven gone at once (reclaim_exited). Without events it
// sleeps one period without looking at anyone, then passes every period.
WatchPlan watch_step(shmsem_t *s, uint32_t slot, const Limit *limit,
                     WatchState *st);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RECLAIM_H
