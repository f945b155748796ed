// Test-only interface of the core: hook callbacks, a manual clock, the names
// of the hook points, the create route. Linked only into the tests' build of
// the library.
#ifndef SHMSEM_SRC_TESTING_H
#define SHMSEM_SRC_TESTING_H

#include <stdint.h>

#include <shmsem/shmsem.h>

#include "hooks.h"
#include "publish.h"
#include "testing_state.h"

namespace shmsem::testing {

using detail::HookPoint;
using HookFn = void (*)(HookPoint, void *ctx);

// Call fn(point, ctx) at every hook point, from the thread that reaches it.
// nullptr removes it.
void set_hook(HookFn fn, void *ctx);
// Replace the monotonic clock (nullptr restores the real one). While a
// manual clock is installed, timed waits re-read it at least every 1 ms.
void set_clock(uint64_t (*now_ns)());
const char *hook_name(HookPoint p);

// Make shmsem_create in this process build under a temporary name (the route
// for kernels and mounts without O_TMPFILE) instead of in an unnamed file.
void force_named_tmp_create(bool on);
// Make it link the unnamed file through /proc/self/fd without first trying
// linkat(AT_EMPTY_PATH) (which root, and since Linux 6.10 anyone, may use).
void force_proc_fd_link(bool on);
using detail::PublishRoute;
// The route the last shmsem_create in this process took, as far as it got:
// kUnnamed while an unnamed file is open but not linked; kNone before.
PublishRoute last_create_route();

// Take liveness features away (detail::kLimit* bits; 0 restores all), to
// exercise the fallbacks of older kernels and hidden /proc.
void limit_liveness(unsigned limits);

// The lease record and slot counts straight from the segment, for tests.
struct Census {
  uint32_t free_leases, held, reserved;
  uint32_t waiting_slots, granted_slots, other_slots, free_slots;
};
Census census(shmsem_t *s);
// Owner pid recorded for a lease (or -1).
int lease_owner_pid(shmsem_t *s, shmsem_lease_t lease);
// Overwrite the owner recorded for a held lease (simulates a recycled PID:
// a live pid with another start time or pidfs inode). Returns 0 or -EINVAL.
int set_lease_owner(shmsem_t *s, shmsem_lease_t lease, int pid, uint64_t start,
                    uint64_t ino);
// Tickets of the queued waiters, head first.
int queue_tickets(shmsem_t *s, uint64_t *out, int max);

}  // namespace shmsem::testing

#endif  // SHMSEM_SRC_TESTING_H
