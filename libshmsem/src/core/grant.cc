// Granting a permit: the hand-off from a releasing (or dead) holder to the
// head of the queue, and the waiter's side of it. See docs/DESIGN.md §5-6.
#include <errno.h>

#include <algorithm>

#include "clock.h"
#include "futex.h"
#include "hist.h"
#include "hooks.h"
#include "rate.h"
#include "chain.h"
#include "grant.h"
#include "tables.h"
#include "transitions.h"

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
void free_left(Locked s, uint32_t w) {
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

void sweep_left(Locked s, uint32_t w, Wakes *wk) {
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

// Takes the records RESERVED for slot `w` out of its reservation, into
// `out` (chain.h: read once). A chain that leaves the records reserved for
// `w` is cut there: the rest are orphans, which the repair at unlock
// returns to the pool.
void take_reservation(Locked s, uint32_t w, Chain *out) {
  WaiterSlot &ws = s->slots[w];
  if (walk_reservation(s, w, out) != ChainEnd::kEnd) mark_corrupt(s);
  counter_add(s->core->reserved, -int32_t(out->size()));
  ws.lease = kNone;
  ws.got = 0;
}

// Whether a shrink waits for this permit: `retiring` as far as the
// geometry allows it (INV-CAPACITY); a count past that is a writer's,
// repaired at unlock, and retires nothing meanwhile.
bool shrink_waits(shmsem_t *s) {
  const Core *c = s->core;
  const uint64_t retiring = c->retiring.load(std::memory_order_relaxed);
  if (!retiring) return false;
  if (uint64_t{c->capacity.load(std::memory_order_relaxed)} +
          c->retired.load(std::memory_order_relaxed) + retiring !=
      s->permits) {
    mark_corrupt(s);
    return false;
  }
  return true;
}

void retire(Locked s, uint32_t l) {
  Core *c = s->core;
  LeaseRecord &rec = s->leases[l];
  counter_add(c->retiring, -1);
  lease_unlist(s, l);
  lease_retire(s, rec);  // commit
  counter_add(c->retired, 1);
}

// Head `w`, whose owner left without the lock, is no waiter any more:
// what was reserved for it goes into `todo` at `next`, and its slot is
// freed (the caller unlinked it). Counted in *freed.
void drop_left_head(Locked s, uint32_t w, Chain *todo, uint32_t next,
                    uint32_t *freed) {
  ++*freed;
  Chain left;
  take_reservation(s, w, &left);
  todo->insert(next, left);
  free_left(s, w);
}

// Lease `l` back to the pool: nobody queued, or a head that has all it
// asked for and waits for its start time (the rate), where no newcomer
// takes it while anyone waits (INV-NOBYPASS).
void to_pool(Locked s, uint32_t l) {
  lease_to_free(s, s->leases[l]);  // commit
  SHMSEM_HOOK(RELEASE_FREED);
  lease_free(s, l);
  counter_add(s->core->available, 1);
}

// Strict FIFO: lease `l` goes to head `w`'s reservation, never to the
// pool, so no newcomer can take it in between (INV-NOBYPASS); the head
// is granted once it has all it asked for and the rate allows. A head
// that left meanwhile is dropped (drop_left_head).
void reserve_for_head(Locked s, uint32_t l, uint32_t w, Chain *todo,
                      uint32_t next, uint32_t *freed, Wakes *wk) {
  Core *c = s->core;
  LeaseRecord &rec = s->leases[l];
  WaiterSlot &ws = s->slots[w];
  rec.slot = w;
  rec.link = ws.lease;  // checked when the chain is walked
  rec.since_ns.store(coarse_ns(), std::memory_order_relaxed);
  const uint64_t gen = next_gen(lease_gen(rec));
  SHMSEM_HOOK(RELEASE_CHOSEN);
  lease_reserve(s, rec, gen);  // commit
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
  if (slot_grant(s, ws)) {
    rate_take(s, now);
    wk->add(s, w);
    return;
  }
  // It left after we looked (LEFT_QUEUED, unlinked above): its
  // reservation, this record included, goes on. A crash before the next
  // commit leaves RESERVED leases whose slot is not GRANTED: repair
  // returns them to the pool.
  drop_left_head(s, w, todo, next, freed);
}

// Passes lease `l`: retirement, the head, or the pool (pass_permit). New
// records to pass (a left head's reservation) go into `todo` at `next`,
// before the rest. *freed counts the left heads freed in the whole pass:
// more than there are slots means a damaged queue, which stops the loop.
void place(Locked s, uint32_t l, Chain *todo, uint32_t next, uint32_t *freed,
           Wakes *wk) {
  Core *c = s->core;
  // A shrink takes released permits before anyone else.
  if (shrink_waits(s)) return retire(s, l);
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
      // Its owner left without the lock: not a waiter any more. What was
      // reserved for it goes on after this record.
      queue_unlink(s, w);
      drop_left_head(s, w, todo, next, freed);
      continue;
    }
    if (w != kNone && word != kSlotWaiting) {
      // A head that is no queued slot: the pool takes the permit, and the
      // repair at unlock hands it to the real head (INV-NOBYPASS).
      mark_corrupt(s);
      w = kNone;
    }
    if (w == kNone || head_full(s, w)) return to_pool(s, l);
    if (barging(s)) {
      // The bounded policy, within the head's bound: the pool, for
      // whoever comes first; the head is nudged to race for it.
      to_pool(s, l);
      return wk->add(s, w);
    }
    return reserve_for_head(s, l, w, todo, next, freed, wk);
  }
}

// Passes each record of `todo` (a private copy: chain.h), in order.
void pass_todo(Locked s, Chain *todo, Wakes *wk) {
  uint32_t freed = 0;
  for (uint32_t i = 0; i < todo->size(); i++) {
    const uint32_t l = (*todo)[i];
    s->leases[l].link = kNone;
    place(s, l, todo, i + 1, &freed, wk);
  }
}

}  // namespace

void pass_permit(Locked s, uint32_t l, Wakes *wk) {
  Chain one;
  one.push_back(l);
  pass_todo(s, &one, wk);
}

void pass_chain(Locked s, const Chain &c, Wakes *wk) {
  Chain todo = c;
  pass_todo(s, &todo, wk);
}

bool wants_permit(const shmsem_t *s) {
  const Core *c = s->core;
  if (c->retiring.load(std::memory_order_relaxed)) return true;
  if (c->closed.load(std::memory_order_relaxed) || barging(s)) return false;
  uint32_t h = c->head;
  return h != kNone && slot_ok(s, h) && !head_full(s, h);
}

void feed_head(Locked s, Wakes *wk) {
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

bool policy_sync(Locked s, Wakes *wk) {
  Core *c = s->core;
  if (!s->bound_ns) {
    // FIFO: always 0; a writer's 1 is put right (derived state).
    if (c->hand_off.load(std::memory_order_relaxed))
      c->hand_off.store(0, std::memory_order_relaxed);
    return false;
  }
  const uint32_t h = c->head;  // once: a writer may change it
  bool over = false;
  if (c->waiting.load(std::memory_order_relaxed) &&
      !c->closed.load(std::memory_order_relaxed) && slot_ok(s, h)) {
    const uint64_t enq = s->slots[h].enq_ns.load(std::memory_order_relaxed);
    const uint64_t now = mono_ns();
    // An enqueue time in the future is a writer's: the hand-off, which
    // keeps every promise of FIFO.
    over = enq > now || now - enq >= s->bound_ns;
  }
  if (over == (c->hand_off.load(std::memory_order_relaxed) != 0)) return false;
  c->hand_off.store(over ? 1 : 0, std::memory_order_relaxed);
  SHMSEM_HOOK(POLICY_HAND_OFF);
  // On: what newcomers could take goes to the head (the gate, opened to
  // the queue by the caller next, sweeps the lanes' LOOSE leases).
  if (over) feed_head(s, wk);
  return over;
}

void drop_reservation(Locked s, uint32_t w, Wakes *wk) {
  Chain todo;
  take_reservation(s, w, &todo);
  pass_todo(s, &todo, wk);
  feed_head(s, wk);
}

bool grant_due_head(Locked s, uint32_t w, Wakes *wk) {
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
  if (!slot_grant(s, ws)) {
    // Only its owner changes it without the lock, and the owner is us.
    mark_corrupt(s);
    return false;
  }
  rate_take(s, now);
  // Permits that waited in the pool behind it go to the next head.
  feed_head(s, wk);
  return true;
}

namespace {

// Granted lease of `k` records (`ch`, read once and whole) becomes the
// caller's: HELD_FAST under `proc` if it is one permit and the process has
// a record, else HELD, the others first and the one the token names last
// (the commit): a thread that dies in between leaves its process holding
// them, which reclamation passes on once the process is gone. Returns the
// token's generation.
uint64_t consume_grant(Locked s, uint32_t w, uint32_t proc, const Chain &ch) {
  Core *c = s->core;
  WaiterSlot &ws = s->slots[w];
  const uint32_t k = ch.size();
  LeaseRecord &rec = s->leases[ch[0]];
  const uint64_t gen = lease_gen(rec);
  if (k == 1 && proc < s->max_procs) {
    // Under the waiter's process record: its release can be lock-free.
    lease_unlist(s, ch[0]);
    lease_hold_fast(s, rec, proc, gen);  // commit
  } else {
    const Owner o = process_of(ws.owner);
    for (uint32_t i = 1; i < k; i++) {
      LeaseRecord &x = s->leases[ch[i]];
      x.owner = o;       // named before HELD (pass_permit)
      x.slot = kMember;  // no token names it
      x.link = i + 1 < k ? ch[i + 1] : kNone;  // the copy, not the segment
      lease_hold(s, x, lease_gen(x));
    }
    rec.owner = o;
    rec.slot = kNone;
    rec.link = k > 1 ? ch[1] : kNone;
    lease_hold(s, rec, gen);  // commit
    counter_add(c->held, int32_t(k));
  }
  counter_add(c->reserved, -int32_t(k));
  ws.lease = kNone;
  ws.got = 0;
  return gen;
}

}  // namespace

int finish_slot(Locked s, uint32_t w, uint32_t proc, shmsem_lease_t *lease,
                Wakes *wk) {
  WaiterSlot &ws = s->slots[w];
  uint32_t word = ws.word.load(std::memory_order_acquire);
  int r;
  switch (word) {
    case kSlotGranted: {
      // Its reservation: `k` records RESERVED for it, linked from
      // ws.lease. The token names that first one.
      const uint32_t k = slot_weight(s, w);
      Chain ch;
      const ChainEnd end = walk_reservation(s, w, &ch);
      SHMSEM_HOOK(WAIT_CHAIN_READ);
      if (end != ChainEnd::kEnd || ch.size() != k) {
        // A writer's: the grant cannot be handed over whole. The caller
        // owns nothing: what the walk found goes on, the slot is freed,
        // and the repair at unlock returns the rest (RESERVED for a FREE
        // slot) to the pool.
        mark_corrupt(s);
        drop_reservation(s, w, wk);
        slot_free(s, w);  // commit
        return -EUCLEAN;
      }
      const uint64_t gen = consume_grant(s, w, proc, ch);
      uint64_t now = mono_ns();
      uint64_t enq = ws.enq_ns.load(std::memory_order_relaxed);
      uint64_t waited = now > enq ? now - enq : 0;
      record_wait(s, waited);
      note_handoff(s, waited);
      SHMSEM_HOOK(WAIT_CONSUME_COMMITTED);
      fill_token(s, ch[0], gen, lease);
      r = 0;
      break;
    }
    case kSlotCancelled:
      r = -ECANCELED;
      break;
    case kSlotClosed:
      r = -ESHUTDOWN;
      break;
    default:
      // FREE or WAITING here would mean a reclamation pass judged this live
      // process dead (e.g. a PID namespace mix-up); the slot is not ours.
      return -ENOTRECOVERABLE;
  }
  slot_free(s, w);
  return r;
}

}  // namespace shmsem::detail
