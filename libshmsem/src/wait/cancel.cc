#include "cancel.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "futex.h"

namespace shmsem::detail {

bool cancel_arm(shmsem_cancel_t *c, shmsem_t *s, uint32_t slot, uint64_t ticket,
                CancelWithdraw withdraw) {
  CancelImpl *ci = cancel_impl(c);
  const int32_t me = int32_t(getpid());
  uint32_t armed = kCancelArmed;
  // A copy this process inherited armed (fork): the arming was the
  // parent's, and no wait of this process is behind it.
  if (ci->armer != me)
    ci->state.compare_exchange_strong(armed, kCancelIdle,
                                      std::memory_order_acq_rel);
  ci->armer = me;
  ci->s = s;
  ci->slot = slot;
  ci->ticket = ticket;
  ci->withdraw = withdraw;
  uint32_t expected = kCancelIdle;
  // Release: a canceller that sees ARMED sees s/slot/ticket/withdraw.
  return ci->state.compare_exchange_strong(expected, kCancelArmed,
                                           std::memory_order_acq_rel);
}

void cancel_disarm(shmsem_cancel_t *c) {
  CancelImpl *ci = cancel_impl(c);
  uint32_t expected = kCancelArmed;
  if (ci->state.compare_exchange_strong(expected, kCancelIdle,
                                        std::memory_order_acq_rel))
    return;
  // Fired while armed: the canceller may still be in the segment.
  for (;;) {
    uint32_t n = ci->inflight.load(std::memory_order_acquire);
    if (n == 0) return;
    futex_wait_private(&ci->inflight, n);
  }
}

void cancel_fire(shmsem_cancel_t *c) {
  CancelImpl *ci = cancel_impl(c);
  ci->inflight.fetch_add(1, std::memory_order_acq_rel);
  uint32_t prev = ci->state.exchange(kCancelFired, std::memory_order_acq_rel);
  // Armed by another process: a fork child's copy of the parent's armed
  // handle, whose wait is the parent's to withdraw, not ours.
  if (prev == kCancelArmed && ci->armer == int32_t(getpid()))
    ci->withdraw(ci->s, ci->slot, ci->ticket);
  if (ci->inflight.fetch_sub(1, std::memory_order_acq_rel) == 1)
    futex_wake_private(&ci->inflight, INT_MAX);
}

void cancel_reset(shmsem_cancel_t *c) {
  cancel_impl(c)->state.store(kCancelIdle, std::memory_order_release);
}

}  // namespace shmsem::detail
