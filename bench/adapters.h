// The competitors behind one small interface, so that every scenario is a
// BENCHMARK_TEMPLATE over them and all are measured in one binary and run.
//
// An adapter is a plain class with:
//
//   static constexpr const char *kName;
//   static constexpr uint32_t kMaxPermits;  // 1: a lock, not a counting
//   semaphore static constexpr bool kAnyReleaser;     // another process may
//   release int  init(uint32_t permits, uint32_t max_waiters);  // parent,
//   before fork;
//                                           // 0 or -errno
//   void attach();                          // first thing in each forked child
//   uint64_t acquire();                     // blocks; returns the token that
//   void release(uint64_t token);           // release takes
//
// State lives in MAP_SHARED memory (or the kernel) so forked children share
// it; the object is built and destroyed in the parent only. Any failure of an
// operation aborts: a benchmark must not count failed calls as fast ones.
#ifndef SHMSEM_BENCH_ADAPTERS_H
#define SHMSEM_BENCH_ADAPTERS_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <unistd.h>

#include <atomic>
#include <climits>

#include <liburing.h>
#include <shmsem/shmsem.h>
#include <shmsem/uring.h>

#include "common.h"

namespace bench {

[[noreturn]] inline void die(const char *what, int err) {
  fprintf(stderr, "bench: %s: %s\n", what, strerror(err < 0 ? -err : err));
  abort();
}

// shmsem itself: the lease is the token.
class Shmsem {
 public:
  static constexpr const char *kName = "shmsem";
  static constexpr uint32_t kMaxPermits = SHMSEM_MAX_PERMITS;
  static constexpr bool kAnyReleaser = true;

  int init(uint32_t permits, uint32_t max_waiters) {
    char name[64];
    unique_shm_name(name, sizeof name);
    shmsem_config cfg{};
    cfg.permits = permits;
    cfg.max_waiters = max_waiters;
    int r = shmsem_create(name, &cfg, SHMSEM_EXCL, &s_);
    // Unlinked at once: the mapping (inherited by children) stays valid and
    // nothing is left in /dev/shm if the run is killed.
    if (r == 0) shmsem_unlink(name);
    return r;
  }
  ~Shmsem() { shmsem_detach(s_); }
  void attach() {}
  uint64_t acquire() {
    shmsem_lease_t l;
    int r = shmsem_acquire(s_, &l);
    if (r != 0) die("shmsem_acquire", r);
    sem_ = l.sem;                  // the same for every lease of this semaphore
    return l.gen << 20 | l.index;  // index < 2^20; gen < 2^44 in any run
  }
  void release(uint64_t token) {
    shmsem_lease_t l{token >> 20, sem_, uint32_t(token & 0xfffff), 0};
    int r = shmsem_release(s_, &l);
    if (r != 0) die("shmsem_release", r);
  }
  shmsem_t *handle() { return s_; }
  uint64_t sem_ = 0;

 private:
  shmsem_t *s_ = nullptr;
};

// shmsem's non-blocking waiter driven through an io_uring
// (<shmsem/uring.h>): the same semaphore, the wait parked in a ring of
// the waiting process (one per process, made at its first wait) instead
// of FUTEX_WAIT. The uncontended path is the same start call; a queued
// acquire sleeps in io_uring_enter until the grant's CQE.
class ShmsemRing : public Shmsem {
 public:
  // cppcheck-suppress duplInheritedMember ; each contender names itself
  static constexpr const char *kName = "shmsem_uring";
  ~ShmsemRing() {
    if (ring_pid_ == getpid()) io_uring_queue_exit(&ring_);
  }
  int init(uint32_t permits, uint32_t max_waiters) {
    if (shmsem_uring_probe() != 0) return -EOPNOTSUPP;
    return Shmsem::init(permits, max_waiters);
  }
  uint64_t acquire() {
    shmsem_waiter_t w;
    shmsem_lease_t l;
    int r = shmsem_waiter_start(handle(), &w, nullptr, &l);
    if (r == SHMSEM_QUEUED) {
      if (ring_pid_ != getpid()) {
        // A fork child does not use its parent's ring.
        if (io_uring_queue_init(8, &ring_, 0) < 0)
          die("io_uring_queue_init", -1);
        ring_pid_ = getpid();
      }
      do {
        if (shmsem_uring_prep_wait(&ring_, &w, 1) != 0)
          die("shmsem_uring_prep_wait", -1);
        io_uring_submit(&ring_);
        for (;;) {
          io_uring_cqe *cqe;
          if (io_uring_wait_cqe(&ring_, &cqe) != 0) continue;
          uint64_t tag = io_uring_cqe_get_data64(cqe);
          io_uring_cqe_seen(&ring_, cqe);
          if (tag == 1) break;
        }
        r = shmsem_waiter_poll(&w, &l);
      } while (r == -EINPROGRESS);
    }
    if (r != 0) die("shmsem_waiter_start/poll", r);
    sem_ = l.sem;
    return l.gen << 20 | l.index;
  }

 private:
  io_uring ring_{};
  pid_t ring_pid_ = 0;
};

// glibc's sem_t in a shared mapping (sem_init pshared=1).
class GlibcSem {
 public:
  static constexpr const char *kName = "sem_t";
  static constexpr uint32_t kMaxPermits = SEM_VALUE_MAX;
  static constexpr bool kAnyReleaser = true;

  int init(uint32_t permits, uint32_t) {
    sem_ = static_cast<sem_t *>(shared_alloc(sizeof(sem_t)));
    return sem_init(sem_, 1, permits) == 0 ? 0 : -errno;
  }
  ~GlibcSem() {
    if (!sem_) return;
    sem_destroy(sem_);
    shared_free(sem_, sizeof(sem_t));
  }
  void attach() {}
  uint64_t acquire() {
    while (sem_wait(sem_) != 0)
      if (errno != EINTR) die("sem_wait", errno);
    return 0;
  }
  void release(uint64_t) {
    if (sem_post(sem_) != 0) die("sem_post", errno);
  }
  sem_t *raw() { return sem_; }

 private:
  sem_t *sem_ = nullptr;
};

// System V semaphore, one semop per operation; kUndo adds SEM_UNDO (the
// kernel's crash-recovery mechanism, an undo record per process).
template <bool kUndo>
class SysVSem {
 public:
  static constexpr const char *kName = kUndo ? "semop+UNDO" : "semop";
  static constexpr uint32_t kMaxPermits = 32767;  // SEMVMX
  // With SEM_UNDO a process that only posts (or only waits) drifts its
  // adjustment out of range (ERANGE), so cross-process release is out.
  static constexpr bool kAnyReleaser = !kUndo;

  int init(uint32_t permits, uint32_t) {
    id_ = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
    if (id_ < 0) return -errno;
    return semctl(id_, 0, SETVAL, int(permits)) == 0 ? 0 : -errno;
  }
  ~SysVSem() {
    if (id_ >= 0) semctl(id_, 0, IPC_RMID);
  }
  void attach() {}
  uint64_t acquire() {
    op(-1);
    return 0;
  }
  void release(uint64_t) { op(+1); }

 private:
  void op(short delta) {
    sembuf b{0, delta, short(kUndo ? SEM_UNDO : 0)};
    while (semop(id_, &b, 1) != 0)
      if (errno != EINTR) die("semop", errno);
  }
  int id_ = -1;
};
using SysV = SysVSem<false>;
using SysVUndo = SysVSem<true>;

// A process-shared robust pthread mutex: what shmsem takes inside every
// operation, and the usual crash-aware N=1 alternative.
class RobustMutex {
 public:
  static constexpr const char *kName = "robust_mutex";
  static constexpr uint32_t kMaxPermits = 1;
  static constexpr bool kAnyReleaser = false;

  int init(uint32_t permits, uint32_t) {
    if (permits != 1) return -EINVAL;
    m_ = static_cast<pthread_mutex_t *>(shared_alloc(sizeof *m_));
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int e = pthread_mutex_init(m_, &a);
    pthread_mutexattr_destroy(&a);
    return -e;
  }
  ~RobustMutex() {
    if (!m_) return;
    pthread_mutex_destroy(m_);
    shared_free(m_, sizeof *m_);
  }
  void attach() {}
  uint64_t acquire() {
    int e = pthread_mutex_lock(m_);
    if (e == EOWNERDEAD)
      pthread_mutex_consistent(m_);
    else if (e != 0)
      die("pthread_mutex_lock", e);
    return 0;
  }
  void release(uint64_t) { pthread_mutex_unlock(m_); }

 private:
  pthread_mutex_t *m_ = nullptr;
};

// flock(2) on a temporary file. A lock belongs to an open file description,
// so each child opens the file again in attach().
class Flock {
 public:
  static constexpr const char *kName = "flock";
  static constexpr uint32_t kMaxPermits = 1;
  static constexpr bool kAnyReleaser = false;

  int init(uint32_t permits, uint32_t) {
    if (permits != 1) return -EINVAL;
    snprintf(path_, sizeof path_, "/tmp/shmsem-bench-flock-XXXXXX");
    fd_ = mkstemp(path_);
    return fd_ >= 0 ? 0 : -errno;
  }
  ~Flock() {
    if (fd_ < 0) return;
    close(fd_);
    unlink(path_);
  }
  void attach() {
    close(fd_);
    fd_ = open(path_, O_RDWR | O_CLOEXEC);
    if (fd_ < 0) die("open", errno);
  }
  uint64_t acquire() {
    while (flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) die("flock", errno);
    return 0;
  }
  void release(uint64_t) { flock(fd_, LOCK_UN); }

 private:
  char path_[64] = {};
  int fd_ = -1;
};

// The fair floor: a minimal strict-FIFO ticket semaphore of N permits. Ticket
// t may proceed once t < serving + N. Waiters sleep on `serving`; a release
// that may unblock someone wakes them all (no per-waiter words: the simplest
// correct FIFO semaphore, not a scalable one). No crash recovery at all.
class Ticket {
 public:
  static constexpr const char *kName = "ticket";
  static constexpr uint32_t kMaxPermits = 1u << 30;
  static constexpr bool kAnyReleaser = true;

  int init(uint32_t permits, uint32_t) {
    n_ = permits;
    w_ = shared_new<Words>();
    return 0;
  }
  ~Ticket() {
    if (w_) shared_delete(w_);
  }
  void attach() {}
  uint64_t acquire() {
    // seq_cst: this RMW and the load of `serving` below pair with the
    // release's RMW of `serving` and load of `next` (a store-load Dekker
    // pattern): either the releaser sees our ticket and wakes, or we see
    // its new `serving`.
    uint32_t t = w_->next.fetch_add(1, std::memory_order_seq_cst);
    for (;;) {
      uint32_t s = w_->serving.load(std::memory_order_seq_cst);
      if (int32_t(t - s) < int32_t(n_)) return 0;
      futex_wait(&w_->serving, s);  // returns at once if serving moved
    }
  }
  void release(uint64_t) {
    uint32_t s = w_->serving.fetch_add(1, std::memory_order_seq_cst) + 1;
    // Tickets still outstanding beyond the N that may hold: someone waits.
    if (w_->next.load(std::memory_order_seq_cst) - s >= n_)
      futex_wake(&w_->serving, INT_MAX);
  }

 private:
  struct Words {
    alignas(64) std::atomic<uint32_t> next{0};
    alignas(64) std::atomic<uint32_t> serving{0};
  };
  uint32_t n_ = 1;
  Words *w_ = nullptr;
};

// The physical floor for a wake-up: a binary semaphore that is one futex
// word; release always stores and issues FUTEX_WAKE. Handoff scenarios only.
// kTimed sleeps with a 1 ms absolute timeout (FUTEX_WAIT_BITSET), as a
// shmsem waiter that holds the watcher role does: it isolates what arming a
// timer costs a wake-up.
template <bool kTimed>
class RawFutexT {
 public:
  static constexpr const char *kName =
      kTimed ? "raw_futex+timeout" : "raw_futex";
  static constexpr uint32_t kMaxPermits = 1;
  static constexpr bool kAnyReleaser = true;

  int init(uint32_t permits, uint32_t) {
    if (permits != 1) return -EINVAL;
    w_ = shared_new<std::atomic<uint32_t>>();
    w_->store(1);
    return 0;
  }
  ~RawFutexT() {
    if (w_) shared_delete(w_);
  }
  void attach() {}
  uint64_t acquire() {
    // Acquire: the permit's owner sees what the releaser wrote.
    while (w_->exchange(0, std::memory_order_acquire) == 0) {
      if (kTimed)
        futex_wait_until(w_, 0, now_ns() + 1'000'000);
      else
        futex_wait(w_, 0);
    }
    return 0;
  }
  void release(uint64_t) {
    w_->store(1, std::memory_order_release);
    futex_wake(w_, 1);
  }

 private:
  std::atomic<uint32_t> *w_ = nullptr;
};
using RawFutex = RawFutexT<false>;
using RawFutexTimed = RawFutexT<true>;

// The physical floor for an uncontended pair: two atomic RMWs on a shared
// counter (what any lock-free fast path must at least do). Uncontended only.
class TwoRmw {
 public:
  static constexpr const char *kName = "2x_atomic_rmw";
  static constexpr uint32_t kMaxPermits = UINT32_MAX;
  static constexpr bool kAnyReleaser = true;

  int init(uint32_t permits, uint32_t) {
    c_ = shared_new<std::atomic<uint32_t>>();
    c_->store(permits);
    return 0;
  }
  ~TwoRmw() {
    if (c_) shared_delete(c_);
  }
  void attach() {}
  uint64_t acquire() {
    c_->fetch_sub(1, std::memory_order_acquire);
    return 0;
  }
  void release(uint64_t) { c_->fetch_add(1, std::memory_order_release); }

 private:
  std::atomic<uint32_t> *c_ = nullptr;
};

// Sets up `a` for `permits`; on failure marks the benchmark skipped and
// returns false.
template <class A, class State>
bool setup(State &state, A &a, uint32_t permits, uint32_t max_waiters = 0) {
  if (permits > A::kMaxPermits) {
    state.SkipWithError("not a counting semaphore (N=1 only)");
    return false;
  }
  int r = a.init(permits, max_waiters);
  if (r != 0) {
    state.SkipWithError(strerror(-r));
    return false;
  }
  return true;
}

}  // namespace bench

#endif  // SHMSEM_BENCH_ADAPTERS_H
