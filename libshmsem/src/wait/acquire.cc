// The blocking acquires, built on the non-blocking waiter (waiter.h).
#include "acquire.h"

#include <errno.h>

#include <unistd.h>

#include <algorithm>

#include "cancel.h"
#include "thread_cancel.h"
#include "fastpath.h"
#include "clock.h"
#include "futex.h"
#include "hooks.h"
#include "section.h"
#include "reclaim.h"
#include "tables.h"
#include "waiter.h"

namespace shmsem::detail {
namespace {

// The head spins before sleeping for about twice as long as recent
// hand-offs took (core.handoff_ns), within [kMinSpinNs, kMaxSpinNs]: a grant
// that comes within a few microseconds then costs neither a sleep nor a
// FUTEX_WAKE. The bound is about what a sleep and a wake-up cost here
// (bench/RESULTS.md, "Spinning"), so a spin that fails costs at most about
// as much again as sleeping at once would have.
constexpr uint64_t kMinSpinNs = 2'000;
constexpr uint64_t kMaxSpinNs = 20'000;

// Spinning helps only while the holder runs on another CPU. Where it cannot
// (this thread shares the holder's CPU, or more runnable contenders than
// CPUs), spins keep failing; each thread then halves its own cap on every
// failure and doubles it on every success, as glibc's adaptive mutexes do,
// and below kMinSpinNs it only tries again every kSpinRetry-th wait.
constexpr int kSpinRetry = 16;
thread_local uint32_t t_spin_cap = kMaxSpinNs;
thread_local uint32_t t_spin_skipped = 0;

int online_cpus() {
  static const int n = int(sysconf(_SC_NPROCESSORS_ONLN));
  return n;
}

// Returns true if the word left WAITING.
bool spin_while_waiting(shmsem_t *s, std::atomic<uint32_t> *word) {
  if (online_cpus() < 2) return false;  // the holder needs our CPU
  uint64_t cap = t_spin_cap;
  if (cap < kMinSpinNs) {
    if (++t_spin_skipped < kSpinRetry) return false;
    t_spin_skipped = 0;
    cap = kMinSpinNs;
  }
  uint64_t budget = std::clamp<uint64_t>(
      2 * uint64_t{s->core->handoff_ns.load(std::memory_order_relaxed)},
      kMinSpinNs, std::min<uint64_t>(cap, kMaxSpinNs));
  uint64_t end = 0;
  for (;;) {
    for (int i = 0; i < 32; i++) {
      if (word->load(std::memory_order_acquire) != kSlotWaiting) {
        t_spin_cap =
            uint32_t(std::min<uint64_t>(2 * cap + kMinSpinNs, kMaxSpinNs));
        return true;
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    uint64_t now = real_mono_ns();
    if (!end) {
      end = now + budget;
    } else if (now >= end) {
      t_spin_cap = uint32_t(cap / 2);
      return false;
    }
  }
}

// A thread cancelled (pthread_cancel) while asleep in the queue leaves it
// as a timeout would, from its cancellation cleanup: either it withdraws
// owning nothing, or the grant won and the permit passes on, since nobody
// will ever see that lease.
struct CancelCleanup {
  shmsem_t *s;
  const Waiter *w;
  shmsem_cancel_t *cancel;
  const Limit *limit;
  WatchState *watch;
};

void leave_on_thread_cancel(void *arg) {
  auto *c = static_cast<CancelCleanup *>(arg);
  c->s->slots[c->w->slot].sleeping.store(0, std::memory_order_relaxed);
  shmsem_lease_t lease;
  if (waiter_abandon(c->s, *c->w, -ECANCELED, c->limit, &lease) == 0)
    release(c->s, &lease);
  if (c->cancel) cancel_disarm(c->cancel);
  // The library is built without exceptions, so the cancellation unwind
  // runs no destructor of ours: give the watch's registration back here
  // (found by an adversarial test when each watcher had a ring of its own:
  // each cancelled watcher leaked it and its pidfds).
  c->watch->events.reset();
}

// The blocking acquires are cancellation points, as sem_wait(3) is, but
// only here, and only deferred: cancellation is enabled (type deferred)
// around the futex sleep, and a request is acted on by pthread_testcancel()
// just before and just after it. pthread_cancel() of a thread in deferred
// mode sends no signal, so the request is seen when the sleep ends, at the
// waiter's next periodic wake-up at the latest (one watch period, see
// reclaim.h). Asynchronous cancellation around the system call (what glibc
// does inside sem_wait) is not possible from outside glibc: its
// cancellation signal can be in flight when the window closes, and glibc
// 2.36 then acts on it inside a later cancellable call of the caller's,
// even with cancellation disabled (found by an adversarial test: a permit
// lost in 2-3% of cancelled rounds). glibc waits such signals out with
// private state we cannot read.
int sleep_cancellable(CancelCleanup *ctx, WatchState *watch,
                      const WatchPlan &plan, std::atomic<uint32_t> *on,
                      uint32_t value) {
  int r;
  pthread_cleanup_push(leave_on_thread_cancel, ctx);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
  pthread_testcancel();
  r = plan.events ? watch->events.wait(on, value, plan.wake_at)
                  : futex_wait(on, value, plan.wake_at);
  pthread_testcancel();
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
  pthread_cleanup_pop(0);
  return r;
}

// A queued blocking acquire: what each turn of its wait needs.
struct Wait {
  shmsem_t *s;
  Waiter w;
  const Limit *limit;
  shmsem_cancel_t *cancel;
  Deadline dl;
  bool interruptible;
  bool cancellable;  // by pthread_cancel (deferred), while it sleeps
  WatchState watch;
  bool spun = false;
  uint32_t nudge = 0;  // the bounded policy's: the slot's nudge, as read
};

// Sleeps once, until a wake-up, the watch's next step, the deadline or the
// start time: the futex wait's result (1: an owner's death was seen), or
// -EAGAIN if it did not sleep.
int sleep_once(Wait *x) {
  shmsem_t *s = x->s;
  std::atomic<uint32_t> *word = waiter_word(s, x->w);
  std::atomic<uint32_t> &sleeping = s->slots[x->w.slot].sleeping;
  // What it sleeps on: its word, or under the bounded policy the slot's
  // nudge as read before this turn's poll (wait_turns): a nudge leaves the
  // word WAITING, and changes the nudge after the permit it is for was
  // freed (section.h: Wakes::run, nudge_slot).
  std::atomic<uint32_t> *on = word;
  uint32_t value = kSlotWaiting;
  if (s->bound_ns) {
    on = &s->slots[x->w.slot].nudge;
    value = x->nudge;
  }
  // One waiter at a time, the watcher, looks for deaths; the others wake
  // rarely, only to take over from a watcher that died.
  WatchPlan plan = watch_step(s, x->w.slot, x->limit, &x->watch);
  plan.wake_at = wake_by(s, x->w.slot, plan.wake_at, x->dl.at());
  // Announce the sleep, then recheck (Dekker with Wakes::run): either we
  // see the grant, or the granter sees `sleeping` and wakes us.
  // (2 under the bounded policy: the first nudge that finds it takes it
  // back to 0 and wakes us, the nudges after it make no system call while
  // we wait for a CPU: section.h nudge_slot.)
  sleeping.store(s->bound_ns ? 2 : 1, std::memory_order_seq_cst);
  // The same pattern for the watcher role: a waiter that was given the
  // role after its watch step (watcher_leave) sees it here, or its giver
  // sees `sleeping` and wakes it (waiter.cc), so it never sleeps a
  // backup's long nap holding the role.
  const bool adopt =
      !x->watch.watching &&
      s->core->watcher.load(std::memory_order_seq_cst) == x->w.slot;
  int fr = -EAGAIN;
  if (!adopt && word->load(std::memory_order_seq_cst) == kSlotWaiting) {
    SHMSEM_HOOK(WAIT_SLEEPING);
    CancelCleanup ctx{s, &x->w, x->cancel, x->limit, &x->watch};
    if (x->cancellable)
      fr = sleep_cancellable(&ctx, &x->watch, plan, on, value);
    else if (plan.events)
      fr = x->watch.events.wait(on, value, plan.wake_at);
    else
      fr = futex_wait(on, value, plan.wake_at);
  }
  sleeping.store(0, std::memory_order_relaxed);
  SHMSEM_HOOK(WAIT_WOKEN);
  if (fr == 1) {
    SHMSEM_HOOK(WATCH_DEATH_SEEN);
    x->watch.death = true;  // the watch reported: take it at once
  } else if (fr == -EIO) {
    x->watch.broken = true;  // futex_waitv failed: poll from now on
    x->watch.use_events = false;
    x->watch.events.reset();
  }
  return fr;
}

// The queued waiter's turns until it is granted, or leaves (deadline,
// cancel, signal): its result.
int wait_turns(Wait *x, shmsem_lease_t *lease) {
  shmsem_t *s = x->s;
  for (;;) {
    // Before the poll, which under the bounded policy races for the pool:
    // a permit freed after it changes the nudge after this read.
    if (s->bound_ns)
      x->nudge = s->slots[x->w.slot].nudge.load(std::memory_order_seq_cst);
    int r = waiter_poll(s, x->w, x->limit, lease);
    if (r != -EINPROGRESS) return r;
    // Spin once, when at the head (FIFO: nobody else can be granted next):
    // at once if we queued at the head, else after the wake-up that finds
    // us there.
    // (Not while the bounded policy lets newcomers past it: no grant comes.)
    if (!x->spun && !barging(s) &&
        __atomic_load_n(&s->core->head, __ATOMIC_RELAXED) == x->w.slot) {
      x->spun = true;
      if (spin_while_waiting(s, waiter_word(s, x->w))) continue;
    }
    if (x->dl.passed(mono_ns())) {
      SHMSEM_HOOK(WAIT_TIMEOUT_FIRED);
      return waiter_abandon(s, x->w, -ETIMEDOUT, x->limit, lease);
    }
    const int fr = sleep_once(x);
    if (fr == -EINTR && x->interruptible)
      return waiter_abandon(s, x->w, -EINTR, x->limit, lease);
    if (x->cancel && cancel_fired(x->cancel)) {
      // The canceller normally wins the transition itself; this covers a
      // handle fired between arm and the first sleep.
      SHMSEM_HOOK(WAIT_CANCEL_SEEN);
      return waiter_abandon(s, x->w, -ECANCELED, x->limit, lease);
    }
  }
}

// A fired cancel before anything: counted as a cancellation, under the
// lock, as waiter_start_by counts a deadline already past. The fired
// handle in the limit gives the lock up once its holder was judged (about
// a millisecond), uncounted.
int cancelled_at_once(shmsem_t *s, shmsem_cancel_t *cancel) {
  if (s->rdonly) return -EBADF;
  const Limit fired{0, cancel, false};
  Section sec(s, &fired);
  if (!sec.error()) stat_bump(s->core->cancellations);
  return -ECANCELED;
}

}  // namespace

int acquire(shmsem_t *s, uint32_t weight, const timespec *deadline_ts,
            shmsem_cancel_t *cancel, unsigned flags, shmsem_lease_t *lease) {
  if (!s || !lease || (flags & ~unsigned(SHMSEM_WAIT_INTERRUPTIBLE)) ||
      weight < 1 || weight > s->permits)
    return -EINVAL;  // before a fired cancel: a bad n is -EINVAL at once
  Deadline dl;
  if (int e = deadline_of(deadline_ts, &dl)) return e;
  if (cancel && cancel_fired(cancel)) return cancelled_at_once(s, cancel);
  // Every step that may wait on another process (the lock, a reclamation
  // pass) stops at the caller's limit; see limit.h.
  const Limit limit{dl.at(), cancel, (flags & SHMSEM_WAIT_INTERRUPTIBLE) != 0};
  // No cancellation point up to the queue: waiter_start() makes none (the
  // first-time identity reads and the reclamation pass disable
  // cancellation themselves), so the uncontended path touches no
  // cancellation state.
  Waiter w;
  int r = waiter_start_by(s, weight, dl.passed(mono_ns()), &limit, &w, lease);
  if (r == 0) SHMSEM_HOOK(ACQUIRE_TAKEN);
  if (r <= 0) return r;
  SHMSEM_HOOK(ACQUIRE_ENQUEUED);
  // Queued: thread cancellation acts only while the waiter sleeps (below);
  // nothing else here may be cut short. Only in deferred mode: a caller in
  // asynchronous mode may call only async-cancel-safe functions.
  NoCancel no_cancel;
  int type;
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &type);
  if (type != PTHREAD_CANCEL_DEFERRED) pthread_setcanceltype(type, nullptr);
  if (cancel && !cancel_arm(cancel, s, w.slot, w.ticket, waiter_cancel_remote))
    return waiter_abandon(s, w, -ECANCELED, &limit, lease);
  Wait x{s,
         w,
         &limit,
         cancel,
         dl,
         limit.interruptible,
         no_cancel.caller_state() == PTHREAD_CANCEL_ENABLE &&
             type == PTHREAD_CANCEL_DEFERRED,
         {}};  // the watch after no_cancel: its destructor closes fds
  r = wait_turns(&x, lease);
  if (cancel) cancel_disarm(cancel);
  return r;
}

}  // namespace shmsem::detail
