// The steps of a Redis acquire (acquire.cc), shared by the blocking
// acquire (redis_acquire) and the non-blocking waiter (async.cc): check
// the arguments, enqueue (grant at once, or a ticket), then wait on the
// ticket's mailbox until the grant, shutdown, the deadline or a cancel.
#ifndef SHMSEM_SRC_REDIS_ACQUIRE_H
#define SHMSEM_SRC_REDIS_ACQUIRE_H

#include <shmsem/shmsem.h>
#include <stdint.h>
#include <time.h>

#include <atomic>
#include <string>

#include "pool.h"

namespace shmsem::detail {

// One queued wait: the ticket the enqueue returned, its deadline
// (absolute CLOCK_MONOTONIC, nullptr none) and cancel handle (nullptr
// none); `key` is filled by wait_queued.
struct Wait {
  Pool *p;
  uint64_t ticket;
  const timespec *deadline;
  shmsem_cancel_t *cancel;
  std::string key;
  // Set by a wait whose BLPOP may be ended with CLIENT UNBLOCK: the wait
  // keeps here the server's id of its connection (0 not known yet, -1
  // unknowable).
  std::atomic<int64_t> *conn_id = nullptr;
  // The canceller ends the BLPOP itself (async.cc): BLPOPs are not cut
  // short to look at `cancel`.
  bool cancel_unblocks = false;
  // SHMSEM_WAIT_INTERRUPTIBLE (needs conn_id): a signal handler that runs
  // while the wait blocks in BLPOP ends it (`interrupted`, then -EINTR
  // unless the grant won).
  bool interruptible = false;
  bool interrupted = false;
  // Readable when the armed cancel handle fired (an eventfd; -1 none):
  // the BLPOP is ended as for a signal, and the wait sees `cancel` fired.
  int wake_fd = -1;
};

// -EBADF a read-only handle; -EINVAL `n` or `deadline`; else 0.
int acquire_check(Pool *p, uint32_t n, const timespec *deadline);

// The enqueue (arguments checked): 0 granted at once with `lease`, 1
// queued with *ticket, or an error (-ETIMEDOUT a deadline already past
// and no permit free). A grant is held by the keep-alive from here on.
int acquire_enqueue(shmsem_t *s, uint32_t n, const timespec *deadline,
                    shmsem_lease_t *lease, uint64_t *ticket);

// Wait for queued ticket w.ticket on a waiter connection of its own until
// the grant (0, `lease`), shutdown (-ESHUTDOWN), the deadline
// (-ETIMEDOUT), `cancel` (-ECANCELED, or 0 if the grant won), or the
// server lost (-ECOMM, -EIDRM). Blocks; no thread of its own.
int wait_queued(Wait &w, shmsem_lease_t *lease);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_REDIS_ACQUIRE_H
