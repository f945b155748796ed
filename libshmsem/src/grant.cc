// Granting a permit: the hand-off from a releasing (or dead) holder to the
// head of the queue, and the waiter's side of it. See docs/DESIGN.md §5-6.
#include <errno.h>

#include <algorithm>

#include "clock.h"
#include "futex.h"
#include "hist.h"
#include "hooks.h"
#include "rate.h"
#include "tables.h"

namespace shmsem::detail {

void record_wait(shmsem_t *s, uint64_t ns) {
  stat_bump(s->core->wait_hist[hist_bucket(ns)]);
  stat_bump(s->core->wait_sum_ns, ns);
  stat_bump(s->core->acquisitions);
}

void record_hold(shmsem_t *s, uint64_t since_ns) {
  const uint64_t now = coarse_ns();
  const uint64_t ns = now > since_ns ? now - since_ns : 0;
  stat_bump(s->core->hold_hist[hold_bucket(ns)]);
  stat_bump(s->core->hold_sum_ns, ns);
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

// Slot `w`, left by its owner, unlinked, its reservation dropped, goes back
// to the free list. The waiter could not count its outcome (that takes the
// lock): it said why it left (left_why), and it is counted here, once. If
// it held the watcher role, the role passes on now (a wake under the lock:
// rare).
void free_left(shmsem_t *s, uint32_t w) {
  // Pairs with the owner's CAS to LEFT / LEFT_QUEUED (release), which our
  // caller read (relaxed) to find the slot left: its left_why store is
  // visible.
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint32_t why = __atomic_load_n(&s->slots[w].left_why, __ATOMIC_RELAXED);
  slot_free(s, w);  // commit
  if (why == kLeftCancelled)
    stat_bump(s->core->cancellations);
  else if (why != kLeftCounted)
    stat_bump(s->core->timeouts);
  uint32_t nw = watcher_leave(s, w);
  if (nw != kNone) wake_slot(s, nw);
}

void sweep_left(shmsem_t *s, uint32_t w, Wakes *wk) {
  WaiterSlot &ws = s->slots[w];
  uint32_t word = ws.word.load(std::memory_order_relaxed);
  if (word == kSlotLeftQueued)
    queue_unlink(s, w);
  else if (word != kSlotLeft)
    return;
  // Its reservation (a grant it gave up, or a head's partial one) goes on
  // (a crash before the slot is freed leaves the slot LEFT with nothing
  // reserved for it: freed by whoever meets it next).
  drop_reservation(s, w, wk);
  free_left(s, w);
}

namespace {

bool head_full(const shmsem_t *s, uint32_t w) {
  return s->slots[w].got >= slot_weight(s, w);
}

// Takes the records RESERVED for slot `w` out of its reservation: returns
// the first, linked to the others and ending at *last (kNone: none). Each
// is checked; a chain that leaves the records reserved for `w` stops there
// (the rest are orphans, which the repair at unlock returns to the pool).
uint32_t take_reservation(shmsem_t *s, uint32_t w, uint32_t *last) {
  WaiterSlot &ws = s->slots[w];
  uint32_t first = ws.lease, end = kNone, n = 0;
  for (uint32_t l = first; l != kNone; l = s->leases[l].link) {
    if (!lease_ok(s, l) || n >= s->permits ||
        lease_state(s->leases[l]) != kLeaseReserved ||
        s->leases[l].slot != w) {
      mark_corrupt(s);
      break;
    }
    end = l;
    n++;
  }
  if (end == kNone) first = kNone;
  else s->leases[end].link = kNone;
  counter_add(s->core->reserved, -int32_t(n));
  ws.lease = kNone;
  ws.got = 0;
  *last = end;
  return first;
}

// The reservation of `w` goes first, then `todo`.
uint32_t splice(shmsem_t *s, uint32_t w, uint32_t todo) {
  uint32_t last;
  uint32_t first = take_reservation(s, w, &last);
  if (first == kNone) return todo;
  s->leases[last].link = todo;
  return first;
}

void retire(shmsem_t *s, uint32_t l) {
  Core *c = s->core;
  LeaseRecord &rec = s->leases[l];
  counter_add(c->retiring, -1);
  lease_unlist(s, l);
  lease_store(rec, kLeaseRetired, lease_gen(rec));  // commit
  counter_add(c->retired, 1);
}

// Passes lease `l`: retirement, the head, or the pool (pass_permit). New
// records to pass (a left head's reservation) are put before *todo.
// *freed counts the left heads freed in the whole pass: more than there are
// slots means a damaged queue, which stops the loop.
void place(shmsem_t *s, uint32_t l, uint32_t *todo, uint32_t *freed,
           Wakes *wk) {
  Core *c = s->core;
  LeaseRecord &rec = s->leases[l];
  // A shrink takes released permits before anyone else.
  if (c->retiring.load(std::memory_order_relaxed) > 0) return retire(s, l);
  // Each round frees a slot whose owner left, or ends.
  for (;;) {
    uint32_t w = c->closed.load(std::memory_order_relaxed) ? kNone : c->head;
    if (w != kNone && *freed > s->max_waiters) {
      mark_corrupt(s);
      w = kNone;
    }
    uint32_t word = w != kNone && slot_ok(s, w)
                        ? s->slots[w].word.load(std::memory_order_relaxed)
                        : 0;
    if (w != kNone && word == kSlotLeftQueued) {
      ++*freed;
      // Its owner left without the lock: not a waiter any more. What was
      // reserved for it goes on after this record.
      queue_unlink(s, w);
      *todo = splice(s, w, *todo);
      free_left(s, w);
      continue;
    }
    if (w != kNone && word != kSlotWaiting) {
      // A head that is no queued slot: the pool takes the permit, and the
      // repair at unlock hands it to the real head (INV-NOBYPASS).
      mark_corrupt(s);
      w = kNone;
    }
    if (w == kNone || head_full(s, w)) {
      // Nobody queued, or a head that has all it asked for and waits for
      // its start time (the rate): back to the pool, where no newcomer
      // takes it while anyone waits (INV-NOBYPASS).
      lease_store(rec, kLeaseFree, lease_gen(rec));  // commit
      SHMSEM_HOOK(RELEASE_FREED);
      lease_free(s, l);
      counter_add(c->available, 1);
      return;
    }
    // Strict FIFO: the permit goes to the head's reservation, never to the
    // pool, so no newcomer can take it in between (INV-NOBYPASS).
    WaiterSlot &ws = s->slots[w];
    rec.slot = w;
    rec.link = ws.lease;  // checked when the chain is walked
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
    ws.lease = l;
    ws.got = ws.got + 1;
    SHMSEM_HOOK(RELEASE_RESERVED);
    if (ws.got < slot_weight(s, w)) return;  // the head gathers more
    const uint64_t now =
        c->rate_interval_ns.load(std::memory_order_relaxed) ? mono_ns() : 0;
    if (!rate_ok(s, now)) {
      // All its permits, but no token yet: it sleeps until its start time,
      // which it learns when woken now (once).
      wk->add(s, w);
      return;
    }
    queue_unlink(s, w);
    // Release: a waiter that reads GRANTED sees the lease fields above. A
    // CAS, not a store: the owner may leave without the lock at any moment.
    uint32_t expected = kSlotWaiting;
    if (ws.word.compare_exchange_strong(expected, kSlotGranted,
                                        std::memory_order_release,
                                        std::memory_order_relaxed)) {
      rate_take(s, now);
      wk->add(s, w);
      return;
    }
    // It left after we looked (LEFT_QUEUED, unlinked above): its
    // reservation, this record included, goes on. A crash before the next
    // commit leaves RESERVED leases whose slot is not GRANTED: repair
    // returns them to the pool.
    ++*freed;
    *todo = splice(s, w, *todo);
    free_left(s, w);
    return;
  }
}

// Passes `todo` and every record linked from it.
void pass_todo(shmsem_t *s, uint32_t todo, Wakes *wk) {
  uint32_t freed = 0;
  while (todo != kNone) {
    if (!lease_ok(s, todo)) {
      mark_corrupt(s);  // the rest stay where they are until repair
      return;
    }
    const uint32_t l = todo;
    todo = s->leases[l].link;
    s->leases[l].link = kNone;
    place(s, l, &todo, &freed, wk);
  }
}

}  // namespace

void pass_permit(shmsem_t *s, uint32_t l, Wakes *wk) {
  s->leases[l].link = kNone;
  pass_todo(s, l, wk);
}

void pass_chain(shmsem_t *s, uint32_t l, Wakes *wk) { pass_todo(s, l, wk); }

bool wants_permit(const shmsem_t *s) {
  const Core *c = s->core;
  if (c->retiring.load(std::memory_order_relaxed)) return true;
  if (c->closed.load(std::memory_order_relaxed)) return false;
  uint32_t h = c->head;
  return h != kNone && slot_ok(s, h) && !head_full(s, h);
}

void feed_head(shmsem_t *s, Wakes *wk) {
  Core *c = s->core;
  for (uint32_t i = 0; i < s->permits; i++) {
    if (!c->available.load(std::memory_order_relaxed) || !wants_permit(s))
      return;
    uint32_t l = lease_pop(s);
    if (l == kNone) return;
    counter_add(c->available, -1);
    pass_permit(s, l, wk);
  }
}

void drop_reservation(shmsem_t *s, uint32_t w, Wakes *wk) {
  uint32_t last;
  uint32_t first = take_reservation(s, w, &last);
  if (first != kNone) pass_chain(s, first, wk);
  feed_head(s, wk);
}

bool grant_due_head(shmsem_t *s, uint32_t w, Wakes *wk) {
  Core *c = s->core;
  // Not while a shrink waits: the head's reservation would then be above
  // the capacity (settle_capacity takes it back; this is the guard).
  if (c->head != w || c->closed.load(std::memory_order_relaxed) ||
      c->retiring.load(std::memory_order_relaxed))
    return false;
  WaiterSlot &ws = s->slots[w];
  if (ws.word.load(std::memory_order_relaxed) != kSlotWaiting ||
      !head_full(s, w))
    return false;
  const uint64_t now = mono_ns();
  if (!rate_ok(s, now)) return false;
  queue_unlink(s, w);
  uint32_t expected = kSlotWaiting;
  if (!ws.word.compare_exchange_strong(expected, kSlotGranted,
                                       std::memory_order_release,
                                       std::memory_order_relaxed)) {
    // Only its owner changes it without the lock, and the owner is us.
    mark_corrupt(s);
    return false;
  }
  rate_take(s, now);
  // Permits that waited in the pool behind it go to the next head.
  feed_head(s, wk);
  return true;
}

int finish_slot(shmsem_t *s, uint32_t w, uint32_t proc,
                shmsem_lease_t *lease) {
  Core *c = s->core;
  WaiterSlot &ws = s->slots[w];
  uint32_t word = ws.word.load(std::memory_order_acquire);
  int r;
  switch (word) {
    case kSlotGranted: {
      // Its reservation: `k` records RESERVED for it, linked from
      // ws.lease. The token names that first one.
      const uint32_t k = slot_weight(s, w);
      const uint32_t l = ws.lease;
      uint32_t n = 0;
      for (uint32_t x = l; x != kNone; x = s->leases[x].link) {
        if (!lease_ok(s, x) || n >= k ||
            lease_state(s->leases[x]) != kLeaseReserved ||
            s->leases[x].slot != w) {
          n = 0;
          break;
        }
        n++;
      }
      if (n != k) {
        mark_corrupt(s);  // repair frees a GRANTED slot without its leases
        return -EUCLEAN;
      }
      SHMSEM_HOOK(WAIT_CHAIN_READ);
      LeaseRecord &rec = s->leases[l];
      const uint64_t gen = lease_gen(rec);
      if (k == 1 && proc < s->max_procs) {
        // Under the waiter's process record: its release can be lock-free.
        lease_unlist(s, l);
        rec.word.store(lease_word(kLeaseHeldFast, proc, gen),
                       std::memory_order_release);  // commit
      } else {
        // The others first, the one the token names last (the commit): a
        // thread that dies in between leaves its process holding them,
        // which reclamation passes on once the process is gone.
        const Owner o = process_of(ws.owner);
        for (uint32_t x = rec.link; x != kNone; x = s->leases[x].link) {
          s->leases[x].owner = o;  // named before HELD (pass_permit)
          s->leases[x].slot = kMember;  // no token names it
          lease_store(s->leases[x], kLeaseHeld, lease_gen(s->leases[x]));
        }
        rec.owner = o;
        rec.slot = kNone;
        lease_store(rec, kLeaseHeld, gen);  // commit
        counter_add(c->held, int32_t(k));
      }
      counter_add(c->reserved, -int32_t(k));
      ws.lease = kNone;
      ws.got = 0;
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
