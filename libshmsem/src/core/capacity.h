// The capacity at run time: a shrink retires permits, a grow brings them
// back. docs/DESIGN.md section 13.
#ifndef SHMSEM_SRC_CAPACITY_H
#define SHMSEM_SRC_CAPACITY_H

#include "handle.h"
#include "tables.h"

namespace shmsem::detail {

// shmsem_set_permits: commits the new capacity (one store), then settles.
int set_capacity(shmsem_t *s, uint32_t permits);

// Under the lock: the records follow core.capacity. RETIRED records plus
// `retiring` (permits held above the capacity, retired as they come back)
// make up records - capacity: a shrink adds to `retiring` and retires
// free permits at once; a grow first forgets what was still to retire,
// then passes RETIRED records on (pass_permit: the head first). A shrink
// also takes back the head's reservation (nobody holds it yet). Run again
// by repair, which recounts `retired` and sets `retiring` to 0 first: a
// resize cut short at any step is finished there.
void settle_capacity(Locked s, Wakes *wk);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CAPACITY_H
