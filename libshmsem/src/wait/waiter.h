// The non-blocking waiter: the one state machine every acquire is built on.
// The blocking calls (acquire.cc) and the io_uring path drive it the same
// way: start; sleep on word() while it reads kSlotWaiting; poll() after any
// wake-up; abandon() on timeout, cancellation or signal.
#ifndef SHMSEM_SRC_WAITER_H
#define SHMSEM_SRC_WAITER_H

#include "handle.h"
#include "limit.h"

namespace shmsem::detail {

struct Waiter {
  uint32_t slot;
  uint64_t ticket;
};

// Returns 0 with `lease` filled if a permit was taken at once; 1 if queued
// (`w` describes the slot); -EAGAIN if !may_queue and no permit could be
// taken without passing a waiter; -ESHUTDOWN, -EBUSY (queue full), -EBADF;
// or `limit`'s error if it was reached while the lock was held by another
// (nothing changed).
// `weight` permits as one lease (1..permits, else -EINVAL).
int waiter_start(shmsem_t *s, uint32_t weight, bool may_queue,
                 const Limit *limit, Waiter *w, shmsem_lease_t *lease);

// waiter_start for a call with a deadline, `expired` if it has passed: an
// expired call that finds no permit runs a reclamation pass (one per watch
// period) and tries once more, then counts a timeout: -ETIMEDOUT.
int waiter_start_by(shmsem_t *s, uint32_t weight, bool expired,
                    const Limit *limit, Waiter *w, shmsem_lease_t *lease);

// If slot `slot` is the head, has all it asked for and waits for a token
// of the rate limit: when (mono_ns) it is due, and it must poll then.
// Else 0. Read without the lock: a hint, checked again under it.
uint64_t head_start_ns(const shmsem_t *s, uint32_t slot);

// The futex word to sleep on; sleep only while it reads kSlotWaiting.
inline std::atomic<uint32_t> *waiter_word(shmsem_t *s, const Waiter &w) {
  return &s->slots[w.slot].word;
}

// -EINPROGRESS while still queued; otherwise completes the wait: 0 with
// `lease` (granted), -ECANCELED or -ESHUTDOWN. After completion `w` is dead.
// Completing takes the lock; if `limit` is reached while another holds it,
// the waiter leaves without it (below) and `limit`'s error is returned.
int waiter_poll(shmsem_t *s, const Waiter &w, const Limit *limit,
                shmsem_lease_t *lease);

// Give up with `reason` (-ETIMEDOUT, -ECANCELED, -EINTR). One-shot: if a
// grant (or cancel, or shutdown) already won, returns that outcome instead,
// e.g. 0 with `lease` if the grant won. After it `w` is dead.
//
// Leaving without the lock: when `limit` is reached while another process
// holds the lock (stopped, or a writer named a live thread in the lock
// word), the waiter changes its own slot word with one CAS (WAITING ->
// LEFT_QUEUED; GRANTED, CANCELLED, CLOSED -> LEFT) and returns `limit`'s
// error (-ECANCELED or -ESHUTDOWN if that was already the outcome). A
// grant that had already won is given up then: its permit goes on to the
// next waiter. The next lock holder that meets the slot frees it.
int waiter_abandon(shmsem_t *s, const Waiter &w, int reason, const Limit *limit,
                   shmsem_lease_t *lease);

// Another thread cancels the wait of (slot, ticket): WAITING->CANCELLED and a
// wake-up. No effect if that wait already completed.
void waiter_cancel_remote(shmsem_t *s, uint32_t slot, uint64_t ticket);

// A caller's deadline (an absolute CLOCK_MONOTONIC timespec, or none) as
// every wait keeps it.
struct Deadline {
  bool set = false;
  uint64_t ns = 0;  // mono_ns() time, if set
  // For a Limit and a wake time: 0 for none; a deadline of {0, 0} is long
  // past, not "none" (1).
  uint64_t at() const { return set ? (ns ? ns : 1) : 0; }
  bool passed(uint64_t now) const { return set && now >= ns; }
};
// 0, or -EINVAL for a timespec out of range (null: no deadline).
int deadline_of(const timespec *ts, Deadline *d);
// The real time a waiter on `slot` must look again by: `at` (its watch's;
// 0 none), its deadline (`deadline`, mono_ns(); 0 none) and, at the head
// of a rate-limited queue, its start time, whichever comes first.
uint64_t wake_by(const shmsem_t *s, uint32_t slot, uint64_t at,
                 uint64_t deadline);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_WAITER_H
