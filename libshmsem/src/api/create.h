// Creating a semaphore (shmsem_create): see create.cc.
#ifndef SHMSEM_SRC_CREATE_H
#define SHMSEM_SRC_CREATE_H

#include "handle.h"

namespace shmsem::detail {

int segment_create(const char *name, const shmsem_config *cfg, int flags,
                   shmsem_t **out);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CREATE_H
