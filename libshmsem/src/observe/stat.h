#ifndef SHMSEM_SRC_STAT_H
#define SHMSEM_SRC_STAT_H

#include "handle.h"

namespace shmsem::detail {

int stat(shmsem_t *s, struct shmsem_stat *st);
// Fill without the lock (the caller holds it, or cannot take it).
void stat_fill(shmsem_t *s, struct shmsem_stat *st);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_STAT_H
