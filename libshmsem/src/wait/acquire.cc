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
#include "lock.h"
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
        t_spin_cap = uint32_t(std::min<uint64_t>(2 * cap + kMinSpinNs,
                                                 kMaxSpinNs));
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
  // runs no destructor of ours: close the watch's ring here (found by an
  // adversarial test: each cancelled watcher leaked a ring and its pidfds).
  // Acted on only at pthread_testcancel(), outside any ring wait, so no
  // futex wait is pending in it.
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
                      const WatchPlan &plan) {
  int r;
  std::atomic<uint32_t> *word = waiter_word(ctx->s, *ctx->w);
  pthread_cleanup_push(leave_on_thread_cancel, ctx);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
  pthread_testcancel();
  r = plan.events ? watch->events.wait(word, kSlotWaiting, plan.wake_at)
                  : futex_wait(word, kSlotWaiting, plan.wake_at);
  pthread_testcancel();
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
  pthread_cleanup_pop(0);
  return r;
}

}  // namespace

int acquire(shmsem_t *s, uint32_t weight, const timespec *deadline_ts,
            shmsem_cancel_t *cancel, unsigned flags, shmsem_lease_t *lease) {
  if (!s || !lease || (flags & ~unsigned(SHMSEM_WAIT_INTERRUPTIBLE)) ||
      weight < 1 || weight > s->permits)
    return -EINVAL;  // before a fired cancel: a bad n is -EINVAL at once
  uint64_t deadline = 0;
  if (deadline_ts) {
    int e = deadline_ns(deadline_ts, &deadline);
    if (e) return e;
  }
  if (cancel && cancel_fired(cancel)) {
    // Counted as a cancellation, under the lock, as waiter_start_by counts
    // a deadline already past. The fired handle in the limit gives the lock
    // up once its holder was judged (about a millisecond), uncounted.
    if (s->rdonly) return -EBADF;
    const Limit fired{0, cancel, false};
    LockGuard guard(s, &fired);
    if (!guard.error()) stat_bump(s->core->cancellations);
    return -ECANCELED;
  }
  const bool expired = deadline_ts && mono_ns() >= deadline;
  // Every step that may wait on another process (the lock, a reclamation
  // pass) stops at the caller's limit; see limit.h.
  // (A deadline of {0, 0} is long past, not "none".)
  const Limit limit{deadline_ts ? std::max<uint64_t>(deadline, 1) : 0, cancel,
                    (flags & SHMSEM_WAIT_INTERRUPTIBLE) != 0};
  // No cancellation point up to the queue: waiter_start() makes none (the
  // first-time identity reads and the reclamation pass disable
  // cancellation themselves), so the uncontended path touches no
  // cancellation state.
  Waiter w;
  int r = waiter_start_by(s, weight, expired, &limit, &w, lease);
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
  const bool cancellable = no_cancel.caller_state() == PTHREAD_CANCEL_ENABLE &&
                           type == PTHREAD_CANCEL_DEFERRED;

  if (cancel && !cancel_arm(cancel, s, w.slot, w.ticket))
    return waiter_abandon(s, w, -ECANCELED, &limit, lease);

  std::atomic<uint32_t> *word = waiter_word(s, w);
  std::atomic<uint32_t> &sleeping = s->slots[w.slot].sleeping;
  WatchState watch;  // after no_cancel: its destructor closes fds
  bool spun = false;
  for (;;) {
    r = waiter_poll(s, w, &limit, lease);
    if (r != -EINPROGRESS) break;
    // Spin once, when at the head (FIFO: nobody else can be granted next):
    // at once if we queued at the head, else after the wake-up that finds
    // us there.
    if (!spun && __atomic_load_n(&s->core->head, __ATOMIC_RELAXED) == w.slot) {
      spun = true;
      if (spin_while_waiting(s, word)) continue;
    }
    uint64_t now = mono_ns();
    if (deadline_ts && now >= deadline) {
      SHMSEM_HOOK(WAIT_TIMEOUT_FIRED);
      r = waiter_abandon(s, w, -ETIMEDOUT, &limit, lease);
      break;
    }
    // One waiter at a time, the watcher, looks for deaths; the others wake
    // rarely, only to take over from a watcher that died.
    WatchPlan plan = watch_step(s, w.slot, &limit, &watch);
    if (deadline_ts) {
      uint64_t d = deadline_wake_at(deadline);
      if (!plan.wake_at || d < plan.wake_at) plan.wake_at = d;
    }
    // At the head with all its permits, waiting for a token of the rate
    // limit: nobody wakes it at its start time but its own timer.
    if (uint64_t start = head_start_ns(s, w.slot)) {
      uint64_t d = deadline_wake_at(start);
      if (!plan.wake_at || d < plan.wake_at) plan.wake_at = d;
    }
    // Announce the sleep, then recheck (Dekker with release.cc): either we
    // see the grant, or the releaser sees `sleeping` and wakes us.
    sleeping.store(1, std::memory_order_seq_cst);
    // The same pattern for the watcher role: a waiter that was given the
    // role after its watch step (watcher_leave) sees it here, or its giver
    // sees `sleeping` and wakes it (waiter.cc), so it never sleeps a
    // backup's long nap holding the role.
    const bool adopt =
        !watch.watching &&
        s->core->watcher.load(std::memory_order_seq_cst) == w.slot;
    int fr = -EAGAIN;
    if (!adopt && word->load(std::memory_order_seq_cst) == kSlotWaiting) {
      SHMSEM_HOOK(WAIT_SLEEPING);
      CancelCleanup ctx{s, &w, cancel, &limit, &watch};
      if (cancellable)
        fr = sleep_cancellable(&ctx, &watch, plan);
      else if (plan.events)
        fr = watch.events.wait(word, kSlotWaiting, plan.wake_at);
      else
        fr = futex_wait(word, kSlotWaiting, plan.wake_at);
    }
    sleeping.store(0, std::memory_order_relaxed);
    SHMSEM_HOOK(WAIT_WOKEN);
    if (fr == 1) {
      SHMSEM_HOOK(WATCH_DEATH_SEEN);
      watch.death = true;  // an owner process exited: reclaim at once
    } else if (fr == -EIO) {
      watch.broken = true;  // the ring failed: poll from now on
      watch.use_events = false;
      watch.events.reset();
    }
    if (fr == -EINTR && (flags & SHMSEM_WAIT_INTERRUPTIBLE)) {
      r = waiter_abandon(s, w, -EINTR, &limit, lease);
      break;
    }
    if (cancel && cancel_fired(cancel)) {
      // The canceller normally wins the transition itself; this covers a
      // handle fired between arm and the first sleep.
      SHMSEM_HOOK(WAIT_CANCEL_SEEN);
      r = waiter_abandon(s, w, -ECANCELED, &limit, lease);
      break;
    }
  }
  if (cancel) cancel_disarm(cancel);
  return r;
}

}  // namespace shmsem::detail
