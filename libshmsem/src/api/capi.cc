// The C API boundary: argument checks and dispatch into shmsem::detail.
// Nothing below this file sees a C caller.
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <shmsem/shmsem.h>

#include "acquire.h"
#include "waiter_api.h"
#include "cancel.h"
#include "thread_cancel.h"
#include "capacity.h"
#include "check.h"
#include "clock.h"
#include "deathwatch.h"
#include "declare.h"
#include "fastpath.h"
#include "handle.h"
#include "hist.h"
#include "hooks.h"
#include "inspect.h"
#include "notifier.h"
#include "owner.h"
#include "publish.h"
#include "reclaim.h"
#include "release.h"
#include "create.h"
#include "segment.h"
#include "shutdown.h"
#include "stat.h"
#include "waiter.h"

#define SHMSEM_API extern "C" __attribute__((visibility("default")))

namespace d = shmsem::detail;

namespace {

// Every call that takes the segment lock or records an owner: a process in
// another PID namespace than the semaphore's (a child that unshare()d one
// and uses an inherited handle) would name itself by a tid that means
// someone else here, and be robbed of the lock as "dead". -EXDEV instead.
bool foreign_pidns(shmsem_t *s) { return s && !d::pidns_compatible(s->pidns); }

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

}  // namespace

// create and open open, read and close files, which are cancellation
// points; the API promises none outside the queue.
SHMSEM_API int shmsem_create(const char *name, const struct shmsem_config *cfg,
                             int flags, shmsem_t **out) {
  d::NoCancel no_cancel;
  return d::segment_create(name, cfg, flags, out);
}

SHMSEM_API int shmsem_open(const char *name, int flags, shmsem_t **out) {
  d::NoCancel no_cancel;
  return d::segment_open(name, flags, out);
}

SHMSEM_API void shmsem_detach(shmsem_t *s) { d::segment_detach(s); }

SHMSEM_API int shmsem_unlink(const char *name) {
  return d::segment_unlink(name);
}

// The lock-free path comes before the PID namespace check: it works only
// with the process record this process registered under the lock, which
// that check guarded (a process never changes its PID namespace; a child
// has another pid, and registers its own).
SHMSEM_API int shmsem_acquire(shmsem_t *s, shmsem_lease_t *lease) {
  if (s && lease && d::fast_acquire(s, lease) == 0) {
    SHMSEM_HOOK(ACQUIRE_TAKEN);
    return 0;
  }
  if (foreign_pidns(s)) return -EXDEV;
  return d::acquire(s, 1, nullptr, nullptr, 0, lease);
}

namespace {

int try_acquire(shmsem_t *s, uint32_t n, shmsem_lease_t *lease) {
  if (!s || !lease) return -EINVAL;
  if (n == 1 && d::fast_acquire(s, lease) == 0) {
    SHMSEM_HOOK(ACQUIRE_TAKEN);
    return 0;
  }
  if (foreign_pidns(s)) return -EXDEV;
  // Never blocks for long: a lock held by someone else, or a reclamation
  // pass, gets the floor of a limit that has already passed (lock.h,
  // reclaim.h), then the try fails as if no permit were free. The deadline
  // is "long past", not "now": no clock read on the uncontended path.
  d::Waiter w;
  const d::Limit now{1};
  int r = d::waiter_start(s, n, false, &now, &w, lease);
  if (r == -EAGAIN && d::maybe_reclaim(s, &now) > 0)
    r = d::waiter_start(s, n, false, &now, &w, lease);
  if (r == 0) SHMSEM_HOOK(ACQUIRE_TAKEN);
  return r == -ETIMEDOUT ? -EAGAIN : r;
}

}  // namespace

SHMSEM_API int shmsem_try_acquire(shmsem_t *s, shmsem_lease_t *lease) {
  return try_acquire(s, 1, lease);
}

SHMSEM_API int shmsem_acquire_until(shmsem_t *s, const struct timespec *deadline,
                                    shmsem_lease_t *lease) {
  if (!deadline) return -EINVAL;
  if (foreign_pidns(s)) return -EXDEV;
  return d::acquire(s, 1, deadline, nullptr, 0, lease);
}

namespace {

// A relative timeout as the absolute deadline acquire() takes: from one
// read of the monotonic clock (the tests' manual clock when installed);
// past what 64-bit nanoseconds hold, no deadline ("never").
int acquire_for(shmsem_t *s, uint32_t n, uint64_t timeout_ns,
                shmsem_lease_t *lease) {
  if (foreign_pidns(s)) return -EXDEV;
  const uint64_t now = d::mono_ns();
  if (timeout_ns > UINT64_MAX - now)
    return d::acquire(s, n, nullptr, nullptr, 0, lease);
  const struct timespec deadline = d::ns_to_ts(now + timeout_ns);
  return d::acquire(s, n, &deadline, nullptr, 0, lease);
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
  if (foreign_pidns(s)) return -EXDEV;
  return d::acquire(s, 1, deadline, cancel, flags, lease);
}

// Weighted acquires: the same calls for n permits (waiter_start checks n).
SHMSEM_API int shmsem_acquire_n(shmsem_t *s, uint32_t n,
                                shmsem_lease_t *lease) {
  // One permit: the lock-free path first, as shmsem_acquire.
  if (n == 1 && s && lease && d::fast_acquire(s, lease) == 0) {
    SHMSEM_HOOK(ACQUIRE_TAKEN);
    return 0;
  }
  if (foreign_pidns(s)) return -EXDEV;
  return d::acquire(s, n, nullptr, nullptr, 0, lease);
}

SHMSEM_API int shmsem_try_acquire_n(shmsem_t *s, uint32_t n,
                                    shmsem_lease_t *lease) {
  return try_acquire(s, n, lease);
}

SHMSEM_API int shmsem_acquire_until_n(shmsem_t *s, uint32_t n,
                                      const struct timespec *deadline,
                                      shmsem_lease_t *lease) {
  if (!deadline) return -EINVAL;
  if (foreign_pidns(s)) return -EXDEV;
  return d::acquire(s, n, deadline, nullptr, 0, lease);
}

SHMSEM_API int shmsem_acquire_ex_n(shmsem_t *s, uint32_t n,
                                   const struct timespec *deadline,
                                   shmsem_cancel_t *cancel, unsigned flags,
                                   shmsem_lease_t *lease) {
  if (foreign_pidns(s)) return -EXDEV;
  return d::acquire(s, n, deadline, cancel, flags, lease);
}

SHMSEM_API int shmsem_set_permits(shmsem_t *s, uint32_t permits) {
  if (foreign_pidns(s)) return -EXDEV;
  return d::set_capacity(s, permits);
}

SHMSEM_API void shmsem_cancel_init(shmsem_cancel_t *c) {
  if (c) memset(c, 0, sizeof *c);
}

SHMSEM_API void shmsem_cancel(shmsem_cancel_t *c) {
  if (c) d::cancel_fire(c);
}

SHMSEM_API void shmsem_cancel_reset(shmsem_cancel_t *c) {
  if (c) d::cancel_impl(c)->state.store(d::kCancelIdle, std::memory_order_release);
}

// The non-blocking waiter (async.h). Only start may record an owner; the
// later calls work on a slot the PID namespace check already let in.
SHMSEM_API int shmsem_waiter_start(shmsem_t *s, shmsem_waiter_t *w,
                                   const struct timespec *deadline,
                                   shmsem_lease_t *lease) {
  if (foreign_pidns(s)) return -EXDEV;
  return d::async_start(s, w, 1, deadline, lease);
}

SHMSEM_API int shmsem_waiter_start_n(shmsem_t *s, shmsem_waiter_t *w,
                                     uint32_t n,
                                     const struct timespec *deadline,
                                     shmsem_lease_t *lease) {
  if (foreign_pidns(s)) return -EXDEV;
  return d::async_start(s, w, n, deadline, lease);
}

SHMSEM_API int shmsem_waiter_futex(const shmsem_waiter_t *w, uint32_t **word,
                                   uint32_t *value) {
  return d::async_futex(w, word, value);
}

SHMSEM_API int shmsem_waiter_wake_by(const shmsem_waiter_t *w,
                                     struct timespec *at) {
  return d::async_wake_by(w, at);
}

SHMSEM_API int shmsem_waiter_poll(shmsem_waiter_t *w, shmsem_lease_t *lease) {
  return d::async_poll(w, lease);
}

SHMSEM_API int shmsem_waiter_cancel(shmsem_waiter_t *w,
                                    shmsem_lease_t *lease) {
  return d::async_cancel(w, lease);
}

SHMSEM_API int shmsem_uring_probe(void) {
  d::NoCancel no_cancel;
  return d::ring_futex_available() ? 0 : -EOPNOTSUPP;
}

SHMSEM_API int shmsem_release(shmsem_t *s, shmsem_lease_t *lease) {
  int r = d::release_lockfree(s, lease);
  if (r <= 0) return r;
  if (foreign_pidns(s)) return -EXDEV;
  return d::release_locked(s, lease);
}

SHMSEM_API int shmsem_declare_hold(shmsem_t *s, const shmsem_lease_t *lease,
                                   uint64_t hold_ns) {
  if (foreign_pidns(s)) return -EXDEV;
  return d::declare_hold(s, lease, hold_ns);
}

SHMSEM_API int shmsem_shutdown(shmsem_t *s) {
  if (foreign_pidns(s) && !s->rdonly) return -EXDEV;
  return d::shutdown(s);
}

SHMSEM_API int shmsem_recover(shmsem_t *s) {
  if (foreign_pidns(s) && !s->rdonly) return -EXDEV;
  int r = d::reclaim(s, nullptr);
  // And free leases that no lane names any more (a writer's, or a defect's).
  if (r >= 0) r += d::recover_unnamed_loose(s);
  // And whatever else a writer left broken is rebuilt from the records:
  // after a recover, shmsem_check returns 0 (docs/DESIGN.md §7a).
  // A repair may have put records in use that the pass above could not
  // see (a slot a writer made WAITING, missing from the in-use array): one
  // more pass judges their owners.
  if (r >= 0 && d::check_and_repair(s)) {
    const int again = d::reclaim(s, nullptr);
    if (again > 0) r += again;
  }
  return r;
}

// A read-only handle takes no lock: those work from anywhere.
SHMSEM_API int shmsem_stat(shmsem_t *s, struct shmsem_stat *st) {
  if (foreign_pidns(s) && !s->rdonly) return -EXDEV;
  return d::stat(s, st);
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

SHMSEM_API unsigned shmsem_hist_bucket(uint64_t ns) { return d::hist_bucket(ns); }

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
  if (foreign_pidns(s) && !s->rdonly) return -EXDEV;
  return d::inspect(s, out, holders, max_holders, waiters, max_waiters);
}

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

SHMSEM_API int shmsem_check(shmsem_t *s) {
  if (foreign_pidns(s) && !s->rdonly) return -EXDEV;
  return d::check(s, nullptr, 0);
}

SHMSEM_API const char *shmsem_strerror(int err) {
  if (err == INT_MIN) return "unknown error";
  if (err < 0) err = -err;
  switch (err) {
    case 0: return "success";
    case ESHUTDOWN: return "semaphore is closed";
    case EALREADY: return "lease already released";
    case EBUSY: return "wait queue is full";
    case EAGAIN: return "no permit available now";
    case ETIMEDOUT: return "timed out waiting for a permit";
    case ECANCELED: return "wait was cancelled";
    case EINTR: return "wait was interrupted by a signal";
    case EINVAL: return "invalid argument (name, configuration or lease)";
    case ENOENT: return "no such semaphore";
    case EEXIST: return "semaphore already exists";
    case EBADMSG: return "not a shmsem segment, or damaged";
    case EPROTO: return "semaphore has an incompatible layout version";
    case EXDEV: return "semaphore belongs to another PID namespace";
    case EBADF: return "semaphore is open read-only";
    case EUCLEAN: return "semaphore invariant is broken";
    case ENOTRECOVERABLE: return "waiter slot was reclaimed while in use";
    case EINPROGRESS: return "still waiting for a permit";
    case EOPNOTSUPP: return "not supported by this kernel";
    case EACCES: return "permission denied";
    case EPERM: return "semaphore belongs to another user";
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

SHMSEM_API int shmsem_notifier_add(shmsem_notifier_t *n, shmsem_waiter_t *w,
                                   uint64_t user_data) {
  return d::notifier_add(n, w, user_data);
}

SHMSEM_API int shmsem_notifier_remove(shmsem_notifier_t *n,
                                      shmsem_waiter_t *w) {
  return d::notifier_remove(n, w);
}

SHMSEM_API int shmsem_notifier_next(shmsem_notifier_t *n,
                                    uint64_t *user_data) {
  return d::notifier_next(n, user_data);
}

SHMSEM_API void shmsem_notifier_destroy(shmsem_notifier_t *n) {
  d::notifier_destroy(n);
}
