// The state machine of the shared records: one function per arrow of
// docs/DESIGN.md section 4's diagrams, and the only code that writes a
// lease word, a waiter slot's word or a process record's state (scripts/lint
// refuses a store, CAS or exchange of one anywhere else). The lock-free
// arrows of a lease (LOOSE -> HELD_FAST, HELD_FAST -> LOOSE) are the fast
// path's, in fast/fastpath.h; the lock-free arrows of a slot (its owner
// leaving) are at the end of this file.
//
// An arrow taken under the lock takes a Locked (section.h): a call from
// outside a Section does not compile. A store is the commit where only lock
// holders change the word; a CAS where something else may change it
// meanwhile (the lock-free path on LOOSE and HELD_FAST leases, a waiter
// leaving its slot without the lock), and then the caller acts only if it
// won. Release order: a reader that sees the new state sees the fields the
// caller wrote before it.
#ifndef SHMSEM_SRC_TRANSITIONS_H
#define SHMSEM_SRC_TRANSITIONS_H

#include <stdint.h>

#include <atomic>

#include "handle.h"
#include "section.h"
#include "tables.h"

namespace shmsem::detail {

// --- leases (layout.h: LeaseState) ------------------------------------------
// FREE or RESERVED -> HELD at generation `gen` (a grant to a lock holder or
// to a waiter that consumes its reservation; the members of a weighted
// lease keep theirs). `owner` was named before.
inline void lease_hold(Locked, LeaseRecord &r, uint64_t gen) {
  r.word.store(lease_word(kLeaseHeld, kNoProc, gen), std::memory_order_release);
}
// FREE or RESERVED -> HELD_FAST under process record `proc`: its release
// can be lock-free. The caller has taken it out of the records in use.
inline void lease_hold_fast(Locked, LeaseRecord &r, uint32_t proc,
                            uint64_t gen) {
  r.word.store(lease_word(kLeaseHeldFast, proc, gen),
               std::memory_order_release);
}
// FREE -> RESERVED for the head waiter, at a new generation.
inline void lease_reserve(Locked, LeaseRecord &r, uint64_t gen) {
  r.word.store(lease_word(kLeaseReserved, kNoProc, gen),
               std::memory_order_release);
}
// HELD, RESERVED or FREE -> RETIRED (a shrink took it): nobody's.
inline void lease_retire(Locked, LeaseRecord &r) {
  const uint64_t w = r.word.load(std::memory_order_relaxed);
  r.word.store(lease_word(kLeaseRetired, kNoProc, word_gen(w)),
               std::memory_order_release);
}
// Any state but LOOSE and HELD_FAST -> FREE, keeping the generation (a
// release, a reservation given back, repair's rebuild).
inline void lease_to_free(Locked, LeaseRecord &r) {
  const uint64_t w = r.word.load(std::memory_order_relaxed);
  r.word.store(lease_word(kLeaseFree, kNoProc, word_gen(w)),
               std::memory_order_release);
}
// HELD_FAST (read as *w) -> HELD, the lease named as `owner`'s and listed
// in use: a lock holder takes it over from the lock-free path (a release
// under the lock, reclamation of a dead process, repair). A CAS: a
// lock-free release of the same lease may race. False, *w refreshed, if
// the word was no longer *w.
inline bool lease_lock_in(Locked s, uint32_t l, uint64_t *w,
                          const Owner &owner) {
  LeaseRecord &r = s->leases[l];
  r.owner = owner;
  if (!r.word.compare_exchange_strong(
          *w, lease_word(kLeaseHeld, kNoProc, word_gen(*w)),
          std::memory_order_acquire, std::memory_order_relaxed))
    return false;
  used_add_lease(s, l);
  return true;
}
// LOOSE (read as *w) -> `state` (HELD or HELD_FAST) under `proc` at `gen`:
// a lock holder takes a lease a lock-free release left. A CAS: the
// lock-free path may take it first.
inline bool lease_take_loose(Locked, LeaseRecord &r, uint64_t *w,
                             uint32_t state, uint32_t proc, uint64_t gen) {
  return r.word.compare_exchange_strong(*w, lease_word(state, proc, gen),
                                        std::memory_order_acquire,
                                        std::memory_order_relaxed);
}
// LOOSE (read as *w) that no lane names -> FREE (repair). A CAS, as above.
inline bool lease_unloose(Locked, LeaseRecord &r, uint64_t *w) {
  return r.word.compare_exchange_strong(
      *w, lease_word(kLeaseFree, kNoProc, word_gen(*w)),
      std::memory_order_relaxed, std::memory_order_relaxed);
}

// --- waiter slots (layout.h: SlotState)
// ---------------------------------------- FREE -> WAITING: the waiter's
// enqueue commits.
inline void slot_enqueue(Locked, WaiterSlot &ws) {
  ws.word.store(kSlotWaiting, std::memory_order_release);
}
// `from` (WAITING) -> GRANTED, CLOSED or CANCELLED: a grant, a shutdown, a
// cancel. A CAS: the owner may leave without the lock at any moment. False
// if it did (or the word was not `from`).
inline bool slot_end_wait(Locked, WaiterSlot &ws, uint32_t from, uint32_t to) {
  return ws.word.compare_exchange_strong(from, to, std::memory_order_release,
                                         std::memory_order_relaxed);
}
inline bool slot_grant(Locked k, WaiterSlot &ws) {
  return slot_end_wait(k, ws, kSlotWaiting, kSlotGranted);
}
inline bool slot_close(Locked k, WaiterSlot &ws) {
  return slot_end_wait(k, ws, kSlotWaiting, kSlotClosed);
}
inline bool slot_cancel(Locked k, WaiterSlot &ws) {
  return slot_end_wait(k, ws, kSlotWaiting, kSlotCancelled);
}
// GRANTED with nothing consumed -> FREE (repair: its owner is gone). A CAS.
inline bool slot_drop_grant(Locked, WaiterSlot &ws) {
  uint32_t from = kSlotGranted;
  return ws.word.compare_exchange_strong(
      from, kSlotFree, std::memory_order_release, std::memory_order_relaxed);
}
// Any -> FREE: the slot goes back to the free list (tables.h slot_free)
// or repair found a word no state has.
inline void slot_to_free(Locked, WaiterSlot &ws) {
  ws.word.store(kSlotFree, std::memory_order_release);
}

// Slot `w` in use (checked by the caller) -> FREE, back on the free list.
inline void slot_free(Locked s, uint32_t w) {
  slot_to_free(s, s->slots[w]);
  used_remove(s, s->core->n_used_slots, s->used_slots, s->slots, s->max_waiters,
              s->slots[w].used_pos);
  s->slots[w].next_free = s->core->free_slot;
  s->core->free_slot = w;
}
// Whatever a lock holder found -> LEFT (repair: a half-done shutdown).
inline void slot_mark_left(Locked, WaiterSlot &ws) {
  ws.word.store(kSlotLeft, std::memory_order_release);
}
// The owner leaving its slot without the lock (its wait for the lock
// ended): WAITING -> LEFT_QUEUED, or GRANTED, CANCELLED, CLOSED -> LEFT,
// from `*v` as read. Lock holders change the word by CAS from WAITING only,
// so a failed CAS (with *v refreshed) means one of them won a race.
// Acquire on failure: a GRANTED that beat us is read with its lease.
inline bool slot_leave_unlocked(std::atomic<uint32_t> &word, uint32_t *v,
                                uint32_t to) {
  return word.compare_exchange_strong(*v, to, std::memory_order_acq_rel,
                                      std::memory_order_acquire);
}

// --- process records (layout.h: ProcState)
// ------------------------------------- FREE -> USED: the record is this
// process's (its owner and lanes written before).
inline void proc_claim(Locked, ProcRecord &pr) {
  pr.state.store(kProcUsed, std::memory_order_release);
}
// USED -> FREE: its process is proven dead and its leases passed on.
inline void proc_free(Locked, ProcRecord &pr) {
  pr.state.store(kProcFree, std::memory_order_release);
}

// --- a fresh segment (creation: nobody can name the file yet)
// -----------------
inline void lease_init(LeaseRecord &r, bool retired) {
  r.word.store(lease_word(retired ? kLeaseRetired : kLeaseFree, kNoProc, 0),
               std::memory_order_relaxed);
}
inline void slot_init(WaiterSlot &ws) {
  ws.word.store(kSlotFree, std::memory_order_relaxed);
}
inline void proc_init(ProcRecord &pr) {
  pr.state.store(kProcFree, std::memory_order_relaxed);
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_TRANSITIONS_H
