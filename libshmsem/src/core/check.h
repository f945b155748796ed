#ifndef SHMSEM_SRC_CHECK_H
#define SHMSEM_SRC_CHECK_H

#include <stddef.h>

#include "handle.h"

namespace shmsem::detail {

// 0, or -EUCLEAN with the broken invariant named in `msg`.
int check(shmsem_t *s, char *msg, size_t len);
int check_locked(shmsem_t *s, char *msg, size_t len);
// Takes the lock; if any invariant is broken, repairs (recovery.h), after
// which check() returns 0 (shmsem_recover's last step). Returns 1 if it
// repaired, else 0.
int check_and_repair(shmsem_t *s);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CHECK_H
