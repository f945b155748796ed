#include "owner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>
#include <new>

namespace shmsem::detail {
namespace {

Owner g_self;
std::atomic<bool> g_self_valid{false};
std::once_flag g_atfork_once;
std::mutex g_self_mu;

void forget_self() { g_self_valid.store(false, std::memory_order_relaxed); }
void reset_pidfds_in_child();

}  // namespace

bool proc_start_time(int32_t pid, uint64_t *start, bool *zombie) {
  if (pid <= 0) return false;
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // The command name (field 2) may contain spaces and ')': skip to the last ')'.
  const char *p = strrchr(buf, ')');
  if (!p) return false;
  p += 2;  // field 3: state
  char state = *p;
  // Fields 3..21 precede starttime (field 22): skip 19 fields.
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p) return false;
    p++;
  }
  *start = strtoull(p, nullptr, 10);
  *zombie = state == 'Z' || state == 'X' || state == 'x';
  return true;
}

const Owner &self_owner() {
  if (!g_self_valid.load(std::memory_order_acquire)) {
    std::call_once(g_atfork_once, [] {
      pthread_atfork(nullptr, nullptr, [] {
        forget_self();
        reset_pidfds_in_child();
      });
    });
    std::lock_guard<std::mutex> guard(g_self_mu);
    if (g_self_valid.load(std::memory_order_acquire)) return g_self;
    Owner o{};
    o.pid = getpid();
    bool zombie = false;
    if (!proc_start_time(o.pid, &o.start, &zombie)) o.start = 0;
    g_self = o;
    g_self_valid.store(true, std::memory_order_release);
  }
  return g_self;
}

namespace {

// Liveness verdicts of live owners are cached as pidfds: once (pid, start)
// is verified against /proc, a pidfd pins that very process, and poll()
// on it reports its exit (zombie included) with one cheap system call.
// The reclamation pass asks about the same few owners every millisecond.
struct PidfdCache {
  static constexpr int kSize = 32;
  struct Entry {
    Owner owner;
    int fd;
    uint64_t used;
  } e[kSize];
  int n = 0;
  uint64_t clock = 0;
  std::mutex mu;
};
PidfdCache *g_pidfds = new PidfdCache;  // never freed: used until exit

void reset_pidfds_in_child() {
  // The parent's lock state is meaningless here; the fds still name the
  // same processes, so the entries stay valid.
  new (&g_pidfds->mu) std::mutex;
}

int pidfd_open_(int32_t pid) {
#ifdef SYS_pidfd_open
  return int(syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

bool exited(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

// 1 alive, 0 dead, -1 unknown (no pidfd support).
int cached_alive(const Owner &o) {
  PidfdCache &c = *g_pidfds;
  std::lock_guard<std::mutex> guard(c.mu);
  for (int i = 0; i < c.n; i++) {
    if (c.e[i].owner.pid != o.pid || c.e[i].owner.start != o.start) continue;
    if (!exited(c.e[i].fd)) {
      c.e[i].used = ++c.clock;
      return 1;
    }
    close(c.e[i].fd);
    c.e[i] = c.e[--c.n];
    return 0;
  }
  int fd = pidfd_open_(o.pid);
  if (fd < 0) return errno == ESRCH ? 0 : -1;
  uint64_t start = 0;
  bool zombie = false;
  // The pidfd pins the process it was opened on; if the pid was recycled
  // in between, /proc shows the new start time and the verdict is "dead".
  if (!proc_start_time(o.pid, &start, &zombie) || zombie ||
      (o.start && start != o.start) || exited(fd)) {
    close(fd);
    return 0;
  }
  if (c.n == PidfdCache::kSize) {  // evict the least recently used
    int lru = 0;
    for (int i = 1; i < c.n; i++)
      if (c.e[i].used < c.e[lru].used) lru = i;
    close(c.e[lru].fd);
    c.e[lru] = c.e[--c.n];
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  c.e[c.n++] = {o, fd, ++c.clock};
  return 1;
}

}  // namespace

bool owner_alive(const Owner &o) {
  int v = cached_alive(o);
  if (v >= 0) return v == 1;
  uint64_t start = 0;
  bool zombie = false;
  if (!proc_start_time(o.pid, &start, &zombie)) {
    // No such process -- unless /proc itself is unreadable, in which case
    // nothing can be judged and everybody counts as alive.
    return !proc_start_time(self_owner().pid, &start, &zombie);
  }
  // start == 0: the owner could not read its own start time.
  return !zombie && (o.start == 0 || start == o.start);
}

uint64_t pidns_inode() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return uint64_t(st.st_ino);
}

}  // namespace shmsem::detail
