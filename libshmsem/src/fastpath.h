// The lock-free path: an uncontended acquire and release that take no lock
// and make no system call, one CAS on the lease word each, and stay
// attributable to their process after a crash. docs/DESIGN.md section 11.
//
// A thread's lane (layout.h) names the lease it freed last (`loose`). A
// release stores that name, then CASes its lease HELD_FAST -> LOOSE; an
// acquire reads the lease its lane names and, if it is still LOOSE and the
// gate is shut (nobody queued, not closed), CASes it LOOSE -> HELD_FAST
// under its own process record. Everything else (no lane, no process
// record, a gate open, a CAS lost, a lease that is not the lane's) takes the
// locked path, which handles every state.
#ifndef SHMSEM_SRC_FASTPATH_H
#define SHMSEM_SRC_FASTPATH_H

#include <shmsem/shmsem.h>

#include "handle.h"

namespace shmsem::detail {

// 0 and *lease filled, or 1: take the locked path.
int fast_acquire(shmsem_t *s, shmsem_lease_t *lease);
// 0 released, or 1: take the locked path (which gives every error). The
// caller has checked the token's semaphore, index and reserved field.
int fast_release(shmsem_t *s, const shmsem_lease_t *lease);

// --- under the lock ------------------------------------------------------------
// This process's record, registered at the first call (kNoProc if none is
// free: the process then works without the lock-free path).
uint32_t self_proc(shmsem_t *s);
// Lease `l` read as `w`, LOOSE: CAS it to HELD (listed, owned by this
// process for the instant until the caller commits its next state) and
// pass it to the head waiter or the pool (pass_permit). Returns the slot to
// wake, or kNone; false in *taken if the word was no longer `w`.
uint32_t pass_loose(shmsem_t *s, uint32_t l, uint64_t w, bool *taken);
// Any LOOSE lease, taken for this process as HELD_FAST under `proc` (or
// HELD with `me` as owner if proc is kNoProc). kNone if none.
uint32_t take_any_loose(shmsem_t *s, uint32_t proc, const Owner &me,
                        uint64_t *gen);
// While anyone is queued, every LOOSE lease goes to the head waiters; each
// granted slot is woken at once. Returns how many were passed on.
int sweep_loose(shmsem_t *s);
// The store-load barrier that the SC fences of the gate protocol need after
// an RMW: nothing on x86, where a locked instruction is a full barrier.
inline void fence_after_rmw() {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_FASTPATH_H
