// The one way into the state under the lock: a Section takes the segment
// lock (lock.h), repairs on entry when the previous holder died inside or a
// writer left counters no consistent state has, and on leaving brings the
// derived state up to date (a repair if a step found damage, the gate of
// the lock-free path, the lanes' sweep), unlocks, and then wakes the slots
// its grants collected. docs/DESIGN.md section 2 and "The state machine".
//
// A Locked is the proof of being inside: only a Section makes one, and
// every transition of a record's state word (transitions.h) and every step
// built on them takes one, so a call from outside the lock does not
// compile. It converts to the handle, so a function that only reads takes
// a plain shmsem_t *.
#ifndef SHMSEM_SRC_SECTION_H
#define SHMSEM_SRC_SECTION_H

#include <stdint.h>

#include <atomic>

#include "futex.h"
#include "handle.h"
#include "limit.h"

namespace shmsem::detail {

class Locked {
 public:
  shmsem_t *operator->() const { return s_; }
  operator shmsem_t *() const {
    return s_;
  }  // NOLINT(google-explicit-constructor)

 private:
  explicit Locked(shmsem_t *s) : s_(s) {}
  friend class Section;
  shmsem_t *s_;
};

// Wake whoever sleeps on slot `w`'s word: every sleeper, not one. The
// waiter is one thread, but a futex wait can outlive the wait it was for:
// an async waiter's ring wait is withdrawn by a cancel only later, or
// never (shmsem_waiter_cancel), and the slot may meanwhile serve a new
// waiter. A wake of one could land on the stale wait and leave the new
// waiter asleep until its next periodic wake-up. The stale wait sees a
// spurious wake-up. The same system call either way.
// Under the bounded policy a blocking waiter sleeps on the slot's `nudge`
// (layout.h), which every wake changes first: a nudge of the head (a permit
// to race for) leaves `word` as it was.
inline void wake_slot(shmsem_t *s, uint32_t w) {
  WaiterSlot &ws = s->slots[w];
  ws.nudge.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&ws.word, INT32_MAX);
  if (s->bound_ns) futex_wake(&ws.nudge, INT32_MAX);
}

// The bounded policy: a permit was freed for head `w` to race for. The
// nudge changes whether or not the head sleeps (it read it before its
// last look at the pool: acquire.cc wait_turns), then the head is woken
// if it sleeps (Dekker with its `sleeping`, as Wakes::run). `w` is checked.
// A blocking waiter announces its sleep with 2, and the first nudge to
// find it takes it back to 0 and wakes it: the nudges after that, while it
// waits for a CPU, change `nudge` only (one measured FUTEX_WAKE per
// acquisition for nobody, without). An async waiter's 1 stays for its whole
// wait, and every nudge wakes it.
inline void nudge_slot(shmsem_t *s, uint32_t w) {
  WaiterSlot &ws = s->slots[w];
  ws.nudge.fetch_add(1, std::memory_order_seq_cst);
  uint32_t sl = ws.sleeping.load(std::memory_order_seq_cst);
  if (sl == 1 || (sl == 2 && ws.sleeping.compare_exchange_strong(
                                 sl, 0, std::memory_order_seq_cst)))
    wake_slot(s, w);
}

// Slots granted under the lock, to wake after unlocking (a few; more are
// woken at once, under the lock: rare).
struct Wakes {
  uint32_t n = 0;
  uint32_t slot[4] = {};
  void add(shmsem_t *s, uint32_t w) {
    if (n < 4)
      slot[n++] = w;
    else
      wake_slot(s, w);
  }
  // After unlocking. Dekker with the waiter (waiter.cc): the grant was
  // stored under the lock, then this fence, then the load of `sleeping`;
  // a waiter still spinning costs no system call.
  // Under the lock, each at once whatever its `sleeping` says: what repair
  // and the lanes' sweep grant (they run after a death, or for a releaser
  // that may be killed the moment it unlocks, as before the section).
  void wake_all(shmsem_t *s) {
    for (uint32_t i = 0; i < n; i++) wake_slot(s, slot[i]);
    n = 0;
  }
  void run(shmsem_t *s) const {
    if (!n) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (uint32_t i = 0; i < n; i++) {
      if (s->bound_ns)
        nudge_slot(s, slot[i]);  // a nudge too, which leaves `word` alone
      else if (s->slots[slot[i]].sleeping.load(std::memory_order_relaxed))
        wake_slot(s, slot[i]);
    }
  }
};

class Section {
 public:
  // Waits for the lock as long as it takes.
  explicit Section(shmsem_t *s);
  // As lock_within(): check error() before anything else; nonzero means
  // not inside (-ETIMEDOUT, -ECANCELED, -EINTR).
  Section(shmsem_t *s, const Limit *limit);
  ~Section() {
    unlock();
    wakes_.run(s_);
  }
  Section(const Section &) = delete;
  Section &operator=(const Section &) = delete;

  int error() const { return err_; }
  Locked locked() const { return Locked(s_); }
  Wakes *wakes() { return &wakes_; }
  // Leaves the lock now: the derived state brought up to date, the unlock.
  // The wake-ups still run at the end of the section's scope.
  void unlock();

 private:
  void enter(int got);
  void sync_gate();
  shmsem_t *s_;
  int err_ = 0;
  bool inside_ = false;
  Wakes wakes_;
};

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_SECTION_H
