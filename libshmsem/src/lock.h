// The segment lock: one futex word holding the holder's tid, no pointer.
// A waiter sleeps with a timeout, and when the holder has held the lock
// suspiciously long it asks whether the holder is provably dead (owner.h);
// if so it takes the lock over and runs repair() (recovery.cc) before anyone
// else sees the state. A stopped or merely slow holder is waited for.
// docs/DESIGN.md section 2.
#ifndef SHMSEM_SRC_LOCK_H
#define SHMSEM_SRC_LOCK_H

#include "handle.h"

namespace shmsem::detail {

void init_lock(Core *c);
void lock(shmsem_t *s);
void unlock(shmsem_t *s);

class LockGuard {
 public:
  explicit LockGuard(shmsem_t *s) : s_(s) { lock(s_); }
  ~LockGuard() { unlock(s_); }
  LockGuard(const LockGuard &) = delete;
  LockGuard &operator=(const LockGuard &) = delete;

 private:
  shmsem_t *s_;
};

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_LOCK_H
