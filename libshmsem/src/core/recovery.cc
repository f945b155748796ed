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
#include "census.h"
#include "chain.h"
#include "clock.h"
#include "lanes.h"
#include "futex.h"
#include "hooks.h"
#include "owner.h"
#include "rate.h"
#include "grant.h"
#include "tables.h"
#include "transitions.h"

namespace shmsem::detail {

namespace {

// A RESERVED record given back in repair: FREE, for the rebuild below.
void orphan(Locked s, uint32_t l) {
  LeaseRecord &rec = s->leases[l];
  rec.link = kNone;
  lease_to_free(s, rec);
}

// The reservations, as the records say (each RESERVED record names its
// slot, read once), in private memory: repair acts on this copy and writes
// the slots' chains and counts from it at the end (chain.h: a link in the
// segment is never followed twice).
struct Reservations {
  std::vector<uint32_t> head;  // per slot: its first record, or kNone
  std::vector<uint32_t> link;  // per record: the next of its slot's
  std::vector<uint32_t> got;   // per slot
};

// Every record reserved for slot `w` goes back to the pool.
void orphan_reservation(Locked s, Reservations *rv, uint32_t w) {
  for (uint32_t l = rv->head[w]; l != kNone; l = rv->link[l]) orphan(s, l);
  rv->head[w] = kNone;
  rv->got[w] = 0;
}

// 1. Reservations, from the records. A record whose slot is gone (a
// hand-on cut short) is an orphan.
Reservations read_reservations(Locked s) {
  const uint32_t n = s->permits, m = s->max_waiters;
  Reservations rv{std::vector<uint32_t>(m, kNone),
                  std::vector<uint32_t>(n, kNone), std::vector<uint32_t>(m, 0)};
  for (uint32_t l = n; l-- > 0;) {
    LeaseRecord &rec = s->leases[l];
    if (lease_state(rec) != kLeaseReserved) continue;
    const uint32_t w = __atomic_load_n(&rec.slot, __ATOMIC_RELAXED);
    const uint32_t word =
        w < m ? s->slots[w].word.load(std::memory_order_relaxed) : 0;
    if (word == kSlotWaiting || word == kSlotLeftQueued ||
        word == kSlotGranted || word == kSlotLeft) {
      rv.link[l] = rv.head[w];
      rv.head[w] = l;
      rv.got[w]++;
    } else {
      orphan(s, l);
    }
  }
  return rv;
}

// The slots' chains and counts from the copy, and each slot's weight as
// every reader clamps it (tables.h slot_weight), so check agrees.
void write_reservations(Locked s, const Reservations &rv) {
  for (uint32_t w = 0; w < s->max_waiters; w++) {
    WaiterSlot &ws = s->slots[w];
    if (ws.word.load(std::memory_order_relaxed) != kSlotFree)
      ws.weight = slot_weight(s, w);
    ws.lease = rv.head[w];
    ws.got = rv.got[w];
    for (uint32_t l = rv.head[w]; l != kNone; l = rv.link[l])
      s->leases[l].link = rv.link[l];
  }
}

// The head's ticket: only it may gather a reservation (strict FIFO).
uint64_t head_ticket(const shmsem_t *s) {
  uint64_t head = ~uint64_t{0};
  for (uint32_t w = 0; w < s->max_waiters; w++) {
    uint32_t word = s->slots[w].word.load(std::memory_order_relaxed);
    uint64_t t = __atomic_load_n(&s->slots[w].ticket, __ATOMIC_RELAXED);
    if ((word == kSlotWaiting || word == kSlotLeftQueued) && t < head) head = t;
  }
  return head;
}

// 2. A half-finished grant, consume or return: slot `w` against its
// reservation (in the copy). Slot words its owner may change meanwhile
// (leaving without the lock: WAITING -> LEFT_QUEUED, the others -> LEFT)
// are changed by CAS; a slot left either way is consistent, and is freed
// by whoever meets it next (grant.cc sweep_left()), never here.
void settle_slot(Locked s, Reservations *rv, uint32_t w, uint64_t head,
                 Wakes *wk) {
  Core *c = s->core;
  WaiterSlot &ws = s->slots[w];
  uint32_t word = ws.word.load(std::memory_order_relaxed);
  const uint32_t k = slot_weight(s, w), got = rv->got[w];
  const bool queued = word == kSlotWaiting || word == kSlotLeftQueued;
  if (word == kSlotGranted || word == kSlotLeft) {
    // All of it, or nothing (consumed); a part means the consumer died
    // between the records it made HELD: the rest go back.
    if (got != k && got != 0) orphan_reservation(s, rv, w);
    if (word == kSlotGranted && rv->got[w] == 0) (void)slot_drop_grant(s, ws);
  } else if (queued && c->closed.load(std::memory_order_relaxed)) {
    // A shutdown that died half-way. (A slot its owner left goes out of
    // the queue as LEFT: nobody waits on a closed semaphore.)
    orphan_reservation(s, rv, w);
    if (word == kSlotWaiting && slot_close(s, ws)) {
      wk->add(s, w);
      stat_bump(c->shutdown_failures);  // as shutdown would have
    } else {
      slot_mark_left(s, ws);
    }
  } else if (queued) {
    if (got &&
        (__atomic_load_n(&ws.ticket, __ATOMIC_RELAXED) != head || got > k)) {
      orphan_reservation(s, rv, w);  // not the head's: a writer's
    } else if (word == kSlotWaiting && got == k) {
      // A grant cut short between its last reservation and GRANTED:
      // completed (a CAS: the owner may leave without the lock; then the
      // records are orphans like any other). Under a rate limit it waits
      // for its start time: woken to learn it.
      if (c->rate_interval_ns.load(std::memory_order_relaxed) ||
          slot_grant(s, ws))
        wk->add(s, w);
      else
        orphan_reservation(s, rv, w);
    }
  } else if (word == kSlotCancelled || word == kSlotClosed) {
    orphan_reservation(s, rv, w);  // dropped when it was cancelled or closed
  } else if (word != kSlotFree) {
    orphan_reservation(s, rv, w);
    slot_to_free(s, ws);
  }
}

// A HELD_FAST lease under a process record that is not in use (a
// writer's): held by nobody we can name. HELD under this process, whose
// reclamation passes it on (the dead record's process may have held it; we
// cannot tell). Returns false, with *w reread, if the word changed (the
// lock-free path's: CAS only).
bool adopt_fast(Locked s, uint32_t l, uint64_t *w) {
  LeaseRecord &rec = s->leases[l];
  const uint32_t p = word_proc(*w);
  if (p < s->max_procs &&
      s->procs[p].state.load(std::memory_order_relaxed) == kProcUsed)
    return true;     // its process's, as it should be
  rec.slot = kNone;  // a token names it
  rec.link = kNone;
  return lease_lock_in(s, l, w, self_owner());
}

// 3. The lease free list and the array of leases in use, from the record
// states; any other word is FREE.
void rebuild_leases(Locked s) {
  Core *c = s->core;
  const uint32_t n = s->permits;
  c->free_lease = kNone;
  c->n_used_leases.store(0, std::memory_order_relaxed);
  for (uint32_t l = n; l-- > 0;) {
    LeaseRecord &rec = s->leases[l];
    uint64_t w = rec.word.load(std::memory_order_relaxed);
    switch (word_state(w)) {
      case kLeaseHeld:
      case kLeaseReserved:
        used_add(s, c->n_used_leases, s->used_leases, n, l, &rec.used_pos);
        break;
      case kLeaseRetired:
        break;
      case kLeaseHeldFast:
        if (adopt_fast(s, l, &w) || word_state(w) != kLeaseLoose) break;
        [[fallthrough]];  // released meanwhile
      case kLeaseLoose:
        // Free, and found by the sweeps only through a lane of its process
        // record that names it (fast_release() names it before freeing it).
        if (loose_named(s, l, w)) break;
        if (!lease_unloose(s, rec, &w))
          break;  // taken meanwhile (CAS: the only way it changes)
        lease_push(s, l);
        break;
      default:
        lease_to_free(s, rec);
        lease_push(s, l);
    }
  }
}

// Tickets start at 1 and grow by one a wait: none is 0, and none reaches
// kForgedTicket (2^63 waits at a billion a second take 292 years). A queued
// slot with such a ticket was written by a writer: it goes to the end of
// the queue, renumbered after the others, so that tickets stay in FIFO
// order and next_ticket above them (a ticket of 2^64 - 1 left nothing to
// count up to). Its owner, if it waits, finds its ticket changed and
// returns -ENOTRECOVERABLE, its wait withdrawn (waiter.cc).
constexpr uint64_t kForgedTicket = uint64_t{1} << 63;

bool forged_ticket(uint64_t t) { return t == 0 || t >= kForgedTicket; }

void renumber_forged_tickets(
    shmsem_t *s, const std::vector<std::pair<uint64_t, uint32_t>> &queued) {
  Core *c = s->core;
  uint64_t next = c->next_ticket;  // above max_valid, not forged (above)
  bool forged = false;
  for (const auto &q : queued) forged |= forged_ticket(q.first);
  if (!forged) return;
  for (const auto &q : queued)
    if (forged_ticket(q.first)) {
      queue_unlink(s, q.second);
      __atomic_store_n(&s->slots[q.second].ticket, next++, __ATOMIC_RELAXED);
      queue_append(s, q.second);
    }
  c->next_ticket = next;
}

// Process records in any state but FREE and USED: USED, so that the
// leases their process may hold lock-free stay its own, and the next pass
// judges the owner they name (a dead or zero one is freed then).
void settle_procs(Locked s) {
  for (uint32_t p = 0; p < s->max_procs; p++) {
    std::atomic<uint32_t> &st = s->procs[p].state;
    uint32_t v = st.load(std::memory_order_relaxed);
    if (v != kProcFree && v != kProcUsed)
      st.compare_exchange_strong(v, kProcUsed, std::memory_order_relaxed);
  }
}

// 3. The slot free list, the array of slots in use and the queue. The
// queue is ordered by (ticket, slot), each ticket read once: the sort must
// never read the segment, where a writer may change tickets under it, and
// std::sort with an inconsistent order runs off the ends of its array (an
// adversarial test corrupted the heap that way).
void rebuild_slots(Locked s) {
  Core *c = s->core;
  const uint32_t m = s->max_waiters;
  std::vector<std::pair<uint64_t, uint32_t>> queued;
  c->free_slot = kNone;
  c->n_used_slots.store(0, std::memory_order_relaxed);
  uint64_t max_valid = 0;
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
    if (!forged_ticket(ticket)) max_valid = std::max(max_valid, ticket);
    if (word == kSlotWaiting || word == kSlotLeftQueued)
      queued.emplace_back(ticket, w);
  }
  // FIFO among the live waiters: tickets were stored before each commit.
  std::sort(queued.begin(), queued.end());
  c->head = c->tail = kNone;
  c->waiting.store(0, std::memory_order_relaxed);
  for (const auto &q : queued) queue_append(s, q.second);
  if (c->next_ticket <= max_valid || forged_ticket(c->next_ticket))
    c->next_ticket = max_valid + 1;
  renumber_forged_tickets(s, queued);
}

// 3. The weighted leases' chains (section 13), from the records: each
// lease a token names (HELD, not kMember) is walked once (chain.h) and its
// records relinked from the copy; a record another chain reached first
// ends the chain; a kMember record no chain reaches links nowhere. (A
// stale link, to a record that left, would be harmless, but check would
// have to tell it from a writer's: none is left.)
void rebuild_weighted(Locked s) {
  const uint32_t n = s->permits;
  std::vector<bool> reached(n, false);
  for (uint32_t l = 0; l < n; l++) {
    LeaseRecord &rec = s->leases[l];
    if (lease_state(rec) != kLeaseHeld || rec.slot == kMember) continue;
    Chain ch;
    (void)walk_lease(s, l, &ch);
    for (uint32_t i = 1; i < ch.size(); i++)
      if (reached[ch[i]]) {
        ch.truncate(i);
        break;
      }
    for (uint32_t i = 0; i < ch.size(); i++) {
      reached[ch[i]] = true;
      s->leases[ch[i]].link = i + 1 < ch.size() ? ch[i + 1] : kNone;
    }
  }
  for (uint32_t l = 0; l < n; l++)
    if (!reached[l] && lease_state(s->leases[l]) == kLeaseHeld)
      s->leases[l].link = kNone;
}

// 2. Every slot against its reservation.
void finish_slots(Locked s, Reservations *rv, Wakes *wk) {
  const uint64_t head = head_ticket(s);
  for (uint32_t w = 0; w < s->max_waiters; w++) settle_slot(s, rv, w, head, wk);
}

}  // namespace

void repair(Locked s) {
  SHMSEM_HOOK(REPAIR_LOCKED);
  Core *c = s->core;
  stat_bump(c->repairs);
  Wakes wakes;
  Wakes *wk = &wakes;
  // The rate words first (the creator's, clamped): whether a full head
  // waits for its start time or is granted depends on them (a writer's
  // interval on a semaphore without a rate left a full head waiting).
  (void)rate_clamp(s, mono_ns());
  Reservations rv = read_reservations(s);
  SHMSEM_HOOK(REPAIR_CHAINS_READ);
  if (c->closed.load(std::memory_order_relaxed))
    c->closed.store(1, std::memory_order_relaxed);
  finish_slots(s, &rv, wk);
  write_reservations(s, rv);
  rebuild_leases(s);
  rebuild_slots(s);
  settle_procs(s);
  store_counters(s, census(s));
  rebuild_weighted(s);

  // 4. The watcher role, if its holder's slot is gone.
  uint32_t wt = c->watcher;
  uint32_t wword = wt < s->max_waiters
                       ? s->slots[wt].word.load(std::memory_order_relaxed)
                       : kSlotFree;
  if (wword == kSlotFree || slot_left(wword)) {
    c->watcher = c->tail;
    if (c->tail != kNone) wk->add(s, c->tail);
  }

  // 5. A resize cut short is finished: the records follow the capacity.
  // Then a releaser that died after freeing its lease: permits free while
  // the head gathers break INV-NOBYPASS; hand them on.
  settle_capacity(s, wk);
  feed_head(s, wk);
  // 6. Leases a lock-free release freed while waiters queue.
  sweep_loose(s);
  wakes.wake_all(s);
}

}  // namespace shmsem::detail
