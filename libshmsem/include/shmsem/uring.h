/*
 * shmsem over io_uring: one ring holds any number of queued acquires,
 * each asleep in the kernel on its own waiter's futex word
 * (IORING_OP_FUTEX_WAIT, Linux 6.7+), and completes each when its permit
 * arrives, in FIFO order, across processes. Header-only over liburing
 * (Debian's 2.3 and later: the futex wait is filled by hand, as the kernel
 * reads it, so no newer liburing is needed), compiled with the caller's
 * liburing: link with -lshmsem -luring. shmsem(7), "Async use".
 *
 * The loop, for a waiter `w` that shmsem_waiter_start() queued:
 *
 *	shmsem_uring_prep_wait(ring, &w, tag);   submit
 *	on each CQE with user_data == tag (whatever its res):
 *		r = shmsem_waiter_poll(&w, &lease);
 *		r == -EINPROGRESS: shmsem_uring_prep_wait(ring, &w, tag) again
 *		else the wait is complete: 0 (lease), -ETIMEDOUT, -ESHUTDOWN...
 *	skip CQEs with user_data == SHMSEM_URING_IGNORE
 *
 * Timeouts go through the ring: the futex wait is linked to a timeout at
 * the waiter's wake-by time (its deadline, or its share of the watch for
 * dead processes), so the CQE comes by then at the latest and the poll
 * does what is due. A loop must poll each waiter by its wake-by time, or a
 * queue of async waiters may wait behind a dead holder until it does.
 *
 * Cancelling: shmsem_waiter_cancel(&w, &lease) decides at once, one-shot
 * against the grant: -ECANCELED (withdrawn, owning nothing) or 0 (the
 * grant won: the caller owns `lease`). Then withdraw the ring's wait with
 * shmsem_uring_prep_cancel(ring, tag) and reuse `tag` only after its CQE
 * came. Cancelling through the ring first also works: shmsem_uring_prep_cancel,
 * then, on the wait's CQE (-ECANCELED, or 0 if the grant's wake-up crossed
 * the cancel), shmsem_waiter_cancel, which tells which won. A ring wait
 * left pending after its waiter completed is harmless: it ends with a
 * spurious CQE when the slot's word is next woken, and takes no wake-up
 * from anyone else (the library wakes every sleeper on a slot word).
 *
 * Each queued waiter costs our shmsem_waiter_t (96 bytes), 132 bytes of the
 * segment (its 128-byte slot and its entry in the array of slots in use;
 * one of max_waiters), and in the kernel two requests
 * (the futex wait and its linked timeout, about 800 bytes of slab
 * together, bench/RESULTS.md) while the wait is submitted. Each linked
 * timeout that fires makes the kernel walk the ring's pending futex waits,
 * so the library keeps them rare (a waiter's share of the watch comes about
 * once per second per queue, not per waiter); beyond some tens of
 * thousands of waits on one ring, spread them over several rings.
 */
#ifndef SHMSEM_URING_H
#define SHMSEM_URING_H

/* liburing.h first: it sets the feature macros it needs (_GNU_SOURCE, for
 * sigset_t among others), which take effect only before the first system
 * header. A program that includes a system header before this one must
 * do the same (define _GNU_SOURCE, or include <liburing.h> first). */
#include <liburing.h>

#include <errno.h>
#include <stdint.h>

#include <shmsem/shmsem.h>

#ifdef __cplusplus
extern "C" {
#endif

/* user_data of the SQEs these helpers add besides the caller's: the linked
 * timeouts and the cancel requests. Their CQEs carry nothing to act on.
 * Odd, so never an aligned pointer. */
#define SHMSEM_URING_IGNORE UINT64_C(0x73686d73656dffff)

/* As the kernel's uapi names them (<linux/io_uring.h>, <linux/futex.h>);
 * Debian 12's headers predate them. */
#define SHMSEM_IORING_OP_FUTEX_WAIT 51
#define SHMSEM_FUTEX2_SIZE_U32 0x02u /* shared word: no FUTEX2_PRIVATE */
#define SHMSEM_FUTEX_BITSET_MATCH_ANY 0xffffffffu

/*
 * Two SQEs for queued waiter `w`: IORING_OP_FUTEX_WAIT on its word while
 * it holds the queued value (user_data `user_data`), linked to a timeout
 * at its wake-by time (IORING_TIMEOUT_ABS, CLOCK_MONOTONIC; user_data
 * SHMSEM_URING_IGNORE). The timeout's time is kept in `w`, which must stay
 * in place until the SQEs are submitted. Returns 0; -EBUSY fewer than two
 * free SQEs (submit, then prepare again); -EINVAL `w` is not queued.
 */
static inline int shmsem_uring_prep_wait(struct io_uring *ring,
                                         shmsem_waiter_t *w,
                                         uint64_t user_data) {
  uint32_t *word, value;
  struct timespec at;
  struct io_uring_sqe *sqe;
  struct __kernel_timespec *kts;
  int r;

  r = shmsem_waiter_futex(w, &word, &value);
  if (r < 0) return r;
  r = shmsem_waiter_wake_by(w, &at);
  if (r < 0) return r;
  if (io_uring_sq_space_left(ring) < 2) return -EBUSY;

  /* The kernel reads: fd = FUTEX2_* flags, addr = the word, addr2 (off)
   * = the expected value, addr3 = the bitset; len and the futex flags
   * (rw_flags) 0, which io_uring_prep_rw leaves them. */
  sqe = io_uring_get_sqe(ring);
  io_uring_prep_rw(SHMSEM_IORING_OP_FUTEX_WAIT, sqe,
                   (int)SHMSEM_FUTEX2_SIZE_U32, word, 0, value);
  sqe->addr3 = SHMSEM_FUTEX_BITSET_MATCH_ANY;
  sqe->flags |= IOSQE_IO_LINK;
  io_uring_sqe_set_data64(sqe, user_data);

  /* cppcheck-suppress cstyleCast ; a C header: no C++ casts */
  kts = (struct __kernel_timespec *)(void *)w->__ring_ts;
  kts->tv_sec = at.tv_sec;
  kts->tv_nsec = at.tv_nsec;
  sqe = io_uring_get_sqe(ring);
  io_uring_prep_link_timeout(sqe, kts, IORING_TIMEOUT_ABS);
  io_uring_sqe_set_data64(sqe, SHMSEM_URING_IGNORE);
  return 0;
}

/*
 * One SQE that withdraws the ring's wait prepared with `user_data` (an
 * IORING_OP_ASYNC_CANCEL; its own CQE has user_data SHMSEM_URING_IGNORE).
 * The wait's CQE follows with -ECANCELED, or 0 if it was woken first.
 * Returns 0 or -EBUSY (no free SQE).
 */
static inline int shmsem_uring_prep_cancel(struct io_uring *ring,
                                           uint64_t user_data) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

  if (!sqe) return -EBUSY;
  io_uring_prep_cancel64(sqe, user_data, 0);
  io_uring_sqe_set_data64(sqe, SHMSEM_URING_IGNORE);
  return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* SHMSEM_URING_H */
