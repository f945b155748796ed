// The notifier (shmsem_notifier_t): an eventfd made readable by a helper
// thread that waits, with futex_waitv(2), on the futex words of up to
// SHMSEM_NOTIFIER_MAX non-blocking waiters (of any backend), for loops that can
// only poll a file descriptor. Process-local memory and one thread; it
// never touches a waiter's state machine, only reports when to poll it.
#ifndef SHMSEM_SRC_NOTIFIER_H
#define SHMSEM_SRC_NOTIFIER_H

#include <stdint.h>
#include <time.h>

#include <shmsem/shmsem.h>

namespace shmsem::detail {

int notifier_create(shmsem_notifier_t **out);
int notifier_fd(const shmsem_notifier_t *n);
// Watch waiter `w` (a key, never read here): its futex word, the value
// the word holds while it waits and its wake-by time, as the waiter's
// backend gave them (capi.cc reads them through the seam: a shm waiter's
// word is in its segment, a remote waiter's in this process).
int notifier_add(shmsem_notifier_t *n, const shmsem_waiter_t *w,
                 uint64_t user_data, const uint32_t *word, uint32_t value,
                 const timespec &wake_by);
int notifier_remove(shmsem_notifier_t *n, const shmsem_waiter_t *w);
int notifier_next(shmsem_notifier_t *n, uint64_t *user_data);
void notifier_destroy(shmsem_notifier_t *n);

// For tests: true once the helper thread watches by looking at every word
// each millisecond (futex_waitv missing, refused, or taken away with
// kLimitNoWaitv) instead of sleeping in futex_waitv.
bool notifier_polls(const shmsem_notifier_t *n);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_NOTIFIER_H
