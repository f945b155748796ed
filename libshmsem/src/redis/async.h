// The non-blocking waiter (shmsem_waiter_*) of the Redis backend: a
// queued remote acquire kept by one thread of the caller's process, which
// runs the blocking wait (acquire.h) and reports its end through a futex
// word in process memory, so that an io_uring (<shmsem/uring.h>), the
// notifier's eventfd or a plain FUTEX_WAIT can wait on it. async.cc says
// how; docs/REDIS.md, "Async waiters", what it costs and what it does
// across fork.
#ifndef SHMSEM_SRC_REDIS_ASYNC_H
#define SHMSEM_SRC_REDIS_ASYNC_H

#include <shmsem/shmsem.h>
#include <stdint.h>
#include <time.h>

#include <atomic>

#include "conn.h"
#include "pool.h"

namespace shmsem::detail {

// The table's waiter entries (backend.h, docs/BACKENDS.md).
int redis_waiter_start(shmsem_t *s, shmsem_waiter_t *w, uint32_t n,
                       const timespec *deadline, shmsem_lease_t *lease);
bool redis_owns_waiter(const shmsem_waiter_t *w);
int redis_waiter_futex(const shmsem_waiter_t *w, uint32_t **word,
                       uint32_t *value);
int redis_waiter_wake_by(const shmsem_waiter_t *w, timespec *at);
int redis_waiter_poll(shmsem_waiter_t *w, shmsem_lease_t *lease);
int redis_waiter_cancel(shmsem_waiter_t *w, shmsem_lease_t *lease);

// shmsem_detach of a Redis handle, first: every waiter of `s` still queued
// is cancelled and its thread joined; a lease whose grant won is released.
// The caller's shmsem_waiter_t of such a waiter is then stale (-EINVAL).
void async_detach(shmsem_t *s);

// The server's id of connection `c` (CLIENT ID) into *id, -1 if it cannot
// be had: what the canceller's CLIENT UNBLOCK names (acquire.cc's
// block_once calls it after each connect of a waiter's connection).
void publish_client_id(Conn *c, std::atomic<int64_t> *id, int timeout_ms);

// CLIENT UNBLOCK `id` TIMEOUT on the handle's main connection, within
// timeout_ms: 1 it was blocked (its BLPOP now returns nil, or was served
// already), 0 it was not, or an error (-ECOMM; -EPERM an error reply: ACL,
// a renamed command). The canceller of a non-blocking waiter, and an
// interruptible wait that took a signal (acquire.cc), end a BLPOP so.
int unblock_client(Pool *p, int64_t id, int timeout_ms);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_REDIS_ASYNC_H
