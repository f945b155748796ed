// (a) Uncontended acquire+release pair, one thread, ns per pair (wall clock).
// (f1) The same pair on semaphores of N = 1, 64, 4096 permits.
// (e) shmsem_stat on a semaphore of 4096 permits.
#include <benchmark/benchmark.h>

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
BENCHMARK_TEMPLATE(BM_PairVsPermits, Shmsem)->ArgName("N")->Arg(1)->Arg(64)->Arg(4096);
BENCHMARK_TEMPLATE(BM_PairVsPermits, GlibcSem)->ArgName("N")->Arg(1)->Arg(64)->Arg(4096);
BENCHMARK_TEMPLATE(BM_PairVsPermits, Ticket)->ArgName("N")->Arg(1)->Arg(64)->Arg(4096);

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
