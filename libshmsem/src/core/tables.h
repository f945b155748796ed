// The lease table and the ticket queue of waiter slots: the O(1) steps every
// operation is built from. Every function here requires the segment lock.
// Counters are plain load+store (the lock serialises writers; the atomics
// only let lock-free readers see whole values).
#ifndef SHMSEM_SRC_TABLES_H
#define SHMSEM_SRC_TABLES_H

#include "futex.h"
#include "handle.h"

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

// --- lease words (layout.h) ---------------------------------------------------
inline uint32_t lease_state(const LeaseRecord &r) {
  return word_state(r.word.load(std::memory_order_relaxed));
}
inline uint64_t lease_gen(const LeaseRecord &r) {
  return word_gen(r.word.load(std::memory_order_relaxed));
}
// Lock holders only, on a record in FREE, HELD or RESERVED: states the
// lock-free path never changes (its CAS expects LOOSE or HELD_FAST), so a
// plain store is the commit. Release: a reader that sees the new state sees
// the fields written before it.
inline void lease_store(LeaseRecord &r, uint32_t state, uint64_t gen) {
  r.word.store(lease_word(state, kNoProc, gen), std::memory_order_release);
}

// --- the gate of the lock-free path --------------------------------------------
// After `waiting`, `closed`, `retiring` or the rate changed: the gate
// follows them. Returns true when it has just opened to a hand-on (nobody
// was queued and no shrink waited): the caller then sweeps the lanes
// (fastpath.h), after a fence, for leases freed by releasers that read the
// gate before this store.
inline bool gate_sync(shmsem_t *s) {
  Core *c = s->core;
  uint32_t g =
      (c->waiting.load(std::memory_order_relaxed) ? kGateQueued : 0) |
      (c->closed.load(std::memory_order_relaxed) ? kGateClosed : 0) |
      (c->retiring.load(std::memory_order_relaxed) ? kGateRetiring : 0) |
      (c->rate_interval_ns.load(std::memory_order_relaxed) ? kGateRate : 0);
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
// `corrupt`, and unlock() runs repair() before releasing the lock, which
// rebuilds every derived structure from the commit words. The operation
// itself goes on degraded (e.g. "no free lease"), and its committed state
// words are what repair then builds on.
inline bool lease_ok(const shmsem_t *s, uint32_t l) { return l < s->permits; }
inline bool slot_ok(const shmsem_t *s, uint32_t w) { return w < s->max_waiters; }
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
  used_remove(s, s->core->n_used_leases, s->used_leases, s->leases,
              s->permits, s->leases[l].used_pos);
}
// Put a FREE lease on the free list (repair's rebuild; not in use).
inline void lease_push(shmsem_t *s, uint32_t l) {
  s->leases[l].next_free = s->core->free_lease;
  s->core->free_lease = l;
}
// A lease in use (l checked by the caller) goes back to the pool.
inline void lease_free(shmsem_t *s, uint32_t l) {
  used_remove(s, s->core->n_used_leases, s->used_leases, s->leases,
              s->permits, s->leases[l].used_pos);
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
// Return a slot in use (w checked by the caller) to the free list; its
// word becomes FREE.
inline void slot_free(shmsem_t *s, uint32_t w) {
  s->slots[w].word.store(kSlotFree, std::memory_order_release);
  used_remove(s, s->core->n_used_slots, s->used_slots, s->slots,
              s->max_waiters, s->slots[w].used_pos);
  s->slots[w].next_free = s->core->free_slot;
  s->core->free_slot = w;
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
// the role passes to the newest waiter (the tail), which the caller wakes, if it sleeps, after
// unlocking (returned; kNone if none or `w` was not the watcher).
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

// Wake whoever sleeps on slot `w`'s word: every sleeper, not one. The
// waiter is one thread, but a futex wait can outlive the wait it was for:
// an async waiter's ring wait is withdrawn by a cancel only later, or
// never (shmsem_waiter_cancel), and the slot may meanwhile serve a new
// waiter. A wake of one could land on the stale wait and leave the new
// waiter asleep until its next periodic wake-up. The stale wait sees a
// spurious wake-up. The same system call either way.
inline void wake_slot(shmsem_t *s, uint32_t w) {
  futex_wake(&s->slots[w].word, INT32_MAX);
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

// Slots granted under the lock, to wake after unlocking (a few; more are
// woken at once, under the lock: rare).
struct Wakes {
  uint32_t n = 0;
  uint32_t slot[4] = {};
  void add(shmsem_t *s, uint32_t w) {
    if (n < 4)
      slot[n++] = w;
    else
      wake_slot(s, w);
  }
  // After unlocking. Dekker with the waiter (acquire.cc): the grant was
  // stored under the lock, then this fence, then the load of `sleeping`;
  // a waiter still spinning costs no system call.
  void run(shmsem_t *s) const {
    if (!n) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (uint32_t i = 0; i < n; i++)
      if (s->slots[slot[i]].sleeping.load(std::memory_order_relaxed))
        wake_slot(s, slot[i]);
  }
};

// Wakes run when it goes out of scope: declared before the LockGuard, it
// runs after the unlock.
struct WakeAfter : Wakes {
  shmsem_t *s;
  explicit WakeAfter(shmsem_t *sem) : s(sem) {}
  ~WakeAfter() { run(s); }
  WakeAfter(const WakeAfter &) = delete;
  WakeAfter &operator=(const WakeAfter &) = delete;
};

// The permits a waiter asks for, as read from its slot: within
// [1, permits] whatever a writer left there.
inline uint32_t slot_weight(const shmsem_t *s, uint32_t w) {
  uint32_t k = s->slots[w].weight;
  return k < 1 ? 1 : k > s->permits ? s->permits : k;
}

// Lease `l` is leaving the owner's hands (release, reclamation of a dead
// owner, a grow); the caller has already taken it out of its counter
// (`held`, `reserved`, `available`) and it is listed in used_leases. It
// goes, in this order: to retirement while a shrink waits for permits; to
// the head waiter's reservation (RESERVED) while the head needs more, and
// once the head has all it asked for and the rate allows, the head is
// granted (word GRANTED; added to `wk`); else to the pool. This is the
// only place a permit is granted to a waiter. Heads whose owner left
// without the lock are freed on the way, their reservations passed on.
// `l`'s own link is ignored (cleared).
void pass_permit(shmsem_t *s, uint32_t l, Wakes *wk);
// The same for each record of `c` (a weighted lease being released, read
// once by walk_lease: chain.h), in order.
class Chain;
void pass_chain(shmsem_t *s, const Chain &c, Wakes *wk);

// Slot `w` is the head, WAITING, holds all it asked for, and the rate now
// allows it: grant it (GRANTED, a token taken), and pass the pool's free
// permits to the next head. False if any of that is not so. The head's own
// step: nobody else wakes for a start time.
bool grant_due_head(shmsem_t *s, uint32_t w, Wakes *wk);

// Slot `w` (checked) leaves the queue or is freed: the records RESERVED for
// it go on (pass_permit), and the pool's free permits to a head that now
// wants them (feed_head). `reserved` is adjusted.
void drop_reservation(shmsem_t *s, uint32_t w, Wakes *wk);

// While the head waiter wants permits (or a shrink does): free ones from
// the pool go to it. Bounded. Used when a head changes with permits free
// (a rate-limited head that was full leaves or is granted).
void feed_head(shmsem_t *s, Wakes *wk);

// Whether a released permit is wanted before the pool: a shrink waits, or
// the head waiter still gathers its reservation.
bool wants_permit(const shmsem_t *s);

// Frees slot `w` (checked by the caller), whose owner left without the lock
// (LEFT_QUEUED: unlinked first; LEFT: its reservation is passed on). No
// effect on any other state.
void sweep_left(shmsem_t *s, uint32_t w, Wakes *wk);
// The same for a slot the caller has already unlinked and whose
// reservation it has dropped.
void free_left(shmsem_t *s, uint32_t w);

// The waiter owning slot `w` completes: its word is no longer WAITING.
// Frees the slot; GRANTED fills `lease` and returns 0.
// A GRANTED lease of one permit becomes HELD_FAST under `proc` (the
// waiter's process record) if it has one, else HELD; one of n permits is n
// HELD records linked from the one the token names. A reservation a writer
// broke is not handed over: -EUCLEAN, the slot freed, its records passed
// on (slots to wake go to `wk`), the caller owning nothing.
int finish_slot(shmsem_t *s, uint32_t w, uint32_t proc, shmsem_lease_t *lease,
                Wakes *wk);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_TABLES_H
