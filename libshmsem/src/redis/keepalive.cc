// The keep-alive (pool.h): one thread per handle, started at its first
// lease, renews every lease the process holds through the handle every
// TTL/3 in one call (shmsem_renew), on a connection of its own, so that a
// holder that lives keeps its leases and one that dies (or stops, or loses
// the server for a TTL) loses them. A renewal that gets no answer (the
// connection dropped, the server or the network silent for the call's
// timeout of TTL/3) is tried again after TTL/20, not a whole period later:
// then a lease survives an outage of up to about 2*TTL/3 - TTL/20 whenever
// it starts (the last renewal answered may be TTL/3 old and the one in
// flight lost after its TTL/3 timeout; docs/REDIS.md, "Safety envelope"). A
// lease the server says is gone (expired, released elsewhere) is forgotten
// here; its holder hears -EKEYEXPIRED from release and shmsem_lease_renew. All
// signals are blocked in the thread: the caller's handlers never run on it.
#include <errno.h>
#include <signal.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "pool.h"

namespace shmsem::detail {
namespace {

// One renewal of `held` on `c`: the leases the server no longer holds are
// dropped from the handle's list. false if the server did not answer (or
// answered what this client cannot read): the caller tries again soon.
bool renew_once(Pool *p, Conn *c, const std::vector<HeldLease> &held) {
  std::vector<std::string> args;
  for (const HeldLease &l : held) {
    args.push_back(std::to_string(l.index));
    args.push_back(std::to_string(l.gen));
  }
  Reply r;
  // A third of the TTL (a later answer is too late to keep the lease), and
  // never longer than a call may take (detach waits for this one).
  int timeout = int(p->ttl_ms / 3 > 0 ? p->ttl_ms / 3 : 1);
  if (timeout > io_timeout_ms(p)) timeout = io_timeout_ms(p);
  if (conn_call(p, c, "shmsem_renew", args, &r, timeout) < 0) return false;
  if (r.status() != "ok" || r.size() != held.size() + 2) return false;
  std::lock_guard<std::mutex> lock(p->ka_mu);
  for (size_t i = 0; i < held.size(); i++) {
    std::string st;
    if (!r.str(i + 1, &st) || st == "held") continue;
    auto &v = p->leases;
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](const HeldLease &l) {
                             return l.index == held[i].index &&
                                    l.gen == held[i].gen;
                           }),
            v.end());
  }
  return true;
}

// The thread renews when a period ends, never because a lease was added:
// an add wakes only an idle thread (no lease held), so that an acquire
// costs no wake-up and no renewal of the leases already held (measured in
// bench/RESULTS.md, "Redis backend": every acquire used to wake this
// thread out of its timed wait into a renewal of every lease).
void *keepalive_main(void *arg) {
  Pool *p = static_cast<Pool *>(arg);
  Conn c;
  const auto period = std::chrono::milliseconds(p->ttl_ms / 3 + 1);
  const auto retry = std::chrono::milliseconds(p->ttl_ms / 20 + 1);
  bool answered = true;
  std::unique_lock<std::mutex> lock(p->ka_mu);
  while (!p->ka_stop) {
    if (p->leases.empty()) {
      p->ka_idle = true;
      p->ka_cv.wait(lock);
      p->ka_idle = false;
      continue;
    }
    // A lease added during the period is renewed at its end: within
    // TTL/3 of its grant, as every other. An unanswered renewal is tried
    // again sooner (retry).
    const auto due =
        std::chrono::steady_clock::now() + (answered ? period : retry);
    while (!p->ka_stop &&
           p->ka_cv.wait_until(lock, due) != std::cv_status::timeout) {
    }
    if (p->ka_stop) break;
    if (p->leases.empty()) continue;
    const std::vector<HeldLease> held = p->leases;
    lock.unlock();
    answered = renew_once(p, &c, held);
    lock.lock();
  }
  return nullptr;
}

// Start the thread with every signal blocked. Called with ka_mu held.
int start_thread(Pool *p) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int e = pthread_create(&p->ka_thread, nullptr, keepalive_main, p);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (e != 0) return -e;
  p->ka_running = true;
  return 0;
}

}  // namespace

int keepalive_add(Pool *p, const HeldLease &l) {
  std::lock_guard<std::mutex> lock(p->ka_mu);
  if (!p->ka_running && !p->ka_stop) {
    const int e = start_thread(p);
    if (e < 0) return e;
  }
  p->leases.push_back(l);
  if (p->ka_idle) p->ka_cv.notify_all();
  return 0;
}

bool keepalive_remove(Pool *p, uint32_t index, uint64_t gen, uint64_t *seq) {
  std::lock_guard<std::mutex> lock(p->ka_mu);
  auto &v = p->leases;
  for (size_t i = 0; i < v.size(); i++) {
    if (v[i].index != index || v[i].gen != gen) continue;
    if (seq) {
      *seq = v[i].seq;
      return true;
    }
    v.erase(v.begin() + long(i));
    return true;
  }
  return false;
}

void keepalive_stop(Pool *p) {
  bool join = false;
  {
    std::lock_guard<std::mutex> lock(p->ka_mu);
    p->ka_stop = true;
    join = p->ka_running;
    p->ka_cv.notify_all();
  }
  if (join) pthread_join(p->ka_thread, nullptr);
}

}  // namespace shmsem::detail
