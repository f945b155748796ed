// The cancellation handle behind shmsem_cancel_t (process-local memory):
// its layout and state; the transitions are in wait/cancel.cc.
//   IDLE --arm (waiter, CAS)--> ARMED --disarm (waiter, CAS)--> IDLE
//   IDLE|ARMED --fire (any thread, exchange)--> FIRED --reset--> IDLE
// A canceller that finds ARMED performs the shared WAITING->CANCELLED
// transition itself (a flag plus a wake could be lost). `inflight` counts
// cancellers inside the segment; a disarming waiter that finds FIRED waits
// for it to drop to 0, so its caller may detach at once.
#ifndef SHMSEM_SRC_CANCEL_HANDLE_H
#define SHMSEM_SRC_CANCEL_HANDLE_H

#include "handle.h"

namespace shmsem::detail {

enum CancelState : uint32_t {
  kCancelIdle = 0,
  kCancelArmed = 1,
  kCancelFired = 2
};

struct CancelImpl {
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> inflight;
  shmsem_t *s;
  uint32_t slot;
  uint64_t ticket;
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
