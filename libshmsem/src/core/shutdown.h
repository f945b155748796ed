#ifndef SHMSEM_SRC_SHUTDOWN_H
#define SHMSEM_SRC_SHUTDOWN_H

#include "handle.h"
#include "section.h"

namespace shmsem::detail {

int shutdown(shmsem_t *s);
// Under the lock: move every queued waiter to CLOSED and wake it.
int fail_queued(Locked s);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_SHUTDOWN_H
