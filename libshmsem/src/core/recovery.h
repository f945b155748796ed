#ifndef SHMSEM_SRC_RECOVERY_H
#define SHMSEM_SRC_RECOVERY_H

#include "handle.h"

namespace shmsem::detail {

// Called with the lock held after a takeover: the previous lock owner died
// inside a critical section. Rebuilds every derived structure from the
// record states (docs/DESIGN.md §7) and finishes half-done grants.
void repair(shmsem_t *s);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RECOVERY_H
