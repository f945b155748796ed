#ifndef SHMSEM_SRC_RELEASE_H
#define SHMSEM_SRC_RELEASE_H

#include "handle.h"

namespace shmsem::detail {

// Release a lease: the lock-free path if it can, else the locked one.
int release(shmsem_t *s, shmsem_lease_t *lease);
// The token's checks and the lock-free path: 0 released, a negative errno,
// or 1: the locked path must decide (release_locked()).
int release_lockfree(shmsem_t *s, const shmsem_lease_t *lease);
// Under the lock, for a token release_lockfree() passed on.
int release_locked(shmsem_t *s, const shmsem_lease_t *lease);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RELEASE_H
