// Snapshots for monitors (inspect.cc; <shmsem/inspect.h>).
#ifndef SHMSEM_SRC_INSPECT_H
#define SHMSEM_SRC_INSPECT_H

#include <shmsem/inspect.h>

#include "handle.h"

namespace shmsem::detail {

int inspect(shmsem_t *s, struct shmsem_inspection *out,
            struct shmsem_holder *holders, uint32_t max_holders,
            struct shmsem_waiter_info *waiters, uint32_t max_waiters);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_INSPECT_H
