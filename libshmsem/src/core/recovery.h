#ifndef SHMSEM_SRC_RECOVERY_H
#define SHMSEM_SRC_RECOVERY_H

#include "handle.h"
#include "section.h"

namespace shmsem::detail {

// Inside a section whose previous holder died inside, or that found damage:
// rebuilds every derived structure from the record states (docs/DESIGN.md
// §7) and finishes half-done grants, waking their waiters at once, under
// the lock: a repair runs after a death, and its wake-ups must not wait for
// an unlock this process may not live to reach.
void repair(Locked s);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RECOVERY_H
