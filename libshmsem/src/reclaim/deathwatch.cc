// The process's death watch: one helper thread, one io_uring, the owner
// processes its watchers asked for. See deathwatch.h and docs/DESIGN.md
// section 7, "Watching by events".
//
// Representation (process-local, all under Watchdog::mu but where noted):
//   entries[]  the owner processes followed: pending (the helper has not
//              opened its pidfd yet), armed (a poll is in the ring) or
//              failed (its identity could not be pinned); an exit frees
//              the entry and appends the owner to the log.
//   log        the owners proven gone, numbered (gseq); each registration
//              remembers the last number it took.
//   regs       the registrations; each has a word (`death`) the helper
//              bumps and wakes when it has something to say.
//   ctl        bumped (under mu) when a watcher adds a pending entry, then
//              woken: the helper's ring waits on it.
//
// Why no report is lost. A blocking watcher sleeps in futex_waitv(2) on
// its own word and on `death` with the value it last took: a bump before
// the call starts makes it fail at once (-EAGAIN), a bump after wakes it.
// An async watcher sleeps in its caller's loop on its slot word, which the
// helper wakes after the bump; a wake that comes before the loop's futex
// wait is in the kernel would be lost, so the helper wakes the word again
// (1, 2, 4 ... ms later) until the waiter's poll takes the report.
//
// Proof of death only: an owner is logged gone when the pidfd that
// owner_pidfd() pinned to exactly the recorded process reports POLLIN, or
// when owner_pidfd() proves it gone (-ESRCH). Never a timer.
//
// Fork: the watch is memory and a thread of the process that made it. A
// child (any fork, _Fork or clone: self_pid() reads the MADV_WIPEONFORK
// identity page) finds a watch of another pid, never touches it (its mutex
// may be held by a thread the child does not have), and makes its own.
// closefrom(): the watch keeps no descriptor. The ring is entered through
// its registered index (IORING_REGISTER_RING_FDS), its number closed at
// once; a pidfd is closed as soon as its poll is submitted (the poll holds
// the file).
#include "deathwatch.h"

#include <dlfcn.h>
#include <errno.h>
#include <liburing.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <new>

#include "clock.h"
#include "futex.h"
#include "inuse.h"
#include "owner.h"
#include "testing_state.h"

namespace shmsem::detail {
namespace {

// Debian 12's liburing 2.3 predates the futex opcodes (Linux 6.7): the
// values are the kernel's ABI, numbered after IORING_OP_URING_CMD (46).
constexpr int kOpFutexWait = 51;
static_assert(IORING_OP_URING_CMD == 46, "io_uring opcode numbering");
constexpr uint32_t kFutex2SizeU32 = 0x02;          // FUTEX2_SIZE_U32
constexpr uint32_t kFutex2Private = 0x80;          // FUTEX2_PRIVATE
constexpr uint64_t kFutexMatchAny = 0xffff'ffffu;  // FUTEX_BITSET_MATCH_ANY

// user_data of the helper's requests; a poll's is (generation << 32) | index.
constexpr uint64_t kCtlTag = ~uint64_t{0};
constexpr uint64_t kIgnoreTag = ~uint64_t{0} - 1;
constexpr unsigned kRingEntries = 2 * kMaxWatched;
// Gone owners remembered; a registration that fell further behind is told
// so (it runs a full pass).
constexpr size_t kLogMax = 1024;
// An entry no watcher named for this long may be dropped once the table
// is three quarters full (a watcher names its owners at least every
// kEventSafetyNs, reclaim.h).
constexpr uint64_t kIdleEntryNs = 10'000'000'000;
// The async watchers' wake-ups again, until taken: 1, 2, 4 ... ms.
constexpr unsigned kMaxRetries = 11;
// Registrations at once (watchers in this process, blocking or async).
constexpr uint32_t kMaxRegs = 4096;

// IORING_OP_FUTEX_WAIT on a 32-bit futex word, filled by hand (the kernel
// reads: addr = the word, addr2 = the expected value, addr3 = the bitset,
// fd = FUTEX2_* flags; len, futex_flags, buf_index and file_index must be
// 0, which io_uring_prep_rw leaves them in any liburing version).
void prep_futex_wait(io_uring_sqe *sqe, std::atomic<uint32_t> *word,
                     uint32_t expected, uint32_t flags, uint64_t tag) {
  io_uring_prep_rw(kOpFutexWait, sqe, int(flags), word, 0,
                   expected);  // off is addr2
  sqe->addr3 = kFutexMatchAny;
  sqe->user_data = tag;
}

bool disabled() {
#ifdef SHMSEM_TESTING
  if (g_liveness_limits.load(std::memory_order_relaxed) & kLimitNoUring)
    return true;
#endif
  return false;
}

// A real wait on a word that does not hold the expected value must fail at
// once with EAGAIN: anything else, and this kernel does not wait on futexes
// in a ring the way we need.
bool probe_ring() {
  io_uring ring;
  if (io_uring_queue_init(4, &ring, 0) < 0) return false;
  bool ok = false;
  io_uring_probe *p = io_uring_get_probe_ring(&ring);
  if (p && io_uring_opcode_supported(p, kOpFutexWait)) {
    std::atomic<uint32_t> word{1};
    prep_futex_wait(io_uring_get_sqe(&ring), &word, 0, kFutex2SizeU32, 1);
    io_uring_cqe *cqe = nullptr;
    int r = io_uring_submit_and_wait(&ring, 1);
    while (r >= 0 && (r = io_uring_wait_cqe(&ring, &cqe)) == -EINTR) {
    }
    ok = r == 0 && cqe && cqe->res == -EAGAIN;
  }
  if (p) io_uring_free_probe(p);
  io_uring_queue_exit(&ring);
  return ok;
}

// futex_waitv(2) on a word that does not hold the value: -EAGAIN.
bool probe_waitv() {
  std::atomic<uint32_t> word{1};
  struct futex_waitv v = {};
  v.val = 0;
  v.uaddr = uintptr_t(&word);
  v.flags = kFutex2SizeU32 | kFutex2Private;
  return futex_waitv(&v, 1, nullptr) == -EAGAIN;
}

std::atomic<int> g_ring_futex{0};  // 0 not probed yet, 1 yes, -1 no
std::atomic<int> g_waitv{0};

struct Key {
  int32_t pid;
  uint64_t start, ino;
  bool operator==(const Key &o) const {
    return pid == o.pid && start == o.start && ino == o.ino;
  }
  bool operator<(const Key &o) const {
    return pid != o.pid       ? pid < o.pid
           : start != o.start ? start < o.start
                              : ino < o.ino;
  }
};

enum class EState : uint8_t { kFree, kPending, kArming, kArmed, kFailed };

struct Entry {
  Key key{};
  EState st = EState::kFree;
  uint32_t gen = 1;
  uint64_t named_at = 0;   // real monotonic: a watcher last named it
  uint64_t failed_at = 0;  // ... it became kFailed (tried again 10 s on)
};

struct Reg {
  // Bumped by the helper (under mu) when it has something to report, then
  // woken (private futex): what a blocking watcher's futex_waitv watches.
  std::atomic<uint32_t> death{0};
  // Owner's side (the registration's thread, or the async waiter's poll).
  uint32_t seen = 0;
  uint64_t ticket = 0;
  // Under mu.
  std::atomic<uint32_t> *wake = nullptr;
  uint64_t gone_seen = 0;  // the last log number taken
  uint32_t gen = 1;
  bool used = false;
  // The helper's: wake `wake` again at retry_at until `taken` reaches the
  // bump it woke for.
  std::atomic<uint32_t> taken{0};
  uint64_t retry_at = 0;
  unsigned retries = 0;
};

struct Watchdog {
  explicit Watchdog(int32_t p) : pid(p) {}
  const int32_t pid;
  std::mutex mu;
  Entry entries[kMaxWatched];
  // Never freed, so their words stay valid; read without mu by their
  // owners (a slot is written once, under mu, before its handle exists).
  std::atomic<Reg *> regs[kMaxRegs] = {};
  uint32_t n_regs = 0;
  std::vector<std::pair<uint64_t, Key>> log;
  uint64_t gseq = 0;
  std::atomic<uint32_t> ctl{0};
  std::atomic<bool> broken{false};
  bool started = false;
};

std::atomic<Watchdog *> g_wd{nullptr};

// This process's watch (a parent's, in a fork child, is left untouched).
Watchdog *watchdog() {
  const int32_t me = self_pid();
  Watchdog *w = g_wd.load(std::memory_order_acquire);
  for (;;) {
    if (w && w->pid == me)
      return w->broken.load(std::memory_order_relaxed) ? nullptr : w;
    auto *n = new (std::nothrow) Watchdog(me);
    if (!n) return nullptr;
    if (g_wd.compare_exchange_strong(w, n, std::memory_order_acq_rel))
      w = n;
    else
      delete n;  // another thread made it first: `w` is the current one
  }
}

Reg *reg_of(Watchdog *w, uint64_t handle) {
  const uint32_t idx = uint32_t(handle), gen = uint32_t(handle >> 32);
  if (!w || !handle || idx >= kMaxRegs) return nullptr;
  Reg *r = w->regs[idx].load(std::memory_order_acquire);
  return r && r->used && r->gen == gen ? r : nullptr;
}

// Under mu: the registration's report, its word bumped and woken.
void notify(Reg *r, uint64_t now) {
  r->death.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_private(&r->death, 1);
  if (r->wake) {
    futex_wake(r->wake, INT32_MAX);
    r->retry_at = now + 1'000'000;
    r->retries = 0;
  }
}

void notify_all(Watchdog *w) {
  const uint64_t now = real_mono_ns();
  for (uint32_t i = 0; i < w->n_regs; i++) {
    Reg *r = w->regs[i].load(std::memory_order_relaxed);
    if (r->used) notify(r, now);
  }
}

// Under mu: the owner is proven gone.
void log_gone(Watchdog *w, const Key &k) {
  w->log.push_back({++w->gseq, k});
  if (w->log.size() > kLogMax)
    w->log.erase(w->log.begin(), w->log.begin() + (kLogMax / 4));
}

Entry *find(Watchdog *w, const Key &k) {
  for (Entry &e : w->entries)
    if (e.st != EState::kFree && e.key == k) return &e;
  return nullptr;
}

Entry *free_entry(Watchdog *w) {
  for (Entry &e : w->entries)
    if (e.st == EState::kFree) return &e;
  return nullptr;
}

uint64_t tag_of(const Watchdog *w, const Entry &e) {
  return (uint64_t{e.gen} << 32) | uint64_t(&e - w->entries);
}

// ---- The helper thread. ----

io_uring_sqe *next_sqe(io_uring *ring) {
  io_uring_sqe *sqe = io_uring_get_sqe(ring);
  if (!sqe) {
    io_uring_submit(ring);
    sqe = io_uring_get_sqe(ring);
  }
  return sqe;
}

// The ring, entered through its registered index; its descriptor closed.
bool setup_ring(io_uring *ring) {
  if (io_uring_queue_init(kRingEntries, ring, 0) < 0) return false;
  if (io_uring_register_ring_fd(ring) != 1) {
    io_uring_queue_exit(ring);
    return false;
  }
  close(ring->ring_fd);
  ring->ring_fd = -1;  // never closed again: the number may name anything
  return true;
}

// What one round of the helper arms: the pending entries, copied.
struct Arming {
  uint32_t idx, gen;
  Key key;
  int fd;  // the pidfd, or the negative errno owner_pidfd() gave
};

// Under mu: pending entries to arm, idle entries to drop (their polls
// cancelled), the value of ctl the helper's wait will expect.
void collect(Watchdog *w, io_uring *ring, std::vector<Arming> *out,
             uint32_t *ctl) {
  *ctl = w->ctl.load(std::memory_order_relaxed);
  const uint64_t now = real_mono_ns();
  size_t used = 0;
  for (const Entry &e : w->entries) used += e.st != EState::kFree;
  for (Entry &e : w->entries) {
    if (e.st == EState::kPending) {
      e.st = EState::kArming;
      out->push_back({uint32_t(&e - w->entries), e.gen, e.key, -1});
    } else if (used > kMaxWatched * 3 / 4 && e.st == EState::kArmed &&
               now - e.named_at > kIdleEntryNs) {
      io_uring_sqe *sqe = next_sqe(ring);
      if (!sqe) continue;
      io_uring_prep_cancel64(sqe, tag_of(w, e), 0);
      sqe->user_data = kIgnoreTag;
      e.st = EState::kFree;
      e.gen++;
      used--;
    } else if (e.st == EState::kFailed && now - e.failed_at > kIdleEntryNs) {
      e.st = EState::kFree;  // named again, it is tried again
      e.gen++;
    }
  }
}

// Under mu, just before the helper sleeps (after every report of the
// round, settle()'s included): the async wakes due again; the earliest
// retry time left, or 0.
uint64_t retry_wakes(Watchdog *w) {
  const uint64_t now = real_mono_ns();
  uint64_t next = 0;
  for (uint32_t i = 0; i < w->n_regs; i++) {
    Reg *r = w->regs[i].load(std::memory_order_relaxed);
    if (!r->used || !r->wake || r->retries >= kMaxRetries ||
        r->taken.load(std::memory_order_acquire) ==
            r->death.load(std::memory_order_relaxed))
      continue;
    if (now >= r->retry_at) {
      futex_wake(r->wake, INT32_MAX);
      r->retries++;
      r->retry_at = now + (uint64_t{1'000'000} << r->retries);
    }
    if (r->retries < kMaxRetries && (!next || r->retry_at < next))
      next = r->retry_at;
  }
  return next;
}

// Outside mu: a pidfd and a poll for each pending owner.
bool arm_pending(io_uring *ring, std::vector<Arming> *todo) {
  unsigned n = 0;
  for (Arming &a : *todo) {
    Owner o{};
    o.pid = a.key.pid, o.start = a.key.start, o.ino = a.key.ino;
    a.fd = owner_pidfd(o);
    if (a.fd < 0) continue;
    io_uring_sqe *sqe = next_sqe(ring);
    if (!sqe) return false;
    io_uring_prep_poll_add(sqe, a.fd, POLLIN);
    sqe->user_data = (uint64_t{a.gen} << 32) | a.idx;
    n++;
  }
  return n == 0 || io_uring_submit(ring) >= 0;
}

// Under mu: the outcome of arm_pending.
void settle(Watchdog *w, std::vector<Arming> *todo) {
  bool tell = false;
  for (Arming &a : *todo) {
    Entry &e = w->entries[a.idx];
    if (a.fd >= 0) close(a.fd);  // the poll holds the file now
    if (e.gen != a.gen || e.st != EState::kArming) continue;
    if (a.fd >= 0) {
      e.st = EState::kArmed;
    } else if (a.fd == -ESRCH) {
      log_gone(w, e.key);
      e.st = EState::kFree;
      e.gen++;
      tell = true;
    } else {
      e.st = EState::kFailed;  // unknown: the watchers that need it poll
      e.failed_at = real_mono_ns();
      tell = true;
    }
  }
  todo->clear();
  if (tell) notify_all(w);
}

// Under mu: a poll completed. POLLIN on a pidfd pinned to the recorded
// process is the proof; anything else (the poll failed) is no proof: the
// entry counts as failed (tried again 10 s on; no loop of retries) and
// the watchers are told, so that those who need it poll.
void completed(Watchdog *w, uint64_t tag, int res) {
  const uint32_t idx = uint32_t(tag), gen = uint32_t(tag >> 32);
  if (idx >= kMaxWatched) return;
  Entry &e = w->entries[idx];
  if (e.gen != gen || e.st != EState::kArmed) return;
  if (res > 0 && (res & POLLIN)) {
    log_gone(w, e.key);
    e.st = EState::kFree;
    e.gen++;
  } else {
    e.st = EState::kFailed;
    e.failed_at = real_mono_ns();
  }
  notify_all(w);
}

void fail(Watchdog *w) {
  std::lock_guard<std::mutex> lock(w->mu);
  w->broken.store(true, std::memory_order_relaxed);
  notify_all(w);
}

// One round: arm what is pending, (re)submit the wait on ctl, sleep until
// a completion or the next retry, take every completion. False if the
// ring failed.
bool helper_round(Watchdog *w, io_uring *ring, bool *ctl_armed,
                  std::vector<Arming> *todo) {
  uint32_t ctl;
  uint64_t retry;
  {
    std::lock_guard<std::mutex> lock(w->mu);
    collect(w, ring, todo, &ctl);
  }
  if (!arm_pending(ring, todo)) return false;
  {
    std::lock_guard<std::mutex> lock(w->mu);
    settle(w, todo);
    retry = retry_wakes(w);
  }
  if (!*ctl_armed) {
    io_uring_sqe *sqe = next_sqe(ring);
    if (!sqe) return false;
    prep_futex_wait(sqe, &w->ctl, ctl, kFutex2SizeU32 | kFutex2Private,
                    kCtlTag);
    *ctl_armed = true;
  }
  if (io_uring_submit(ring) < 0) return false;
  io_uring_cqe *cqe = nullptr;
  __kernel_timespec ts{};
  if (retry) {
    const uint64_t now = real_mono_ns();
    const uint64_t rel = retry > now ? retry - now : 0;
    ts.tv_sec = int64_t(rel / 1'000'000'000u);
    ts.tv_nsec = int64_t(rel % 1'000'000'000u);
  }
  int r = io_uring_wait_cqe_timeout(ring, &cqe, retry ? &ts : nullptr);
  if (r < 0 && r != -ETIME && r != -EINTR) return false;
  std::lock_guard<std::mutex> lock(w->mu);
  while (io_uring_peek_cqe(ring, &cqe) == 0) {
    const uint64_t tag = cqe->user_data;
    const int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    if (tag == kCtlTag)
      *ctl_armed = false;
    else if (tag != kIgnoreTag)
      completed(w, tag, res);
  }
  return true;
}

void *helper_main(void *arg) {
  auto *w = static_cast<Watchdog *>(arg);
  // No cancellation point of ours may end it with mu held.
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
  io_uring ring;
  if (!setup_ring(&ring)) {
    fail(w);
    return nullptr;
  }
  bool ctl_armed = false;
  std::vector<Arming> todo;
  while (helper_round(w, &ring, &ctl_armed, &todo)) {
  }
  // The ring failed (it cannot be closed by anyone else): watchers poll.
  fail(w);
  return nullptr;
}

// Under mu, once per process: the helper thread, every signal blocked.
// The library it runs in is pinned first (RTLD_NODELETE): a dlclose() must
// not unmap the code under a running thread.
bool start(Watchdog *w) {
  if (w->started) return !w->broken.load(std::memory_order_relaxed);
  w->started = true;
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&helper_main), &info) && info.dli_fname)
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  const int e = pthread_create(&t, &attr, helper_main, w);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (e) {
    w->broken.store(true, std::memory_order_relaxed);
    return false;
  }
  pthread_setname_np(t, "shmsem-watch");
  return true;
}

// The distinct owner processes of the records in use but this one, as
// for_each_in_use() reads them (slots, HELD leases), then the process
// records below the mark (a writer's lowered mark costs events, not a
// permit: the safety pass judges every record). More than kMaxWatched,
// and the read stops there: *more is set (the watcher keeps its period
// timer), so that a forged or huge set of owners costs one bounded read.
std::vector<Key> owners_of(shmsem_t *s, bool *more) {
  const Owner &me = self_owner();
  std::vector<Key> keys;
  size_t compact_at = 4 * kMaxWatched;
  *more = false;
  auto add = [&](const Owner &o) {
    if (o.pid == me.pid && o.start == me.start && o.ino == me.ino) return;
    const Key k{o.pid, o.start, o.ino};
    if (!keys.empty() && keys.back() == k) return;
    keys.push_back(k);
    if (keys.size() < compact_at) return;
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    *more = keys.size() > kMaxWatched;
    compact_at = keys.size() + 4 * kMaxWatched;
  };
  for_each_in_use(s, [&](uint32_t, bool, const Owner &o) {
    add(o);
    return !*more;
  });
  const Core *c = s->core;
  const uint32_t hwm =
      std::min(c->procs_hwm.load(std::memory_order_relaxed), s->max_procs);
  for (uint32_t p = 0; p < hwm && !*more; p++)
    if (s->procs[p].state.load(std::memory_order_acquire) == kProcUsed)
      add(read_owner(s->procs[p].owner));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  if (keys.size() > kMaxWatched) {
    keys.resize(kMaxWatched);
    *more = true;
  }
  return keys;
}

// Under mu: a registration for a new watcher.
uint64_t new_reg(Watchdog *w) {
  uint32_t i = 0;
  while (i < w->n_regs && w->regs[i].load(std::memory_order_relaxed)->used) i++;
  if (i == w->n_regs) {
    if (i == kMaxRegs) return 0;
    Reg *n = new (std::nothrow) Reg();
    if (!n) return 0;
    w->regs[i].store(n, std::memory_order_release);
    w->n_regs++;
  }
  Reg *r = w->regs[i].load(std::memory_order_relaxed);
  r->used = true;
  r->gen++;
  r->wake = nullptr;
  r->gone_seen = w->gseq;
  r->seen = r->death.load(std::memory_order_relaxed);
  r->taken.store(r->seen, std::memory_order_relaxed);
  r->retries = 0;
  return (uint64_t{r->gen} << 32) | i;
}

// Under mu: names each owner to the watch; what arm() returns. Sets
// *kick if the helper has new work.
EventWatch::Arm name_owners(Watchdog *w, const std::vector<Key> &keys,
                            bool *kick) {
  const uint64_t now = real_mono_ns();
  bool partial = false;
  for (const Key &k : keys) {
    Entry *e = find(w, k);
    if (!e && (e = free_entry(w))) {
      e->key = k;
      e->st = EState::kPending;
      *kick = true;
    }
    if (!e) {
      partial = true;  // the table is full: the helper drops idle entries
      *kick = true;
      continue;
    }
    e->named_at = now;
    partial |= e->st == EState::kFailed;
  }
  return partial ? EventWatch::kPartial : EventWatch::kComplete;
}

}  // namespace

bool ring_futex_available() {
  if (disabled()) return false;
  int v = g_ring_futex.load(std::memory_order_relaxed);
  if (v == 0) {
    v = probe_ring() ? 1 : -1;
    g_ring_futex.store(v, std::memory_order_relaxed);
  }
  return v > 0;
}

bool events_available() {
  const char *env = secure_getenv("SHMSEM_DEATH_WATCH");
  if (env && strcmp(env, "poll") == 0) return false;
  if (!ring_futex_available()) return false;
  int v = g_waitv.load(std::memory_order_relaxed);
  if (v == 0) {
    v = probe_waitv() ? 1 : -1;
    g_waitv.store(v, std::memory_order_relaxed);
  }
  return v > 0;
}

EventWatch::~EventWatch() { reset(); }

EventWatch::Arm EventWatch::arm(shmsem_t *s, std::atomic<uint32_t> *wake,
                                bool *dead) {
  Watchdog *w = watchdog();
  if (!w) return kFailed;
  bool more = false;
  const std::vector<Key> keys = owners_of(s, &more);
  bool kick = false;
  Arm a;
  {
    std::lock_guard<std::mutex> lock(w->mu);
    if (!start(w)) return kFailed;
    Reg *r = reg_of(w, handle_);
    if (!r) {
      handle_ = new_reg(w);
      if (!(r = reg_of(w, handle_))) return kFailed;
    }
    r->wake = wake;
    r->ticket = __atomic_load_n(&s->core->next_ticket, __ATOMIC_RELAXED);
    a = name_owners(w, keys, &kick);
    if (more) a = kPartial;
    if (kick) w->ctl.fetch_add(1, std::memory_order_relaxed);
    *dead = w->gseq != r->gone_seen;
  }
  if (kick) futex_wake_private(&w->ctl, 1);
  return a;
}

bool EventWatch::stale(shmsem_t *s) const {
  Reg *r = reg_of(g_wd.load(std::memory_order_acquire), handle_);
  return !r ||
         __atomic_load_n(&s->core->next_ticket, __ATOMIC_RELAXED) != r->ticket;
}

int EventWatch::wait(std::atomic<uint32_t> *word, uint32_t expected,
                     uint64_t deadline_ns) {
  Reg *r = reg_of(g_wd.load(std::memory_order_acquire), handle_);
  if (!r) return -EIO;
  struct futex_waitv v[2] = {};
  v[0].val = expected;
  v[0].uaddr = uintptr_t(word);
  v[0].flags = kFutex2SizeU32;  // shared: a segment word
  v[1].val = r->seen;
  v[1].uaddr = uintptr_t(&r->death);
  v[1].flags = kFutex2SizeU32 | kFutex2Private;
  timespec ts;
  if (deadline_ns) ts = ns_to_ts(deadline_ns);
  const int x = futex_waitv(v, 2, deadline_ns ? &ts : nullptr);
  if (r->death.load(std::memory_order_acquire) != r->seen) return 1;
  if (x == -ETIMEDOUT || x == -EINTR) return x;
  if (x == -ENOSYS || x == -EPERM) return -EIO;
  return 0;  // woken, -EAGAIN: the caller looks at its word
}

bool EventWatch::notified() const {
  Reg *r = reg_of(g_wd.load(std::memory_order_acquire), handle_);
  return r && r->death.load(std::memory_order_acquire) != r->seen;
}

std::vector<Owner> EventWatch::take_gone() {
  std::vector<Owner> g;
  Watchdog *w = g_wd.load(std::memory_order_acquire);
  if (!w || w->pid != self_pid()) return g;
  std::lock_guard<std::mutex> lock(w->mu);
  Reg *r = reg_of(w, handle_);
  if (!r) return g;
  r->seen = r->death.load(std::memory_order_acquire);
  r->taken.store(r->seen, std::memory_order_release);
  for (const auto &[seq, k] : w->log) {
    if (seq <= r->gone_seen) continue;
    Owner o{};
    o.pid = k.pid, o.start = k.start, o.ino = k.ino;
    g.push_back(o);
  }
  r->gone_seen = w->gseq;
  return g;
}

void EventWatch::reset() {
  if (!handle_) return;
  Watchdog *w = g_wd.load(std::memory_order_acquire);
  if (w && w->pid == self_pid()) {
    std::lock_guard<std::mutex> lock(w->mu);
    if (Reg *r = reg_of(w, handle_)) {
      r->used = false;
      r->wake = nullptr;
    }
  }
  handle_ = 0;
}

uint64_t EventWatch::detach() {
  const uint64_t h = handle_;
  handle_ = 0;
  return h;
}

void EventWatch::adopt(uint64_t handle) {
  reset();
  handle_ = handle;
}

}  // namespace shmsem::detail
