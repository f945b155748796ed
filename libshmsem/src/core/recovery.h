#ifndef SHMSEM_SRC_RECOVERY_H
#define SHMSEM_SRC_RECOVERY_H

#include "handle.h"
#include "section.h"

namespace shmsem::detail {

// Inside a section whose previous holder died inside, or that found damage:
// rebuilds every derived structure from the record states (docs/DESIGN.md
// §7) and finishes half-done grants; the slots to wake go to `wk`.
void repair(Locked s, Wakes *wk);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RECOVERY_H
