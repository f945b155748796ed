#ifndef SHMSEM_SRC_RELEASE_H
#define SHMSEM_SRC_RELEASE_H

#include "handle.h"

namespace shmsem::detail {

// Under the lock, for a token release_lockfree() (fast/fastpath.h) passed
// on: the lease's permit goes to the head waiter or the pool.
int release_locked(shmsem_t *s, const shmsem_lease_t *lease);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RELEASE_H
