// The Redis backend's non-blocking waiter (async.h).
//
// Goal: a remote acquire that an event loop drives like a local one (start,
// wait on a futex word, poll, cancel), so that <shmsem/uring.h> and the
// notifier serve it unchanged, while the wait itself is the blocking one
// of acquire.cc (BLPOP on the ticket's mailbox, the keep-alive of its
// place, the deadline and the cancel resolved by shmsem_cancel on the
// server, one transition against the grant).
//
// Representation. A queued remote waiter is a Record in this process's
// registry and one thread that runs wait_queued for it:
//   doorbell  the futex word (shmsem_waiter_futex): holds `waiting` while
//             the wait goes on; the thread stores waiting + 1 (release,
//             after the outcome) and wakes every sleeper on it with a
//             shared FUTEX_WAKE (the word is private memory, but the
//             io_uring and the notifier wait on it without
//             FUTEX_PRIVATE_FLAG: shmsem.h).
//   rc, lease the outcome, written by the thread before the word changes.
//   cancel    a private cancel handle the thread's wait looks at.
//   conn_id   the server's id of the thread's connection, for CLIENT
//             UNBLOCK.
// The caller's shmsem_waiter_t holds no pointer: a magic no pointer can
// equal (claimed by redis_owns_waiter from the bytes alone), the record's
// index and generation in the registry, and the pid that started it. Every
// call reads those once and looks the record up under the registry's lock:
// a garbage, stale or copied waiter names no live record and is -EINVAL.
// Records are never freed (a slot is reused with a new generation), so a
// late futex wait or wake on an old word touches memory that stays ours,
// as a shm waiter's word stays in its segment.
//
// One resolver. Only the thread ends its wait on the server (the grant it
// pops, or its shmsem_cancel at the deadline or on the cancel handle), so
// a grant is taken exactly once. waiter_cancel fires the private handle
// and then ends the thread's BLPOP at once with CLIENT UNBLOCK ... TIMEOUT
// (the server's own decision: either the BLPOP was served, and its reply
// carries the grant, or it returns nil and the thread sees the handle);
// the UNBLOCK is repeated while the thread is between two BLPOPs, since it
// only acts on a blocked client. Where CLIENT UNBLOCK is refused (ACL), the
// cancel waits for the current BLPOP to end: at most a third of the
// waiter keep-alive TTL (docs/REDIS.md).
//
// Fork: the registry is reset in the child at its first call (its lock may
// have been held by a parent's thread); the parent's waiters have no
// thread there, and the child's copy of a shmsem_waiter_t names the
// parent's pid: -EINVAL, as a copied shm waiter.
#include "async.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <mutex>
#include <new>
#include <vector>

#include "acquire.h"
#include "cancel.h"
#include "clock.h"
#include "futex.h"
#include "ops.h"
#include "pool.h"
#include "thread_cancel.h"

namespace shmsem::detail {
namespace {

// The first word of a remote waiter: "REDISWTR", a non-canonical address
// on every 64-bit Linux (the shm backend's waiter starts with a pointer).
constexpr uint64_t kRemoteWaiterMagic = 0x5245444953575452ull;

// What a remote waiter keeps in shmsem_waiter_t::__opaque.
struct WaiterBytes {
  uint64_t magic;
  uint32_t index;  // in the registry
  uint32_t gen;    // the record's generation when it was started
  int32_t pid;     // the process that started it
  uint32_t unused;
};
static_assert(sizeof(WaiterBytes) <= sizeof(shmsem_waiter_t::__opaque));

// The thread's stack: hiredis and a few strings (its buffers are on the
// heap). 8 MiB of address space per queued waiter would be the default.
constexpr size_t kStackBytes = size_t{256} * 1024;
// How long past its deadline a wait may take to end (wait_queued: its
// grace for the last BLPOP, then the server's answer to the cancel).
constexpr uint64_t kLateNs = 1'000'000'000;
// Without a deadline, the poll-by time: nothing needs a poll, the thread
// changes the word when anything happens.
constexpr uint64_t kIdleWakeNs = 3600 * kNsPerSec;
// The canceller's pause between two CLIENT UNBLOCKs that found the thread
// between BLPOPs: doubling from 1 ms, at most 50 ms.
constexpr uint64_t kFirstPauseNs = 1'000'000;
constexpr uint64_t kMaxPauseNs = 50'000'000;

struct Record {
  // The futex word (file comment); not a state word of the state machine.
  std::atomic<uint32_t> doorbell{0};
  uint32_t waiting = 0;
  // Under the registry's lock:
  uint32_t gen = 0;
  bool used = false;
  shmsem_t *s = nullptr;
  Pool *p = nullptr;
  // Set by start before the thread runs, then read-only:
  uint64_t ticket = 0;
  bool has_deadline = false;
  timespec deadline{};
  pthread_t thread{};
  // The caller's thread only (one call at a time on a waiter):
  std::atomic<uint64_t> wake_by{0};
  // Shared with the thread:
  shmsem_cancel_t cancel{};
  std::atomic<int64_t> conn_id{0};
  int rc = 0;  // written before the word changes, read after
  shmsem_lease_t lease{};
};

struct Registry {
  std::mutex mu;
  std::vector<Record *> recs;  // never freed
  std::vector<uint32_t> spare;
  std::atomic<pid_t> pid{0};
};

Registry &registry() {
  // Leaked on purpose: waiter threads may outlive static destructors.
  static Registry *r = [] {
    auto *n = new Registry;
    n->pid.store(getpid(), std::memory_order_relaxed);
    return n;
  }();
  return *r;
}

// A fork child's first call: a lock held by a parent's thread stays held
// in the copy, and the parent's waiters have no thread here. One thread
// resets; others of the child wait for it (as pool_enter does).
Registry &entered() {
  Registry &r = registry();
  const pid_t me = getpid();
  pid_t seen = r.pid.load(std::memory_order_acquire);
  if (seen == me) return r;
  if (seen != 0 && r.pid.compare_exchange_strong(seen, 0)) {
    new (&r.mu) std::mutex;
    r.spare.clear();
    for (uint32_t i = 0; i < r.recs.size(); i++) {
      r.recs[i]->used = false;
      r.recs[i]->gen++;
      r.spare.push_back(i);
    }
    r.pid.store(me, std::memory_order_release);
    return r;
  }
  while (r.pid.load(std::memory_order_acquire) != me) sched_yield();
  return r;
}

struct Ref {
  Record *rec = nullptr;
  uint32_t index = 0;
};

// The live record `w` names in this process, or none. `w`'s bytes are
// read once, into a copy, and checked against the registry.
Ref lookup(const shmsem_waiter_t *w) {
  WaiterBytes b;
  memcpy(&b, w->__opaque, sizeof b);
  if (b.magic != kRemoteWaiterMagic || b.pid != getpid()) return {};
  Registry &r = entered();
  std::lock_guard<std::mutex> lock(r.mu);
  if (b.index >= r.recs.size()) return {};
  Record *rec = r.recs[b.index];
  if (!rec->used || rec->gen != b.gen) return {};
  return {rec, b.index};
}

// A record for a waiter of handle `s` (pool `p`): named `used` under the
// lock together with its handle, which async_detach looks for.
Ref alloc_record(shmsem_t *s, Pool *p) {
  Registry &r = entered();
  std::lock_guard<std::mutex> lock(r.mu);
  Ref ref;
  if (!r.spare.empty()) {
    ref.index = r.spare.back();
    r.spare.pop_back();
  } else {
    if (r.recs.size() >= UINT32_MAX) return {};
    auto *rec = new (std::nothrow) Record;
    if (!rec) return {};
    r.recs.push_back(rec);  // no exceptions: a failed growth aborts
    ref.index = uint32_t(r.recs.size() - 1);
  }
  ref.rec = r.recs[ref.index];
  ref.rec->used = true;
  ref.rec->gen++;
  ref.rec->s = s;
  ref.rec->p = p;
  return ref;
}

void free_record(const Ref &ref) {
  Registry &r = entered();
  std::lock_guard<std::mutex> lock(r.mu);
  ref.rec->used = false;
  ref.rec->gen++;
  ref.rec->s = nullptr;
  r.spare.push_back(ref.index);
}

void *waiter_main(void *arg) {
  auto *rec = static_cast<Record *>(arg);
  // No cancellation point may end the wait half-way: it ends only by its
  // own outcome (the canceller's path is the private handle).
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
  Wait w{
      rec->p,       rec->ticket, rec->has_deadline ? &rec->deadline : nullptr,
      &rec->cancel, "",          &rec->conn_id,
      true};
  shmsem_lease_t lease{};
  rec->rc = wait_queued(w, &lease);
  rec->lease = lease;
  // Release: the outcome is visible to whoever sees the new value.
  rec->doorbell.store(rec->waiting + 1, std::memory_order_release);
  futex_wake(&rec->doorbell, INT_MAX);
  return nullptr;
}

// Start the thread of a queued waiter. 0, or -EAGAIN/-ENOMEM (no thread).
int start_thread(Record *rec) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr)) return -ENOMEM;
  pthread_attr_setstacksize(&attr, kStackBytes);
  // The thread inherits the caller's signal mask: block everything for it
  // (no handler of the caller's may run on it), then restore ours.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int e = pthread_create(&rec->thread, &attr, waiter_main, rec);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (e) return -e;  // -EAGAIN, -ENOMEM, -EPERM
  pthread_setname_np(rec->thread, "shmsem-rwait");
  return 0;
}

// A ticket the thread cannot wait for (no record, no thread): withdrawn
// at once, keeping a grant that won. 0 with `lease`, or `why`.
int withdraw(Pool *p, uint64_t ticket, const timespec *deadline,
             shmsem_lease_t *lease, int why) {
  shmsem_cancel_t fired{};
  cancel_fire(&fired);  // never armed: only marks it fired
  Wait w{p, ticket, deadline, &fired, ""};
  return wait_queued(w, lease) == 0 ? 0 : why;
}

uint64_t first_wake_by(const Record *rec) {
  if (!rec->has_deadline) return real_mono_ns() + kIdleWakeNs;
  const uint64_t d = ts_to_ns(rec->deadline);
  return d > UINT64_MAX - kLateNs ? UINT64_MAX : d + kLateNs;
}

bool waiting(const Record *rec) {
  return rec->doorbell.load(std::memory_order_acquire) == rec->waiting;
}

// After the private handle fired: end the thread's BLPOP, then wait for
// the thread to store its outcome.
void unblock_until_done(Record *rec) {
  uint64_t pause = kFirstPauseNs;
  bool unblocking = true;
  while (waiting(rec)) {
    if (unblocking) {
      const int64_t id = rec->conn_id.load(std::memory_order_relaxed);
      // 1: the thread is on its way; an error: it will see the handle
      // when its BLPOP ends. 0 (or no id yet): try again shortly.
      if (id > 0 && unblock_client(rec->p, id, io_timeout_ms(rec->p)) != 0)
        unblocking = false;
      if (id < 0) unblocking = false;
    }
    const uint64_t until = unblocking ? real_mono_ns() + pause : 0;
    (void)futex_wait(&rec->doorbell, rec->waiting, until);
    if (pause < kMaxPauseNs) pause *= 2;
  }
}

// The end of a wait whose word changed: join the thread, take its
// outcome, free the record, and leave `w` unused.
int complete(const Ref &ref, shmsem_waiter_t *w, shmsem_lease_t *lease) {
  pthread_join(ref.rec->thread, nullptr);
  const int rc = ref.rec->rc;
  if (rc == 0) *lease = ref.rec->lease;
  free_record(ref);
  memset(w->__opaque, 0, sizeof w->__opaque);
  return rc;
}

}  // namespace

int unblock_client(Pool *p, int64_t id, int timeout_ms) {
  NoCancel no_cancel;  // as pool_call: never cancelled holding the mutex
  std::lock_guard<std::mutex> lock(p->mu);
  Conn *c = &p->main;
  if (c->stale()) c->close();
  if (!c->connected()) {
    const int e = c->connect(p->ep, timeout_ms);
    if (e < 0) return e;
  }
  Reply r;
  const int e = c->call({"CLIENT", "UNBLOCK", std::to_string(id), "TIMEOUT"},
                        timeout_ms, &r);
  if (e < 0) return e;
  const redisReply *x = r.get();
  if (!x || x->type != REDIS_REPLY_INTEGER) return -EPERM;
  return x->integer == 1 ? 1 : 0;
}

void publish_client_id(Conn *c, std::atomic<int64_t> *id, int timeout_ms) {
  Reply r;
  int64_t v = -1;
  if (c->call({"CLIENT", "ID"}, timeout_ms, &r) == 0 && r.get() &&
      r.get()->type == REDIS_REPLY_INTEGER && r.get()->integer > 0)
    v = r.get()->integer;
  id->store(v, std::memory_order_relaxed);
}

bool redis_owns_waiter(const shmsem_waiter_t *w) {
  uint64_t magic;
  memcpy(&magic, w->__opaque, sizeof magic);
  return magic == kRemoteWaiterMagic;
}

int redis_waiter_start(shmsem_t *s, shmsem_waiter_t *w, uint32_t n,
                       const timespec *deadline, shmsem_lease_t *lease) {
  if (!s || !w || !lease) return -EINVAL;
  if (lookup(w).rec) return -EINVAL;  // queued: wiping it strands its thread
  Pool *p = pool_of(s);
  pool_enter(p);
  int e = acquire_check(p, n, deadline);
  if (e < 0) return e;
  NoCancel no_cancel;  // a step of a loop, not a blocking call
  uint64_t ticket = 0;
  e = acquire_enqueue(s, n, deadline, lease, &ticket);
  if (e != 1) return e;  // granted at once, or an error: `w` unused
  const Ref ref = alloc_record(s, p);
  if (!ref.rec) return withdraw(p, ticket, deadline, lease, -ENOMEM);
  Record *rec = ref.rec;
  rec->ticket = ticket;
  rec->has_deadline = deadline != nullptr;
  rec->deadline = deadline ? *deadline : timespec{};
  rec->cancel = shmsem_cancel_t{};
  rec->conn_id.store(0, std::memory_order_relaxed);
  rec->rc = 0;
  rec->lease = shmsem_lease_t{};
  rec->waiting = rec->doorbell.load(std::memory_order_relaxed) + 1;
  rec->doorbell.store(rec->waiting, std::memory_order_relaxed);
  rec->wake_by.store(first_wake_by(rec), std::memory_order_relaxed);
  e = start_thread(rec);
  if (e < 0) {
    free_record(ref);
    return withdraw(p, ticket, deadline, lease, e);
  }
  memset(w->__opaque, 0, sizeof w->__opaque);
  const WaiterBytes b{kRemoteWaiterMagic, ref.index, rec->gen,
                      int32_t(getpid()), 0};
  memcpy(w->__opaque, &b, sizeof b);
  return SHMSEM_QUEUED;
}

int redis_waiter_futex(const shmsem_waiter_t *w, uint32_t **word,
                       uint32_t *value) {
  if (!w || !word || !value) return -EINVAL;
  const Ref ref = lookup(w);
  if (!ref.rec) return -EINVAL;
  // std::atomic<uint32_t> is a plain 32-bit word (futex.h passes it so).
  *word = reinterpret_cast<uint32_t *>(&ref.rec->doorbell);
  *value = ref.rec->waiting;
  return 0;
}

int redis_waiter_wake_by(const shmsem_waiter_t *w, timespec *at) {
  if (!w || !at) return -EINVAL;
  const Ref ref = lookup(w);
  if (!ref.rec) return -EINVAL;
  *at = ns_to_ts(ref.rec->wake_by.load(std::memory_order_relaxed));
  return 0;
}

int redis_waiter_poll(shmsem_waiter_t *w, shmsem_lease_t *lease) {
  if (!w || !lease) return -EINVAL;
  const Ref ref = lookup(w);
  if (!ref.rec) return -EINVAL;
  if (waiting(ref.rec)) {
    // Still queued past its poll-by time (a server slow to answer the
    // cancel at the deadline): the next poll-by time is later, so that a
    // loop that polls by it does not spin.
    const uint64_t now = real_mono_ns();
    if (ref.rec->wake_by.load(std::memory_order_relaxed) <= now)
      ref.rec->wake_by.store(now + kLateNs, std::memory_order_relaxed);
    return -EINPROGRESS;
  }
  NoCancel no_cancel;  // pthread_join is a cancellation point
  return complete(ref, w, lease);
}

int redis_waiter_cancel(shmsem_waiter_t *w, shmsem_lease_t *lease) {
  if (!w || !lease) return -EINVAL;
  const Ref ref = lookup(w);
  if (!ref.rec) return -EINVAL;
  NoCancel no_cancel;
  cancel_fire(&ref.rec->cancel);
  unblock_until_done(ref.rec);
  const int rc = complete(ref, w, lease);
  // The outcome in cancel's terms: the lease if the grant won, shutdown,
  // the server lost; anything else (withdrawn, timed out first, reaped)
  // owns nothing.
  if (rc == 0 || rc == -ESHUTDOWN || rc == -ECOMM || rc == -EIDRM) return rc;
  return -ECANCELED;
}

void async_detach(shmsem_t *s) {
  std::vector<Ref> mine;
  {
    Registry &r = entered();
    std::lock_guard<std::mutex> lock(r.mu);
    for (uint32_t i = 0; i < r.recs.size(); i++)
      if (r.recs[i]->used && r.recs[i]->s == s) mine.push_back({r.recs[i], i});
  }
  NoCancel no_cancel;
  for (const Ref &ref : mine) {
    cancel_fire(&ref.rec->cancel);
    unblock_until_done(ref.rec);
    pthread_join(ref.rec->thread, nullptr);
    shmsem_lease_t lease = ref.rec->lease;
    if (ref.rec->rc == 0) (void)redis_release(s, &lease);
    free_record(ref);
  }
}

}  // namespace shmsem::detail
