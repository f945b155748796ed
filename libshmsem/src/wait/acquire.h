#ifndef SHMSEM_SRC_ACQUIRE_H
#define SHMSEM_SRC_ACQUIRE_H

#include "handle.h"

namespace shmsem::detail {

// Every blocking acquire of `weight` permits. deadline_ts: absolute
// CLOCK_MONOTONIC or nullptr.
int acquire(shmsem_t *s, uint32_t weight, const timespec *deadline_ts,
            shmsem_cancel_t *cancel, unsigned flags, shmsem_lease_t *lease);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_ACQUIRE_H
