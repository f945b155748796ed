// Declared hold times (declare.cc).
#ifndef SHMSEM_SRC_DECLARE_H
#define SHMSEM_SRC_DECLARE_H

#include "handle.h"

namespace shmsem::detail {

int declare_hold(shmsem_t *s, const shmsem_lease_t *lease, uint64_t hold_ns);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_DECLARE_H
