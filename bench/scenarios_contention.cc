// (c) K processes on one semaphore of N permits for a fixed duration. Each
// loops: stamp, acquire, stamp, ~100 ns critical section (calibrated spin),
// release. Per process, in shared memory: acquisitions and a histogram of
// the wait (acquire call to return). Reported: ops/s, Jain's fairness index
// over the per-process counts, min/max count, p50/p99/max wait.
//
// Arg "pin": 0 leaves placement to the scheduler; 1 pins child i, before it
// starts looping, to CPU i mod m of the m CPUs in the parent's affinity mask
// (with 2 CPUs: even children on the first, odd on the second). Every K/N
// pair runs both ways.
#include <benchmark/benchmark.h>

#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "adapters.h"

namespace bench {
namespace {

constexpr uint64_t kDurationNs = 500'000'000;
constexpr uint64_t kCriticalNs = 100;

struct PerProcess {
  uint64_t ops;
  uint64_t end_ns;
  Histogram wait;
};

template <class A>
void BM_Contention(benchmark::State &state) {
  const int k = int(state.range(0));
  const uint32_t n = uint32_t(state.range(1));
  const bool pin = state.range(2) != 0;
  const std::vector<int> cpus = allowed_cpus();
  if (pin && cpus.empty()) {
    state.SkipWithError("no CPU in the affinity mask");
    return;
  }
  A a;
  if (!setup(state, a, n, 1024)) return;
  spin_ns(0);  // calibrate before forking so every child inherits the rate
  struct Control {
    std::atomic<uint32_t> ready{0}, go{0}, stop{0}, unpinned{0};
  };
  Control *ctl = shared_new<Control>();
  const size_t per_bytes = sizeof(PerProcess) * size_t(k);
  auto *per = static_cast<PerProcess *>(shared_alloc(per_bytes));
  for (auto _ : state) {
    memset(per, 0, per_bytes);
    ctl->ready.store(0);
    ctl->go.store(0);
    ctl->stop.store(0);
    ctl->unpinned.store(0);
    Children kids;
    for (int i = 0; i < k; i++) {
      kids.spawn(i, [&](int me) {
        // A child the kernel would not pin still runs (the parent waits for
        // all K) and is counted; the parent then fails the benchmark.
        if (pin && !pin_self(cpus[size_t(me) % cpus.size()]))
          ctl->unpinned.fetch_add(1, std::memory_order_relaxed);
        a.attach();
        PerProcess &p = per[me];
        ctl->ready.fetch_add(1, std::memory_order_acq_rel);
        wait_until_equal(&ctl->go, 1);
        while (!ctl->stop.load(std::memory_order_relaxed)) {
          uint64_t t0 = now_ns();
          uint64_t tok = a.acquire();
          uint64_t t1 = now_ns();
          spin_ns(kCriticalNs);
          a.release(tok);
          p.ops++;
          p.wait.add(t1 - t0);
        }
        p.end_ns = now_ns();
      });
    }
    while (ctl->ready.load(std::memory_order_acquire) != uint32_t(k))
      sleep_ns(100'000);
    uint64_t start = now_ns();
    store_and_wake(&ctl->go, 1);
    sleep_ns(kDurationNs);
    ctl->stop.store(1, std::memory_order_relaxed);
    if (kids.wait_all(10'000'000'000u))
      state.SkipWithError("child failed or hung");
    if (ctl->unpinned.load())
      state.SkipWithError("sched_setaffinity failed in a child");
    uint64_t end = start;
    for (int i = 0; i < k; i++) end = std::max(end, per[i].end_ns);
    state.SetIterationTime(double(end - start) * 1e-9);

    std::vector<double> ops;
    Histogram all{};
    uint64_t total = 0;
    for (int i = 0; i < k; i++) {
      ops.push_back(double(per[i].ops));
      total += per[i].ops;
      all.merge(per[i].wait);
    }
    state.counters["ops_per_s"] = double(total) / (double(end - start) * 1e-9);
    state.counters["jain"] = jain_index(ops);
    state.counters["min_ops"] = *std::min_element(ops.begin(), ops.end());
    state.counters["max_ops"] = *std::max_element(ops.begin(), ops.end());
    state.counters["p50_wait_ns"] = double(all.quantile(0.50));
    state.counters["p99_wait_ns"] = double(all.quantile(0.99));
    state.counters["max_wait_ns"] = double(all.max);
    if constexpr (std::is_same_v<A, Shmsem>) {
      // Reclamation must never fire here: every process is alive throughout.
      struct shmsem_stat st;
      if (shmsem_stat(a.handle(), &st) == 0) {
        state.counters["reclaimed"] =
            double(st.reclaimed_holders + st.reclaimed_waiters + st.repairs);
        if (state.error_occurred())
          fprintf(stderr,
                  "bench: shmsem after failure: reclaimed_holders=%llu "
                  "reclaimed_waiters=%llu repairs=%llu check=%d\n",
                  (unsigned long long)st.reclaimed_holders,
                  (unsigned long long)st.reclaimed_waiters,
                  (unsigned long long)st.repairs, shmsem_check(a.handle()));
      }
    }
  }
  shared_free(per, per_bytes);
  shared_delete(ctl);
}

// Each K/N pair unpinned, then pinned.
void KNPin(benchmark::internal::Benchmark *b,
           std::initializer_list<std::pair<int, int>> kn) {
  b->ArgNames({"K", "N", "pin"});
  for (auto [k, n] : kn) b->Args({k, n, 0})->Args({k, n, 1});
}
void KN(benchmark::internal::Benchmark *b) {
  KNPin(b, {{2, 1}, {4, 1}, {8, 1}, {8, 4}});
}
void K1(benchmark::internal::Benchmark *b) {
  KNPin(b, {{2, 1}, {4, 1}, {8, 1}});
}

#define CONTENTION(A, ARGS)            \
  BENCHMARK_TEMPLATE(BM_Contention, A) \
      ->Apply(ARGS)                    \
      ->UseManualTime()                \
      ->Iterations(1)
CONTENTION(Shmsem, KN);
CONTENTION(GlibcSem, KN);
CONTENTION(SysV, KN);
CONTENTION(SysVUndo, KN);
CONTENTION(RobustMutex, K1);
CONTENTION(Flock, K1);
CONTENTION(Ticket, KN);

}  // namespace
}  // namespace bench
