// Crash reclamation, measured (not a pass/fail test):
//  1. SIGKILL of a holder -> grant of its permit to the queued head waiter,
//     over --runs runs (p50, p90, max, min; nearest rank). The killed
//     holder is left a zombie until the grant is seen, so "zombie counts as
//     dead" is on the measured path.
//  2. The cost of death-watching while --waiters waiter threads are queued
//     behind a live holder: wake-ups per second in total (voluntary context
//     switches of every thread of this process: the waiters, the idle main
//     thread and any thread the library or io_uring adds, whose number is
//     printed) and CPU time per second.
//
// The library picks its death-watch mode once per process from
// SHMSEM_DEATH_WATCH (unset: events where the kernel has them; "poll": the
// timed-polling fallback); bench/run.sh runs this binary once each way, and
// the first line printed says which setting this process saw.
#include <dirent.h>
#include <pthread.h>
#include <shmsem/shmsem.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
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
  std::atomic<uint64_t> granted_at{0};
};

template <typename F>
bool wait_for(F pred, int timeout_ms = 10000) {
  uint64_t end = now_ns() + uint64_t(timeout_ms) * 1'000'000ull;
  while (!pred()) {
    if (now_ns() > end) return false;
    usleep(100);
  }
  return true;
}

// A process that takes one permit and keeps it until killed.
pid_t spawn_holder(shmsem_t *s, Shared *sh) {
  new (sh) Shared();
  pid_t holder = fork();
  if (holder == 0) {
    shmsem_lease_t l;
    shmsem_acquire(s, &l);
    sh->holding = 1;
    pause();
    _exit(0);
  }
  wait_for([&] { return sh->holding.load() == 1; });
  return holder;
}

uint32_t waiting(shmsem_t *s) {
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  return st.waiting;
}

int kill_to_grant(int runs) {
  auto *sh = static_cast<Shared *>(mmap(nullptr, sizeof(Shared),
                                        PROT_READ | PROT_WRITE,
                                        MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<double> us;
  for (int run = 0; run < runs; run++) {
    std::string name = "/shmsem-reclaim-bench-" + std::to_string(getpid());
    shmsem_config cfg{};
    cfg.permits = 1;
    shmsem_t *s;
    if (shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s) != 0) return 1;
    pid_t holder = spawn_holder(s, sh);
    pid_t waiter = fork();
    if (waiter == 0) {
      shmsem_lease_t l;
      if (shmsem_acquire(s, &l) != 0) _exit(1);
      sh->granted_at = now_ns();
      shmsem_release(s, &l);
      _exit(0);
    }
    wait_for([&] { return waiting(s) == 1; });
    usleep(5000);  // let the waiter settle into its sleep
    uint64_t t0 = now_ns();
    kill(holder, SIGKILL);
    if (!wait_for([&] { return sh->granted_at.load() != 0; })) {
      fprintf(stderr,
              "bench: run %d: no grant within 10 s of SIGKILL of the holder\n",
              run);
      kill(waiter, SIGKILL);
      waitpid(holder, nullptr, 0);
      waitpid(waiter, nullptr, 0);
      shmsem_detach(s);
      shmsem_unlink(name.c_str());
      return 1;
    }
    us.push_back(double(sh->granted_at.load() - t0) / 1000.0);
    waitpid(holder, nullptr, 0);
    waitpid(waiter, nullptr, 0);
    shmsem_detach(s);
    shmsem_unlink(name.c_str());
  }
  std::sort(us.begin(), us.end());
  // Nearest rank: the smallest value with at least q of the runs at or below.
  auto rank = [&](double q) {
    size_t i = size_t(std::ceil(q * double(us.size())));
    return us[std::clamp<size_t>(i, 1, us.size()) - 1];
  };
  printf(
      "SIGKILL of holder -> grant to queued head, %d runs: p50 %.0f us, "
      "p90 %.0f us, max %.0f us, min %.0f us\n",
      runs, rank(0.50), rank(0.90), us.back(), us.front());
  return 0;
}

// Summed over every thread of this process; *threads gets their number.
uint64_t voluntary_switches(int *threads) {
  uint64_t total = 0;
  *threads = 0;
  DIR *d = opendir("/proc/self/task");
  while (dirent *e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string p = std::string("/proc/self/task/") + e->d_name + "/status";
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

double cpu_seconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int watch_cost(int nwaiters, int seconds) {
  std::string name = "/shmsem-watch-bench-" + std::to_string(getpid());
  shmsem_config cfg{};
  cfg.permits = 1;
  cfg.max_waiters = uint32_t(nwaiters);
  shmsem_t *s;
  if (shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s) != 0) return 1;
  auto *sh = static_cast<Shared *>(mmap(nullptr, sizeof(Shared),
                                        PROT_READ | PROT_WRITE,
                                        MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  pid_t holder = spawn_holder(s, sh);  // a live holder in another process
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  std::vector<pthread_t> threads(static_cast<size_t>(nwaiters));
  size_t started = 0;
  for (; started < threads.size(); started++) {
    int e = pthread_create(
        &threads[started], &attr,
        [](void *arg) -> void * {
          shmsem_lease_t l;
          if (shmsem_acquire(static_cast<shmsem_t *>(arg), &l) == 0)
            shmsem_release(static_cast<shmsem_t *>(arg), &l);
          return nullptr;
        },
        s);
    if (e != 0) {
      fprintf(stderr, "bench: pthread_create after %zu waiters: %s\n", started,
              strerror(e));
      break;
    }
  }
  threads.resize(started);
  const int nthreads = int(started);
  wait_for([&] { return waiting(s) == uint32_t(nthreads); }, 30000);
  sleep(1);
  {
    // The cost of one reclamation pass over this queue (what the watcher
    // runs each period), measured from this thread.
    const int passes = 200;
    double c = cpu_seconds();
    uint64_t t = now_ns();
    for (int i = 0; i < passes; i++) shmsem_recover(s);
    printf(
        "one reclamation pass over %d queued slots: %.1f us wall, %.1f us "
        "CPU\n",
        nthreads, double(now_ns() - t) / passes / 1000.0,
        (cpu_seconds() - c) * 1e6 / passes);
  }
  const uint32_t queued = waiting(s);
  int tasks0 = 0, tasks1 = 0;
  uint64_t v0 = voluntary_switches(&tasks0);
  double c0 = cpu_seconds();
  sleep(unsigned(seconds));
  uint64_t v1 = voluntary_switches(&tasks1);
  double c1 = cpu_seconds();
  // Threads other than the waiters and main (e.g. io_uring workers) may come
  // and go during the window: both counts are shown when they differ.
  char tasks[32];
  if (tasks0 == tasks1)
    snprintf(tasks, sizeof tasks, "%d", tasks0);
  else
    snprintf(tasks, sizeof tasks, "%d->%d", tasks0, tasks1);
  printf(
      "%d waiter threads (%u queued) behind a live holder, %d s: %.0f "
      "wake-ups/s in total (all %s threads of this process), %.2f%% of one "
      "CPU\n",
      nthreads, queued, seconds, double(v1 - v0) / seconds, tasks,
      100.0 * (c1 - c0) / seconds);
  shmsem_shutdown(s);  // fails every waiter: the threads end
  for (auto &t : threads) pthread_join(t, nullptr);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  shmsem_detach(s);
  shmsem_unlink(name.c_str());
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  int runs = 50, waiters = 1000, seconds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--runs"))
      runs = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--waiters"))
      waiters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds"))
      seconds = atoi(argv[i + 1]);
  }
  const char *watch = getenv("SHMSEM_DEATH_WATCH");
  printf("SHMSEM_DEATH_WATCH=%s\n", watch ? watch : "(unset)");
  if (runs < 1 || waiters < 1 || seconds < 1) {
    fprintf(stderr,
            "usage: %s [--runs N>=1] [--waiters N>=1] [--seconds N>=1]\n",
            argv[0]);
    return 2;
  }
  if (kill_to_grant(runs)) return 1;
  return watch_cost(waiters, seconds);
}
