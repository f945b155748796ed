// The semaphores in /dev/shm, each read on its own (list.cc; shmsem_list
// in <shmsem/inspect.h>).
#ifndef SHMSEM_SRC_LIST_H
#define SHMSEM_SRC_LIST_H

#include <stdint.h>

#include <shmsem/inspect.h>

namespace shmsem::detail {

// shmsem_list once its arguments are checked (`out` is not NULL when `max`
// is not 0): how many files there are, the first `max` of them read into
// `out`; or a negative errno if /dev/shm itself cannot be read.
int list(struct shmsem_list_entry *out, uint32_t max);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_LIST_H
