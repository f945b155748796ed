// The segment lock: one futex word holding the holder's tid, no pointer.
// A waiter sleeps with a timeout, and when the holder has held the lock
// suspiciously long it asks whether the holder is provably dead (owner.h);
// if so it takes the lock over, and the section (section.h) runs repair()
// before anyone else sees the state. A stopped or merely slow holder is waited
// for, up to the caller's limit (limit.h) if it has one. docs/DESIGN.md
// section 2.
#ifndef SHMSEM_SRC_LOCK_H
#define SHMSEM_SRC_LOCK_H

#include "handle.h"
#include "limit.h"

namespace shmsem::detail {

void init_lock(Core *c);
// Takes the lock word, giving up when `limit` (null: never) is reached
// while the lock is held by someone else (alive, stopped, or unknown):
// 0 taken, 1 taken over from a holder proven dead (the state may be half
// changed: repair before use), or -ETIMEDOUT (the deadline passed and the
// wait lasted at least kLockFloorNs), -ECANCELED or -EINTR without it.
// Never before the holder was judged once (about a millisecond): a dead
// holder is taken over whatever the limit. Only a Section (section.h)
// calls these two.
[[nodiscard]] int lock_take(shmsem_t *s, const Limit *limit);
void lock_release(shmsem_t *s);

// A wait for the lock lasts at least this long before a deadline that has
// already passed ends it: a try must not fail because the holder was
// preempted inside the critical section on a busy machine. kLockFloorNs
// when the holder is seen stopped or asleep (it is not getting anywhere),
// or cannot be seen; kLockRunningFloorNs while it is seen runnable
// (preempted: 64 processes contending on 2 CPUs under a sanitizer, beside
// other work, saw single holds past 100 ms).
inline constexpr uint64_t kLockFloorNs = 100'000'000;
inline constexpr uint64_t kLockRunningFloorNs = 1'000'000'000;

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_LOCK_H
