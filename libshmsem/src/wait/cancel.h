// The transitions of the cancellation handle (segment/cancel_handle.h):
// arm and disarm by the waiter, fire by any thread.
#ifndef SHMSEM_SRC_CANCEL_H
#define SHMSEM_SRC_CANCEL_H

#include "cancel_handle.h"

namespace shmsem::detail {

// false: already fired, do not wait. A fire while armed calls
// withdraw(s, slot, ticket) in the canceller's thread.
bool cancel_arm(shmsem_cancel_t *c, shmsem_t *s, uint32_t slot, uint64_t ticket,
                CancelWithdraw withdraw);
void cancel_disarm(shmsem_cancel_t *c);
void cancel_fire(shmsem_cancel_t *c);
// FIRED (or IDLE) -> IDLE: the handle may be used again (shmsem_cancel_reset).
void cancel_reset(shmsem_cancel_t *c);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CANCEL_H
