#include "owner.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>

#include "thread_cancel.h"
#include "testing_state.h"

#ifndef PIDFS_MAGIC
#define PIDFS_MAGIC 0x50494446
#endif
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#ifndef PIDFD_GET_PID_NAMESPACE
#define PIDFD_GET_PID_NAMESPACE _IO(0xFF, 5)
#endif

namespace shmsem::detail {
namespace {

// Test builds can take features away to exercise the fallbacks.
bool limited(unsigned what) {
#ifdef SHMSEM_TESTING
  return g_liveness_limits.load(std::memory_order_relaxed) & what;
#else
  (void)what;
  return false;
#endif
}

// pidfd_open(2); -1 with errno on failure.
int pidfd_open_(pid_t pid, unsigned flags) {
  if (limited(kLimitNoPidfd)) {
    errno = ENOSYS;
    return -1;
  }
#ifdef SYS_pidfd_open
  return int(syscall(SYS_pidfd_open, pid, flags));
#else
  (void)pid, (void)flags;
  errno = ENOSYS;
  return -1;
#endif
}

// The pidfs inode of a pidfd: unique to one process (or thread) for the life
// of the boot (Linux 6.9+). 0 if the pidfd does not live on pidfs.
uint64_t pidfs_ino(int fd) {
  if (limited(kLimitNoPidfs)) return 0;
  struct statfs sf;
  struct stat st;
  if (fstatfs(fd, &sf) != 0 || sf.f_type != PIDFS_MAGIC) return 0;
  if (fstat(fd, &st) != 0) return 0;
  return uint64_t(st.st_ino);
}

// POLLIN on a pidfd: the process (thread, for PIDFD_THREAD) has exited,
// zombie included; for a process, only once every thread has exited.
bool pidfd_exited(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP));
}

// Reads /proc/<path>/stat into buf. The command name (field 2) may hold
// spaces and ')': everything after the last ')' is fields 3 onwards.
const char *read_stat(const char *path, char *buf, size_t len) {
  if (limited(kLimitNoProc)) return nullptr;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  if (n <= 0) return nullptr;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p + 2 : nullptr;
}

// Start time and state from the fields after the command name.
bool parse_stat(const char *p, uint64_t *start, char *state) {
  *state = *p;
  for (int field = 3; field < 22; field++) {  // skip to field 22
    p = strchr(p, ' ');
    if (!p) return false;
    p++;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (end == p || errno) return false;
  *start = v;
  return true;
}

// What this process learns about itself once.
struct Self {
  Owner owner;
  uint64_t pidns;  // pidns_inode(), 0 unknown
  // /proc shows our PID namespace: /proc/self/stat names us by our getpid().
  // A PID namespace without its own /proc mount shows another numbering,
  // in which /proc/<pid> is some other process.
  bool proc_ours;
};

Self compute_self() {
  NoCancel no_cancel;  // open/read/close are cancellation points
  Self me{};
  me.owner.pid = getpid();
  me.pidns = pidns_inode();
  int fd = pidfd_open_(me.owner.pid, 0);
  if (fd >= 0) {
    me.owner.ino = pidfs_ino(fd);
    close(fd);
  }
  char buf[1024];
  const char *p = read_stat("/proc/self/stat", buf, sizeof buf);
  char state;
  if (p && strtol(buf, nullptr, 10) == me.owner.pid) {
    me.proc_ours = true;
    if (!parse_stat(p, &me.owner.start, &state)) me.owner.start = 0;
  }
  return me;
}

// The page that forgets across fork: all zero in any child (MADV_WIPEONFORK,
// Linux 4.14+), so a child of fork(), _Fork() or a raw clone() never takes
// its parent's identity, and no lock is ever held here that a fork could
// interrupt. `ready` goes 0 -> 1 (one thread computing) -> 2.
struct SelfPage {
  std::atomic<uint32_t> ready;
  Self self;
};
std::atomic<SelfPage *> g_page{nullptr};
std::atomic<bool> g_no_wipe{false};

SelfPage *self_page() {
  SelfPage *p = g_page.load(std::memory_order_acquire);
  if (p || g_no_wipe.load(std::memory_order_relaxed)) return p;
  const size_t len = size_t(sysconf(_SC_PAGESIZE));
  void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  if (madvise(m, len, MADV_WIPEONFORK) != 0) {
    munmap(m, len);
    g_no_wipe.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  SelfPage *expected = nullptr;
  if (!g_page.compare_exchange_strong(expected, static_cast<SelfPage *>(m),
                                      std::memory_order_acq_rel)) {
    munmap(m, len);
    return expected;
  }
  return static_cast<SelfPage *>(m);
}

// This process's Self, by reference: into the page once it is ready (no
// copy, no system call), else into a per-thread copy just computed.
const Self &self() {
  SelfPage *p = self_page();
  if (p && p->ready.load(std::memory_order_acquire) == 2) return p->self;
  // Not learnt yet, or no MADV_WIPEONFORK (Linux < 4.14: nothing can be
  // cached safely across a fork that runs no handler, so learn it again).
  thread_local Self t_fallback;
  t_fallback = compute_self();
  if (p) {
    uint32_t expected = 0;
    if (p->ready.compare_exchange_strong(expected, 1,
                                         std::memory_order_acquire)) {
      p->self = t_fallback;
      p->ready.store(2, std::memory_order_release);
      g_self_pid.store(&p->self.owner.pid, std::memory_order_release);
    }
  }
  return t_fallback;
}

// The calling thread's identity (process part included), recomputed in a
// new process: the cached pid no longer matches.
// initial-exec: no __tls_get_addr call on the fast path (a few bytes of
// static TLS, as glibc itself uses).
__attribute__((tls_model("initial-exec"))) thread_local Owner t_owner;

}  // namespace

std::atomic<const int32_t *> g_self_pid{nullptr};

const Owner &self_owner() { return self().owner; }

const Owner &self_thread_owner() {
  const Owner &me = self_owner();
  if (t_owner.pid != me.pid || t_owner.tid == 0) {
    NoCancel no_cancel;  // close() is a cancellation point
    Owner o = me;
    o.tid = int32_t(syscall(SYS_gettid));
    int fd = pidfd_open_(o.tid, PIDFD_THREAD);
    if (fd >= 0) {
      o.tino = pidfs_ino(fd);
      close(fd);
    }
    t_owner = o;
  }
  return t_owner;
}

bool proc_stat(pid_t pid, uint64_t *start, char *state) {
  if (pid <= 0 || !self().proc_ours) return false;
  char path[64], buf[1024];
  (void)snprintf(path, sizeof path, "/proc/%d/stat", int(pid));  // fits
  const char *p = read_stat(path, buf, sizeof buf);
  return p && parse_stat(p, start, state);
}

namespace {

// `fd`, a pidfd of o.pid, pins whichever process has the pid now. If that
// one has exited, so has the recorded one (it is that one, or an earlier
// one); else it is the recorded one only if its pidfs inode (or, without
// pidfs, its start time) matches.
Verdict pinned_verdict(int fd, const Owner &o) {
  if (pidfd_exited(fd)) return Verdict::kDead;
  if (uint64_t ino = pidfs_ino(fd); ino && o.ino)
    return ino == o.ino ? Verdict::kAlive : Verdict::kDead;  // else recycled
  uint64_t start;
  char state;
  if (o.start && proc_stat(o.pid, &start, &state))
    return start == o.start ? Verdict::kAlive : Verdict::kDead;
  return Verdict::kUnknown;
}

}  // namespace

Verdict process_verdict(const Owner &o) {
  // No process has a pid of 0 or below (0 is the kernel's idle task): a
  // record naming one was never written by an owner (every owner records
  // its pid before its commit), only by a writer of the segment or as all
  // zeros. Nobody holds it: dead, so that reclamation frees it (a forged
  // WAITING slot with a zero owner held the head of the queue for ever).
  if (o.pid <= 0) return Verdict::kDead;
  const Self &me = self();
  if (o.pid == me.owner.pid) {
    // Our own pid: us, unless the record names an earlier process.
    if ((o.ino && me.owner.ino && o.ino != me.owner.ino) ||
        (o.start && me.owner.start && o.start != me.owner.start))
      return Verdict::kDead;
    return Verdict::kAlive;
  }
  int fd = pidfd_open_(o.pid, 0);
  if (fd < 0) {
    // ESRCH: no process has this pid in our namespace (the caller has
    // proven it is the segment's), so the recorded one has exited and been
    // reaped. EINVAL: the number now names a thread, not a process, so it
    // was recycled. Anything else (ENOSYS, EPERM, EMFILE): ask kill().
    if (errno == ESRCH) return Verdict::kDead;
    if (errno == EINVAL && !limited(kLimitNoPidfd)) return Verdict::kDead;
    if (kill(o.pid, 0) != 0 && errno == ESRCH) return Verdict::kDead;
    uint64_t start;
    char state;
    if (o.start && proc_stat(o.pid, &start, &state) && start != o.start)
      return Verdict::kDead;  // recycled
    return Verdict::kUnknown;
  }
  Verdict v = pinned_verdict(fd, o);
  close(fd);
  return v;
}

int owner_pidfd(const Owner &o) {
  if (o.pid <= 0) return -EINVAL;
  int fd = pidfd_open_(o.pid, 0);
  if (fd < 0) {
    int e = errno;
    return process_verdict(o) == Verdict::kDead ? -ESRCH : -(e ? e : EIO);
  }
  // Worth watching only if it provably pins the recorded process.
  Verdict v = pinned_verdict(fd, o);
  if (v == Verdict::kAlive) return fd;
  close(fd);
  return v == Verdict::kDead ? -ESRCH : -ENOENT;
}

Verdict thread_verdict(const Owner &o) {
  if (o.tid <= 0) return Verdict::kUnknown;
  int fd = pidfd_open_(o.tid, PIDFD_THREAD);
  if (fd < 0) {
    // ESRCH: no thread has this tid in our namespace. EINVAL: the kernel
    // predates PIDFD_THREAD (6.9): nothing is known.
    return errno == ESRCH ? Verdict::kDead : Verdict::kUnknown;
  }
  Verdict v = Verdict::kUnknown;
  if (pidfd_exited(fd)) {
    v = Verdict::kDead;
  } else if (uint64_t ino = pidfs_ino(fd); ino && o.tino) {
    v = ino == o.tino ? Verdict::kAlive : Verdict::kDead;
  }
  // A thread-group leader that ended while other threads run stays a
  // zombie thread, and its thread pidfd does not report it (seen on 6.18):
  // /proc/<tid>/stat, where it is ours, shows the state. Only a leader (or
  // a bare tid, which may be one) can linger so; other threads are reaped
  // at once and fail pidfd_open with ESRCH. A recycled tid that shows a
  // zombie proves the recorded thread gone just as well.
  if (v != Verdict::kDead && (o.pid == 0 || o.tid == o.pid)) {
    uint64_t start;
    char state;
    if (proc_stat(o.tid, &start, &state) &&
        (state == 'Z' || state == 'X' || state == 'x'))
      v = Verdict::kDead;
  }
  close(fd);
  return v;
}

Verdict tid_verdict(int32_t tid) {
  Owner bare{};
  bare.tid = tid;
  Verdict v = thread_verdict(bare);
  if (v == Verdict::kDead || tid <= 0) return v;
  int fd = pidfd_open_(tid, PIDFD_THREAD);
  if (fd < 0) return Verdict::kUnknown;  // gone just now, or no PIDFD_THREAD
  close(fd);
  return Verdict::kAlive;
}

Verdict record_verdict(const Owner &o, bool is_slot) {
  Verdict p = process_verdict(o);
  if (!is_slot || p == Verdict::kDead) return p;
  return thread_verdict(o) == Verdict::kDead ? Verdict::kDead : p;
}

bool pidns_compatible(uint64_t segment_pidns) {
  uint64_t ns = self().pidns;
  return !segment_pidns || !ns || ns == segment_pidns;
}

bool may_judge(uint64_t segment_pidns) {
  uint64_t ns = self().pidns;
  return segment_pidns && ns && ns == segment_pidns;
}

uint64_t pidns_inode() {
  struct stat st;
  if (!limited(kLimitNoProc) && stat("/proc/self/ns/pid", &st) == 0)
    return uint64_t(st.st_ino);
  int fd = pidfd_open_(getpid(), 0);
  if (fd < 0) return 0;
  uint64_t ino = 0;
  int ns = ioctl(fd, PIDFD_GET_PID_NAMESPACE, 0);
  if (ns >= 0) {
    if (fstat(ns, &st) == 0) ino = uint64_t(st.st_ino);
    close(ns);
  }
  close(fd);
  return ino;
}

}  // namespace shmsem::detail
