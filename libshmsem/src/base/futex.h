// The one place that calls futex(2) and futex_waitv(2). Results callers ever
// see:
//   0           woken, or a spurious wake-up: recheck the word
//   -EAGAIN     the word no longer held `expected` when the kernel looked
//   -ETIMEDOUT  the absolute CLOCK_MONOTONIC deadline passed
//   -EINTR      a signal handler ran
// Words are shared between processes, so FUTEX_PRIVATE_FLAG is never used
// on segment words: the kernel must key the futex on the page, not the mm.
// A wake may land on a slot that was freed and reused meanwhile; its new
// owner sees a spurious wake-up and sleeps again, which is harmless.
#ifndef SHMSEM_SRC_FUTEX_H
#define SHMSEM_SRC_FUTEX_H

#include <stdint.h>

#include <atomic>

struct futex_waitv;
struct timespec;

namespace shmsem::detail {

// deadline_ns: absolute CLOCK_MONOTONIC time, or 0 for no deadline.
int futex_wait(std::atomic<uint32_t> *word, uint32_t expected,
               uint64_t deadline_ns);
// Wake up to n sleepers; returns how many were woken.
int futex_wake(std::atomic<uint32_t> *word, int n);
// Private variants, for words in process-local memory only.
int futex_wait_private(std::atomic<uint32_t> *word, uint32_t expected);
int futex_wake_private(std::atomic<uint32_t> *word, int n);
// futex_waitv(2) (Linux 5.16) with an absolute CLOCK_MONOTONIC timeout
// (nullptr: none), for the notifier. Returns the index of a woken word
// (>= 0), or -EAGAIN (a word did not hold its value), -ETIMEDOUT, -EINTR,
// -ENOSYS (older kernel), -EPERM (seccomp), -EFAULT (a word not mapped).
int futex_waitv(struct futex_waitv *v, uint32_t count, const timespec *timeout);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_FUTEX_H
