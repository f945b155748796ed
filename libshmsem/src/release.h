#ifndef SHMSEM_SRC_RELEASE_H
#define SHMSEM_SRC_RELEASE_H

#include "handle.h"

namespace shmsem::detail {

int release(shmsem_t *s, shmsem_lease_t *lease);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_RELEASE_H
