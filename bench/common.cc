#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace bench {

void *shared_alloc(size_t bytes) {
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("bench: mmap");
    abort();
  }
  return p;
}

void shared_free(void *p, size_t bytes) { munmap(p, bytes); }

void sleep_ns(uint64_t ns) {
  timespec ts{time_t(ns / 1'000'000'000u), long(ns % 1'000'000'000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

namespace {

// A dependent chain the compiler cannot fold away.
__attribute__((noinline)) uint64_t spin_loop(uint64_t n) {
  uint64_t x = 0;
  for (uint64_t i = 0; i < n; i++) asm volatile("" : "+r"(x) : "r"(i));
  return x;
}

double loops_per_ns() {
  static double rate = [] {
    const uint64_t n = 20'000'000;
    uint64_t best = UINT64_MAX;
    for (int r = 0; r < 5; r++) {
      uint64_t t0 = now_ns();
      spin_loop(n);
      best = std::min(best, now_ns() - t0);
    }
    return double(n) / double(best);
  }();
  return rate;
}

}  // namespace

void spin_ns(uint64_t ns) { spin_loop(uint64_t(double(ns) * loops_per_ns())); }

void futex_wait(std::atomic<uint32_t> *w, uint32_t expected) {
  syscall(SYS_futex, w, FUTEX_WAIT, expected, nullptr, nullptr, 0);
}

void futex_wait_until(std::atomic<uint32_t> *w, uint32_t expected,
                      uint64_t deadline_ns) {
  timespec ts{time_t(deadline_ns / 1'000'000'000u),
              long(deadline_ns % 1'000'000'000u)};
  syscall(SYS_futex, w, FUTEX_WAIT_BITSET, expected, &ts, nullptr,
          FUTEX_BITSET_MATCH_ANY);
}

void futex_wake(std::atomic<uint32_t> *w, int n) {
  syscall(SYS_futex, w, FUTEX_WAKE, n, nullptr, nullptr, 0);
}

void wait_until_equal(std::atomic<uint32_t> *w, uint32_t v) {
  for (;;) {
    uint32_t cur = w->load(std::memory_order_acquire);
    if (cur == v) return;
    futex_wait(w, cur);
  }
}

void store_and_wake(std::atomic<uint32_t> *w, uint32_t v) {
  w->store(v, std::memory_order_release);
  futex_wake(w, INT32_MAX);
}

PinScope::PinScope(int cpu) {
  active_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0;
  pin_self(cpu);
}

PinScope::~PinScope() {
  if (active_) sched_setaffinity(0, sizeof saved_, &saved_);
}

bool pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) == 0) return true;
  perror("bench: sched_setaffinity");
  return false;
}

int cpu_count() { return int(sysconf(_SC_NPROCESSORS_ONLN)); }

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    perror("bench: sched_getaffinity");
    return cpus;
  }
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

char proc_state(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return '?';
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return '?';
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && p[1] && p[2] ? p[2] : '?';
}

Children::~Children() { wait_all(0); }

pid_t Children::spawn(int index, const std::function<void(int)> &body) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    perror("bench: fork");
    abort();
  }
  if (pid == 0) {
    body(index);
    _exit(0);
  }
  pids_.push_back(pid);
  return pid;
}

int Children::wait_all(uint64_t timeout_ns) {
  const uint64_t deadline = now_ns() + timeout_ns;
  int bad = 0;
  for (pid_t &pid : pids_) {
    if (pid <= 0) continue;
    int st = 0;
    bool clean = false;
    for (;;) {
      pid_t r = waitpid(pid, &st, WNOHANG);
      if (r == pid) {
        clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        break;
      }
      if (r < 0 && errno != EINTR) break;
      if (now_ns() >= deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        break;
      }
      sleep_ns(200'000);
    }
    if (!clean) bad++;
    pid = 0;
  }
  pids_.clear();
  return bad;
}

namespace {

int bucket_of(uint64_t ns) {
  if (ns < 16) return int(ns);
  int e = 63 - __builtin_clzll(ns);  // >= 4
  int b = 16 + (e - 4) * 8 + int((ns >> (e - 3)) & 7);
  return std::min(b, Histogram::kBuckets - 1);
}

uint64_t bucket_upper(int b) {
  if (b < 16) return uint64_t(b);
  int e = (b - 16) / 8 + 4, sub = (b - 16) % 8;
  return (uint64_t(8 + sub + 1) << (e - 3)) - 1;
}

}  // namespace

void Histogram::add(uint64_t ns) {
  count[bucket_of(ns)]++;
  if (ns > max) max = ns;
}

void Histogram::merge(const Histogram &o) {
  for (int b = 0; b < kBuckets; b++) count[b] += o.count[b];
  max = std::max(max, o.max);
}

uint64_t Histogram::total() const {
  uint64_t t = 0;
  for (int b = 0; b < kBuckets; b++) t += count[b];
  return t;
}

uint64_t Histogram::quantile(double q) const {
  uint64_t t = total();
  if (t == 0) return 0;
  uint64_t want = uint64_t(q * double(t) + 0.999999), seen = 0;
  for (int b = 0; b < kBuckets; b++) {
    seen += count[b];
    if (seen >= want) return std::min(bucket_upper(b), max);
  }
  return max;
}

double jain_index(const std::vector<double> &x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return s2 > 0 ? s * s / (double(x.size()) * s2) : 0;
}

void unique_shm_name(char *buf, size_t len) {
  static std::atomic<int> n{0};
  snprintf(buf, len, "/shmsem-bench-%d-%d", int(getpid()), n.fetch_add(1));
}

}  // namespace bench
