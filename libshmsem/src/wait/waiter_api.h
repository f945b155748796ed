// The public non-blocking waiter (shmsem_waiter_t): the waiter of waiter.h
// kept in caller memory between the steps of an event loop, plus the share
// of the watch for dead processes that a blocking waiter runs between its
// sleeps (reclaim.h), here run at each poll. docs/DESIGN.md section 12.
#ifndef SHMSEM_SRC_WAITER_API_H
#define SHMSEM_SRC_WAITER_API_H

#include <shmsem/shmsem.h>

#include "handle.h"

namespace shmsem::detail {

int async_start(shmsem_t *s, shmsem_waiter_t *w, uint32_t weight,
                const timespec *deadline, shmsem_lease_t *lease);
int async_futex(const shmsem_waiter_t *w, uint32_t **word, uint32_t *value);
int async_wake_by(const shmsem_waiter_t *w, timespec *at);
int async_poll(shmsem_waiter_t *w, shmsem_lease_t *lease);
int async_cancel(shmsem_waiter_t *w, shmsem_lease_t *lease);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_WAITER_API_H
