// The cancellation handle behind shmsem_cancel_t (process-local memory):
// its layout and state; the transitions are in wait/cancel.cc.
//   IDLE --arm (waiter, CAS)--> ARMED --disarm (waiter, CAS)--> IDLE
//   IDLE|ARMED --fire (any thread, exchange)--> FIRED --reset--> IDLE
// A canceller that finds ARMED calls `withdraw`, which the arming waiter's
// backend chose: the shm backend's performs the shared WAITING->CANCELLED
// transition itself (a flag plus a wake could be lost); the Redis
// backend's wakes the waiter's poll (docs/REDIS.md). `inflight` counts
// cancellers inside `withdraw`; a disarming waiter that finds FIRED waits
// for it to drop to 0, so its caller may detach at once. `armer` is the
// process that armed it: a fork child's copy of an armed handle is idle in
// the child (its arm starts afresh, its fire withdraws nothing: the wait
// is the parent's).
#ifndef SHMSEM_SRC_CANCEL_HANDLE_H
#define SHMSEM_SRC_CANCEL_HANDLE_H

#include "handle.h"

namespace shmsem::detail {

enum CancelState : uint32_t {
  kCancelIdle = 0,
  kCancelArmed = 1,
  kCancelFired = 2
};

using CancelWithdraw = void (*)(shmsem_t *s, uint32_t slot, uint64_t ticket);

struct CancelImpl {
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> inflight;
  shmsem_t *s;
  uint32_t slot;
  int32_t armer;
  uint64_t ticket;
  CancelWithdraw withdraw;
};
static_assert(sizeof(CancelImpl) <= sizeof(shmsem_cancel_t));

inline CancelImpl *cancel_impl(shmsem_cancel_t *c) {
  return reinterpret_cast<CancelImpl *>(c);
}
inline bool cancel_fired(shmsem_cancel_t *c) {
  return cancel_impl(c)->state.load(std::memory_order_acquire) == kCancelFired;
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_CANCEL_HANDLE_H
