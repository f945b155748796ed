#include "waiter.h"

#include <errno.h>

#include "chain.h"
#include "clock.h"
#include "fastpath.h"
#include "futex.h"
#include "hooks.h"
#include "grant.h"
#include "section.h"
#include "owner.h"
#include "rate.h"
#include "reclaim.h"
#include "tables.h"
#include "transitions.h"

namespace shmsem::detail {

namespace {

// Under the lock, nobody queued: one free permit for this process (the
// free list, or a lease a lock-free release left in a lane), HELD_FAST
// under process record `proc`, or HELD with `me` as its owner if proc is
// kNoProc; kNone if none. `hook`: the crash tests' point between the pop
// and the commit (the single permit's; a weighted acquire has its own).
uint32_t take_free(Locked s, uint32_t proc, const Owner &me, uint64_t *gen,
                   bool hook) {
  Core *c = s->core;
  uint32_t l = lease_pop(s);
  if (l == kNone) return take_any_loose(s, proc, me, gen);
  if (hook) SHMSEM_HOOK(ACQUIRE_LEASE_POPPED);
  LeaseRecord &rec = s->leases[l];
  rec.slot = kNone;
  rec.since_ns.store(coarse_ns(), std::memory_order_relaxed);
  *gen = next_gen(lease_gen(rec));
  if (proc != kNoProc) {
    lease_unlist(s, l);
    lease_hold_fast(s, rec, proc, *gen);  // commit
  } else {
    rec.owner = process_of(me);
    lease_hold(s, rec, *gen);  // commit
    counter_add(c->held, 1);
  }
  counter_add(c->available, -1);
  return l;
}

// Permits taken at once but fewer than asked (weighted): linked from
// `chain`, HELD by this process until they become this waiter's
// reservation or go back.
struct Partial {
  uint32_t chain = kNone, taken = 0;
  Chain mine;  // the same records, in private memory (chain.h)
};

// n records, each HELD by this process, linked from the last one taken:
// the one the token names (section 13); kNone if fewer were free (those
// stay in `p`).
uint32_t take_weighted(Locked s, uint32_t weight, const Owner &me, Partial *p,
                       uint64_t *gen) {
  for (; p->taken < weight; p->taken++) {
    const uint32_t l = take_free(s, kNoProc, me, gen, false);
    if (l == kNone) break;
    s->leases[l].link = p->chain;
    s->leases[l].slot = kMember;  // no token names it (section 13)
    p->chain = l;
    p->mine.push_back(l);
    SHMSEM_HOOK(ACQUIRE_LEASE_POPPED);
  }
  const uint32_t l = p->taken == weight ? p->chain : kNone;
  if (l != kNone) s->leases[l].slot = kNone;  // the one the token names
  return l;
}

// `weight` free permits and a token if the rate asks for one, taken: true
// with `lease` filled (what a weighted take found too few of stays in `p`).
// One permit is held under process record `proc` (kNoProc: none), so that
// its release (and this thread's next acquire) can be lock-free.
bool take_now(Locked s, uint32_t weight, uint32_t proc, const Owner &me,
              uint64_t waited, Partial *p, shmsem_lease_t *lease) {
  Core *c = s->core;
  const uint64_t now =
      c->rate_interval_ns.load(std::memory_order_relaxed) ? mono_ns() : 0;
  if (!rate_ok(s, now)) return false;
  uint64_t gen = 0;
  const uint32_t l = weight == 1 ? take_free(s, proc, me, &gen, true)
                                 : take_weighted(s, weight, me, p, &gen);
  if (l == kNone) return false;
  rate_take(s, now);
  record_wait(s, waited);
  SHMSEM_HOOK(ACQUIRE_COMMITTED);
  fill_token(s, l, gen, lease);
  return true;
}

// A free permit and nobody queued (INV-NOBYPASS: while anyone waits, no
// lease is FREE or LOOSE, unless the head has all it asked for and waits
// for its start time: this test is the FIFO rule; or the bounded policy
// lets newcomers past a head within its bound): true with `lease` filled.
bool take_at_once(Locked s, uint32_t weight, const Owner &me, Partial *p,
                  shmsem_lease_t *lease) {
  if (s->core->waiting.load(std::memory_order_relaxed) != 0 && !barging(s))
    return false;
  return take_now(s, weight, self_proc(s), me, 0, p, lease);
}

// What a weighted take found too few of goes back (to the pool, or to
// the head's reservation).
void give_back(Locked s, Partial *p, Wakes *wk) {
  if (p->chain == kNone) return;
  counter_add(s->core->held, -int32_t(p->taken));
  pass_chain(s, p->mine, wk);
  *p = Partial{};
}

// No permit now: a slot at the tail of the queue (1, *w filled), or
// -EAGAIN (may not queue), -EBUSY (the queue is full). What a weighted
// acquire took goes to its reservation, or back.
int enqueue(Locked s, uint32_t weight, bool may_queue, const Owner &me,
            Partial *p, Wakes *wk, Waiter *w) {
  Core *c = s->core;
  uint32_t slot = may_queue ? slot_pop(s) : kNone;
  if (slot == kNone) {
    // Not enough for a weighted acquire that may not wait: they go back.
    give_back(s, p, wk);
    if (!may_queue) return -EAGAIN;
    stat_bump(c->queue_full);
    return -EBUSY;
  }
  SHMSEM_HOOK(ENQUEUE_SLOT_POPPED);
  WaiterSlot &ws = s->slots[slot];
  ws.owner = me;
  ws.lease = kNone;
  ws.weight = weight;
  ws.got = 0;
  ws.ticket = c->next_ticket++;
  ws.enq_ns.store(mono_ns(), std::memory_order_relaxed);
  // An async waiter left it at 1 for its whole wait (waiter_api.cc).
  ws.sleeping.store(0, std::memory_order_relaxed);
  slot_enqueue(s, ws);  // commit
  SHMSEM_HOOK(ENQUEUE_COMMITTED);
  const bool head = c->waiting.load(std::memory_order_relaxed) == 0;
  queue_append(s, slot);
  // The first waiter to find no watcher takes the role; it passes to the
  // tail when its holder leaves (watcher_leave). Not the newest waiter: in
  // a long queue every newcomer would displace a watcher asleep on its
  // first-period timer, which then wakes once for nothing (4000 queued
  // threads: 35 us per hand-off instead of 9).
  if (c->watcher == kNone) c->watcher = slot;
  if (p->chain != kNone && barging(s)) {
    // Behind others, or racing for the pool: what it took goes back.
    give_back(s, p, wk);
  } else if (p->chain != kNone) {
    // At the head with part of what it asked for: that becomes its
    // reservation (a crash before leaves them HELD by this process).
    counter_add(c->held, -int32_t(p->taken));
    pass_chain(s, p->mine, wk);
  } else if (head) {
    // At the head because the rate said no: the free permits become its
    // reservation (it then sleeps until its start time).
    feed_head(s, wk);
  }
  w->slot = slot;
  w->ticket = ws.ticket;
  return 1;
}

}  // namespace

int waiter_start(shmsem_t *s, uint32_t weight, bool may_queue,
                 const Limit *limit, Waiter *w, shmsem_lease_t *lease) {
  if (s->rdonly) return -EBADF;
  if (weight < 1 || weight > s->permits) return -EINVAL;
  // The lock-free path first: the lease this thread freed last, if it is
  // still free and nobody is queued (fastpath.h).
  if (weight == 1 && fast_acquire(s, lease) == 0) return 0;
  // Learnt before the lock: the first time in a process (or thread) it
  // costs system calls; after that it is a copy. A wait belongs to the
  // thread that waits, so a slot names the thread too; a lease only the
  // process.
  const Owner &me = may_queue ? self_thread_owner() : self_owner();
  // (A process in another PID namespace than the segment's never gets
  // here: the C API refuses it with -EXDEV, capi.cc.)
  Section sec(s, limit);
  if (sec.error()) return sec.error();
  SHMSEM_HOOK(ACQUIRE_LOCKED);
  if (s->core->closed.load(std::memory_order_relaxed)) return -ESHUTDOWN;
  Partial p;
  if (take_at_once(sec.locked(), weight, me, &p, lease)) return 0;
  return enqueue(sec.locked(), weight, may_queue, me, &p, sec.wakes(), w);
}

int waiter_start_by(shmsem_t *s, uint32_t weight, bool expired,
                    const Limit *limit, Waiter *w, shmsem_lease_t *lease) {
  int r = waiter_start(s, weight, !expired, limit, w, lease);
  if (r != -EAGAIN) return r;
  // No permit now and we may not wait: first reclaim permits of dead
  // holders (rate-limited to one pass per watch period), then retry.
  if (maybe_reclaim(s, limit) > 0)
    r = waiter_start(s, weight, false, limit, w, lease);
  if (r != -EAGAIN) return r;
  Section sec(s, limit);  // counters change only under the lock
  if (!sec.error()) stat_bump(s->core->timeouts);
  return -ETIMEDOUT;
}

int deadline_of(const timespec *ts, Deadline *d) {
  *d = Deadline{};
  if (!ts) return 0;
  if (int e = deadline_ns(ts, &d->ns)) return e;
  d->set = true;
  return 0;
}

uint64_t wake_by(const shmsem_t *s, uint32_t slot, uint64_t at,
                 uint64_t deadline) {
  auto sooner = [&at](uint64_t t) {
    const uint64_t d = deadline_wake_at(t);
    if (!at || d < at) at = d;
  };
  if (deadline) sooner(deadline);
  // At the head with all its permits, waiting for a token of the rate
  // limit: nobody wakes it at its start time but its own timer (or poll).
  if (uint64_t start = head_start_ns(s, slot)) sooner(start);
  // The bounded policy: the end of its bound, when (at the head) it turns
  // the hand-off on (policy_sync); nobody else does at that moment. Past
  // it, a waiter that becomes the head does so in a section, which turns
  // the hand-off on there.
  if (s->bound_ns) {
    const uint64_t end =
        s->slots[slot].enq_ns.load(std::memory_order_relaxed) + s->bound_ns;
    if (end > mono_ns()) sooner(end);
  }
  return at;
}

uint64_t head_start_ns(const shmsem_t *s, uint32_t slot) {
  const Core *c = s->core;
  if (!c->rate_interval_ns.load(std::memory_order_relaxed) ||
      __atomic_load_n(&c->head, __ATOMIC_RELAXED) != slot)
    return 0;
  const WaiterSlot &ws = s->slots[slot];
  if (__atomic_load_n(&ws.got, __ATOMIC_RELAXED) < slot_weight(s, slot))
    return 0;
  uint64_t t = rate_start(rate_read(s, mono_ns()));
  return t ? t : 1;
}

namespace {

// The lock stayed held by another past the caller's limit (`err`): leave
// without it (waiter.h). One CAS on our own word, from whatever it holds
// now: only we leave it, and lock holders change it by CAS from WAITING
// only, so the loop ends after at most one lost race (a grant, a cancel,
// a shutdown).
int leave_unlocked(shmsem_t *s, const Waiter &w, int err) {
  std::atomic<uint32_t> &word = *waiter_word(s, w);
  uint32_t v = word.load(std::memory_order_acquire);
  SHMSEM_HOOK(WAIT_LEAVING);
  const uint32_t why = err == -ETIMEDOUT ? kLeftTimedOut : kLeftCancelled;
  for (;;) {
    uint32_t to = kSlotLeft;
    int r = err;
    switch (v) {
      case kSlotWaiting:
        to = kSlotLeftQueued;
        break;
      case kSlotGranted:
        break;  // given up: the caller's outcome
      case kSlotCancelled:
        r = -ECANCELED;
        break;
      case kSlotClosed:
        r = -ESHUTDOWN;
        break;
      default:
        // FREE, or a value a writer put there: not ours any more (as in
        // finish_slot()); leave it alone.
        return -ENOTRECOVERABLE;
    }
    // Its canceller or the shutdown counted a CANCELLED or CLOSED slot
    // (whatever ended our wait for the lock: a cancelled waiter's limit
    // holds the fired handle, so err is -ECANCELED too). `v` is what the
    // CAS below compares with, refreshed when it fails.
    __atomic_store_n(
        &s->slots[w.slot].left_why,
        v == kSlotCancelled || v == kSlotClosed ? uint32_t{kLeftCounted} : why,
        __ATOMIC_RELAXED);
    if (slot_leave_unlocked(word, &v, to)) return r;
  }
}

// The bounded policy within the head's bound: the head `w` (WAITING, ours)
// takes what it asked for from the pool, as a newcomer would, and leaves
// the queue: true with `lease` filled. False if it is not the head, or not
// enough is free (what it took goes back).
bool head_takes(Locked s, uint32_t w, shmsem_lease_t *lease, Wakes *wk) {
  WaiterSlot &ws = s->slots[w];
  if (s->core->head != w) return false;
  const uint32_t weight = slot_weight(s, w);
  const Owner me = ws.owner;
  // What was reserved for it while the hand-off was on goes to the pool
  // first (barging: to_pool), where it takes it back with the rest.
  drop_reservation(s, w, wk);
  const uint64_t enq = ws.enq_ns.load(std::memory_order_relaxed);
  const uint64_t now = mono_ns();
  Partial p;
  if (!take_now(s, weight, weight == 1 ? self_proc(s) : kNoProc, me,
                now > enq ? now - enq : 0, &p, lease)) {
    give_back(s, &p, wk);
    return false;
  }
  SHMSEM_HOOK(HEAD_BARGE_TAKEN);
  queue_unlink(s, w);
  slot_free(s, w);  // commit: WAITING -> FREE
  // The next head races for what is left (it slept as a waiter behind us,
  // which nothing else would wake for that).
  const uint32_t next = s->core->head;  // once: a writer may change it
  if (slot_ok(s, next) && s->core->available.load(std::memory_order_relaxed))
    wk->add(s, next);
  return true;
}

// Completes the wait under the lock; `abandon_reason` != 0 tries to leave
// the queue first. Wakes the next watcher, if any, after unlocking.
int complete(shmsem_t *s, const Waiter &w, int abandon_reason,
             const Limit *limit, shmsem_lease_t *lease) {
  int r;
  Section sec(s, limit);
  if (sec.error()) return leave_unlocked(s, w, sec.error());
  {
    const Locked k = sec.locked();
    Wakes *wk = sec.wakes();
    SHMSEM_HOOK(WAIT_RETURN_LOCKED);
    WaiterSlot &ws = s->slots[w.slot];
    if (ws.ticket != w.ticket) {
      // Not our wait any more: reclamation withdrew it (its thread ended;
      // an async waiter may outlive the thread that started it) and the
      // slot may serve another waiter now. Touch nothing.
      return -ENOTRECOVERABLE;
    }
    const bool waiting =
        ws.word.load(std::memory_order_relaxed) == kSlotWaiting;
    if (abandon_reason && waiting) {
      // We win the one-shot transition: leave the queue owning nothing.
      // What was reserved for us (a weighted or rate-limited head) goes on.
      queue_unlink(s, w.slot);
      drop_reservation(k, w.slot, wk);
      slot_free(k, w.slot);  // commit: WAITING -> FREE
      stat_bump(abandon_reason == -ETIMEDOUT ? s->core->timeouts
                                             : s->core->cancellations);
      r = abandon_reason;
    } else if (waiting && barging(s)) {
      if (!head_takes(k, w.slot, lease, wk)) return -EINPROGRESS;
      r = 0;  // it raced for the pool and won
    } else if (waiting && !grant_due_head(k, w.slot, wk)) {
      return -EINPROGRESS;  // a poll at the head before its start time
    } else {
      // The grant (or another party) won.
      r = finish_slot(k, w.slot, self_proc(k), lease, wk);
    }
    // The new watcher takes the role up at its next wake-up; woken after
    // the unlock only if it sleeps (Wakes::run: one that spins or is about
    // to sleep sees the role at its next watch step): a hand-off between
    // two processes would otherwise pay a FUTEX_WAKE for the role on every
    // grant.
    const uint32_t next_watcher = watcher_leave(s, w.slot);
    if (next_watcher != kNone) wk->add(s, next_watcher);
  }
  return r;
}

// The bounded policy: a head races for the pool (within its bound) or turns
// the hand-off on (past it), either under the lock. Read without it: a
// stale answer costs a lock round or a wait until the next wake-up.
bool poll_at_head(const shmsem_t *s, uint32_t slot) {
  return __atomic_load_n(&s->core->head, __ATOMIC_RELAXED) == slot &&
         !s->core->hand_off.load(std::memory_order_relaxed);
}

}  // namespace

int waiter_poll(shmsem_t *s, const Waiter &w, const Limit *limit,
                shmsem_lease_t *lease) {
  // Acquire: pairs with the release CAS of the new word (grant.cc). A
  // slot that serves another ticket now is completed (as not ours) under
  // the lock. A head whose start time (the rate) has come grants itself.
  if (waiter_word(s, w)->load(std::memory_order_acquire) == kSlotWaiting &&
      __atomic_load_n(&s->slots[w.slot].ticket, __ATOMIC_RELAXED) == w.ticket) {
    uint64_t start = head_start_ns(s, w.slot);
    if (s->bound_ns && poll_at_head(s, w.slot)) start = 1;
    if (!start || start > mono_ns()) return -EINPROGRESS;
  }
  return complete(s, w, 0, limit, lease);
}

int waiter_abandon(shmsem_t *s, const Waiter &w, int reason, const Limit *limit,
                   shmsem_lease_t *lease) {
  return complete(s, w, reason, limit, lease);
}

void waiter_cancel_remote(shmsem_t *s, uint32_t slot, uint64_t ticket) {
  // The waiter may leave by itself while we wait for a lock held by a
  // stopped process: then there is nothing left to cancel.
  Limit limit;
  limit.watch = waiter_word(s, Waiter{slot, ticket});
  limit.watch_value = kSlotWaiting;
  Section sec(s, &limit);
  if (sec.error()) return;
  SHMSEM_HOOK(CANCEL_LOCKED);
  const Locked k = sec.locked();
  WaiterSlot &ws = s->slots[slot];
  if (ws.ticket != ticket ||
      ws.word.load(std::memory_order_relaxed) != kSlotWaiting)
    return;
  queue_unlink(s, slot);
  // A CAS: the owner may leave without the lock at any moment.
  const bool cancelled = slot_cancel(k, ws);  // commit
  if (cancelled) stat_bump(s->core->cancellations);
  // What was reserved for it goes on (a crash before leaves orphans,
  // which repair returns to the pool); one that left (LEFT_QUEUED,
  // unlinked above) is freed.
  drop_reservation(k, slot, sec.wakes());
  if (!cancelled) return free_left(k, slot);
  sec.unlock();
  // Woken whatever its `sleeping` says (cancels are rare): every sleeper
  // on the word, a stale async wait included, sees CANCELLED.
  wake_slot(s, slot);
}

}  // namespace shmsem::detail
