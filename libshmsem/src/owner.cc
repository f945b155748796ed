#include "owner.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>

namespace shmsem::detail {
namespace {

Owner g_self;
std::atomic<bool> g_self_valid{false};
std::once_flag g_atfork_once;
std::mutex g_self_mu;

void forget_self() { g_self_valid.store(false, std::memory_order_relaxed); }

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
    std::call_once(g_atfork_once,
                   [] { pthread_atfork(nullptr, nullptr, forget_self); });
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

bool owner_alive(const Owner &o) {
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
