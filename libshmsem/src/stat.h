#ifndef SHMSEM_SRC_STAT_H
#define SHMSEM_SRC_STAT_H

#include "handle.h"

namespace shmsem::detail {

int stat(shmsem_t *s, struct shmsem_stat *st);
uint64_t wait_quantile(const struct shmsem_stat *st, double q);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_STAT_H
