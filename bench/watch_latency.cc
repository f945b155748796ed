// The death watch, measured (not a pass/fail test; issue 28):
//  1. Kill -> grant: a holder (another process) is SIGKILLed 0, 50 or 200 ms
//     after a waiter (a third process) queued behind it; the time from the
//     kill to the waiter's grant, over --runs runs per cell (p50, p90, max;
//     nearest rank). On a fresh semaphore (created for the run) and on a
//     reused one (one semaphore for every run of the cell, which has
//     reclaimed before the first: its watch period is what its last
//     reclamation pass cost, times 200). The killed holder stays a zombie
//     until the grant is seen.
//  2. Idle wake-ups: --waiters waiters queued behind a live holder, in one
//     child process, either as that many blocking threads or as that many
//     async waiters parked in one io_uring (<shmsem/uring.h>) driven by one
//     thread; wake-ups per second of the child in all (voluntary context
//     switches of every thread of it, read from /proc/<pid>/task/*/status
//     by this process, so the counting costs the child nothing).
//   shmsem_watch_bench [--runs N] [--waiters N] [--seconds S] [--only
//   kill|idle]
#include <dirent.h>
#include <liburing.h>
#include <shmsem/shmsem.h>
#include <shmsem/uring.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

struct Shared {
  std::atomic<int> holding{0};
  std::atomic<int> ready{0};
  std::atomic<uint64_t> granted_at{0};
};

Shared *shared_page() {
  void *p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : new (p) Shared();
}

template <typename F>
bool wait_for(F pred, int timeout_ms = 10000, int step_us = 100) {
  uint64_t end = now_ns() + uint64_t(timeout_ms) * 1'000'000ull;
  while (!pred()) {
    if (now_ns() > end) return false;
    if (step_us) usleep(unsigned(step_us));
  }
  return true;
}

uint32_t waiting(shmsem_t *s) {
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  return st.waiting;
}

// A process that takes one permit and keeps it until killed.
pid_t spawn_holder(shmsem_t *s, Shared *sh) {
  sh->holding = 0;
  pid_t holder = fork();
  if (holder == 0) {
    shmsem_lease_t l;
    if (shmsem_acquire(s, &l) != 0) _exit(1);
    sh->holding = 1;
    for (;;) pause();
  }
  wait_for([&] { return sh->holding.load() == 1; });
  return holder;
}

// A process that queues for one permit and notes when it got it.
pid_t spawn_waiter(shmsem_t *s, Shared *sh) {
  sh->granted_at = 0;
  pid_t waiter = fork();
  if (waiter == 0) {
    shmsem_lease_t l;
    if (shmsem_acquire(s, &l) != 0) _exit(1);
    sh->granted_at = now_ns();
    shmsem_release(s, &l);
    _exit(0);
  }
  return waiter;
}

// One run: the time from the holder's SIGKILL to the grant, in us; < 0 if
// no grant came within 10 s.
double one_kill(shmsem_t *s, Shared *sh, int delay_ms) {
  pid_t holder = spawn_holder(s, sh);
  pid_t waiter = spawn_waiter(s, sh);
  wait_for([&] { return waiting(s) == 1; }, 10000, 0);
  if (delay_ms) usleep(unsigned(delay_ms) * 1000u);
  const uint64_t t0 = now_ns();
  kill(holder, SIGKILL);
  const bool ok =
      wait_for([&] { return sh->granted_at.load() != 0; }, 10000, 20);
  if (!ok) kill(waiter, SIGKILL);
  waitpid(holder, nullptr, 0);
  waitpid(waiter, nullptr, 0);
  return ok ? double(sh->granted_at.load() - t0) / 1000.0 : -1.0;
}

shmsem_t *create(const std::string &name) {
  shmsem_config cfg{};
  cfg.permits = 1;
  shmsem_t *s = nullptr;
  shmsem_unlink(name.c_str());
  return shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s) == 0 ? s : nullptr;
}

void report(const char *label, int delay_ms, std::vector<double> us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  auto rank = [&](double q) {
    size_t i = size_t(std::ceil(q * double(us.size())));
    return us[std::clamp<size_t>(i, 1, us.size()) - 1];
  };
  printf("| %s | %d ms | %zu | %.2f | %.2f | %.2f |\n", label, delay_ms,
         us.size(), rank(0.5) / 1000, rank(0.9) / 1000, us.back() / 1000);
  fflush(stdout);
}

int kill_matrix(int runs) {
  Shared *sh = shared_page();
  if (!sh) return 1;
  printf("Kill -> grant (ms), %d runs per cell:\n\n", runs);
  printf("| semaphore | kill after queueing | runs | p50 | p90 | max |\n");
  printf("|---|---|---|---|---|---|\n");
  const std::string base = "/shmsem-watch-bench-" + std::to_string(getpid());
  for (int reused = 0; reused < 2; reused++) {
    for (int delay : {0, 50, 200}) {
      std::vector<double> us;
      shmsem_t *s = nullptr;
      if (reused) {
        // One semaphore for the cell, which reclaims once before the runs.
        s = create(base);
        if (!s || one_kill(s, sh, 0) < 0) return 1;
      }
      for (int run = 0; run < runs; run++) {
        if (!reused && !(s = create(base))) return 1;
        double t = one_kill(s, sh, delay);
        if (t < 0) {
          fprintf(stderr, "bench: no grant within 10 s of the kill\n");
          return 1;
        }
        us.push_back(t);
        if (!reused) {
          shmsem_detach(s);
          shmsem_unlink(base.c_str());
        }
      }
      if (reused) {
        shmsem_detach(s);
        shmsem_unlink(base.c_str());
      }
      report(reused ? "reused" : "fresh", delay, us);
    }
  }
  return 0;
}

// Voluntary context switches of every thread of `pid`; *threads their number.
uint64_t voluntary_switches(pid_t pid, int *threads) {
  uint64_t total = 0;
  *threads = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR *d = opendir(dir.c_str());
  if (!d) return 0;
  while (dirent *e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string p = dir + "/" + e->d_name + "/status";
    FILE *f = fopen(p.c_str(), "r");
    if (!f) continue;
    ++*threads;
    char line[256];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "voluntary_ctxt_switches:", 24))
        total += strtoull(line + 24, nullptr, 10);
    fclose(f);
  }
  closedir(d);
  return total;
}

// The child of the idle measurement: n blocking threads.
[[noreturn]] void blocking_waiters(shmsem_t *s, int n, Shared *sh) {
  std::vector<std::thread> t;
  for (int i = 0; i < n; i++)
    t.emplace_back([s] {
      shmsem_lease_t l;
      if (shmsem_acquire(s, &l) == 0) shmsem_release(s, &l);
    });
  sh->ready = 1;
  for (auto &x : t) x.join();  // until the shutdown
  _exit(0);
}

// The child of the idle measurement: n async waiters parked in one ring,
// each re-armed after every CQE that leaves it queued.
[[noreturn]] void async_waiters(shmsem_t *s, int n, Shared *sh) {
  io_uring ring;
  if (io_uring_queue_init(unsigned(4 * n + 8), &ring, 0) < 0) _exit(1);
  std::vector<shmsem_waiter_t> w(static_cast<size_t>(n));
  shmsem_lease_t l;
  int queued = 0;
  for (int i = 0; i < n; i++) {
    if (shmsem_waiter_start(s, &w[size_t(i)], nullptr, &l) != SHMSEM_QUEUED)
      _exit(2);
    shmsem_uring_prep_wait(&ring, &w[size_t(i)], uint64_t(i));
    queued++;
  }
  io_uring_submit(&ring);
  sh->ready = 1;
  while (queued > 0) {
    io_uring_cqe *cqe;
    if (io_uring_wait_cqe(&ring, &cqe) != 0) continue;
    uint64_t tag = cqe->user_data;
    io_uring_cqe_seen(&ring, cqe);
    if (tag == SHMSEM_URING_IGNORE) continue;
    shmsem_waiter_t *x = &w[size_t(tag)];
    int r = shmsem_waiter_poll(x, &l);
    if (r == -EINPROGRESS) {
      shmsem_uring_prep_wait(&ring, x, tag);
      io_uring_submit(&ring);
    } else {
      if (r == 0) shmsem_release(s, &l);
      queued--;
    }
  }
  _exit(0);
}

int idle(bool async, int n, int seconds) {
  const std::string name =
      "/shmsem-watch-idle-bench-" + std::to_string(getpid());
  shmsem_config cfg{};
  cfg.permits = 1;
  cfg.max_waiters = uint32_t(n);
  shmsem_t *s;
  shmsem_unlink(name.c_str());
  if (shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s) != 0) return 1;
  Shared *sh = shared_page();
  pid_t holder = spawn_holder(s, sh);
  sh->ready = 0;
  pid_t child = fork();
  if (child == 0) {
    if (async)
      async_waiters(s, n, sh);
    else
      blocking_waiters(s, n, sh);
  }
  wait_for([&] { return sh->ready.load() == 1; }, 30000);
  wait_for([&] { return waiting(s) == uint32_t(n); }, 30000);
  sleep(2);  // let the roles settle
  int t0 = 0, t1 = 0;
  uint64_t v0 = voluntary_switches(child, &t0);
  sleep(unsigned(seconds));
  uint64_t v1 = voluntary_switches(child, &t1);
  printf("| %d %s waiters | %d s | %.1f | %d |\n", n,
         async ? "async (one io_uring)" : "blocking", seconds,
         double(v1 - v0) / seconds, t1);
  fflush(stdout);
  shmsem_shutdown(s);
  waitpid(child, nullptr, 0);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  shmsem_detach(s);
  shmsem_unlink(name.c_str());
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  int runs = 15, waiters = 200, seconds = 5;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--runs"))
      runs = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--waiters"))
      waiters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds"))
      seconds = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--only"))
      only = argv[i + 1];
  }
  if (runs < 1 || waiters < 1 || seconds < 1) {
    fprintf(stderr,
            "usage: %s [--runs N] [--waiters N] [--seconds S] "
            "[--only kill|idle]\n",
            argv[0]);
    return 2;
  }
  const char *watch = getenv("SHMSEM_DEATH_WATCH");
  printf("SHMSEM_DEATH_WATCH=%s\n\n", watch ? watch : "(unset)");
  if (only != "idle" && kill_matrix(runs)) return 1;
  if (only == "kill") return 0;
  printf(
      "\nIdle wake-ups behind a live holder (the waiters' process, all "
      "its threads):\n\n");
  printf("| waiters | window | wake-ups/s | threads |\n|---|---|---|---|\n");
  if (idle(false, waiters, seconds)) return 1;
  if (shmsem_uring_probe() != 0) {
    printf("(async: skipped, no IORING_OP_FUTEX_WAIT here)\n");
    return 0;
  }
  return idle(true, waiters, seconds);
}
