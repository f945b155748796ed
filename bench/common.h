// Helpers shared by the scenarios: shared memory, clocks, a calibrated spin,
// CPU pinning, forked children, a wait-time histogram, raw futex calls.
// Benchmarks report; nothing here asserts a timing.
#ifndef SHMSEM_BENCH_COMMON_H
#define SHMSEM_BENCH_COMMON_H

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <functional>
#include <new>
#include <vector>

namespace bench {

// --- shared memory (MAP_SHARED | MAP_ANONYMOUS: inherited across fork) -----
void *shared_alloc(size_t bytes);
void shared_free(void *p, size_t bytes);

template <class T>
T *shared_new() {
  return new (shared_alloc(sizeof(T))) T();
}
template <class T>
void shared_delete(T *p) {
  p->~T();
  shared_free(p, sizeof(T));
}

// --- time -------------------------------------------------------------------
inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}
void sleep_ns(uint64_t ns);

// Busy work of about `ns` nanoseconds (calibrated once per process).
void spin_ns(uint64_t ns);

// --- futex on a shared (not private) word: the waiters are other processes --
void futex_wait(std::atomic<uint32_t> *w, uint32_t expected);
void futex_wake(std::atomic<uint32_t> *w, int n);
// As futex_wait, with an absolute CLOCK_MONOTONIC deadline.
void futex_wait_until(std::atomic<uint32_t> *w, uint32_t expected,
                      uint64_t deadline_ns);
// Sleep until *w == v.
void wait_until_equal(std::atomic<uint32_t> *w, uint32_t v);
// *w = v, then wake every sleeper on w.
void store_and_wake(std::atomic<uint32_t> *w, uint32_t v);

// --- CPU placement ----------------------------------------------------------
// Pins the calling process to one CPU; restores the saved mask on scope exit.
class PinScope {
 public:
  explicit PinScope(int cpu);
  ~PinScope();
  PinScope(const PinScope &) = delete;
  PinScope &operator=(const PinScope &) = delete;

 private:
  cpu_set_t saved_;
  bool active_;
};
// For children (no restore needed). False (and a message on stderr) if the
// kernel refused, e.g. `cpu` is outside the process's affinity mask.
bool pin_self(int cpu);
int cpu_count();
// The CPUs in the calling process's affinity mask, ascending (online CPUs
// only: the kernel keeps offline ones out of every mask).
std::vector<int> allowed_cpus();

// 'S' once the process sleeps (in a futex, semop or flock), from /proc.
char proc_state(pid_t pid);

// --- children
// ----------------------------------------------------------------- Forked
// processes running `body(i)` then _exit(0). Never returns into the benchmark
// framework. The destructor kills and reaps whatever is left.
class Children {
 public:
  Children() = default;
  ~Children();
  pid_t spawn(int index, const std::function<void(int)> &body);
  // Reap all; after timeout_ns, SIGKILL the rest. Returns the number that
  // did not exit cleanly.
  int wait_all(uint64_t timeout_ns);
  pid_t pid(int i) const { return pids_[size_t(i)]; }

 private:
  std::vector<pid_t> pids_;
};

// --- wait-time histogram: 8 linear sub-buckets per power of two (~12%) ------
struct Histogram {
  static constexpr int kBuckets = 16 + 8 * 44;
  uint64_t count[kBuckets];
  uint64_t max;
  void add(uint64_t ns);
  void merge(const Histogram &o);
  uint64_t total() const;
  // Upper bound of the bucket holding the q-quantile (0 < q <= 1).
  uint64_t quantile(double q) const;
};

// Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 = perfectly even.
double jain_index(const std::vector<double> &x);

// A name no other run uses: "/shmsem-bench-<pid>-<n>".
void unique_shm_name(char *buf, size_t len);

}  // namespace bench

#endif  // SHMSEM_BENCH_COMMON_H
