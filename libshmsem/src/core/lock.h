// The segment lock: one futex word holding the holder's tid, no pointer.
// A waiter sleeps with a timeout, and when the holder has held the lock
// suspiciously long it asks whether the holder is provably dead (owner.h);
// if so it takes the lock over and runs repair() (recovery.cc) before anyone
// else sees the state. A stopped or merely slow holder is waited for, up to
// the caller's limit (limit.h) if it has one. docs/DESIGN.md section 2.
#ifndef SHMSEM_SRC_LOCK_H
#define SHMSEM_SRC_LOCK_H

#include "handle.h"
#include "limit.h"

namespace shmsem::detail {

void init_lock(Core *c);
void lock(shmsem_t *s);
// As lock(), but gives up when `limit` is reached while the lock is held by
// someone else (alive, stopped, or unknown): 0 with the lock, or -ETIMEDOUT
// (the deadline passed and the wait lasted at least kLockFloorNs),
// -ECANCELED or -EINTR without it. Never before the holder was judged once
// (about a millisecond): a dead holder is taken over whatever the limit.
// A null limit waits as lock() does.
[[nodiscard]] int lock_within(shmsem_t *s, const Limit *limit);
void unlock(shmsem_t *s);

// A wait for the lock lasts at least this long before a deadline that has
// already passed ends it: a try must not fail because the holder was
// preempted inside the critical section on a busy machine. kLockFloorNs
// when the holder is seen stopped or asleep (it is not getting anywhere),
// or cannot be seen; kLockRunningFloorNs while it is seen runnable
// (preempted: 64 processes contending on 2 CPUs under a sanitizer, beside
// other work, saw single holds past 100 ms).
inline constexpr uint64_t kLockFloorNs = 100'000'000;
inline constexpr uint64_t kLockRunningFloorNs = 1'000'000'000;

class LockGuard {
 public:
  explicit LockGuard(shmsem_t *s) : s_(s) { lock(s_); }
  // Check error() before touching the state: nonzero means not locked.
  LockGuard(shmsem_t *s, const Limit *limit)
      : s_(s), err_(lock_within(s, limit)) {}
  ~LockGuard() {
    if (!err_) unlock(s_);
  }
  int error() const { return err_; }
  LockGuard(const LockGuard &) = delete;
  LockGuard &operator=(const LockGuard &) = delete;

 private:
  shmsem_t *s_;
  int err_ = 0;
};

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_LOCK_H
