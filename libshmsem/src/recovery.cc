// Repair after a process died holding the segment lock.
//
// Like musl's robust-list walk, this trusts only what was committed: the
// per-record state words (lease.state, slot.word, core.closed), each changed
// by one aligned store. Free lists, queue links and counters are caches of
// those states and are rebuilt from scratch. The two multi-record steps roll
// forward: a lease already RESERVED for a slot still WAITING completes its
// grant; a GRANTED slot whose lease is no longer RESERVED for it was already
// consumed and is freed.
#include "recovery.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "fastpath.h"
#include "futex.h"
#include "owner.h"
#include "hooks.h"
#include "tables.h"

namespace shmsem::detail {

void repair(shmsem_t *s) {
  SHMSEM_HOOK(REPAIR_LOCKED);
  Core *c = s->core;
  stat_bump(c->repairs);
  const uint32_t n = s->permits, m = s->max_waiters;
  std::vector<uint32_t> wake;

  // 1. Half-finished grants and returns.
  for (uint32_t l = 0; l < n; l++) {
    LeaseRecord &rec = s->leases[l];
    if (lease_state(rec) != kLeaseReserved) continue;
    uint32_t w = rec.slot;
    uint32_t word =
        w < m ? s->slots[w].word.load(std::memory_order_relaxed) : 0;
    if (word == kSlotWaiting) {
      s->slots[w].lease = l;
      // A CAS: the owner may leave without the lock at any moment; then
      // the lease is an orphan like any other.
      if (s->slots[w].word.compare_exchange_strong(
              word, kSlotGranted, std::memory_order_release,
              std::memory_order_relaxed))
        wake.push_back(w);
      else
        lease_store(rec, kLeaseFree, lease_gen(rec));  // orphan
    } else if (!((word == kSlotGranted || word == kSlotLeft) &&
                 s->slots[w].lease == l)) {
      lease_store(rec, kLeaseFree, lease_gen(rec));  // orphan
    }
  }
  for (uint32_t w = 0; w < m; w++) {
    WaiterSlot &ws = s->slots[w];
    uint32_t word = ws.word.load(std::memory_order_relaxed);
    // Slot words its owner may change meanwhile (leaving without the lock:
    // WAITING -> LEFT_QUEUED, the others -> LEFT) are changed by CAS; a
    // slot left either way is consistent, and is freed by whoever meets it
    // next (grant.cc sweep_left()), never here.
    if (word == kSlotGranted) {
      uint32_t l = ws.lease;
      if (l >= n ||
          lease_state(s->leases[l]) != kLeaseReserved ||
          s->leases[l].slot != w)
        ws.word.compare_exchange_strong(word, kSlotFree,
                                        std::memory_order_release,
                                        std::memory_order_relaxed);  // consumed
    } else if ((word == kSlotWaiting || word == kSlotLeftQueued) &&
               c->closed.load(std::memory_order_relaxed)) {
      // 2. A shutdown that died half-way. (A slot its owner left goes out
      // of the queue as LEFT: nobody waits on a closed semaphore.)
      if (word == kSlotWaiting &&
          ws.word.compare_exchange_strong(word, kSlotClosed,
                                          std::memory_order_release,
                                          std::memory_order_relaxed))
        wake.push_back(w);
      else
        ws.word.store(kSlotLeft, std::memory_order_release);
    } else if (word != kSlotWaiting && word != kSlotCancelled &&
               word != kSlotClosed && word != kSlotFree && !slot_left(word)) {
      ws.word.store(kSlotFree, std::memory_order_release);
    }
  }

  // 3. Free lists, queue and counters from the record states.
  uint32_t avail = 0, held = 0, reserved = 0;
  c->free_lease = kNone;
  c->n_used_leases.store(0, std::memory_order_relaxed);
  c->n_used_slots.store(0, std::memory_order_relaxed);
  for (uint32_t l = n; l-- > 0;) {
    LeaseRecord &rec = s->leases[l];
    uint64_t w = rec.word.load(std::memory_order_relaxed);
    switch (word_state(w)) {
      case kLeaseHeld:
        held++;
        used_add(s, c->n_used_leases, s->used_leases, n, l, &rec.used_pos);
        break;
      case kLeaseReserved:
        reserved++;
        used_add(s, c->n_used_leases, s->used_leases, n, l, &rec.used_pos);
        break;
      case kLeaseHeldFast:
        // The lock-free path's, changed by CAS only. Held under a process
        // record that is not in use (a writer's): held by nobody we can
        // name. HELD under this process, whose reclamation passes it on
        // (the dead record's process may have held it; we cannot tell).
        if (word_proc(w) < s->max_procs &&
            s->procs[word_proc(w)].state.load(std::memory_order_relaxed) ==
                kProcUsed)
          break;
        rec.owner = self_owner();
        if (rec.word.compare_exchange_strong(
                w, lease_word(kLeaseHeld, kNoProc, word_gen(w)),
                std::memory_order_relaxed, std::memory_order_relaxed)) {
          held++;
          used_add(s, c->n_used_leases, s->used_leases, n, l, &rec.used_pos);
          break;
        }
        if (word_state(w) != kLeaseLoose) break;  // released meanwhile
        [[fallthrough]];
      case kLeaseLoose:
        // Free, and found by the sweeps only through a lane of its process
        // record that names it (fast_release() names it before freeing it).
        if (loose_named(s, l, w)) break;
        if (!rec.word.compare_exchange_strong(
                w, lease_word(kLeaseFree, kNoProc, word_gen(w)),
                std::memory_order_relaxed, std::memory_order_relaxed))
          break;  // taken meanwhile (CAS: the only way it changes)
        lease_push(s, l);
        avail++;
        break;
      default:
        rec.word.store(lease_word(kLeaseFree, kNoProc, word_gen(w)),
                       std::memory_order_relaxed);
        lease_push(s, l);
        avail++;
    }
  }
  c->available.store(avail, std::memory_order_relaxed);
  c->held.store(held, std::memory_order_relaxed);
  c->reserved.store(reserved, std::memory_order_relaxed);

  // (ticket, slot), each ticket read once: the sort must never read the
  // segment, where a writer may change tickets under it, and std::sort
  // with an inconsistent order runs off the ends of its array (an
  // adversarial test corrupted the heap that way).
  std::vector<std::pair<uint64_t, uint32_t>> queued;
  c->free_slot = kNone;
  uint64_t max_ticket = 0;
  for (uint32_t w = m; w-- > 0;) {
    WaiterSlot &ws = s->slots[w];
    uint32_t word = ws.word.load(std::memory_order_relaxed);
    if (word == kSlotFree) {
      ws.next_free = c->free_slot;
      c->free_slot = w;
      continue;
    }
    used_add(s, c->n_used_slots, s->used_slots, m, w, &ws.used_pos);
    uint64_t ticket = __atomic_load_n(&ws.ticket, __ATOMIC_RELAXED);
    max_ticket = std::max(max_ticket, ticket);
    if (word == kSlotWaiting || word == kSlotLeftQueued)
      queued.emplace_back(ticket, w);
  }
  // FIFO among the live waiters: tickets were stored before each commit.
  std::sort(queued.begin(), queued.end());
  c->head = c->tail = kNone;
  c->waiting.store(0, std::memory_order_relaxed);
  for (const auto &q : queued) queue_append(s, q.second);
  if (c->next_ticket <= max_ticket) c->next_ticket = max_ticket + 1;

  // 4. The watcher role, if its holder's slot is gone.
  uint32_t wt = c->watcher;
  uint32_t wword =
      wt < m ? s->slots[wt].word.load(std::memory_order_relaxed) : kSlotFree;
  if (wword == kSlotFree || slot_left(wword)) {
    c->watcher = c->tail;
    if (c->tail != kNone) wake.push_back(c->tail);
  }

  // 5. A releaser that died after freeing its lease: permits free while
  // waiters queue break INV-NOBYPASS; hand them on.
  for (uint32_t i = 0; i < n && c->head != kNone; i++) {
    uint32_t l = lease_pop(s);
    if (l == kNone) break;
    counter_add(c->available, -1);
    uint32_t g = pass_permit(s, l);
    if (g != kNone) wake.push_back(g);
  }
  // 6. Leases a lock-free release freed while waiters queue.
  sweep_loose(s);
  for (uint32_t w : wake) wake_slot(s, w);
}

}  // namespace shmsem::detail
