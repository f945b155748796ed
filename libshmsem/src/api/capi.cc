// The C API boundary: argument checks, and dispatch through the backend
// seam (backend.h, docs/BACKENDS.md): a call that takes a name goes to the
// backend the name chooses, a call on a handle to the handle's backend, a
// call on a waiter to the backend that queued it. The one exception is the
// uncontended path of a shm handle: its lock-free acquire and its release
// run inline (shm_backend.h) where a table call would cost the pair more
// than the rest of it. Nothing below this file sees a C caller.
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

#include "backend.h"
#include "cancel.h"
#include "clock.h"
#include "deathwatch.h"
#include "hist.h"
#include "notifier.h"
#include "publish.h"
#include "shm_backend.h"
#include "thread_cancel.h"

#define SHMSEM_API extern "C" __attribute__((visibility("default")))

namespace d = shmsem::detail;

namespace {

// strerror(3) is not thread-safe: for a value it has no text for, glibc
// before 2.32 formats "Unknown error N" into one static buffer. strerror_r
// into a buffer of the calling thread is; these pick its result, whichever
// variant the C library declares (GNU returns the text, XSI returns 0).
[[maybe_unused]] const char *strerror_r_text(const char *text, const char *) {
  return text;
}
[[maybe_unused]] const char *strerror_r_text(int r, const char *buf) {
  return r == 0 ? buf : "unknown error";
}

// A name whose URL scheme no backend of this build serves.
int no_backend(shmsem_t **out) {
  if (!out) return -EINVAL;
  *out = nullptr;
  return -EPROTONOSUPPORT;
}

}  // namespace

// create and open open, read and close files (or sockets), which are
// cancellation points; the API promises none outside the queue.
SHMSEM_API int shmsem_create(const char *name, const struct shmsem_config *cfg,
                             int flags, shmsem_t **out) {
  d::NoCancel no_cancel;
  const d::Backend *b = d::backend_for_name(name);
  return b ? b->create(name, cfg, flags, out) : no_backend(out);
}

SHMSEM_API int shmsem_open(const char *name, int flags, shmsem_t **out) {
  d::NoCancel no_cancel;
  const d::Backend *b = d::backend_for_name(name);
  return b ? b->open(name, flags, out) : no_backend(out);
}

SHMSEM_API void shmsem_detach(shmsem_t *s) { d::backend_of(s)->detach(s); }

SHMSEM_API int shmsem_unlink(const char *name) {
  const d::Backend *b = d::backend_for_name(name);
  return b ? b->unlink(name) : -EPROTONOSUPPORT;
}

// A place, not a name: NULL or "/dev/shm" for the shm backend, a server
// ("redis://HOST[:PORT]") for the backend of its scheme. Reads files or
// talks to a server: cancellation points the API does not promise.
SHMSEM_API int shmsem_list_at(const char *where, struct shmsem_list_entry *out,
                              uint32_t max) {
  d::NoCancel no_cancel;
  if (!out && max) return -EINVAL;
  const d::Backend *b = d::backend_for_name(where);
  if (!b) return -EPROTONOSUPPORT;
  return b->list ? b->list(where, out, max) : -EOPNOTSUPP;
}

// One permit of a shm handle: the lock-free path inline first.
SHMSEM_API int shmsem_acquire(shmsem_t *s, shmsem_lease_t *lease) {
  if (s && lease && d::is_shm(s) && d::shm_fast_acquire(s, lease)) return 0;
  return d::backend_of(s)->acquire(s, 1, nullptr, nullptr, 0, lease);
}

namespace {

int try_acquire(shmsem_t *s, uint32_t n, shmsem_lease_t *lease) {
  if (!s || !lease) return -EINVAL;
  if (n == 1 && d::is_shm(s) && d::shm_fast_acquire(s, lease)) return 0;
  return d::backend_of(s)->try_acquire(s, n, lease);
}

}  // namespace

SHMSEM_API int shmsem_try_acquire(shmsem_t *s, shmsem_lease_t *lease) {
  return try_acquire(s, 1, lease);
}

SHMSEM_API int shmsem_acquire_until(shmsem_t *s,
                                    const struct timespec *deadline,
                                    shmsem_lease_t *lease) {
  if (!deadline) return -EINVAL;
  return d::backend_of(s)->acquire(s, 1, deadline, nullptr, 0, lease);
}

namespace {

// A relative timeout as the absolute deadline the backends take: from one
// read of the monotonic clock (the tests' manual clock when installed);
// past what 64-bit nanoseconds hold, no deadline ("never").
int acquire_for(shmsem_t *s, uint32_t n, uint64_t timeout_ns,
                shmsem_lease_t *lease) {
  const d::Backend *b = d::backend_of(s);
  const uint64_t now = d::mono_ns();
  if (timeout_ns > UINT64_MAX - now)
    return b->acquire(s, n, nullptr, nullptr, 0, lease);
  const struct timespec deadline = d::ns_to_ts(now + timeout_ns);
  return b->acquire(s, n, &deadline, nullptr, 0, lease);
}

}  // namespace

SHMSEM_API int shmsem_acquire_for(shmsem_t *s, uint64_t timeout_ns,
                                  shmsem_lease_t *lease) {
  return acquire_for(s, 1, timeout_ns, lease);
}

SHMSEM_API int shmsem_acquire_for_n(shmsem_t *s, uint32_t n,
                                    uint64_t timeout_ns,
                                    shmsem_lease_t *lease) {
  return acquire_for(s, n, timeout_ns, lease);
}

SHMSEM_API int shmsem_acquire_ex(shmsem_t *s, const struct timespec *deadline,
                                 shmsem_cancel_t *cancel, unsigned flags,
                                 shmsem_lease_t *lease) {
  return d::backend_of(s)->acquire(s, 1, deadline, cancel, flags, lease);
}

// Weighted acquires: the same calls for n permits (the backend checks n).
SHMSEM_API int shmsem_acquire_n(shmsem_t *s, uint32_t n,
                                shmsem_lease_t *lease) {
  // One permit: the lock-free path first, as shmsem_acquire.
  if (n == 1 && s && lease && d::is_shm(s) && d::shm_fast_acquire(s, lease))
    return 0;
  return d::backend_of(s)->acquire(s, n, nullptr, nullptr, 0, lease);
}

SHMSEM_API int shmsem_try_acquire_n(shmsem_t *s, uint32_t n,
                                    shmsem_lease_t *lease) {
  return try_acquire(s, n, lease);
}

SHMSEM_API int shmsem_acquire_until_n(shmsem_t *s, uint32_t n,
                                      const struct timespec *deadline,
                                      shmsem_lease_t *lease) {
  if (!deadline) return -EINVAL;
  return d::backend_of(s)->acquire(s, n, deadline, nullptr, 0, lease);
}

SHMSEM_API int shmsem_acquire_ex_n(shmsem_t *s, uint32_t n,
                                   const struct timespec *deadline,
                                   shmsem_cancel_t *cancel, unsigned flags,
                                   shmsem_lease_t *lease) {
  return d::backend_of(s)->acquire(s, n, deadline, cancel, flags, lease);
}

SHMSEM_API int shmsem_set_permits(shmsem_t *s, uint32_t permits) {
  return d::backend_of(s)->set_permits(s, permits);
}

// The cancel handle is process memory, armed by whichever backend's
// acquire waits with it (wait/cancel.h; docs/BACKENDS.md).
SHMSEM_API void shmsem_cancel_init(shmsem_cancel_t *c) {
  if (c) memset(c, 0, sizeof *c);
}

SHMSEM_API void shmsem_cancel(shmsem_cancel_t *c) {
  if (c) d::cancel_fire(c);
}

SHMSEM_API void shmsem_cancel_reset(shmsem_cancel_t *c) {
  if (c) d::cancel_reset(c);
}

// The non-blocking waiter: started through the handle's backend, then
// driven through the backend that claims it.
SHMSEM_API int shmsem_waiter_start(shmsem_t *s, shmsem_waiter_t *w,
                                   const struct timespec *deadline,
                                   shmsem_lease_t *lease) {
  return d::backend_of(s)->waiter_start(s, w, 1, deadline, lease);
}

SHMSEM_API int shmsem_waiter_start_n(shmsem_t *s, shmsem_waiter_t *w,
                                     uint32_t n,
                                     const struct timespec *deadline,
                                     shmsem_lease_t *lease) {
  return d::backend_of(s)->waiter_start(s, w, n, deadline, lease);
}

SHMSEM_API int shmsem_waiter_futex(const shmsem_waiter_t *w, uint32_t **word,
                                   uint32_t *value) {
  return d::waiter_backend(w)->waiter_futex(w, word, value);
}

SHMSEM_API int shmsem_waiter_wake_by(const shmsem_waiter_t *w,
                                     struct timespec *at) {
  return d::waiter_backend(w)->waiter_wake_by(w, at);
}

SHMSEM_API int shmsem_waiter_poll(shmsem_waiter_t *w, shmsem_lease_t *lease) {
  return d::waiter_backend(w)->waiter_poll(w, lease);
}

SHMSEM_API int shmsem_waiter_cancel(shmsem_waiter_t *w, shmsem_lease_t *lease) {
  return d::waiter_backend(w)->waiter_cancel(w, lease);
}

SHMSEM_API int shmsem_uring_probe(void) {
  d::NoCancel no_cancel;
  return d::ring_futex_available() ? 0 : -EOPNOTSUPP;
}

// A shm (or NULL) handle: the lock-free release inline, then the locked
// one; shm_release is also the shm table's entry.
SHMSEM_API int shmsem_release(shmsem_t *s, shmsem_lease_t *lease) {
  if (d::is_shm(s)) return d::shm_release(s, lease);
  return d::backend_of(s)->release(s, lease);
}

// Leases that expire are a remote backend's (shmsem(7), "Across hosts"):
// a local lease never expires, and has no global grant sequence.
SHMSEM_API int shmsem_lease_renew(shmsem_t *s, const shmsem_lease_t *lease) {
  if (!s || !lease) return -EINVAL;
  const d::Backend *b = d::backend_of(s);
  return b->lease_renew ? b->lease_renew(s, lease) : -EOPNOTSUPP;
}

SHMSEM_API int shmsem_lease_sequence(shmsem_t *s, const shmsem_lease_t *lease,
                                     uint64_t *seq) {
  if (!s || !lease || !seq) return -EINVAL;
  const d::Backend *b = d::backend_of(s);
  return b->lease_sequence ? b->lease_sequence(s, lease, seq) : -EOPNOTSUPP;
}

SHMSEM_API int shmsem_declare_hold(shmsem_t *s, const shmsem_lease_t *lease,
                                   uint64_t hold_ns) {
  return d::backend_of(s)->declare_hold(s, lease, hold_ns);
}

SHMSEM_API int shmsem_shutdown(shmsem_t *s) {
  return d::backend_of(s)->shutdown(s);
}

SHMSEM_API int shmsem_recover(shmsem_t *s) {
  return d::backend_of(s)->recover(s);
}

SHMSEM_API int shmsem_stat(shmsem_t *s, struct shmsem_stat *st) {
  return d::backend_of(s)->stat(s, st);
}

SHMSEM_API uint64_t shmsem_stat_wait_quantile(const struct shmsem_stat *st,
                                              double q) {
  return st ? d::hist_quantile(st->wait_hist, q) : 0;
}

SHMSEM_API uint64_t shmsem_stat_hold_quantile(const struct shmsem_stat *st,
                                              double q) {
  return st ? d::hold_quantile(st->hold_hist, q) : 0;
}

SHMSEM_API uint64_t shmsem_hist_quantile(const uint64_t *hist, double q) {
  return d::hist_quantile(hist, q);
}

SHMSEM_API uint64_t shmsem_hold_bound_ns(unsigned b) {
  return b < SHMSEM_HOLD_BUCKETS ? d::kHoldBoundNs[b] : ~uint64_t{0};
}

SHMSEM_API unsigned shmsem_hist_bucket(uint64_t ns) {
  return d::hist_bucket(ns);
}

SHMSEM_API uint64_t shmsem_hist_lower_ns(unsigned b) {
  return b < SHMSEM_HIST_BUCKETS ? d::hist_lower(b) : ~uint64_t{0};
}

SHMSEM_API uint64_t shmsem_hist_upper_ns(unsigned b) {
  return b < SHMSEM_HIST_BUCKETS ? d::hist_upper(b) : ~uint64_t{0};
}

SHMSEM_API int shmsem_inspect(shmsem_t *s, struct shmsem_inspection *out,
                              struct shmsem_holder *holders,
                              uint32_t max_holders,
                              struct shmsem_waiter_info *waiters,
                              uint32_t max_waiters) {
  return d::backend_of(s)->inspect(s, out, holders, max_holders, waiters,
                                   max_waiters);
}

// Leftovers are files in /dev/shm: the shared-memory backend's alone, so
// outside the seam.
namespace {

struct LeftoverList {
  struct shmsem_leftover *out;
  uint32_t max, n;
};

// Keeps the `max` first by name, in order (an insertion: a handful).
void add_leftover(const d::Leftover &l, void *ctx) {
  auto *list = static_cast<LeftoverList *>(ctx);
  struct shmsem_leftover e;
  memset(&e, 0, sizeof e);
  static_assert(sizeof e.file >= sizeof l.file);
  memcpy(e.file, l.file, sizeof l.file);
  e.pid = l.pid;
  e.creator_gone = l.creator_gone;
  e.size = l.size;
  e.uid = l.uid;
  uint32_t kept = list->n < list->max ? list->n : list->max;
  uint32_t at = 0;
  while (at < kept && strcmp(list->out[at].file, e.file) < 0) at++;
  list->n++;
  if (at >= list->max) return;
  if (kept == list->max) kept--;  // the last one falls off
  memmove(&list->out[at + 1], &list->out[at], (kept - at) * sizeof e);
  list->out[at] = e;
}

}  // namespace

SHMSEM_API int shmsem_leftovers(struct shmsem_leftover *out, uint32_t max) {
  if (!out && max) return -EINVAL;
  LeftoverList list{out, max, 0};
  int r = d::scan_leftovers(add_leftover, &list);
  return r < 0 ? r : int(list.n);
}

SHMSEM_API int shmsem_remove_leftover(const char *file) {
  if (!file) return -EINVAL;
  return d::remove_leftover(file);
}

SHMSEM_API int shmsem_check(shmsem_t *s) { return d::backend_of(s)->check(s); }

SHMSEM_API const char *shmsem_strerror(int err) {
  if (err == INT_MIN) return "unknown error";
  if (err < 0) err = -err;
  switch (err) {
    case 0:
      return "success";
    case ESHUTDOWN:
      return "semaphore is closed";
    case EALREADY:
      return "lease already released";
    case EBUSY:
      return "wait queue is full";
    case EAGAIN:
      return "no permit available now";
    case ETIMEDOUT:
      return "timed out waiting for a permit";
    case ECANCELED:
      return "wait was cancelled";
    case EINTR:
      return "wait was interrupted by a signal";
    case EINVAL:
      return "invalid argument (name, configuration or lease)";
    case ENOENT:
      return "no such semaphore";
    case EEXIST:
      return "semaphore already exists";
    case EBADMSG:
      return "not a shmsem segment, or damaged";
    case EPROTO:
      return "semaphore has an incompatible layout version";
    case EXDEV:
      return "semaphore belongs to another PID namespace";
    case EBADF:
      return "semaphore is open read-only";
    case EUCLEAN:
      return "semaphore invariant is broken";
    case ENOTRECOVERABLE:
      return "waiter slot was reclaimed while in use";
    case EINPROGRESS:
      return "still waiting for a permit";
    case EOPNOTSUPP:
      return "not supported by this kernel or backend";
    case EKEYEXPIRED:
      return "lease expired (not kept alive) and was taken back";
    case ECOMM:
      return "semaphore server unreachable or not answering";
    case EIDRM:
      return "semaphore was removed";
    case EPROTONOSUPPORT:
      return "no backend for this kind of name";
    case EACCES:
      return "permission denied";
    case EPERM:
      return "semaphore belongs to another user";
    default: {
      thread_local char buf[64];
      return strerror_r_text(strerror_r(err, buf, sizeof buf), buf);
    }
  }
}

// The notifier (notifier.h): process-local, so no PID namespace check.
SHMSEM_API int shmsem_notifier_create(shmsem_notifier_t **out) {
  return d::notifier_create(out);
}

SHMSEM_API int shmsem_notifier_fd(const shmsem_notifier_t *n) {
  return d::notifier_fd(n);
}

// The notifier waits on the word of a waiter of any backend: read here,
// through the backend that queued it.
SHMSEM_API int shmsem_notifier_add(shmsem_notifier_t *n, shmsem_waiter_t *w,
                                   uint64_t user_data) {
  if (!n || !w) return -EINVAL;
  const d::Backend *b = d::waiter_backend(w);
  uint32_t *word, value;
  int r = b->waiter_futex(w, &word, &value);
  if (r) return r;
  timespec at;
  r = b->waiter_wake_by(w, &at);
  if (r) return r;
  return d::notifier_add(n, w, user_data, word, value, at);
}

SHMSEM_API int shmsem_notifier_remove(shmsem_notifier_t *n,
                                      shmsem_waiter_t *w) {
  return d::notifier_remove(n, w);
}

SHMSEM_API int shmsem_notifier_next(shmsem_notifier_t *n, uint64_t *user_data) {
  return d::notifier_next(n, user_data);
}

SHMSEM_API void shmsem_notifier_destroy(shmsem_notifier_t *n) {
  d::notifier_destroy(n);
}
