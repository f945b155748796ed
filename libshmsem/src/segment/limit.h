// What may end a wait before it gets what it waits for: the caller's
// deadline, its cancellation handle, and (if it asked) a signal. The
// blocking acquires pass their limit down to every step that can wait on
// another process: the segment lock (lock.h) and the reclamation pass
// (reclaim.h), so that no writer of the segment, and no stopped or slow
// process, holds a call past its deadline. docs/DESIGN.md section 2.
#ifndef SHMSEM_SRC_LIMIT_H
#define SHMSEM_SRC_LIMIT_H

#include <errno.h>
#include <stdint.h>

#include <algorithm>
#include <atomic>

#include "cancel_handle.h"
#include "clock.h"
#include "futex.h"

namespace shmsem::detail {

struct Limit {
  uint64_t deadline = 0;              // mono_ns() time; 0: none
  shmsem_cancel_t *cancel = nullptr;  // fired: -ECANCELED
  bool interruptible = false;         // a signal: -EINTR
  // -ECANCELED once *watch no longer holds watch_value (a canceller waiting
  // for the lock gives up when the waiter it cancels has left by itself).
  // While it waits it wakes that word at every look (kPollNs), so that the
  // waiter sees its fired handle now, not at its next periodic wake-up,
  // which is further away the longer the queue. A wake can be lost (it
  // changes no word); the next one is not far behind.
  std::atomic<uint32_t> *watch = nullptr;
  uint32_t watch_value = 0;
  // When the first step of the call started (real clock; 0: not yet). The
  // floors count from there, so that a call that waits in several steps
  // (passes, then the lock to leave the queue) gets one floor, not several.
  mutable uint64_t since = 0;
};

// One bounded step under a Limit. The step ends once the caller's deadline
// has passed *and* the call has had `floor_ns` of real time since its first
// step: a try (its deadline already past) still waits a moment for a lock
// held in passing, and a pass still judges a few owners. A fired cancel
// handle ends it at once. A null limit never ends the step.
class StepLimit {
 public:
  // How often a sleeper looks at a cancel handle, a watched word and a
  // manual test clock: none of them can wake it.
  static constexpr uint64_t kPollNs = 2'000'000;

  StepLimit(const Limit *limit, uint64_t floor_ns)
      : l_(limit),
        start_(limit ? call_start(limit) : 0),
        floor_at_(start_ + floor_ns) {}

  // The floor becomes `floor_ns` from the start of the call (longer while
  // the process waited for is seen making progress).
  void set_floor(uint64_t floor_ns) { floor_at_ = start_ + floor_ns; }

  // 0 while the step may go on; else -ECANCELED or -ETIMEDOUT.
  int reached() const {
    if (!l_) return 0;
    if (l_->cancel && cancel_fired(l_->cancel)) return -ECANCELED;
    if (l_->watch) {
      if (l_->watch->load(std::memory_order_acquire) != l_->watch_value)
        return -ECANCELED;
      futex_wake(l_->watch, 1);  // a spurious wake-up for anyone else
    }
    if (l_->deadline && mono_ns() >= l_->deadline &&
        real_mono_ns() >= floor_at_)
      return -ETIMEDOUT;
    return 0;
  }
  // As reached(), after a sleep that returned `futex_result`.
  int reached_after(int futex_result) const {
    if (l_ && l_->interruptible && futex_result == -EINTR) return -EINTR;
    return reached();
  }
  // The real CLOCK_MONOTONIC time to look again at the latest, given the
  // sleeper's own next wake-up `at` (0: none); 0 again means none.
  uint64_t wake_by(uint64_t at) const {
    if (!l_) return at;
    uint64_t t = at ? at : ~uint64_t{0};
    if (l_->cancel || l_->watch || (l_->deadline && clock_is_manual()))
      t = std::min(t, real_mono_ns() + kPollNs);
    if (l_->deadline && !clock_is_manual())
      t = std::min(t, std::max(l_->deadline, floor_at_));
    return t == ~uint64_t{0} ? 0 : t;
  }
  bool limited() const { return l_ != nullptr; }

 private:
  static uint64_t call_start(const Limit *l) {
    if (!l->since) l->since = real_mono_ns();
    return l->since;
  }

  const Limit *l_;
  uint64_t start_;
  uint64_t floor_at_;
};

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_LIMIT_H
