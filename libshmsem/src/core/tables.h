// The lease table and the ticket queue of waiter slots: the O(1) steps every
// operation is built from. Every function here requires the segment lock.
// Counters are plain load+store (the lock serialises writers; the atomics
// only let lock-free readers see whole values).
#ifndef SHMSEM_SRC_TABLES_H
#define SHMSEM_SRC_TABLES_H

#include "futex.h"
#include "handle.h"
#include "section.h"

namespace shmsem::detail {

// In unsigned arithmetic: a writer may have left any count in the segment,
// and one near 2^31 overflowed the signed sum (undefined behaviour).
inline void counter_add(std::atomic<uint32_t> &c, int32_t d) {
  c.store(c.load(std::memory_order_relaxed) + uint32_t(d),
          std::memory_order_relaxed);
}
inline void stat_bump(std::atomic<uint64_t> &c, uint64_t d = 1) {
  c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}
// Next generation of a record: 48 bits (the lease word's), which wraps
// after 2.8e14 grants of one record (160 days at 20 million a second), and
// 0 is never a valid generation.
inline uint64_t next_gen(uint64_t g) {
  g = (g + 1) & kGenMask;
  return g ? g : 1;
}

// --- lease words (layout.h)
// ---------------------------------------------------
inline uint32_t lease_state(const LeaseRecord &r) {
  return word_state(r.word.load(std::memory_order_relaxed));
}
inline uint64_t lease_gen(const LeaseRecord &r) {
  return word_gen(r.word.load(std::memory_order_relaxed));
}
// --- the gate of the lock-free path
// -------------------------------------------- The one formula: what the gate
// must say given the core's state (check compares with it). After `waiting`,
// `closed`, `retiring` or the rate changed: the gate follows them. Returns true
// when it has just opened to a hand-on (nobody was queued and no shrink
// waited): the caller then sweeps the lanes (fastpath.h), after a fence, for
// leases freed by releasers that read the gate before this store.
inline uint32_t gate_of(const Core *c, bool bounded) {
  const uint32_t queued =
      bounded && !c->hand_off.load(std::memory_order_relaxed) ? kGateBarge
                                                              : kGateQueued;
  return (c->waiting.load(std::memory_order_relaxed) ? queued : 0) |
         (c->closed.load(std::memory_order_relaxed) ? kGateClosed : 0) |
         (c->retiring.load(std::memory_order_relaxed) ? kGateRetiring : 0) |
         (c->rate_interval_ns.load(std::memory_order_relaxed) ? kGateRate : 0);
}
inline bool gate_sync(Locked s) {
  Core *c = s->core;
  const uint32_t g = gate_of(c, s->bound_ns != 0);
  uint32_t old = c->gate.load(std::memory_order_relaxed);
  if (g == old) return false;
  c->gate.store(g, std::memory_order_relaxed);
  return (g & kGateHandOn) && !(old & kGateHandOn);
}

// --- shared memory is input --------------------------------------------------
// Every index, link and count read from the segment goes through these
// checks before it is used, read once into a local: another process may
// have written anything there (docs/DESIGN.md, "Trust"). A value out of
// range is never followed; the step is skipped, the handle is marked
// `corrupt`, and the section (section.h) runs repair() before unlocking, which
// rebuilds every derived structure from the commit words. The operation
// itself goes on degraded (e.g. "no free lease"), and its committed state
// words are what repair then builds on.
inline bool lease_ok(const shmsem_t *s, uint32_t l) { return l < s->permits; }

// The bounded policy (section 15): newcomers may take free permits past the
// queue, and freed permits go to the pool, not to the head (which is
// nudged to race for them): while the head is within its bound.
inline bool barging(const shmsem_t *s) {
  return s->bound_ns && !s->core->hand_off.load(std::memory_order_relaxed);
}
inline bool slot_ok(const shmsem_t *s, uint32_t w) {
  return w < s->max_waiters;
}
inline bool link_ok(const shmsem_t *s, uint32_t w) {
  return w == kNone || slot_ok(s, w);
}
inline void mark_corrupt(shmsem_t *s) { s->corrupt = true; }

// --- the arrays of records in use --------------------------------------------
// used_leases[0 .. n_used_leases) holds the HELD and RESERVED leases,
// used_slots[0 .. n_used_slots) the slots that are not FREE, in no order;
// each record keeps its position. Removal moves the last entry into the
// hole. Written under the lock; a reclamation pass reads them without it
// (relaxed: it only collects candidates, every one checked again under the
// lock), so a concurrent move may hide an entry from one pass, never show
// a wrong one as dead.
inline void used_add(shmsem_t *s, std::atomic<uint32_t> &n,
                     std::atomic<uint32_t> *arr, uint32_t cap, uint32_t idx,
                     uint32_t *pos) {
  uint32_t k = n.load(std::memory_order_relaxed);
  if (k >= cap) return mark_corrupt(s);
  arr[k].store(idx, std::memory_order_relaxed);
  *pos = k;
  n.store(k + 1, std::memory_order_relaxed);
}
template <typename Rec>
inline void used_remove(shmsem_t *s, std::atomic<uint32_t> &n,
                        std::atomic<uint32_t> *arr, Rec *recs, uint32_t cap,
                        uint32_t pos) {
  uint32_t count = n.load(std::memory_order_relaxed);
  if (count == 0 || count > cap || pos >= count) return mark_corrupt(s);
  uint32_t last = count - 1;
  uint32_t moved = arr[last].load(std::memory_order_relaxed);
  if (moved >= cap) return mark_corrupt(s);
  arr[pos].store(moved, std::memory_order_relaxed);
  recs[moved].used_pos = pos;
  n.store(last, std::memory_order_relaxed);
}

// --- lease table -----------------------------------------------------------
// Take a lease off the free list (kNone if empty, or if the list is
// damaged); it joins the records in use.
inline uint32_t lease_pop(shmsem_t *s) {
  uint32_t l = s->core->free_lease;
  if (l == kNone) return kNone;
  uint32_t next = lease_ok(s, l) ? s->leases[l].next_free : 0;
  if (!lease_ok(s, l) || !(next == kNone || lease_ok(s, next))) {
    mark_corrupt(s);
    return kNone;
  }
  s->core->free_lease = next;
  s->leases[l].link = kNone;
  used_add(s, s->core->n_used_leases, s->used_leases, s->permits, l,
           &s->leases[l].used_pos);
  return l;
}
// A lease leaves the records in use without going back to the pool: it
// becomes HELD_FAST, which only its process record names.
inline void lease_unlist(shmsem_t *s, uint32_t l) {
  used_remove(s, s->core->n_used_leases, s->used_leases, s->leases, s->permits,
              s->leases[l].used_pos);
}
// Put a FREE lease on the free list (repair's rebuild; not in use).
inline void lease_push(shmsem_t *s, uint32_t l) {
  s->leases[l].next_free = s->core->free_lease;
  s->core->free_lease = l;
}
// Lease `l` joins the records in use.
inline void used_add_lease(shmsem_t *s, uint32_t l) {
  used_add(s, s->core->n_used_leases, s->used_leases, s->permits, l,
           &s->leases[l].used_pos);
}
// A lease in use (l checked by the caller) goes back to the pool.
inline void lease_free(shmsem_t *s, uint32_t l) {
  used_remove(s, s->core->n_used_leases, s->used_leases, s->leases, s->permits,
              s->leases[l].used_pos);
  lease_push(s, l);
}

// --- waiter slots and the FIFO queue -----------------------------------------
inline uint32_t slot_pop(shmsem_t *s) {
  uint32_t w = s->core->free_slot;
  if (w == kNone) return kNone;
  uint32_t next = slot_ok(s, w) ? s->slots[w].next_free : 0;
  if (!slot_ok(s, w) || !link_ok(s, next)) {
    mark_corrupt(s);
    return kNone;
  }
  s->core->free_slot = next;
  used_add(s, s->core->n_used_slots, s->used_slots, s->max_waiters, w,
           &s->slots[w].used_pos);
  return w;
}
inline void queue_append(shmsem_t *s, uint32_t w) {
  Core *c = s->core;
  uint32_t tail = c->tail;
  if (!link_ok(s, tail)) {
    mark_corrupt(s);
    tail = kNone;  // repair rebuilds the queue from the WAITING words
  }
  s->slots[w].prev = tail;
  s->slots[w].next = kNone;
  if (tail != kNone)
    s->slots[tail].next = w;
  else
    c->head = w;
  c->tail = w;
  counter_add(c->waiting, 1);
}
inline void queue_unlink(shmsem_t *s, uint32_t w) {
  Core *c = s->core;
  WaiterSlot &ws = s->slots[w];
  uint32_t prev = ws.prev, next = ws.next;
  if (!link_ok(s, prev) || !link_ok(s, next)) {
    mark_corrupt(s);  // links skipped: repair rebuilds the queue
  } else {
    if (prev != kNone)
      s->slots[prev].next = next;
    else
      c->head = next;
    if (next != kNone)
      s->slots[next].prev = prev;
    else
      c->tail = prev;
  }
  ws.prev = ws.next = kNone;
  counter_add(c->waiting, -1);
}

// Slot `w` is being freed or is leaving for good: if it was the watcher,
// the role passes to the newest waiter (the tail), which the caller wakes, if
// it sleeps, after unlocking (returned; kNone if none or `w` was not the
// watcher).
inline uint32_t watcher_leave(shmsem_t *s, uint32_t w) {
  if (s->core->watcher != w) return kNone;
  uint32_t tail = s->core->tail;
  if (!link_ok(s, tail)) {
    mark_corrupt(s);
    tail = kNone;
  }
  s->core->watcher = tail;
  return tail;
}

// The token of lease `l` at generation `gen`: names this semaphore too.
inline void fill_token(shmsem_t *s, uint32_t l, uint64_t gen,
                       shmsem_lease_t *lease) {
  lease->gen = gen;
  lease->sem = s->nonce;
  lease->index = l;
  lease->__reserved = 0;
}

// A waiter was granted after waiting `waited` ns: the head's spin adapts.
void note_handoff(shmsem_t *s, uint64_t waited);

// Record a completed wait of `ns` in the wait histogram.
void record_wait(shmsem_t *s, uint64_t ns);
// Record, under the lock, the hold time of a lease granted at `since_ns`
// (coarse_ns()) that is being released (the lock-free release records in
// its lane: fastpath.h lane_hold).
void record_hold(shmsem_t *s, uint64_t since_ns);

// The permits a waiter asks for, as read from its slot: within
// [1, permits] whatever a writer left there.
inline uint32_t slot_weight(const shmsem_t *s, uint32_t w) {
  uint32_t k = s->slots[w].weight;
  return k < 1 ? 1 : k > s->permits ? s->permits : k;
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_TABLES_H
