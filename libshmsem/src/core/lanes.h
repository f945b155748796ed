// The lanes under the lock: a process's record and the LOOSE leases its
// threads' lanes name (fast/fastpath.h frees and takes them lock-free),
// found, taken and passed on by lock holders. docs/DESIGN.md section 11.
#ifndef SHMSEM_SRC_LANES_H
#define SHMSEM_SRC_LANES_H

#include <atomic>

#include "handle.h"
#include "owner.h"
#include "section.h"
#include "tables.h"

namespace shmsem::detail {

// This process's record, registered at the first call (kNoProc if none is
// free: the process then works without the lock-free path).
uint32_t self_proc(Locked s);
// Lease `l` read as `w`, LOOSE: CAS it to HELD (listed, owned by this
// process for the instant until the caller commits its next state) and
// pass it on (pass_permit; slots to wake go to `wk`). False if the word
// was no longer `w`.
bool pass_loose(Locked s, uint32_t l, uint64_t w, Wakes *wk);
// Any LOOSE lease, taken for this process as HELD_FAST under `proc` (or
// HELD with `me` as owner if proc is kNoProc). kNone if none.
uint32_t take_any_loose(Locked s, uint32_t proc, const Owner &me,
                        uint64_t *gen);
// A lane of the process record that LOOSE lease `l` (read as `w`) names
// names it in turn: the sweeps can find it.
bool loose_named(const shmsem_t *s, uint32_t l, uint64_t w);
// Takes the lock: every LOOSE lease that no lane names (only a writer, or
// a defect, makes one) goes to the head waiter or the pool. One scan of the
// N words, for shmsem_recover(). Returns how many.
int recover_unnamed_loose(shmsem_t *s);
// While a permit is wanted (wants_permit: the head gathers, or a shrink
// waits), LOOSE leases go on; each granted slot is woken at once, under
// the lock. Returns how many were passed on.
int sweep_loose(Locked s);
// The store-load barrier that the SC fences of the gate protocol need after
// an RMW: nothing on x86, where a locked instruction is a full barrier.
inline void fence_after_rmw() {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// Under the lock: process record `p`'s lanes' hold times join the core's,
// and the lanes start again from zero (its process is gone, or it is being
// given to a new one).
void fold_holds(Locked s, uint32_t p);

// The releaser saw the gate open after freeing lease `l` (fastpath.cc).
void hand_loose(shmsem_t *s, uint32_t l);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_LANES_H
