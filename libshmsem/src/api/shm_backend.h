// The shared-memory backend (shm_backend.cc implements the seam's table,
// kShmBackend, with the layers below): what of it capi.cc runs inline for
// a shm handle, before and instead of the table, so that the uncontended
// acquire and release cost what they cost before the seam.
#ifndef SHMSEM_SRC_SHM_BACKEND_H
#define SHMSEM_SRC_SHM_BACKEND_H

#include <errno.h>

#include "fastpath.h"
#include "handle.h"
#include "hooks.h"
#include "owner.h"
#include "release.h"

namespace shmsem::detail {

// Every call that takes the segment lock or records an owner: a process in
// another PID namespace than the semaphore's (a child that unshare()d one
// and uses an inherited handle) would name itself by a tid that means
// someone else here, and be robbed of the lock as "dead". -EXDEV instead.
inline bool foreign_pidns(const shmsem_t *s) {
  return s && !pidns_compatible(s->pidns);
}

// One permit by the lock-free path (fastpath.h) for a non-NULL `s` and
// `lease`: true and *lease filled, or false: the table's acquire or
// try_acquire decides (the locked path handles every state the lock-free
// one does, so those entries are complete without this). It comes before
// the PID namespace check: it works only with the process record this
// process registered under the lock, which that check guarded (a process
// never changes its PID namespace; a child has another pid, and registers
// its own).
inline bool shm_fast_acquire(shmsem_t *s, shmsem_lease_t *lease) {
  if (fast_acquire(s, lease) != 0) return false;
  SHMSEM_HOOK(ACQUIRE_TAKEN);
  return true;
}

// The table's release, whole: the token's checks and the lock-free
// release, else the locked one. Inline: capi.cc calls it for a shm (or
// NULL) handle rather than through the table.
inline int shm_release(shmsem_t *s, shmsem_lease_t *lease) {
  const int r = release_lockfree(s, lease);
  if (r <= 0) return r;
  if (foreign_pidns(s)) return -EXDEV;
  return release_locked(s, lease);
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_SHM_BACKEND_H
