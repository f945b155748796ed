// The handle's connections and calls (pool.h).
#include "pool.h"

#include "thread_cancel.h"

#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include <new>

namespace shmsem::detail {

int status_errno(const std::string &st) {
  if (st == "ok" || st == "granted" || st == "held") return 0;
  if (st == "again") return -EAGAIN;
  if (st == "shutdown") return -ESHUTDOWN;
  if (st == "busy") return -EBUSY;
  if (st == "inval") return -EINVAL;
  if (st == "already") return -EALREADY;
  if (st == "expired") return -EKEYEXPIRED;
  if (st == "timedout") return -ETIMEDOUT;
  if (st == "canceled") return -ECANCELED;
  if (st == "gone") return -EIDRM;
  if (st == "noent") return -ENOENT;
  if (st == "exists" || st == "mismatch") return -EEXIST;
  if (st == "broken") return -EUCLEAN;
  return kBadReply;
}

// A fork child's first call: the parent's connections and leases are the
// parent's (pool.h). One thread does it; others of the child wait.
void pool_enter(Pool *p) {
  const pid_t me = getpid();
  pid_t seen = p->pid.load(std::memory_order_acquire);
  if (seen == me) return;
  if (seen != 0 && p->pid.compare_exchange_strong(seen, 0)) {
    // Locks a parent's thread held at fork stay held in the child's copy:
    // build them anew (no other thread of the child uses them yet).
    new (&p->mu) std::mutex;
    new (&p->idle_mu) std::mutex;
    new (&p->ka_mu) std::mutex;
    new (&p->ka_cv) std::condition_variable;
    p->main.abandon();
    for (Conn *c : p->idle) {
      c->abandon();
      delete c;
    }
    p->idle.clear();
    p->leases.clear();
    p->ka_running = false;
    p->ka_stop = false;
    p->ka_idle = false;
    p->pid.store(me, std::memory_order_release);
    return;
  }
  while (p->pid.load(std::memory_order_acquire) != me) sched_yield();
}

int conn_call(Pool *p, Conn *c, const char *fn,
              const std::vector<std::string> &args, Reply *out,
              int timeout_ms) {
  if (timeout_ms <= 0) timeout_ms = io_timeout_ms(p);
  if (c->stale()) c->close();
  if (!c->connected()) {
    const int e = c->connect(p->ep, timeout_ms);
    if (e < 0) return e;
  }
  std::vector<std::string> argv{"FCALL", fn, "1", p->base, p->id};
  argv.insert(argv.end(), args.begin(), args.end());
  const int e = c->call(argv, timeout_ms, out);
  if (e < 0) return e;
  // Only a missing function is worth a second try: any other error reply
  // (a script error) may follow writes the function already made.
  if (out->is_error() && out->error_says("Function not found")) {
    // The library went missing (FUNCTION FLUSH, a new server): load it
    // again, once, and repeat.
    const int l = ensure_library(c, timeout_ms);
    if (l < 0) return l;
    const int again = c->call(argv, timeout_ms, out);
    if (again < 0) return again;
  }
  return out->status().empty() ? kBadReply : 0;
}

int pool_call(Pool *p, const char *fn, const std::vector<std::string> &args,
              Reply *out, int timeout_ms) {
  // A thread cancelled in the call's poll (a cancellation point) would
  // leave the mutex held: every later call on the handle would hang.
  NoCancel no_cancel;
  std::lock_guard<std::mutex> lock(p->mu);
  return conn_call(p, &p->main, fn, args, out, timeout_ms);
}

Conn *waiter_conn(Pool *p) {
  {
    std::lock_guard<std::mutex> lock(p->idle_mu);
    if (!p->idle.empty()) {
      Conn *c = p->idle.back();
      p->idle.pop_back();
      return c;
    }
  }
  return new (std::nothrow) Conn;
}

void waiter_conn_done(Pool *p, Conn *c) {
  if (!c) return;
  if (c->connected()) {
    std::lock_guard<std::mutex> lock(p->idle_mu);
    if (p->idle.size() < 8) {
      p->idle.push_back(c);
      return;
    }
  }
  delete c;
}

}  // namespace shmsem::detail
