// Acquiring from a Redis pool. One call (shmsem_acquire) grants at once
// when nobody queues and enough permits are free, or queues the caller
// with a ticket; then the waiter blocks in BLPOP on its own mailbox key
// ("base:mb:TICKET"), on a connection of its own, until the grant (or
// shutdown, or its reaping) is pushed there. Each BLPOP lasts at most a
// third of the waiter's keep-alive TTL and at most until the deadline;
// between two, the waiter renews its place (shmsem_wait_renew), so a dead
// waiter leaves the queue within that TTL. At the deadline, or when its
// cancel handle fired, the waiter calls shmsem_cancel: one transition on
// the server against the grant, which returns the lease if the grant won.
// No pub/sub, no keyspace events, no polling of the pool's state.
//
// Under a rate limit the head that has its permits but no token is told
// when its token is due ("R us", rate.h); it sleeps that long and asks
// again through shmsem_wait_renew, which grants it then.
//
// A blocking acquire's cancel handle is armed with an eventfd that the
// waiter's poll watches: shmsem_cancel writes it (wake_cancelled), the
// waiter ends its own BLPOP with CLIENT UNBLOCK through the handle's main
// connection (end_blpop), reads the BLPOP's reply and, unless it was the
// grant, leaves the queue (shmsem_cancel): -ECANCELED. An interruptible
// wait (SHMSEM_WAIT_INTERRUPTIBLE) whose BLPOP a signal handler
// interrupted ends it the same way: -EINTR. Without an eventfd (none to
// be had) the handle is looked at every kCancelCheckMs. A non-blocking
// waiter's thread (async.cc) runs the same wait; its canceller ends the
// BLPOP with CLIENT UNBLOCK from its own thread.
#include <errno.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "acquire.h"
#include "async.h"
#include "cancel.h"
#include "cancel_handle.h"
#include "clock.h"
#include "ops.h"
#include "pool.h"
#include "rate.h"
#include "thread_cancel.h"

namespace shmsem::detail {
namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kCancelCheckMs = 100;
// How long past a deadline a waiter still waits for the server's answer
// to its cancel (a paused server: then the wait ends -ETIMEDOUT).
constexpr int kGraceMs = 250;
// Consecutive failed waits (no answer, broken connection) before a wait
// without deadline gives up with -ECOMM.
constexpr int kMaxFailures = 3;
// The pause after a failed round: 10 ms doubling to 100 ms.
constexpr uint64_t kRetryMinMs = 10;
constexpr uint64_t kRetryMaxMs = 100;

// A grant reply: "granted" idx gen seq n, at `at` in the reply.
int take_grant(Pool *p, const Reply &r, size_t at, shmsem_lease_t *lease) {
  int64_t idx, gen, seq, n;
  if (!r.num(at, 0, p->max_permits - 1, &idx) ||
      !r.num(at + 1, 1, INT64_MAX, &gen) ||
      !r.num(at + 2, 1, INT64_MAX, &seq) ||
      !r.num(at + 3, 1, p->max_permits, &n))
    return kBadReply;
  lease->gen = uint64_t(gen);
  lease->sem = p->sem;
  lease->index = uint32_t(idx);
  lease->__reserved = 0;
  // A lease the keep-alive cannot hold (no thread) is still the caller's
  // until its TTL: held, but not renewed.
  keepalive_add(p, HeldLease{uint32_t(idx), uint64_t(gen), uint64_t(seq)});
  return 0;
}

// The outcome of a call that may grant: 0 with the lease, 1 with a ticket
// (queued), or an error.
int grant_or_ticket(Pool *p, const Reply &r, uint64_t *ticket,
                    shmsem_lease_t *lease) {
  const std::string st = r.status();
  if (st == "granted")
    return r.size() == 5 ? take_grant(p, r, 1, lease) : kBadReply;
  if (st == "queued") {
    int64_t t;
    if (r.size() != 2 || !r.num(1, 1, INT64_MAX, &t)) return kBadReply;
    *ticket = uint64_t(t);
    return 1;
  }
  return status_errno(st);
}

// The waiter decides its wait is over (reason "timeout" or "cancel").
int resolve(Pool *p, uint64_t ticket, const char *reason, shmsem_lease_t *lease,
            int timeout_ms) {
  Reply r;
  int e = pool_call(p, "shmsem_cancel", {std::to_string(ticket), reason}, &r,
                    timeout_ms);
  // Past its deadline with the server silent: the wait ends; a grant that
  // won meanwhile is never renewed and expires within a TTL.
  if (e == -ECOMM && reason[0] == 't') return -ETIMEDOUT;
  if (e < 0) return e;
  uint64_t unused;
  e = grant_or_ticket(p, r, &unused, lease);
  // The waiter was reaped (or its mailbox lost): it owns nothing.
  if (e == -EKEYEXPIRED) return reason[0] == 't' ? -ETIMEDOUT : -ECANCELED;
  return e == 1 ? kBadReply : e;
}

// A mailbox message: "G idx gen seq n", "S" (shutdown), "X" (reaped: its
// keep-alive lapsed, so the server could not be reached for a while).
int take_message(Pool *p, const std::string &m, shmsem_lease_t *lease) {
  if (m == "S") return -ESHUTDOWN;
  if (m == "X") return -ECOMM;
  uint64_t v[4];
  if (m.compare(0, 2, "G ") != 0 || !parse_numbers(m.substr(2), v, 4))
    return kBadReply;
  const uint64_t idx = v[0], gen = v[1], seq = v[2], n = v[3];
  if (idx >= p->max_permits || gen == 0 || seq == 0 || n == 0 ||
      n > p->max_permits)
    return kBadReply;
  lease->gen = gen;
  lease->sem = p->sem;
  lease->index = uint32_t(idx);
  lease->__reserved = 0;
  keepalive_add(p, HeldLease{uint32_t(idx), gen, seq});
  return 0;
}

// How long the next BLPOP may block (ms), bounded by the keep-alive, the
// deadline and a cancel handle; 0 when the deadline has passed.
uint64_t next_block_ms(const Wait &w) {
  uint64_t ms = w.p->wttl_ms / 3 + 1;
  // A canceller that unblocks the BLPOP itself needs no cut, unless the
  // connection's id could not be had (CLIENT ID refused: -1).
  const bool unblockable =
      w.cancel_unblocks &&
      !(w.conn_id && w.conn_id->load(std::memory_order_relaxed) < 0);
  if (w.cancel && !unblockable && ms > kCancelCheckMs) ms = kCancelCheckMs;
  if (w.deadline) {
    const uint64_t now = mono_ns(), d = ts_to_ns(*w.deadline);
    if (now >= d) return 0;
    const uint64_t left = (d - now + kMs - 1) / kMs;
    if (left < ms) ms = left;
  }
  return ms;
}

// How long a call may take: the handle's limit, or less, to end by the
// deadline (and its grace).
int call_timeout_ms(const Wait &w) {
  const int io = io_timeout_ms(w.p);
  if (!w.deadline) return io;
  const uint64_t now = mono_ns(), d = ts_to_ns(*w.deadline);
  const uint64_t left = (d > now ? (d - now) / kMs : 0) + kGraceMs;
  return left < uint64_t(io) ? int(left) : io;
}

// The cancel handle fired, or a signal handler interrupted an
// interruptible BLPOP (`signalled`): end the BLPOP (CLIENT UNBLOCK of the
// waiter's connection). true when that is done or cannot be (the BLPOP
// then ends by its timeout); false to try again (the server has not
// blocked it yet).
bool end_blpop(Wait &w, bool signalled) {
  if (signalled) w.interrupted = true;
  const int64_t id = w.conn_id->load(std::memory_order_relaxed);
  if (id < 0) return true;
  if (id == 0) return false;
  return unblock_client(w.p, id, call_timeout_ms(w)) != 0;
}

// One BLPOP: 0 and the message, 1 nothing came, or -ECOMM.
int block_once(Wait &w, Conn *c, uint64_t ms, std::string *msg) {
  if (c->stale()) c->close();
  if (!c->connected()) {
    const int e = c->connect(w.p->ep, call_timeout_ms(w));
    if (e < 0) return e;
    if (w.conn_id) w.conn_id->store(0, std::memory_order_relaxed);
  }
  if (w.conn_id && w.conn_id->load(std::memory_order_relaxed) == 0)
    publish_client_id(c, w.conn_id, call_timeout_ms(w));
  // Seconds with three decimals, as BLPOP takes them (Redis 6+).
  const std::string frac = std::to_string(1000 + ms % 1000).substr(1);
  const std::string secs = std::to_string(ms / 1000) + "." + frac;
  Reply r;
  const int slack = w.deadline ? kGraceMs : io_timeout_ms(w.p);
  Conn::Wake wake;
  wake.fd = w.wake_fd;
  wake.on_signal = w.interruptible;
  wake.end = [&w](bool signalled) { return end_blpop(w, signalled); };
  const bool wakes = w.interruptible || w.wake_fd >= 0;
  const int e = c->call({"BLPOP", w.key, secs}, int(ms) + slack, &r,
                        wakes ? &wake : nullptr);
  if (e < 0) return e;
  if (r.is_nil()) return 1;
  if (r.size() != 2 || !r.str(1, msg)) return kBadReply;
  return 0;
}

// Between two BLPOPs: renew the place, and when the head's token is due
// (`due`), ask for the grant; 0 still queued, 1 when the wait is over (the
// lease, or an error, in *out), or an error.
int keep_place(Wait &w, bool due, shmsem_lease_t *lease, int *out) {
  Reply r;
  const int e = pool_call(w.p, "shmsem_wait_renew",
                          {std::to_string(w.ticket), due ? "1" : "0"}, &r,
                          call_timeout_ms(w));
  if (e < 0) return e;
  const std::string st = r.status();
  if (st == "queued") return 0;
  if (st != "done") return status_errno(st);
  // Not queued: the outcome is in the mailbox, or a BLPOP popped it and
  // its reply was lost with the connection; no message comes after it
  // (R1, verify/MODEL.md). shmsem_cancel takes what is there in one step
  // and deletes the mailbox: the grant, or "expired" when it was lost
  // (-ECOMM: that lease is never renewed and expires within its TTL).
  *out = resolve(w.p, w.ticket, "cancel", lease, call_timeout_ms(w));
  if (*out == -ECANCELED) *out = -ECOMM;
  return 1;
}

// After the `failures`th failed round in a row (no server, an error
// reply), wait before the next one, never past the deadline: a server
// that is gone refuses the connect at once, and a mailbox a co-user made
// another type fails every BLPOP at once; without the pause a wait with a
// deadline was a busy loop on the CPU and the server until then.
void pause_after_failure(const Wait &w, int failures) {
  uint64_t ms = kRetryMinMs << (failures < 5 ? failures - 1 : 4);
  if (ms > kRetryMaxMs) ms = kRetryMaxMs;
  const uint64_t left = next_block_ms(w);
  if (left < ms) ms = left;
  if (ms == 0) return;
  const timespec ts{time_t(ms / 1000), long(ms % 1000) * long(kMs)};
  nanosleep(&ts, nullptr);
}

// The waiter's own end of its wait (cancel handle fired, or a signal):
// leave the queue, within the deadline's grace; a server silent past the
// deadline ends it -ETIMEDOUT (a grant that won meanwhile is never renewed
// and expires within a TTL).
int withdraw(Wait &w, shmsem_lease_t *lease) {
  const int e = resolve(w.p, w.ticket, "cancel", lease, call_timeout_ms(w));
  if (e == -ECOMM && w.deadline && next_block_ms(w) == 0) return -ETIMEDOUT;
  return e;
}

// The end of an interrupted wait: leave the queue as a cancel does.
int end_interrupted(Wait &w, shmsem_lease_t *lease) {
  const int e = withdraw(w, lease);
  return e == -ECANCELED ? -EINTR : e;
}

int wait_loop(Wait &w, Conn *c, shmsem_lease_t *lease) {
  int failures = 0;
  uint64_t token_at = 0;  // told "R us": when the head's token is due
  for (;;) {
    if (w.interrupted) return end_interrupted(w, lease);
    uint64_t ms = next_block_ms(w);
    if (ms == 0) return resolve(w.p, w.ticket, "timeout", lease, kGraceMs);
    if (w.cancel && cancel_fired(w.cancel)) return withdraw(w, lease);
    std::string msg;
    int got = 1;  // as a BLPOP that timed out: renew the place
    const bool due = token_at && rate_step(token_at, &ms);
    if (due)
      token_at = 0;  // and ask for the grant
    else if (ms == 0)
      continue;  // slept toward the token: the deadline and cancel first
    else
      got = block_once(w, c, ms, &msg);
    if (got == 0 && rate_message(msg, &token_at)) continue;
    if (got == 0) return take_message(w.p, msg, lease);
    if (w.interrupted) return end_interrupted(w, lease);
    if (w.cancel && cancel_fired(w.cancel)) return withdraw(w, lease);
    if (got < 0) {
      if (++failures >= kMaxFailures && !w.deadline) return got;
      pause_after_failure(w, failures);
      continue;  // the deadline bounds the retries
    }
    failures = 0;
    int out = 0;
    const int e = keep_place(w, due, lease, &out);
    if (e == 1) return out;
    if (e == -ECOMM && w.deadline) {
      pause_after_failure(w, ++failures);
      continue;
    }
    if (e < 0) return e;
  }
}

}  // namespace

int redis_try_acquire(shmsem_t *s, uint32_t n, shmsem_lease_t *lease) {
  Pool *p = pool_of(s);
  pool_enter(p);
  if (p->rdonly) return -EBADF;
  if (n == 0 || n > p->max_permits) return -EINVAL;
  Reply r;
  int e = pool_call(p, "shmsem_acquire",
                    {std::to_string(n), "0", std::to_string(getpid())}, &r);
  if (e < 0) return e;
  uint64_t ticket;
  e = grant_or_ticket(p, r, &ticket, lease);
  return e == 1 ? kBadReply : e;
}

int acquire_check(Pool *p, uint32_t n, const timespec *deadline) {
  if (p->rdonly) return -EBADF;
  if (n == 0 || n > p->max_permits) return -EINVAL;
  if (deadline && (deadline->tv_nsec < 0 || deadline->tv_nsec > 999999999 ||
                   deadline->tv_sec < 0))
    return -EINVAL;
  return 0;
}

int acquire_enqueue(shmsem_t *s, uint32_t n, const timespec *deadline,
                    shmsem_lease_t *lease, uint64_t *ticket) {
  Pool *p = pool_of(s);
  Wait w{p, 0, deadline, nullptr, ""};
  if (deadline && next_block_ms(w) == 0) {
    const int e = redis_try_acquire(s, n, lease);
    return e == -EAGAIN ? -ETIMEDOUT : e;
  }
  Reply r;
  int e = pool_call(p, "shmsem_acquire",
                    {std::to_string(n), "1", std::to_string(getpid())}, &r,
                    call_timeout_ms(w));
  // No answer by the deadline: whatever the server did expires unrenewed.
  if (e == -ECOMM && deadline && next_block_ms(w) == 0) return -ETIMEDOUT;
  if (e < 0) return e;
  return grant_or_ticket(p, r, ticket, lease);
}

int wait_queued(Wait &w, shmsem_lease_t *lease) {
  // The pool's identity in the key: a pool created anew under the name
  // numbers its tickets from 1 again (shmsem.lua, base:mb:ID:T).
  w.key = w.p->base + ":mb:" + w.p->id + ":" + std::to_string(w.ticket);
  Conn *c = waiter_conn(w.p);
  if (!c) return resolve(w.p, w.ticket, "cancel", lease, 0) == 0 ? 0 : -ECOMM;
  const int e = wait_loop(w, c, lease);
  waiter_conn_done(w.p, c);
  return e;
}

namespace {

// The cancel handle's withdraw for a Redis wait (cancel_fire, in the
// canceller's thread): wake the waiter's poll through its eventfd.
void wake_cancelled(shmsem_t *, uint32_t, uint64_t fd) {
  const uint64_t one = 1;
  (void)!write(int(fd), &one, sizeof one);
}

// wait_queued with w.cancel armed (cancel_arm) on an eventfd its BLPOPs
// watch, so a fire ends the wait at once; disarmed before the eventfd is
// closed (a canceller still in wake_cancelled is waited for).
int wait_cancellable(Wait &w, shmsem_lease_t *lease) {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return wait_queued(w, lease);  // looked at every 100 ms
  if (!cancel_arm(w.cancel, nullptr, 0, uint64_t(fd), wake_cancelled)) {
    close(fd);
    return withdraw(w, lease);
  }
  w.wake_fd = fd;
  w.cancel_unblocks = true;
  const int e = wait_queued(w, lease);
  cancel_disarm(w.cancel);
  close(fd);
  return e;
}

}  // namespace

int redis_acquire(shmsem_t *s, uint32_t n, const timespec *deadline,
                  shmsem_cancel_t *cancel, unsigned flags,
                  shmsem_lease_t *lease) {
  if (!s || !lease) return -EINVAL;
  // Not a cancellation point (pthread_cancel): a thread cancelled in its
  // poll would leave its place queued, its connection and eventfd open,
  // its cancel handle armed, or the handle's mutex held (an unblock in
  // progress). The request takes effect at the caller's next cancellation
  // point; shmsem_acquire_ex(3) says to use a cancel handle.
  NoCancel no_cancel;
  Pool *p = pool_of(s);
  pool_enter(p);
  int e = acquire_check(p, n, deadline);
  if (e < 0) return e;
  if (flags & ~SHMSEM_WAIT_INTERRUPTIBLE) return -EINVAL;
  if (cancel && cancel_fired(cancel)) return -ECANCELED;
  Wait w{p, 0, deadline, cancel, ""};
  std::atomic<int64_t> conn_id{0};
  w.interruptible = (flags & SHMSEM_WAIT_INTERRUPTIBLE) != 0;
  // Its BLPOPs may be ended: their connection's id is published first.
  if (w.interruptible || cancel) w.conn_id = &conn_id;
  e = acquire_enqueue(s, n, deadline, lease, &w.ticket);
  if (e != 1) return e;
  return cancel ? wait_cancellable(w, lease) : wait_queued(w, lease);
}

}  // namespace shmsem::detail
