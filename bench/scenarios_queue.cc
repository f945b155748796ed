// (f2) Cost per acquire+release while Q others are queued. One child
// process runs Q+1 threads on one semaphore of N=1, each looping acquire,
// count, release; for a FIFO semaphore every release then hands the permit
// to the head of a queue of about Q-1 sleepers, and the releaser queues
// again at the tail. The parent samples the shared count over a window:
// ns per acquire+release (= per handoff for FIFO semaphores). For shmsem it
// also samples the queue length (shmsem_stat, O(1)).
//
// Arg "threads" = Q+1: 1, 101, 4001 give queues of about 0, 100, 4000.
// The ticket semaphore wakes every sleeper on each release (O(Q) per
// handoff), so it only runs up to Q=100.
#include <benchmark/benchmark.h>
#include <pthread.h>

#include <type_traits>
#include <vector>

#include "adapters.h"

namespace bench {
namespace {

constexpr uint64_t kWarmupNs = 100'000'000;
constexpr uint64_t kWindowNs = 300'000'000;
constexpr size_t kThreadStack = 64 * 1024;

struct QueueShared {
  std::atomic<uint32_t> started{0}, stop{0};
  alignas(64) std::atomic<uint64_t> ops{0};
};

template <class A>
struct ThreadArg {
  // cppcheck-suppress unusedStructMember ; read in queue_thread<A>
  A *a;
  // cppcheck-suppress unusedStructMember ; read in queue_thread<A>
  QueueShared *sh;
};

template <class A>
void *queue_thread(void *p) {
  auto *arg = static_cast<ThreadArg<A> *>(p);
  arg->sh->started.fetch_add(1, std::memory_order_relaxed);
  while (!arg->sh->stop.load(std::memory_order_relaxed)) {
    uint64_t t = arg->a->acquire();
    arg->sh->ops.fetch_add(1, std::memory_order_relaxed);
    arg->a->release(t);
  }
  return nullptr;
}

template <class A>
void BM_QueueHandoff(benchmark::State &state) {
  const uint32_t q = uint32_t(state.range(0));  // threads
  A a;
  if (!setup(state, a, 1, 8192)) return;
  QueueShared *sh = shared_new<QueueShared>();
  for (auto _ : state) {
    Children kids;
    kids.spawn(0, [&](int) {
      a.attach();
      ThreadArg<A> arg{&a, sh};
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setstacksize(&attr, kThreadStack);
      std::vector<pthread_t> th(q);
      for (auto &t : th)
        if (pthread_create(&t, &attr, queue_thread<A>, &arg) != 0)
          die("pthread_create", errno);
      for (auto &t : th) pthread_join(t, nullptr);
    });
    while (sh->started.load(std::memory_order_relaxed) != q)
      sleep_ns(1'000'000);
    sleep_ns(kWarmupNs);
    uint64_t c0 = sh->ops.load(), t0 = now_ns();
    double queued_sum = 0;
    int samples = 0;
    if constexpr (std::is_same_v<A, Shmsem>) {
      for (uint64_t end = t0 + kWindowNs; now_ns() < end; samples++) {
        struct shmsem_stat st;
        shmsem_stat(a.handle(), &st);
        queued_sum += st.waiting;
        sleep_ns(10'000'000);
      }
    } else {
      sleep_ns(kWindowNs);
    }
    uint64_t c1 = sh->ops.load(), t1 = now_ns();
    sh->stop.store(1);
    if (kids.wait_all(30'000'000'000u))
      state.SkipWithError("child failed or hung");
    state.SetIterationTime(double(t1 - t0) * 1e-9);
    state.counters["ns_per_pair"] =
        double(t1 - t0) / double(c1 > c0 ? c1 - c0 : 1);
    if (samples) state.counters["mean_queued"] = queued_sum / samples;
  }
  shared_delete(sh);
}

#define QUEUE(A)                         \
  BENCHMARK_TEMPLATE(BM_QueueHandoff, A) \
      ->ArgName("threads")               \
      ->UseManualTime()                  \
      ->Iterations(1)
QUEUE(Shmsem)->Arg(1)->Arg(101)->Arg(4001);
QUEUE(GlibcSem)->Arg(1)->Arg(101)->Arg(4001);
QUEUE(Ticket)->Arg(1)->Arg(101);

}  // namespace
}  // namespace bench
