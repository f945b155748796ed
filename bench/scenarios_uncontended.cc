// (a) Uncontended acquire+release pair, one thread, ns per pair (wall clock).
// (f1) The same pair on semaphores of N = 1, 64, 4096 permits.
// (f2) try_acquire + release: shmsem_try_acquire against sem_trywait.
// (f3) The pair while 1 ... 1000 other processes are attached (each has
//      taken a permit once, so each has its process record).
// (e) shmsem_stat on a semaphore of 4096 permits.
#include <benchmark/benchmark.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "adapters.h"

namespace bench {
namespace {

template <class A>
void BM_Uncontended(benchmark::State &state) {
  A a;
  if (!setup(state, a, 1, 0)) return;
  uint64_t t0 = now_ns();
  for (auto _ : state) {
    uint64_t t = a.acquire();
    a.release(t);
  }
  state.counters["ns_per_pair"] =
      double(now_ns() - t0) / double(state.iterations());
}
BENCHMARK_TEMPLATE(BM_Uncontended, Shmsem);
BENCHMARK_TEMPLATE(BM_Uncontended, GlibcSem);
BENCHMARK_TEMPLATE(BM_Uncontended, SysV);
BENCHMARK_TEMPLATE(BM_Uncontended, SysVUndo);
BENCHMARK_TEMPLATE(BM_Uncontended, RobustMutex);
BENCHMARK_TEMPLATE(BM_Uncontended, Flock);
BENCHMARK_TEMPLATE(BM_Uncontended, Ticket);
BENCHMARK_TEMPLATE(BM_Uncontended, TwoRmw);

// Arg: N. All N permits free; one is taken and returned each iteration.
template <class A>
void BM_PairVsPermits(benchmark::State &state) {
  A a;
  if (!setup(state, a, uint32_t(state.range(0)), 0)) return;
  uint64_t t0 = now_ns();
  for (auto _ : state) {
    uint64_t t = a.acquire();
    a.release(t);
  }
  state.counters["ns_per_pair"] =
      double(now_ns() - t0) / double(state.iterations());
}
BENCHMARK_TEMPLATE(BM_PairVsPermits, Shmsem)
    ->ArgName("N")
    ->Arg(1)
    ->Arg(64)
    ->Arg(4096);
BENCHMARK_TEMPLATE(BM_PairVsPermits, GlibcSem)
    ->ArgName("N")
    ->Arg(1)
    ->Arg(64)
    ->Arg(4096);
BENCHMARK_TEMPLATE(BM_PairVsPermits, Ticket)
    ->ArgName("N")
    ->Arg(1)
    ->Arg(64)
    ->Arg(4096);

void BM_TryPairShmsem(benchmark::State &state) {
  Shmsem a;
  if (!setup(state, a, 1, 0)) return;
  shmsem_t *s = a.handle();
  uint64_t t0 = now_ns();
  for (auto _ : state) {
    shmsem_lease_t l;
    if (shmsem_try_acquire(s, &l) != 0) die("shmsem_try_acquire", EAGAIN);
    shmsem_release(s, &l);
  }
  state.counters["ns_per_pair"] =
      double(now_ns() - t0) / double(state.iterations());
}
BENCHMARK(BM_TryPairShmsem)->Name("BM_TryPair<Shmsem>");

void BM_TryPairGlibc(benchmark::State &state) {
  GlibcSem a;
  if (!setup(state, a, 1, 0)) return;
  sem_t *sem = a.raw();
  uint64_t t0 = now_ns();
  for (auto _ : state) {
    if (sem_trywait(sem) != 0) die("sem_trywait", errno);
    sem_post(sem);
  }
  state.counters["ns_per_pair"] =
      double(now_ns() - t0) / double(state.iterations());
}
BENCHMARK(BM_TryPairGlibc)->Name("BM_TryPair<GlibcSem>");

// Arg: other attached processes. Each takes and returns a permit once (so
// it holds a process record), then sleeps attached until the run ends.
void BM_PairVsProcesses(benchmark::State &state) {
  Shmsem a;
  if (!setup(state, a, 4, 1024)) return;
  const int n = int(state.range(0));
  std::vector<pid_t> kids;
  int ready[2];
  if (pipe(ready) != 0) die("pipe", errno);
  for (int i = 0; i < n; i++) {
    pid_t p = fork();
    if (p == 0) {
      a.release(a.acquire());
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(1);
      pause();
      _exit(0);
    }
    if (p < 0) break;
    kids.push_back(p);
  }
  for (size_t i = 0; i < kids.size(); i++) {
    char c;
    if (read(ready[0], &c, 1) != 1) break;
  }
  uint64_t t0 = now_ns();
  for (auto _ : state) a.release(a.acquire());
  state.counters["ns_per_pair"] =
      double(now_ns() - t0) / double(state.iterations());
  state.counters["attached"] = double(kids.size());
  for (pid_t p : kids) kill(p, SIGKILL);
  for (pid_t p : kids) waitpid(p, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
}
BENCHMARK(BM_PairVsProcesses)
    ->ArgName("procs")
    ->Arg(1)
    ->Arg(10)
    ->Arg(100)
    ->Arg(1000);

void BM_ShmsemStat(benchmark::State &state) {
  Shmsem a;
  if (!setup(state, a, 4096, 4096)) return;
  struct shmsem_stat st;
  uint64_t t0 = now_ns();
  for (auto _ : state) {
    int r = shmsem_stat(a.handle(), &st);
    benchmark::DoNotOptimize(r);
  }
  state.counters["ns_per_stat"] =
      double(now_ns() - t0) / double(state.iterations());
}
BENCHMARK(BM_ShmsemStat);

}  // namespace
}  // namespace bench
