// The shared-memory backend: the seam's table (backend.h) over the layers
// below, for names without a URL scheme ("/pool" in /dev/shm). Each entry
// is the code the C entry point ran before the seam, from the PID
// namespace check on; the argument checks that do not depend on the
// backend stay in capi.cc. docs/BACKENDS.md.
#include "shm_backend.h"

#include <stddef.h>
#include <string.h>

#include <type_traits>

#include "acquire.h"
#include "backend.h"
#include "capacity.h"
#include "check.h"
#include "create.h"
#include "declare.h"
#include "inspect.h"
#include "lanes.h"
#include "limit.h"
#include "list.h"
#include "reclaim.h"
#include "segment.h"
#include "shutdown.h"
#include "stat.h"
#include "waiter.h"
#include "waiter_api.h"

namespace shmsem::detail {

// backend_of() reads a handle's first word as its backend: nullptr, which
// stands for this one, in every handle the segment layer builds.
static_assert(std::is_standard_layout_v<shmsem_handle>);
static_assert(offsetof(shmsem_handle, backend) == 0);

namespace {

// --- acquire and release -----------------------------------------------------

int shm_acquire(shmsem_t *s, uint32_t n, const timespec *deadline,
                shmsem_cancel_t *cancel, unsigned flags,
                shmsem_lease_t *lease) {
  if (foreign_pidns(s)) return -EXDEV;
  return acquire(s, n, deadline, cancel, flags, lease);
}

// Never blocks for long: a lock held by someone else, or a reclamation
// pass, gets the floor of a limit that has already passed (lock.h,
// reclaim.h), then the try fails as if no permit were free. The deadline
// is "long past", not "now": no clock read on the uncontended path.
int shm_try_acquire(shmsem_t *s, uint32_t n, shmsem_lease_t *lease) {
  if (!s || !lease) return -EINVAL;
  if (foreign_pidns(s)) return -EXDEV;
  Waiter w;
  const Limit now{1};
  int r = waiter_start(s, n, false, &now, &w, lease);
  if (r == -EAGAIN && maybe_reclaim(s, &now) > 0)
    r = waiter_start(s, n, false, &now, &w, lease);
  if (r == 0) SHMSEM_HOOK(ACQUIRE_TAKEN);
  return r == -ETIMEDOUT ? -EAGAIN : r;
}

int shm_release_entry(shmsem_t *s, shmsem_lease_t *lease) {
  return shm_release(s, lease);
}

int shm_declare_hold(shmsem_t *s, const shmsem_lease_t *lease,
                     uint64_t hold_ns) {
  if (foreign_pidns(s)) return -EXDEV;
  return declare_hold(s, lease, hold_ns);
}

// --- the whole semaphore -----------------------------------------------------

int shm_set_permits(shmsem_t *s, uint32_t permits) {
  if (foreign_pidns(s)) return -EXDEV;
  return set_capacity(s, permits);
}

// A read-only handle takes no lock: the calls below work through one from
// anywhere.
bool foreign_writer(const shmsem_t *s) {
  return foreign_pidns(s) && !s->rdonly;
}

int shm_shutdown(shmsem_t *s) {
  if (foreign_writer(s)) return -EXDEV;
  return shutdown(s);
}

int shm_recover(shmsem_t *s) {
  if (foreign_writer(s)) return -EXDEV;
  int r = reclaim(s, nullptr);
  // And free leases that no lane names any more (a writer's, or a defect's).
  if (r >= 0) r += recover_unnamed_loose(s);
  // And whatever else a writer left broken is rebuilt from the records:
  // after a recover, shmsem_check returns 0 (docs/DESIGN.md §7a).
  // A repair may have put records in use that the pass above could not
  // see (a slot a writer made WAITING, missing from the in-use array): one
  // more pass judges their owners.
  if (r >= 0 && check_and_repair(s)) {
    const int again = reclaim(s, nullptr);
    if (again > 0) r += again;
  }
  return r;
}

int shm_check(shmsem_t *s) {
  if (foreign_writer(s)) return -EXDEV;
  return check(s, nullptr, 0);
}

int shm_stat(shmsem_t *s, struct shmsem_stat *st) {
  if (foreign_writer(s)) return -EXDEV;
  return stat(s, st);
}

int shm_inspect(shmsem_t *s, struct shmsem_inspection *out,
                struct shmsem_holder *holders, uint32_t max_holders,
                struct shmsem_waiter_info *waiters, uint32_t max_waiters) {
  if (foreign_writer(s)) return -EXDEV;
  return inspect(s, out, holders, max_holders, waiters, max_waiters);
}

// --- the non-blocking waiter -------------------------------------------------

// Only start may record an owner; the later calls work on a slot the PID
// namespace check already let in.
int shm_waiter_start(shmsem_t *s, shmsem_waiter_t *w, uint32_t n,
                     const timespec *deadline, shmsem_lease_t *lease) {
  if (foreign_pidns(s)) return -EXDEV;
  return async_start(s, w, n, deadline, lease);
}

// shmsem_list_at for /dev/shm: what shmsem_list does. Only the directory
// itself is a place of this backend (with or without its last slash).
int shm_list(const char *where, struct shmsem_list_entry *out, uint32_t max) {
  if (where && strcmp(where, "/dev/shm") != 0 &&
      strcmp(where, "/dev/shm/") != 0)
    return -EINVAL;
  return list(out, max);
}

// No scheme: names without one ("/pool") are this backend's.
const char *const kNoSchemes[] = {nullptr};

// The table, entry by entry by name (C++17 has no designated
// initializers); a constant expression, so kShmBackend is initialised
// before any code runs.
constexpr Backend shm_table() {
  Backend b{};
  b.name = "shm";
  b.schemes = kNoSchemes;
  b.create = segment_create;
  b.open = segment_open;
  b.unlink = segment_unlink;
  b.detach = segment_detach;
  b.acquire = shm_acquire;
  b.try_acquire = shm_try_acquire;
  b.release = shm_release_entry;
  b.set_permits = shm_set_permits;
  b.shutdown = shm_shutdown;
  b.recover = shm_recover;
  b.check = shm_check;
  b.stat = shm_stat;
  b.inspect = shm_inspect;
  b.declare_hold = shm_declare_hold;
  b.waiter_start = shm_waiter_start;
  b.owns_waiter = nullptr;  // the fallback, never asked (backend.h)
  b.waiter_futex = async_futex;
  b.waiter_wake_by = async_wake_by;
  b.waiter_poll = async_poll;
  b.waiter_cancel = async_cancel;
  b.list = shm_list;
  return b;
}

}  // namespace

const Backend kShmBackend = shm_table();

}  // namespace shmsem::detail
