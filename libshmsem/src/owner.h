// Owner identity and liveness: a process is named by its PID plus its start
// time (field 22 of /proc/<pid>/stat, clock ticks since boot), so a recycled
// PID never passes for the old owner. A zombie is dead for our purposes.
#ifndef SHMSEM_SRC_OWNER_H
#define SHMSEM_SRC_OWNER_H

#include <stdint.h>

#include "layout.h"

namespace shmsem::detail {

// This process, cached (reset in fork children by a pthread_atfork handler),
// so the fast path makes no system call.
const Owner &self_owner();

// Start time of `pid` and whether it is running (not a zombie).
// Returns false if the process does not exist.
bool proc_start_time(int32_t pid, uint64_t *start, bool *zombie);

// True if the recorded owner is still a live process.
bool owner_alive(const Owner &o);

// Inode of this process's PID namespace (0 if it cannot be read).
uint64_t pidns_inode();

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_OWNER_H
