#include "waiter_api.h"

#include <errno.h>
#include <string.h>

#include <algorithm>

#include "thread_cancel.h"
#include "clock.h"
#include "hooks.h"
#include "layout.h"
#include "limit.h"
#include "owner.h"
#include "reclaim.h"
#include "waiter.h"

namespace shmsem::detail {
namespace {

// What a shmsem_waiter_t holds. Caller memory, written only by these
// calls, so trusted as far as the caller's own memory is; the slot it
// names is checked against the handle's geometry all the same.
struct AsyncWaiter {
  shmsem_t *s;
  uint64_t ticket;
  uint64_t deadline;  // mono_ns() time; 0 none
  uint64_t pass_at;   // the watch: next pass while watcher (real clock)
  uint64_t wake_by;   // real CLOCK_MONOTONIC: poll by then at the latest
  uint64_t reg;       // its registration with the death watch, 0 none
  uint32_t slot;
  uint32_t state;   // kQueued while queued; anything else: unused
  int32_t pid;      // the process that queued it (a fork child did not)
  uint32_t watch;   // kWatching, kEvents... at the last step
  uint32_t napped;  // took a backup's nap before
};
static_assert(sizeof(AsyncWaiter) <= sizeof(shmsem_waiter_t::__opaque));

constexpr uint32_t kQueued = 0x51554555;  // "QUEU"

// AsyncWaiter::watch: what WatchState keeps between two polls.
constexpr uint32_t kWatching = 1u << 0;
constexpr uint32_t kEvents = 1u << 1;
constexpr uint32_t kComplete = 1u << 2;
constexpr uint32_t kBroken = 1u << 3;

// A backup's nap, per waiter queued: the queue as a whole comes back about
// once a second to see whether the watcher is late, where blocking backups
// come every 4 ms (reclaim.h). Each ring timeout that fires costs the
// kernel a walk of that ring's pending futex waits (io_cancel_remove), and
// the oldest waits, whose naps end first, are at the far end: with the
// blocking rate, 30,000 waits pending on one ring kept a CPU busy in that
// walk (bench/ring_scale). A dead watcher is taken over in about a second.
constexpr uint64_t kBackupAsyncNs = 1'000'000'000;
// No backup naps longer. Not the blocking backups' 2 min: with the queue
// past 120 the whole queue would come back more than once a second, and
// at 60,000 idle waits on one ring the 500 timeouts a second kept the
// loop's thread in the kernel's walk for a minute (an adversarial test).
// The price: a queue that shrank from thousands keeps naps that long, so
// a watcher that dies then is taken over at the next start of an acquire
// (each start looks at the watch) or within the remaining naps.
constexpr uint64_t kMaxBackupAsyncNs = 3600 * kBackupAsyncNs;

AsyncWaiter *impl(shmsem_waiter_t *w) {
  return reinterpret_cast<AsyncWaiter *>(w->__opaque);
}
const AsyncWaiter *impl(const shmsem_waiter_t *w) {
  return reinterpret_cast<const AsyncWaiter *>(w->__opaque);
}

bool queued(const AsyncWaiter *a) {
  return a->state == kQueued && a->s && a->slot < a->s->max_waiters &&
         a->pid == self_pid();
}

// The word the caller's loop sleeps on (shmsem_waiter_futex), which the
// death watch wakes when it reports to this waiter's registration.
std::atomic<uint32_t> *loop_word(const AsyncWaiter *a) {
  return waiter_word(a->s, Waiter{a->slot, a->ticket});
}

// The limit a blocking acquire with this deadline passes down (acquire.cc).
Limit limit_of(const AsyncWaiter *a) {
  return Limit{a->deadline, nullptr, false};  // at(): 0 none, else >= 1
}

// One step of the watch, as a blocking waiter takes before each sleep. A
// watcher on events names the owners to the process's death watch, which
// wakes the slot's word when one exits (so the caller's loop polls it
// then), and polls only for the kEventSafetyNs pass; without events it
// polls on its period. Sets the time to poll by.
void watch(AsyncWaiter *a, const Limit *limit) {
  WatchState st;
  st.watching = a->watch & kWatching;
  st.use_events = a->watch & kEvents;
  st.complete = a->watch & kComplete;
  st.broken = a->watch & kBroken;
  st.pass_at = a->pass_at;
  st.wake = loop_word(a);
  st.events.adopt(a->reg);
  if (st.use_events && st.events.notified()) {
    SHMSEM_HOOK(WATCH_DEATH_SEEN);
    st.death = true;
  }
  WatchPlan plan = watch_step(a->s, a->slot, limit, &st);
  a->reg = st.events.detach();  // kept in the waiter until the next poll
  a->watch = (st.watching ? kWatching : 0) | (st.use_events ? kEvents : 0) |
             (st.complete ? kComplete : 0) | (st.broken ? kBroken : 0);
  a->pass_at = st.pass_at;
  uint64_t at = plan.wake_at;
  if (!st.watching) {
    // A backup: n x kBackupAsyncNs for a queue of n, within
    // [kBackupAsyncNs, kMaxBackupAsyncNs]. The first nap is spread evenly
    // over that span, so that waiters queued together do not all come
    // back together, and the first of them comes soon.
    uint64_t n = std::clamp<uint64_t>(
        a->s->core->waiting.load(std::memory_order_relaxed), 1,
        a->s->max_waiters);
    uint64_t nap =
        std::clamp(kBackupAsyncNs * n, kBackupAsyncNs, kMaxBackupAsyncNs);
    if (!a->napped) {
      a->napped = 1;
      uint64_t x = (a->ticket ^ real_mono_ns()) * 0x9e3779b97f4a7c15ull;
      nap = kBackupAsyncNs + (x ^ (x >> 29)) % nap;
    }
    at = real_mono_ns() + nap;
  }
  // The deadline and the head's start time (the rate limit): its own
  // poll grants it.
  a->wake_by = wake_by(a->s, a->slot, at, a->deadline);
}

int finish(AsyncWaiter *a, int r) {
  if (a->reg) {
    EventWatch e;  // gives the registration back
    e.adopt(a->reg);
    a->reg = 0;
  }
  a->state = 0;
  return r;
}

}  // namespace

int async_start(shmsem_t *s, shmsem_waiter_t *w, uint32_t weight,
                const timespec *deadline_ts, shmsem_lease_t *lease) {
  if (!s || !w || !lease) return -EINVAL;
  AsyncWaiter *a = impl(w);
  if (queued(a)) return -EINVAL;  // wiping it would strand its place
  memset(w, 0, sizeof *w);
  Deadline dl;
  if (int e = deadline_of(deadline_ts, &dl)) return e;
  a->s = s;
  a->deadline = dl.at();
  const Limit limit = limit_of(a);
  const bool expired = dl.passed(mono_ns());
  // Nothing below is a cancellation point: this is not a blocking call.
  NoCancel no_cancel;
  Waiter wt;
  int r = waiter_start_by(s, weight, expired, &limit, &wt, lease);
  if (r == 0) SHMSEM_HOOK(ACQUIRE_TAKEN);
  if (r <= 0) return r;
  // The waker skips FUTEX_WAKE while `sleeping` reads 0 (it only spins);
  // the caller's futex wait is in the kernel from now on, so announce it
  // for the whole wait. Dekker with release.cc: a grant stored before this
  // is seen by the futex wait's own read of the word.
  s->slots[wt.slot].sleeping.store(1, std::memory_order_seq_cst);
  SHMSEM_HOOK(ACQUIRE_ENQUEUED);
  a->slot = wt.slot;
  a->ticket = wt.ticket;
  a->pid = self_pid();
  a->state = kQueued;
  watch(a, &limit);
  return SHMSEM_QUEUED;
}

int async_futex(const shmsem_waiter_t *w, uint32_t **word, uint32_t *value) {
  if (!w || !word || !value) return -EINVAL;
  const AsyncWaiter *a = impl(w);
  if (!queued(a)) return -EINVAL;
  // std::atomic<uint32_t> is a plain 32-bit word (the futex calls here
  // pass it the same way).
  *word = reinterpret_cast<uint32_t *>(loop_word(a));
  *value = kSlotWaiting;
  return 0;
}

int async_wake_by(const shmsem_waiter_t *w, timespec *at) {
  if (!w || !at) return -EINVAL;
  const AsyncWaiter *a = impl(w);
  if (!queued(a)) return -EINVAL;
  *at = ns_to_ts(a->wake_by);
  return 0;
}

int async_poll(shmsem_waiter_t *w, shmsem_lease_t *lease) {
  if (!w || !lease) return -EINVAL;
  AsyncWaiter *a = impl(w);
  if (!queued(a)) return -EINVAL;
  NoCancel no_cancel;  // a pass reads /proc and polls pidfds
  const Limit limit = limit_of(a);
  const Waiter wt{a->slot, a->ticket};
  int r = waiter_poll(a->s, wt, &limit, lease);
  if (r != -EINPROGRESS) return finish(a, r);
  if (a->deadline && mono_ns() >= a->deadline) {
    SHMSEM_HOOK(WAIT_TIMEOUT_FIRED);
    return finish(a, waiter_abandon(a->s, wt, -ETIMEDOUT, &limit, lease));
  }
  watch(a, &limit);
  return -EINPROGRESS;
}

int async_cancel(shmsem_waiter_t *w, shmsem_lease_t *lease) {
  if (!w || !lease) return -EINVAL;
  AsyncWaiter *a = impl(w);
  if (!queued(a)) return -EINVAL;
  NoCancel no_cancel;
  // Bounded as a try: a lock held by a stopped process makes the waiter
  // leave without it (waiter.h), giving up a grant that already won.
  const Limit now{1};
  SHMSEM_HOOK(WAIT_CANCEL_SEEN);
  int r =
      waiter_abandon(a->s, Waiter{a->slot, a->ticket}, -ECANCELED, &now, lease);
  return finish(a, r == -ETIMEDOUT ? -ECANCELED : r);
}

}  // namespace shmsem::detail
