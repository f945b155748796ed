// Test-only interface of the core: hook callbacks, a manual clock, and the
// names of the hook points. Linked only into the tests' build of the library.
#ifndef SHMSEM_SRC_TESTING_H
#define SHMSEM_SRC_TESTING_H

#include <stdint.h>

#include <shmsem/shmsem.h>

#include "hooks.h"

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

// The lease record and slot counts straight from the segment, for tests.
struct Census {
  uint32_t free_leases, held, reserved;
  uint32_t waiting_slots, granted_slots, other_slots, free_slots;
};
Census census(shmsem_t *s);
// Owner pid recorded for a lease (or -1).
int lease_owner_pid(shmsem_t *s, shmsem_lease_t lease);
// Overwrite the owner recorded for a held lease (simulates a recycled PID:
// a live pid with another start time). Returns 0 or -EINVAL.
int set_lease_owner(shmsem_t *s, shmsem_lease_t lease, int pid,
                    uint64_t start);
// Tickets of the queued waiters, head first.
int queue_tickets(shmsem_t *s, uint64_t *out, int max);

}  // namespace shmsem::testing

#endif  // SHMSEM_SRC_TESTING_H
