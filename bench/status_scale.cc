// `shmsem status` on a large semaphore: 4096 permits, all held, and 4096
// queued waiters. Times the text and JSON forms of the command (fork+exec,
// read-only mapping, snapshot, render) over a few runs.
//   shmsem_status_bench PATH-TO-shmsem [runs]
#include <pthread.h>
#include <shmsem/shmsem.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kPermits = 4096, kWaiters = 4096;

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

// Median wall time of `cmd args...` with stdout discarded.
double time_command(const std::vector<std::string> &argv, int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; i++) {
    double t = now_ms();
    pid_t pid = fork();
    if (pid == 0) {
      (void)freopen("/dev/null", "w", stdout);  // quiet if it can be
      std::vector<char *> a;
      for (auto &s : argv) a.push_back(const_cast<char *>(s.c_str()));
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    ms.push_back(now_ms() - t);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH-TO-shmsem [runs]\n", argv[0]);
    return 2;
  }
  int runs = argc > 2 ? atoi(argv[2]) : 5;
  std::string name = "/shmsem-status-bench-" + std::to_string(getpid());
  shmsem_config cfg{};
  cfg.permits = kPermits;
  cfg.max_waiters = kWaiters;
  shmsem_t *s;
  int r = shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s);
  if (r) {
    fprintf(stderr, "create: %s\n", shmsem_strerror(r));
    return 1;
  }
  std::vector<shmsem_lease_t> held(kPermits);
  for (auto &l : held) shmsem_acquire(s, &l);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  std::vector<pthread_t> threads(kWaiters);
  for (auto &t : threads)
    pthread_create(
        &t, &attr,
        [](void *arg) -> void * {
          shmsem_lease_t l;
          shmsem_acquire(static_cast<shmsem_t *>(arg),
                         &l);  // -ESHUTDOWN at the end
          return nullptr;
        },
        s);
  for (;;) {
    struct shmsem_stat st;
    shmsem_stat(s, &st);
    if (st.waiting == kWaiters) break;
    usleep(1000);
  }
  double text = time_command({argv[1], "status", name}, runs);
  double json = time_command({argv[1], "status", name, "--json"}, runs);
  printf(
      "shmsem status, %u permits held and %u waiters queued: text %.1f ms, "
      "--json %.1f ms (median of %d runs, fork+exec included)\n",
      kPermits, kWaiters, text, json, runs);
  shmsem_shutdown(s);
  for (auto &t : threads) pthread_join(t, nullptr);
  for (auto &l : held) shmsem_release(s, &l);
  shmsem_detach(s);
  shmsem_unlink(name.c_str());
  return text < 0 || json < 0;
}
