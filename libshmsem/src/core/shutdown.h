#ifndef SHMSEM_SRC_SHUTDOWN_H
#define SHMSEM_SRC_SHUTDOWN_H

#include "handle.h"

namespace shmsem::detail {

int shutdown(shmsem_t *s);
// Under the lock: move every queued waiter to CLOSED and wake it.
int fail_queued(shmsem_t *s);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_SHUTDOWN_H
