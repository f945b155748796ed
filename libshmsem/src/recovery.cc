// Repair after a process died holding the segment lock.
//
// Like musl's robust-list walk, this trusts only what was committed: the
// per-record state words (lease.state, slot.word, core.closed), each changed
// by one aligned store. Free lists, queue links and counters are caches of
// those states and are rebuilt from scratch: the free lists, the queue, the
// counters, each slot's reservation (from the records RESERVED for it). The
// multi-record steps roll forward or back: a head WAITING with all it asked
// for RESERVED completes its grant; a GRANTED slot with nothing RESERVED for
// it was already consumed and is freed, one with a part was being consumed
// by the holder of the lock, who died (the rest go back); a resize cut short
// is finished from the committed capacity. docs/DESIGN.md sections 7, 13.
#include "recovery.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "capacity.h"
#include "fastpath.h"
#include "futex.h"
#include "owner.h"
#include "hooks.h"
#include "tables.h"

namespace shmsem::detail {

namespace {

// A RESERVED record given back in repair: FREE, for the rebuild below.
void orphan(shmsem_t *s, uint32_t l) {
  LeaseRecord &rec = s->leases[l];
  rec.link = kNone;
  lease_store(rec, kLeaseFree, lease_gen(rec));
}

// Every record reserved for slot `w` (its chain, rebuilt in step 1) goes
// back to the pool.
void orphan_reservation(shmsem_t *s, uint32_t w) {
  WaiterSlot &ws = s->slots[w];
  for (uint32_t l = ws.lease, i = 0; l != kNone && i < s->permits; i++) {
    uint32_t next = s->leases[l].link;
    orphan(s, l);
    l = next;
  }
  ws.lease = kNone;
  ws.got = 0;
}

}  // namespace

void repair(shmsem_t *s) {
  SHMSEM_HOOK(REPAIR_LOCKED);
  Core *c = s->core;
  stat_bump(c->repairs);
  const uint32_t n = s->permits, m = s->max_waiters;
  std::vector<uint32_t> wake;

  // 1. Reservations, from the records: each RESERVED lease names its slot.
  // A slot's chain and count are caches of that (section 13).
  for (uint32_t w = 0; w < m; w++) {
    s->slots[w].lease = kNone;
    s->slots[w].got = 0;
  }
  for (uint32_t l = n; l-- > 0;) {
    LeaseRecord &rec = s->leases[l];
    if (lease_state(rec) != kLeaseReserved) continue;
    uint32_t w = rec.slot;
    uint32_t word =
        w < m ? s->slots[w].word.load(std::memory_order_relaxed) : 0;
    if (word == kSlotWaiting || word == kSlotLeftQueued ||
        word == kSlotGranted || word == kSlotLeft) {
      rec.link = s->slots[w].lease;
      s->slots[w].lease = l;
      s->slots[w].got++;
    } else {
      orphan(s, l);  // its slot is gone: a hand-on cut short
    }
  }
  SHMSEM_HOOK(REPAIR_CHAINS_READ);
  // The head: only it may gather a reservation (strict FIFO).
  uint64_t head_ticket = ~uint64_t{0};
  for (uint32_t w = 0; w < m; w++) {
    uint32_t word = s->slots[w].word.load(std::memory_order_relaxed);
    uint64_t t = __atomic_load_n(&s->slots[w].ticket, __ATOMIC_RELAXED);
    if ((word == kSlotWaiting || word == kSlotLeftQueued) && t < head_ticket)
      head_ticket = t;
  }
  const bool limited = c->rate_interval_ns.load(std::memory_order_relaxed);

  // 2. Half-finished grants, consumes and returns: each slot against its
  // reservation.
  for (uint32_t w = 0; w < m; w++) {
    WaiterSlot &ws = s->slots[w];
    uint32_t word = ws.word.load(std::memory_order_relaxed);
    const uint32_t k = slot_weight(s, w), got = ws.got;
    // Slot words its owner may change meanwhile (leaving without the lock:
    // WAITING -> LEFT_QUEUED, the others -> LEFT) are changed by CAS; a
    // slot left either way is consistent, and is freed by whoever meets it
    // next (grant.cc sweep_left()), never here.
    if (word == kSlotGranted || word == kSlotLeft) {
      // All of it, or nothing (consumed); a part means the consumer died
      // between the records it made HELD: the rest go back.
      if (got != k && got != 0) orphan_reservation(s, w);
      if (word == kSlotGranted && ws.got == 0)
        ws.word.compare_exchange_strong(word, kSlotFree,
                                        std::memory_order_release,
                                        std::memory_order_relaxed);
    } else if ((word == kSlotWaiting || word == kSlotLeftQueued) &&
               c->closed.load(std::memory_order_relaxed)) {
      // A shutdown that died half-way. (A slot its owner left goes out
      // of the queue as LEFT: nobody waits on a closed semaphore.)
      orphan_reservation(s, w);
      if (word == kSlotWaiting &&
          ws.word.compare_exchange_strong(word, kSlotClosed,
                                          std::memory_order_release,
                                          std::memory_order_relaxed)) {
        wake.push_back(w);
        stat_bump(c->shutdown_failures);  // as shutdown would have
      } else
        ws.word.store(kSlotLeft, std::memory_order_release);
    } else if (word == kSlotWaiting || word == kSlotLeftQueued) {
      if (got && (__atomic_load_n(&ws.ticket, __ATOMIC_RELAXED) !=
                      head_ticket ||
                  got > k)) {
        orphan_reservation(s, w);  // not the head's: a writer's
      } else if (word == kSlotWaiting && got == k) {
        // A grant cut short between its last reservation and GRANTED:
        // completed (a CAS: the owner may leave without the lock; then
        // the records are orphans like any other). Under a rate limit it
        // waits for its start time: woken to learn it.
        if (limited || ws.word.compare_exchange_strong(
                           word, kSlotGranted, std::memory_order_release,
                           std::memory_order_relaxed))
          wake.push_back(w);
        else
          orphan_reservation(s, w);
      }
    } else if (word == kSlotCancelled || word == kSlotClosed) {
      orphan_reservation(s, w);  // dropped when it was cancelled or closed
    } else if (word != kSlotFree) {
      orphan_reservation(s, w);
      ws.word.store(kSlotFree, std::memory_order_release);
    }
  }

  // 3. Free lists, queue and counters from the record states.
  uint32_t avail = 0, held = 0, reserved = 0, retired = 0;
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
      case kLeaseRetired:
        retired++;
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
  c->retired.store(retired, std::memory_order_relaxed);
  c->retiring.store(0, std::memory_order_relaxed);  // settled in step 5
  if (c->capacity.load(std::memory_order_relaxed) > n)
    c->capacity.store(n, std::memory_order_relaxed);

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

  // 5. A resize cut short is finished: the records follow the capacity.
  // Then a releaser that died after freeing its lease: permits free while
  // the head gathers break INV-NOBYPASS; hand them on.
  Wakes wk;
  settle_capacity(s, &wk);
  feed_head(s, &wk);
  // 6. Leases a lock-free release freed while waiters queue.
  sweep_loose(s);
  for (uint32_t i = 0; i < wk.n; i++) wake.push_back(wk.slot[i]);
  for (uint32_t w : wake) wake_slot(s, w);
}

}  // namespace shmsem::detail
