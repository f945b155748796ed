// The lease table and the ticket queue of waiter slots: the O(1) steps every
// operation is built from. Every function here requires the segment lock.
// Counters are plain load+store (the lock serialises writers; the atomics
// only let lock-free readers see whole values).
#ifndef SHMSEM_SRC_TABLES_H
#define SHMSEM_SRC_TABLES_H

#include "handle.h"

namespace shmsem::detail {

inline void counter_add(std::atomic<uint32_t> &c, int32_t d) {
  c.store(uint32_t(int32_t(c.load(std::memory_order_relaxed)) + d),
          std::memory_order_relaxed);
}
inline void stat_bump(std::atomic<uint64_t> &c, uint64_t d = 1) {
  c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}
// Next generation of a record; 0 is never a valid generation.
inline uint32_t next_gen(uint32_t g) { return g + 1 ? g + 1 : 1; }

// --- lease table -----------------------------------------------------------
inline uint32_t lease_pop(shmsem_t *s) {
  uint32_t l = s->core->free_lease;
  if (l != kNone) s->core->free_lease = s->leases[l].next_free;
  return l;
}
inline void lease_push(shmsem_t *s, uint32_t l) {
  s->leases[l].next_free = s->core->free_lease;
  s->core->free_lease = l;
}

// --- waiter slots and the FIFO queue -----------------------------------------
inline uint32_t slot_pop(shmsem_t *s) {
  uint32_t w = s->core->free_slot;
  if (w != kNone) s->core->free_slot = s->slots[w].next_free;
  return w;
}
// Return a slot to the free list; its word becomes FREE.
inline void slot_free(shmsem_t *s, uint32_t w) {
  s->slots[w].word.store(kSlotFree, std::memory_order_release);
  s->slots[w].next_free = s->core->free_slot;
  s->core->free_slot = w;
}
inline void queue_append(shmsem_t *s, uint32_t w) {
  Core *c = s->core;
  s->slots[w].prev = c->tail;
  s->slots[w].next = kNone;
  if (c->tail != kNone)
    s->slots[c->tail].next = w;
  else
    c->head = w;
  c->tail = w;
  counter_add(c->waiting, 1);
}
inline void queue_unlink(shmsem_t *s, uint32_t w) {
  Core *c = s->core;
  WaiterSlot &ws = s->slots[w];
  if (ws.prev != kNone)
    s->slots[ws.prev].next = ws.next;
  else
    c->head = ws.next;
  if (ws.next != kNone)
    s->slots[ws.next].prev = ws.prev;
  else
    c->tail = ws.prev;
  ws.prev = ws.next = kNone;
  counter_add(c->waiting, -1);
}

// Slot `w` is being freed or is leaving for good: if it was the watcher,
// the role passes to the newest waiter, which the caller must wake after
// unlocking (returned; kNone if none or `w` was not the watcher).
inline uint32_t watcher_leave(shmsem_t *s, uint32_t w) {
  if (s->core->watcher != w) return kNone;
  s->core->watcher = s->core->tail;
  return s->core->watcher;
}

// Record a completed wait of `ns` in the log2 histogram.
void record_wait(shmsem_t *s, uint64_t ns);

// Lease `l` is leaving the owner's hands (release, or reclamation of a dead
// owner); the caller has already taken it out of `held`/`reserved`. Hand it
// to the head waiter (RESERVED, word GRANTED) and return that slot, which the
// caller must wake after unlocking; or put it back in the pool and return
// kNone. This is the only place a permit is granted to a waiter.
uint32_t pass_permit(shmsem_t *s, uint32_t l);

// The waiter owning slot `w` completes: its word is no longer WAITING.
// Frees the slot; GRANTED fills `lease` and returns 0.
int finish_slot(shmsem_t *s, uint32_t w, shmsem_lease_t *lease);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_TABLES_H
