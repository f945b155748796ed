#ifndef SHMSEM_SRC_CHECK_H
#define SHMSEM_SRC_CHECK_H

#include <stddef.h>

#include "handle.h"

namespace shmsem::detail {

// 0, or -EUCLEAN with the broken invariant named in `msg`.
int check(shmsem_t *s, char *msg, size_t len);
int check_locked(shmsem_t *s, char *msg, size_t len);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CHECK_H
