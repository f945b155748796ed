// The notifier: one eventfd, one helper thread, a watched set and a ready
// FIFO under one mutex (notifier.h).
//
// Goal: tell a loop that can only poll a descriptor when to poll each of
// its waiters, without ever touching the waiter's state machine (async.cc
// completes waits; the notifier only says "poll it now").
//
// Representation (process-local, all under `mu`):
//   watched[]  the waiters whose words the helper thread waits on, in the
//              order they were added; for each a copy of what add() read in
//              the caller's thread: its futex word (a shm waiter's slot
//              word, or a remote waiter's word in this process: capi.cc
//              reads it through the waiter's backend), the value the
//              word holds while the wait goes on, its wake-by time. The
//              caller's shmsem_waiter_t is kept only as a key for remove()
//              and is never read after add() returns.
//   ready[]    waiters found ready, oldest first, until next() or remove()
//              takes them. watched + ready <= SHMSEM_NOTIFIER_MAX.
//   ctl        a process-private futex word bumped (under mu) by every
//              change of the watched set and by destroy(), then woken.
//
// A waiter is ready when its word no longer holds its value (grant,
// cancel, shutdown, reclamation: waiter_api.h; a remote waiter's thread
// finished: redis/async.h) or its wake-by time has come.
//
// INV-NOTIFY-FD: whenever mu is free, the eventfd's counter is 1 if ready[]
// is not empty and 0 if it is. The eventfd is used as a plain counter
// (not EFD_SEMAPHORE), written only when ready[] goes from empty to not
// empty and read (which resets it to 0) only when ready[] becomes empty,
// both under mu. So the descriptor is readable exactly while next() has
// something to return, and a reset can never swallow a readiness that
// came after it.
//
// Why no readiness is lost. The helper thread looks at every word under mu
// (a plain load), then releases mu and calls futex_waitv on the same words
// with the values it expects, and on ctl with the value it read under mu.
// The kernel compares every word with its value when the call starts
// (-EAGAIN if one differs) and otherwise sleeps until any of them is woken:
//
//   helper                           releaser / add()
//   lock; word == WAITING; ctl == 7
//   unlock
//                                    word = GRANTED; FUTEX_WAKE(word)
//   futex_waitv(word: WAITING,        (or: lock; watched += w; ctl = 8;
//               ctl: 7)                unlock; FUTEX_WAKE(ctl))
//     -> -EAGAIN (word or ctl differs), or woken if the change came after
//        the kernel queued us; either way: rescan everything.
//
// A grant wakes every sleeper on the slot's word (shmsem.h, "the futex word
// of a queued waiter"), so the helper's wait shares the word with nothing
// that could eat its wake-up. futex_waitv does not say which word changed
// on -EAGAIN, and a wake-up may be spurious: after every return (woken,
// -EAGAIN, -ETIMEDOUT, -EINTR) the helper rescans all words. Its timeout is
// the earliest wake-by time of the watched set, absolute on CLOCK_MONOTONIC.
//
// A removed waiter's word may still be in a futex_waitv call that started
// before remove() returned: the kernel only compares it (ctl changed too,
// so the call returns at once) or keys a sleep on it, which is harmless,
// as futex.h says of wakes on reused memory. If the segment was unmapped
// meanwhile the call fails with -EFAULT and the helper rescans a set that
// no longer holds the word.
//
// Fallback: without futex_waitv (Linux < 5.16, -ENOSYS; a seccomp filter,
// -EPERM; or kLimitNoWaitv in tests) the same thread looks at every word
// each kPollPeriodNs instead, and sleeps on ctl alone while nothing is
// watched.
//
// Fork: the notifier is memory and a thread of the process that created
// it. A fork child has a copy of the memory but not the thread (and
// perhaps a copy of mu locked by it): the child must not use, and must not
// destroy, a parent's notifier. No atfork handler is installed.
#include "notifier.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <new>

#include "thread_cancel.h"
#include "clock.h"
#include "futex.h"
#include "testing_state.h"

namespace shmsem::detail {
namespace {

constexpr uint32_t kMax = SHMSEM_NOTIFIER_MAX;
// futex_waitv(2) flags, the kernel's ABI (Linux 5.16; Debian 12's headers
// call the size FUTEX_32 and lack FUTEX2_PRIVATE). Segment words are
// shared between processes: no kFutex2Private on them, the kernel must key
// the futex on the page. Only ctl, in our own memory, is private.
constexpr uint32_t kFutex2SizeU32 = 0x02;  // FUTEX2_SIZE_U32
constexpr uint32_t kFutex2Private = 0x80;  // FUTEX2_PRIVATE
static_assert(kMax + 1 <= FUTEX_WAITV_MAX,
              "the words and ctl fit in one futex_waitv call");
// The fallback looks at every word this often.
constexpr uint64_t kPollPeriodNs = 1'000'000;
constexpr uint64_t kNever = ~uint64_t{0};

bool waitv_taken_away() {
#ifdef SHMSEM_TESTING
  if (g_liveness_limits.load(std::memory_order_relaxed) & kLimitNoWaitv)
    return true;
#endif
  return false;
}

// One added waiter, as add() read it in the caller's thread.
struct Entry {
  const shmsem_waiter_t *key;  // the caller's waiter: compared, never read
  uint64_t user_data;
  const uint32_t *word;  // its slot's futex word, in the segment
  uint32_t value;        // what the word holds while the wait goes on
  uint64_t wake_by;      // real CLOCK_MONOTONIC ns
};

}  // namespace
}  // namespace shmsem::detail

struct shmsem_notifier {
  std::mutex mu;
  // Guarded by mu:
  shmsem::detail::Entry watched[SHMSEM_NOTIFIER_MAX];
  shmsem::detail::Entry ready[SHMSEM_NOTIFIER_MAX];
  uint32_t n_watched;
  uint32_t n_ready;
  bool stop;
  // Set only while mu is held (see the file comment); read by the kernel.
  std::atomic<uint32_t> ctl;
  // The helper thread watches by polling (set at create, or by the thread
  // when futex_waitv is refused); read by notifier_polls.
  std::atomic<bool> polls;
  int efd;
  pthread_t thread;
};

namespace shmsem::detail {
namespace {

int find(const Entry *v, uint32_t n, const shmsem_waiter_t *key) {
  for (uint32_t i = 0; i < n; i++)
    if (v[i].key == key) return int(i);
  return -1;
}

void erase(Entry *v, uint32_t *n, uint32_t i) {
  for (uint32_t j = i + 1; j < *n; j++) v[j - 1] = v[j];
  --*n;
}

// INV-NOTIFY-FD: the only write and the only read of the eventfd, both
// under mu. Neither can block (EFD_NONBLOCK) or fail with the counter
// at 0 or 1; a failure would leave nothing to repair.
void fd_set_ready(shmsem_notifier *n) {
  const uint64_t one = 1;
  ssize_t r = write(n->efd, &one, sizeof one);
  (void)r;
}

void fd_reset(shmsem_notifier *n) {
  uint64_t v;
  ssize_t r = read(n->efd, &v, sizeof v);
  (void)r;
}

void push_ready(shmsem_notifier *n, const Entry &e) {
  n->ready[n->n_ready++] = e;
  if (n->n_ready == 1) fd_set_ready(n);
}

// Bump ctl under mu: the helper thread re-reads the watched set before its
// next sleep, or its sleep fails at once on ctl's value. Relaxed: mu
// orders it with the set, and the kernel reads it at the call.
void set_changed(shmsem_notifier *n) {
  n->ctl.fetch_add(1, std::memory_order_relaxed);
}

// Under mu: move every ready waiter (word changed, or wake-by time come)
// from watched[] to ready[], keeping the order they were added in; fill
// `vec` with ctl and the rest. Returns the number of entries of `vec`;
// `*wake_at` is the earliest wake-by time left (kNever if none).
uint32_t scan(shmsem_notifier *n, struct futex_waitv *vec, uint64_t *wake_at) {
  const uint64_t now = real_mono_ns();
  *wake_at = kNever;
  vec[0] = {};
  vec[0].val = n->ctl.load(std::memory_order_relaxed);
  vec[0].uaddr = uintptr_t(&n->ctl);
  vec[0].flags = kFutex2SizeU32 | kFutex2Private;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < n->n_watched; i++) {
    const Entry e = n->watched[i];
    // Relaxed: this only decides that the caller should poll; the poll
    // reads the slot again under the segment's own ordering.
    const uint32_t now_value = __atomic_load_n(e.word, __ATOMIC_RELAXED);
    if (now_value != e.value || e.wake_by <= now) {
      push_ready(n, e);
      continue;
    }
    n->watched[kept++] = e;
    struct futex_waitv &v = vec[kept];
    v = {};
    v.val = e.value;
    v.uaddr = uintptr_t(e.word);
    v.flags = kFutex2SizeU32;  // shared: a segment word
    if (e.wake_by < *wake_at) *wake_at = e.wake_by;
  }
  n->n_watched = kept;
  return kept + 1;
}

void sleep_until(uint64_t at) {
  const timespec ts = ns_to_ts(at);
  // Not a cancellation victim (cancellation is disabled in this thread);
  // an early return (EINTR) only means an early rescan.
  (void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

// Sleep until a watched word or ctl may have changed, or the earliest
// wake-by time; the caller rescans whatever the reason.
void wait_for_change(shmsem_notifier *n, struct futex_waitv *vec,
                     uint32_t count, uint64_t wake_at) {
  if (!n->polls.load(std::memory_order_relaxed)) {
    timespec ts;
    const timespec *tsp = nullptr;
    if (wake_at != kNever) {
      ts = ns_to_ts(wake_at);
      tsp = &ts;
    }
    const int r = futex_waitv(vec, count, tsp);
    if (r >= 0 || r == -EAGAIN || r == -ETIMEDOUT || r == -EINTR) return;
    if (r == -ENOSYS || r == -EPERM)
      n->polls.store(true, std::memory_order_relaxed);
    // Anything else (-EFAULT: see the file comment) is not retried at
    // once: one polling period, so that no error turns into a busy loop.
  }
  if (count == 1) {
    // Nothing watched: sleep on ctl alone until add() or destroy().
    (void)futex_wait_private(&n->ctl, uint32_t(vec[0].val));
    return;
  }
  const uint64_t next = real_mono_ns() + kPollPeriodNs;
  sleep_until(next < wake_at ? next : wake_at);
}

void *helper_main(void *arg) {
  auto *n = static_cast<shmsem_notifier *>(arg);
  // Nobody else holds this thread's id, and no cancellation point may
  // end it with mu held: it ends only when destroy() tells it to.
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
  struct futex_waitv vec[kMax + 1];
  for (;;) {
    uint32_t count;
    uint64_t wake_at;
    {
      std::lock_guard<std::mutex> lock(n->mu);
      if (n->stop) break;
      count = scan(n, vec, &wake_at);
    }
    wait_for_change(n, vec, count, wake_at);
  }
  return nullptr;
}

}  // namespace

int notifier_create(shmsem_notifier_t **out) {
  if (!out) return -EINVAL;
  auto *n = new (std::nothrow) shmsem_notifier();
  if (!n) return -ENOMEM;
  n->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (n->efd < 0) {
    const int e = -errno;  // -EMFILE, -ENFILE, -ENOMEM, -ENODEV
    delete n;
    return e;
  }
  n->polls.store(waitv_taken_away(), std::memory_order_relaxed);
  // The thread inherits the creator's signal mask: block everything for
  // it (no handler of the caller's may run on it), then restore ours.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int e = pthread_create(&n->thread, nullptr, helper_main, n);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (e) {
    close(n->efd);
    delete n;
    return -e;  // -EAGAIN, -ENOMEM, -EPERM
  }
  pthread_setname_np(n->thread, "shmsem-notifier");
  *out = n;
  return 0;
}

int notifier_fd(const shmsem_notifier_t *n) { return n ? n->efd : -EINVAL; }

int notifier_add(shmsem_notifier_t *n, const shmsem_waiter_t *w,
                 uint64_t user_data, const uint32_t *word, uint32_t value,
                 const timespec &wake_by) {
  if (!n || !w || !word) return -EINVAL;
  // capi.cc read these in the caller's thread, once: the helper never
  // touches `w`.
  Entry e{};
  e.value = value;
  e.wake_by = ts_to_ns(wake_by);
  e.key = w;
  e.user_data = user_data;
  e.word = word;
  {
    std::lock_guard<std::mutex> lock(n->mu);
    if (find(n->watched, n->n_watched, w) >= 0 ||
        find(n->ready, n->n_ready, w) >= 0)
      return -EINVAL;
    if (n->n_watched + n->n_ready >= kMax) return -ENOSPC;
    n->watched[n->n_watched++] = e;
    set_changed(n);
  }
  futex_wake_private(&n->ctl, 1);
  return 0;
}

int notifier_remove(shmsem_notifier_t *n, const shmsem_waiter_t *w) {
  if (!n || !w) return -EINVAL;
  NoCancel no_cancel;  // read(2) of the eventfd is a cancellation point
  {
    std::lock_guard<std::mutex> lock(n->mu);
    int i = find(n->ready, n->n_ready, w);
    if (i >= 0) {
      erase(n->ready, &n->n_ready, uint32_t(i));
      if (n->n_ready == 0) fd_reset(n);
      return 0;
    }
    i = find(n->watched, n->n_watched, w);
    if (i < 0) return -ENOENT;
    erase(n->watched, &n->n_watched, uint32_t(i));
    set_changed(n);
  }
  // The helper drops the word from its wait; it already no longer scans it.
  futex_wake_private(&n->ctl, 1);
  return 0;
}

int notifier_next(shmsem_notifier_t *n, uint64_t *user_data) {
  if (!n || !user_data) return -EINVAL;
  NoCancel no_cancel;  // read(2) of the eventfd is a cancellation point
  std::lock_guard<std::mutex> lock(n->mu);
  if (n->n_ready == 0) return -EAGAIN;  // and the counter is 0 already
  *user_data = n->ready[0].user_data;
  erase(n->ready, &n->n_ready, 0);
  if (n->n_ready == 0) fd_reset(n);
  return 0;
}

void notifier_destroy(shmsem_notifier_t *n) {
  if (!n) return;
  NoCancel no_cancel;  // pthread_join and close are cancellation points
  {
    std::lock_guard<std::mutex> lock(n->mu);
    n->stop = true;
    set_changed(n);
  }
  futex_wake_private(&n->ctl, 1);
  pthread_join(n->thread, nullptr);
  close(n->efd);
  delete n;
}

bool notifier_polls(const shmsem_notifier_t *n) {
  return n->polls.load(std::memory_order_relaxed);
}

}  // namespace shmsem::detail
