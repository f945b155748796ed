// Reclaiming the records of dead processes. Liveness is judged outside the
// lock (it reads /proc), then applied under the lock only to records whose
// owner is still exactly the dead (pid, start time): a record reused by a
// live process meanwhile is left alone. A dead process never comes back, so
// a stale "dead" verdict is still true.
#include "reclaim.h"

#include <errno.h>

#include <vector>

#include "clock.h"
#include "futex.h"
#include "hooks.h"
#include "lock.h"
#include "owner.h"
#include "tables.h"

namespace shmsem::detail {
namespace {

bool same(const Owner &a, const Owner &b) {
  return a.pid == b.pid && a.start == b.start;
}

struct Verdicts {
  std::vector<Owner> alive, dead;
  // By value: `o` is read from the segment without the lock and may change
  // under us; the verdict must be about exactly the bytes we remember.
  void judge(Owner o) {
    for (const Owner &x : alive)
      if (same(x, o)) return;
    for (const Owner &x : dead)
      if (same(x, o)) return;
    (owner_alive(o) ? alive : dead).push_back(o);
  }
  bool is_dead(const Owner &o) const {
    for (const Owner &x : dead)
      if (same(x, o)) return true;
    return false;
  }
};

}  // namespace

int reclaim(shmsem_t *s) {
  if (!s) return -EINVAL;
  if (s->rdonly) return -EBADF;
  // 1. Without the lock: whose records are these, and are they alive?
  // (Racy reads of owners are fine: they are only candidates.)
  Verdicts v;
  for (uint32_t l = 0; l < s->permits; l++) {
    uint32_t st = s->leases[l].state.load(std::memory_order_acquire);
    if (st == kLeaseHeld || st == kLeaseReserved) v.judge(s->leases[l].owner);
  }
  for (uint32_t w = 0; w < s->max_waiters; w++)
    if (s->slots[w].word.load(std::memory_order_acquire) != kSlotFree)
      v.judge(s->slots[w].owner);
  if (v.dead.empty()) {
    // Still take the lock once: if its owner died inside a critical
    // section, this is what runs repair() when nobody else is locking
    // (e.g. a releaser died between RESERVED and GRANTED while every other
    // process sleeps on its slot word).
    LockGuard guard(s);
    return 0;
  }
  SHMSEM_HOOK(RECLAIM_SCANNED);

  // 2. Under the lock: dead waiters first, so that the permits reclaimed
  // next go to live waiters.
  std::vector<uint32_t> wake;
  int n = 0;
  {
    LockGuard guard(s);
    SHMSEM_HOOK(RECLAIM_LOCKED);
    Core *c = s->core;
    for (uint32_t w = 0; w < s->max_waiters; w++) {
      WaiterSlot &ws = s->slots[w];
      uint32_t word = ws.word.load(std::memory_order_relaxed);
      if (word == kSlotFree || !v.is_dead(ws.owner)) continue;
      if (word == kSlotWaiting) queue_unlink(s, w);
      uint32_t l = word == kSlotGranted ? ws.lease : kNone;
      slot_free(s, w);  // commit
      uint32_t nw = watcher_leave(s, w);
      if (nw != kNone) wake.push_back(nw);
      stat_bump(c->reclaimed_waiters);
      n++;
      if (l != kNone && l < s->permits &&
          s->leases[l].state.load(std::memory_order_relaxed) == kLeaseReserved) {
        // Granted to a waiter that died before returning: pass it on.
        counter_add(c->reserved, -1);
        uint32_t g = pass_permit(s, l);
        if (g != kNone) wake.push_back(g);
        stat_bump(c->reclaimed_holders);
        n++;
      }
      SHMSEM_HOOK(RECLAIM_ONE);
    }
    for (uint32_t l = 0; l < s->permits; l++) {
      LeaseRecord &rec = s->leases[l];
      if (rec.state.load(std::memory_order_relaxed) != kLeaseHeld ||
          !v.is_dead(rec.owner))
        continue;
      counter_add(c->held, -1);
      uint32_t g = pass_permit(s, l);  // commit inside
      if (g != kNone) wake.push_back(g);
      stat_bump(c->reclaimed_holders);
      n++;
      SHMSEM_HOOK(RECLAIM_ONE);
    }
  }
  for (uint32_t w : wake) futex_wake(&s->slots[w].word, 1);
  return n;
}

int maybe_reclaim(shmsem_t *s) {
  if (s->rdonly) return 0;
  uint64_t now = real_mono_ns();
  uint64_t last = s->core->last_reclaim_ns.load(std::memory_order_relaxed);
  if (now - last < kWatchPeriodNs) return 0;
  // One process per period wins the right to scan.
  if (!s->core->last_reclaim_ns.compare_exchange_strong(
          last, now, std::memory_order_relaxed))
    return 0;
  return reclaim(s);
}

namespace {

// Under the lock: become the watcher if nobody (alive in our books) is.
void adopt_if_orphaned(shmsem_t *s, uint32_t slot) {
  LockGuard guard(s);
  uint32_t wt = s->core->watcher.load(std::memory_order_relaxed);
  if (wt >= s->max_waiters ||
      s->slots[wt].word.load(std::memory_order_relaxed) == kSlotFree)
    s->core->watcher = slot;
}

}  // namespace

uint64_t watch_step(shmsem_t *s, uint32_t slot) {
  uint64_t now = real_mono_ns();
  if (!is_watcher(s, slot)) {
    uint64_t beat = s->core->last_reclaim_ns.load(std::memory_order_relaxed);
    if (now - beat < kStaleNs) {
      uint64_t n = s->core->waiting.load(std::memory_order_relaxed);
      return now + kBackupPeriodNs * (n ? n : 1);
    }
    // Stale heartbeat: reclaim (which frees a dead watcher's slot and
    // passes the role on), and take the role if it is still orphaned.
    maybe_reclaim(s);
    adopt_if_orphaned(s, slot);
    if (!is_watcher(s, slot)) return now + kBackupPeriodNs;
  }
  // The watcher is alone in its role, so it runs its pass every period
  // without the rate limit (whose jitter against the timer would skip every
  // other pass), and publishes the heartbeat the backups read.
  s->core->last_reclaim_ns.store(now, std::memory_order_relaxed);
  reclaim(s);
  return now + kWatchPeriodNs;
}

}  // namespace shmsem::detail
