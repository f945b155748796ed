// The records in use, read without the lock (reclamation, the death watch).
// What these read may be torn or stale: callers judge each owner copy as it
// is and match records as a whole under the lock before changing anything.
#ifndef SHMSEM_SRC_INUSE_H
#define SHMSEM_SRC_INUSE_H

#include <algorithm>
#include <type_traits>

#include "handle.h"

namespace shmsem::detail {

// A copy of an owner read without the lock; may be torn, and then it names
// nobody in particular.
inline Owner read_owner(const Owner &o) {
  Owner c;
  c.pid = __atomic_load_n(&o.pid, __ATOMIC_RELAXED);
  c.tid = __atomic_load_n(&o.tid, __ATOMIC_RELAXED);
  c.start = __atomic_load_n(&o.start, __ATOMIC_RELAXED);
  c.ino = __atomic_load_n(&o.ino, __ATOMIC_RELAXED);
  c.tino = __atomic_load_n(&o.tino, __ATOMIC_RELAXED);
  return c;
}

// fn's verdict on going on: a visitor returning void always goes on.
template <typename F>
bool go_on(F &fn, uint32_t idx, bool slot, const Owner &o) {
  if constexpr (std::is_void_v<decltype(fn(idx, slot, o))>) {
    fn(idx, slot, o);
    return true;
  } else {
    return fn(idx, slot, o);
  }
}

// Visits the records in use: fn(idx, is_slot, owner copy). Slots first,
// then HELD leases (a RESERVED lease belongs to its slot's owner). A
// visitor that returns bool stops the walk by returning false.
template <typename F>
void for_each_in_use(shmsem_t *s, F fn) {
  Core *c = s->core;
  uint32_t n =
      std::min(c->n_used_slots.load(std::memory_order_relaxed), s->max_waiters);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t w = s->used_slots[i].load(std::memory_order_relaxed);
    if (w >= s->max_waiters ||
        s->slots[w].word.load(std::memory_order_acquire) == kSlotFree)
      continue;
    if (!go_on(fn, w, true, read_owner(s->slots[w].owner))) return;
  }
  n = std::min(c->n_used_leases.load(std::memory_order_relaxed), s->permits);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t l = s->used_leases[i].load(std::memory_order_relaxed);
    if (l >= s->permits || word_state(s->leases[l].word.load(
                               std::memory_order_acquire)) != kLeaseHeld)
      continue;
    if (!go_on(fn, l, false, read_owner(s->leases[l].owner))) return;
  }
}

// Visits the process records in use (fastpath.h): fn(p, owner copy). Their
// HELD_FAST leases are listed nowhere: a process found dead here costs one
// scan of the lease words (reclaim.cc). Every record, not only those below
// core.procs_hwm: a writer may lower the mark over a dead process's record,
// and its permits would never come back (the sweeps of the lock-free path
// use the mark; repair recomputes it). Returns whether a record in use was
// found at or above the mark.
template <typename F>
bool for_each_proc(shmsem_t *s, F fn) {
  const uint32_t hwm = s->core->procs_hwm.load(std::memory_order_relaxed);
  bool above = false;
  for (uint32_t p = 0; p < s->max_procs; p++)
    if (s->procs[p].state.load(std::memory_order_acquire) == kProcUsed) {
      above |= p >= hwm;
      fn(p, read_owner(s->procs[p].owner));
    }
  return above;
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_INUSE_H
