// The section under the lock. See section.h and docs/DESIGN.md section 2.
#include "section.h"

#include "census.h"
#include "grant.h"
#include "hooks.h"
#include "lanes.h"
#include "lock.h"
#include "recovery.h"
#include "tables.h"

namespace shmsem::detail {

Section::Section(shmsem_t *s) : s_(s) { enter(lock_take(s, nullptr)); }

Section::Section(shmsem_t *s, const Limit *limit) : s_(s) {
  enter(lock_take(s, limit));
}

void Section::enter(int got) {
  if (got < 0) {
    err_ = got;
    return;
  }
  inside_ = true;
  s_->corrupt = false;
  if (got == 1 || !counters_plausible(s_)) {
    // The previous holder died inside a critical section, or a writer left
    // counters no consistent state has (census.h): rebuild the derived
    // state from the record states before anyone else sees it.
    repair(locked());
  }
  // The bounded policy's hand-off as of now, for every step of the section
  // (a newcomer's locked take included); turned on, the gate opens to the
  // queue now, and what the lanes hold goes to the head. Again at the end.
  if (policy_sync(locked(), &wakes_)) sync_gate();
}

void Section::sync_gate() {
  const Locked k = locked();
  // The gate of the lock-free path follows the queue and `closed`. Opened
  // to the queue: the fence, then the lanes (Dekker with fast_release(),
  // fastpath.h): a lease freed by a releaser that read the gate shut is
  // seen here and goes to the head.
  if (gate_sync(k)) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    SHMSEM_HOOK(GATE_OPENED);
    sweep_loose(k);
    if (s_->corrupt) {
      s_->corrupt = false;
      repair(k);
    }
    (void)gate_sync(k);  // the sweep may have granted every waiter
  }
}

void Section::unlock() {
  if (!inside_) return;
  inside_ = false;
  const Locked k = locked();
  if (s_->corrupt) {
    // A value read from the segment was out of range: rebuild before
    // anyone else sees the state (tables.h).
    s_->corrupt = false;
    repair(k);
  }
  // The bounded policy: the head past its bound turns the hand-off on.
  (void)policy_sync(k, &wakes_);
  sync_gate();
  lock_release(s_);
}

}  // namespace shmsem::detail
