// Granting a permit: the hand-off from a releasing (or dead) holder to the
// head of the queue, and the waiter's side of it. See docs/DESIGN.md §5-6.
#include <errno.h>

#include <algorithm>

#include "clock.h"
#include "futex.h"
#include "hooks.h"
#include "tables.h"

namespace shmsem::detail {

void record_wait(shmsem_t *s, uint64_t ns) {
  int b = 0;
  while (b + 1 < SHMSEM_HIST_BUCKETS && (ns >> (b + 1)) != 0) b++;
  stat_bump(s->core->wait_hist[b]);
  stat_bump(s->core->acquisitions);
}

// The moving average of enqueue-to-grant times the head spins by
// (acquire.cc): 1/8 of each new wait, each capped at kHandoffCapNs so one
// long wait moves it only as far as the spin bound matters.
void note_handoff(shmsem_t *s, uint64_t waited) {
  constexpr uint64_t kHandoffCapNs = 100'000;
  uint64_t avg = s->core->handoff_ns.load(std::memory_order_relaxed);
  avg = std::min(avg, kHandoffCapNs);
  avg = avg - avg / 8 + std::min(waited, kHandoffCapNs) / 8;
  s->core->handoff_ns.store(uint32_t(avg), std::memory_order_relaxed);
}

// Slot `w`, left by its owner and unlinked, goes back to the free list. A
// waiter that left is counted as timed out whatever ended its wait (it
// could not count itself: that takes the lock). If it held the watcher
// role, the role passes on now (a wake under the lock: rare).
void free_left(shmsem_t *s, uint32_t w) {
  slot_free(s, w);  // commit
  stat_bump(s->core->timeouts);
  uint32_t nw = watcher_leave(s, w);
  if (nw != kNone) wake_slot(s, nw);
}

uint32_t sweep_left(shmsem_t *s, uint32_t w) {
  WaiterSlot &ws = s->slots[w];
  uint32_t word = ws.word.load(std::memory_order_relaxed);
  if (word == kSlotLeftQueued) {
    queue_unlink(s, w);
    free_left(s, w);
    return kNone;
  }
  if (word != kSlotLeft) return kNone;
  uint32_t l = ws.lease;
  bool reserved = lease_ok(s, l) &&
                  lease_state(s->leases[l]) == kLeaseReserved &&
                  s->leases[l].slot == w;
  free_left(s, w);
  if (!reserved) return kNone;
  // Granted, then given up: the permit goes on (a crash in between leaves a
  // RESERVED lease without its slot, which repair returns to the pool).
  counter_add(s->core->reserved, -1);
  return pass_permit(s, l);
}

uint32_t pass_permit(shmsem_t *s, uint32_t l) {
  Core *c = s->core;
  LeaseRecord &rec = s->leases[l];
  // Each round frees a slot whose owner left, or ends; a damaged queue
  // that has more entries than slots stops the loop.
  for (uint32_t round = 0;; round++) {
    uint32_t w = c->head;
    if (w != kNone && round > s->max_waiters) {
      mark_corrupt(s);
      w = kNone;
    }
    uint32_t word = w != kNone && slot_ok(s, w)
                        ? s->slots[w].word.load(std::memory_order_relaxed)
                        : 0;
    if (w != kNone && word == kSlotLeftQueued) {
      // Its owner left without the lock: not a waiter any more.
      queue_unlink(s, w);
      free_left(s, w);
      continue;
    }
    if (w != kNone && word != kSlotWaiting) {
      // A head that is no queued slot: the pool takes the permit, and the
      // repair at unlock hands it to the real head (INV-NOBYPASS).
      mark_corrupt(s);
      w = kNone;
    }
    if (w == kNone) {
      // Nobody queued: back to the pool.
      lease_store(rec, kLeaseFree, lease_gen(rec));  // commit
      SHMSEM_HOOK(RELEASE_FREED);
      lease_free(s, l);
      counter_add(c->available, 1);
      return kNone;
    }
    // Strict FIFO: the permit goes to the head, never to the pool, so no
    // newcomer can take it in between (INV-NOBYPASS).
    WaiterSlot &ws = s->slots[w];
    queue_unlink(s, w);
    ws.lease = l;
    rec.slot = w;
    rec.since_ns.store(coarse_ns(), std::memory_order_relaxed);
    const uint64_t gen = next_gen(lease_gen(rec));
    SHMSEM_HOOK(RELEASE_CHOSEN);
    lease_store(rec, kLeaseReserved, gen);  // commit
    // The waiter's name goes on the record only after the commit: written
    // before it, a crash would leave the lease HELD under the name of a
    // live waiter that never got it, and nobody would ever reclaim it
    // (found by the SPIN model, verify/MODEL.md). A RESERVED lease is
    // reclaimed through its slot's owner, never its own.
    rec.owner = process_of(ws.owner);
    counter_add(c->reserved, 1);
    SHMSEM_HOOK(RELEASE_RESERVED);
    // Release: a waiter that reads GRANTED sees the lease fields above. A
    // CAS, not a store: the owner may leave without the lock at any moment.
    uint32_t expected = kSlotWaiting;
    if (ws.word.compare_exchange_strong(expected, kSlotGranted,
                                        std::memory_order_release,
                                        std::memory_order_relaxed))
      return w;
    // It left after we looked (LEFT_QUEUED, unlinked above): free the slot
    // and offer the permit to the next head. A crash before the next
    // commit leaves a RESERVED lease whose slot is not GRANTED: repair
    // returns it to the pool.
    counter_add(c->reserved, -1);
    free_left(s, w);
  }
}

int finish_slot(shmsem_t *s, uint32_t w, uint32_t proc,
                shmsem_lease_t *lease) {
  Core *c = s->core;
  WaiterSlot &ws = s->slots[w];
  uint32_t word = ws.word.load(std::memory_order_acquire);
  int r;
  switch (word) {
    case kSlotGranted: {
      uint32_t l = ws.lease;
      if (!lease_ok(s, l)) {
        mark_corrupt(s);  // repair frees a GRANTED slot without its lease
        return -EUCLEAN;
      }
      LeaseRecord &rec = s->leases[l];
      const uint64_t gen = lease_gen(rec);
      if (proc < s->max_procs) {
        // Under the waiter's process record: its release can be lock-free.
        lease_unlist(s, l);
        rec.word.store(lease_word(kLeaseHeldFast, proc, gen),
                       std::memory_order_release);  // commit
      } else {
        rec.owner = process_of(ws.owner);  // named before HELD (pass_permit)
        lease_store(rec, kLeaseHeld, gen);  // commit
        counter_add(c->held, 1);
      }
      counter_add(c->reserved, -1);
      uint64_t now = mono_ns();
      uint64_t enq = ws.enq_ns.load(std::memory_order_relaxed);
      uint64_t waited = now > enq ? now - enq : 0;
      record_wait(s, waited);
      note_handoff(s, waited);
      SHMSEM_HOOK(WAIT_CONSUME_COMMITTED);
      fill_token(s, l, gen, lease);
      r = 0;
      break;
    }
    case kSlotCancelled: r = -ECANCELED; break;
    case kSlotClosed: r = -ESHUTDOWN; break;
    default:
      // FREE or WAITING here would mean a reclamation pass judged this live
      // process dead (e.g. a PID namespace mix-up); the slot is not ours.
      return -ENOTRECOVERABLE;
  }
  slot_free(s, w);
  return r;
}

}  // namespace shmsem::detail
