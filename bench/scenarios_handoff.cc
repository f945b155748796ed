// Two processes passing a permit while the receiver sleeps.
//
// (b) BM_PingPong: round trips through two semaphores A and B, both drained
//     at setup. Parent: release(A), acquire(B). Child: acquire(A),
//     release(B). Each round trip is two wake-ups of a sleeping process;
//     reported as ns per handoff. Needs release by another process (shmsem
//     leases, sem_t, semop without UNDO, ticket, raw futex).
// (d) BM_Handoff: one-way release-to-grant latency. The parent holds the
//     permit; the child calls acquire and the parent waits until /proc says
//     the child is asleep; then the parent stamps CLOCK_MONOTONIC and
//     releases, and the child stamps when its acquire returns. The iteration
//     time is that difference (manual time). Every adapter takes part.
//
// Arg "same_core": 0 pins parent and child to CPUs 0 and 1, 1 pins both to
// CPU 0 (so the wake-up includes a context switch on one CPU).
#include <benchmark/benchmark.h>

#include <algorithm>

#include "adapters.h"

namespace bench {
namespace {

int child_cpu(benchmark::State &state) { return state.range(0) ? 0 : 1; }

bool cpus_ok(benchmark::State &state) {
  if (!state.range(0) && cpu_count() < 2) {
    state.SkipWithError("cross-core needs 2 CPUs");
    return false;
  }
  return true;
}

template <class A>
void BM_PingPong(benchmark::State &state) {
  if (!A::kAnyReleaser) {
    state.SkipWithError("release only by the owner: see BM_Handoff");
    return;
  }
  if (!cpus_ok(state)) return;
  A a, b;
  if (!setup(state, a, 1) || !setup(state, b, 1)) return;
  struct Shared {
    uint64_t tok_a, tok_b;  // leases held "by the pair", passed along
    std::atomic<uint32_t> stop{0};
  };
  Shared *sh = shared_new<Shared>();
  sh->tok_a = a.acquire();
  sh->tok_b = b.acquire();
  PinScope pin(0);
  Children kids;
  kids.spawn(0, [&](int) {
    pin_self(child_cpu(state));
    a.attach();
    b.attach();
    for (;;) {
      sh->tok_a = a.acquire();
      if (sh->stop.load(std::memory_order_acquire)) return;
      b.release(sh->tok_b);
    }
  });
  uint64_t t0 = now_ns();
  for (auto _ : state) {
    a.release(sh->tok_a);
    sh->tok_b = b.acquire();
  }
  uint64_t elapsed = now_ns() - t0;
  sh->stop.store(1, std::memory_order_release);
  a.release(sh->tok_a);
  if (kids.wait_all(5'000'000'000u)) state.SkipWithError("child failed");
  shared_delete(sh);
  state.counters["ns_per_handoff"] =
      double(elapsed) / double(2 * state.iterations());
}

template <class A>
void BM_Handoff(benchmark::State &state) {
  if (!cpus_ok(state)) return;
  A a;
  if (!setup(state, a, 1)) return;
  const uint64_t iters = uint64_t(state.max_iterations);
  struct Shared {
    std::atomic<uint32_t> go{0}, ready{0}, done{0};
    uint64_t release_ns;  // parent's stamp just before release
  };
  Shared *sh = shared_new<Shared>();
  uint64_t *lat =
      static_cast<uint64_t *>(shared_alloc(iters * sizeof(uint64_t)));
  PinScope pin(0);
  uint64_t tok = a.acquire();
  Children kids;
  pid_t child = kids.spawn(0, [&](int) {
    pin_self(child_cpu(state));
    a.attach();
    for (uint32_t i = 1; i <= iters; i++) {
      wait_until_equal(&sh->go, i);
      sh->ready.store(i, std::memory_order_release);
      uint64_t t = a.acquire();
      // The semaphore orders release_ns before our grant.
      lat[i - 1] = now_ns() - sh->release_ns;
      a.release(t);
      store_and_wake(&sh->done, i);
    }
  });
  uint32_t i = 0;
  for (auto _ : state) {
    i++;
    store_and_wake(&sh->go, i);
    while (sh->ready.load(std::memory_order_acquire) != i) sched_yield();
    while (proc_state(child) != 'S') sched_yield();
    sh->release_ns = now_ns();
    a.release(tok);
    wait_until_equal(&sh->done, i);
    tok = a.acquire();
    state.SetIterationTime(double(lat[i - 1]) * 1e-9);
  }
  a.release(tok);
  if (kids.wait_all(5'000'000'000u)) state.SkipWithError("child failed");
  std::sort(lat, lat + i);
  if (i) {
    state.counters["p50_ns"] = double(lat[i / 2]);
    state.counters["p99_ns"] =
        double(lat[std::min<uint64_t>(i - 1, i * 99 / 100)]);
    state.counters["max_ns"] = double(lat[i - 1]);
  }
  shared_free(lat, iters * sizeof(uint64_t));
  shared_delete(sh);
}

void PinArgs(benchmark::internal::Benchmark *b) {
  b->ArgName("same_core")->Arg(0)->Arg(1);
}

#define PINGPONG(A)                  \
  BENCHMARK_TEMPLATE(BM_PingPong, A) \
      ->Apply(PinArgs)               \
      ->UseRealTime()                \
      ->MinTime(0.2)
PINGPONG(Shmsem);
PINGPONG(ShmsemRing);
PINGPONG(GlibcSem);
PINGPONG(SysV);
PINGPONG(Ticket);
PINGPONG(RawFutex);
PINGPONG(RawFutexTimed);

#define HANDOFF(A)                  \
  BENCHMARK_TEMPLATE(BM_Handoff, A) \
      ->Apply(PinArgs)              \
      ->UseManualTime()             \
      ->Iterations(2000)
HANDOFF(Shmsem);
HANDOFF(ShmsemRing);
HANDOFF(GlibcSem);
HANDOFF(SysV);
HANDOFF(SysVUndo);
HANDOFF(RobustMutex);
HANDOFF(Flock);
HANDOFF(Ticket);
HANDOFF(RawFutex);
HANDOFF(RawFutexTimed);

}  // namespace
}  // namespace bench
