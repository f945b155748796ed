// A handle of the Redis backend and what the process keeps for it: the
// pool's identity and configuration, one connection for the calls (one at
// a time), idle connections for blocking waits (each waiter blocks on its
// own), the leases this process holds through the handle and the
// keep-alive thread that renews them. docs/REDIS.md.
//
// Fork: a child inherits no leases and no waits (as with a local
// semaphore). The first call in a child on a handle it inherited finds
// another pid in `pid`, abandons the parent's connections (closes its
// copies of the descriptors, sends nothing), forgets the parent's leases
// (the parent keeps renewing them; the child never does) and starts afresh.
// The keep-alive thread is not inherited.
#ifndef SHMSEM_SRC_REDIS_POOL_H
#define SHMSEM_SRC_REDIS_POOL_H

#include <pthread.h>
#include <shmsem/shmsem.h>
#include <stdint.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "backend.h"
#include "conn.h"
#include "endpoint.h"

namespace shmsem::detail {

extern const Backend kRedisBackend __attribute__((visibility("hidden")));

// A lease this process holds: renewed by the keep-alive thread until it
// is released, or found lost.
struct HeldLease {
  uint32_t index;
  uint64_t gen;
  uint64_t seq;
};

struct Pool {
  Endpoint ep;
  std::string base;  // "shmsem:{POOL}"
  std::string id;    // the pool's identity (16 hex digits), drawn at create
  uint64_t sem = 0;  // the same as a number: every lease's `sem`
  uint32_t max_permits = 0, ttl_ms = 0, wttl_ms = 0;
  bool rdonly = false;
  std::atomic<pid_t> pid{0};  // the process these connections are for

  std::mutex mu;  // one call at a time on `main`
  Conn main;

  std::mutex idle_mu;  // connections for blocking waits, not in use
  std::vector<Conn *> idle;

  // The keep-alive: `leases` under ka_mu; the thread wakes every ttl/3
  // while any is held, and at once on `stop`; an add wakes it only when
  // it is idle (ka_idle: no lease held, waiting without a timeout).
  std::mutex ka_mu;
  std::condition_variable ka_cv;
  std::vector<HeldLease> leases;
  bool ka_running = false, ka_stop = false, ka_idle = false;
  pthread_t ka_thread{};
};

// The handle: standard layout, the backend first (backend.h).
struct RedisHandle {
  const Backend *backend = &kRedisBackend;
  Pool *pool = nullptr;
};

inline Pool *pool_of(shmsem_t *s) {
  return reinterpret_cast<RedisHandle *>(s)->pool;
}

// How long one call may take: the TTL, within [1 s, 5 s] (a call slower
// than a lease's life cannot keep it anyway).
inline int io_timeout_ms(const Pool *p) {
  const uint32_t t = p->ttl_ms < 1000   ? 1000
                     : p->ttl_ms > 5000 ? 5000
                                        : p->ttl_ms;
  return int(t);
}

// After a fork: the child's handle starts afresh (above). Every entry
// calls it first.
void pool_enter(Pool *p);

// FCALL `fn` on the pool's base key with the pool's id and `args`, on the
// handle's connection (reconnecting if it broke), within timeout_ms (0:
// io_timeout_ms). 0 with *out; -ECOMM, or kBadReply a reply that is not an
// array with a status word.
int pool_call(Pool *p, const char *fn, const std::vector<std::string> &args,
              Reply *out, int timeout_ms = 0);

// The same on a connection of the caller's (a waiter's).
int conn_call(Pool *p, Conn *c, const char *fn,
              const std::vector<std::string> &args, Reply *out, int timeout_ms);

// Open the pool p->base names on p's connection (shmsem_open): its
// identity and configuration into `p` (open.cc). 0; -ENOENT, -ECOMM.
int pool_load_config(Pool *p);

// A connection for a blocking wait (an idle one, or a new one), and its
// return (broken ones are freed). nullptr: -ECOMM.
Conn *waiter_conn(Pool *p);
void waiter_conn_done(Pool *p, Conn *c);

// The keep-alive (keepalive.cc): hold, forget, and stop at detach.
int keepalive_add(Pool *p, const HeldLease &l);
// false if the lease was not held through this process.
bool keepalive_remove(Pool *p, uint32_t index, uint64_t gen,
                      uint64_t *seq = nullptr);
void keepalive_stop(Pool *p);

// The errno of a function's status word (shmsem.lua's replies).
int status_errno(const std::string &st);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_REDIS_POOL_H
