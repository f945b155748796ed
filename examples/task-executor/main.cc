// task-executor: a bounded-concurrency task executor. A pool of std::jthread
// workers runs submitted tasks, and every task first takes a lease from a
// semaphore with K permits (<shmsem/shmsem.hpp>), so at most K tasks run at
// once — across every process using that semaphore, not only this one.
//
//   task-executor [THREADS [TASKS]]
//
// Shutting the executor down (request_stop on every jthread) also cancels
// acquires still queued in the semaphore, through the stop_token each worker
// passes to acquire(stop_token): they return std::nullopt and own nothing.
//
// The run: phase 1 runs TASKS tasks and checks that no more than K ever run
// at once. Phase 2 holds all K permits from the main thread, gives each
// worker one more task (so every worker queues in acquire), waits until the
// semaphore reports them all waiting, shuts the executor down, and checks
// that every queued acquire returned nullopt and that, once the main thread
// gives its permits back, all K are available and every invariant holds.
//
// Exit status: 0 all checks passed, 1 a check failed, 2 usage. The
// semaphore's name is unique (it has the PID) and is unlinked on every exit.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <shmsem/shmsem.h>
#include <shmsem/shmsem.hpp>

namespace {

constexpr uint32_t kPermits = 2;     // K: tasks allowed to run at once
constexpr int kDefaultThreads = 4;   // workers (more than K, so some queue)
constexpr int kDefaultTasks = 2000;  // phase 1

// Runs tasks on a fixed set of jthreads; each task runs under a lease of
// `sem`. Members are declared so that the threads (last) are stopped and
// joined before the queue and its lock go away.
class Executor {
 public:
  Executor(shmsem::semaphore &sem, int threads) : sem_(sem) {
    threads_.reserve(static_cast<size_t>(threads));
    for (int i = 0; i < threads; i++)
      threads_.emplace_back([this](const std::stop_token &st) { work(st); });
  }
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;
  ~Executor() { shutdown(); }

  void submit(std::function<void()> task) {
    {
      const std::lock_guard lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

  // Stops every worker: one waiting for a task returns at once, one queued
  // in the semaphore gets nullopt from acquire(stop_token), one running a
  // task finishes it first. Joins them. Tasks not started are dropped.
  void shutdown() {
    for (auto &t : threads_) t.request_stop();
    for (auto &t : threads_)
      if (t.joinable()) t.join();
  }

  // Acquires that ended in nullopt (stop requested while queued or before).
  int cancelled() const { return cancelled_.load(); }
  size_t dropped() const {
    const std::lock_guard lock(mu_);
    return queue_.size();
  }

 private:
  void work(const std::stop_token &st) {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        if (!cv_.wait(lock, st, [this] { return !queue_.empty(); }))
          return;  // stopped
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      std::optional<shmsem::lease> lease = sem_.acquire(st);
      if (!lease) {  // stopped while queued for a permit (or before)
        cancelled_.fetch_add(1);
        return;
      }
      task();
    }  // the lease goes back after the task, also if it threw
  }

  shmsem::semaphore &sem_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::function<void()>> queue_;
  std::atomic<int> cancelled_{0};
  std::vector<std::jthread> threads_;  // last: stopped and joined first
};

// The semaphore's name is removed when run() is left, however.
class Unlinker {
 public:
  explicit Unlinker(std::string name) : name_(std::move(name)) {}
  Unlinker(const Unlinker &) = delete;
  Unlinker &operator=(const Unlinker &) = delete;
  ~Unlinker() {
    std::error_code ignored;  // already gone is fine
    shmsem::semaphore::unlink(name_.c_str(), ignored);
  }

 private:
  std::string name_;
};

int failures = 0;
void expect(bool ok, const char *what) {
  if (!ok) {
    std::fprintf(stderr, "task-executor: CHECK FAILED: %s\n", what);
    failures++;
  }
}

// Polls the semaphore until `n` acquires are queued; false after `budget`.
// (Waiting for an observable state; nothing is ordered by time.)
bool wait_for_waiters(const shmsem::semaphore &sem, uint32_t n,
                      std::chrono::seconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (sem.stat().waiting != n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

int run(int threads, int tasks) {
  const std::string name =
      "/shmsem-example-executor-" + std::to_string(getpid());
  shmsem_config cfg{};
  cfg.permits = kPermits;
  auto sem = shmsem::semaphore::create(name, cfg, SHMSEM_EXCL);
  const Unlinker unlinker(name);

  // Phase 1: bounded concurrency.
  std::atomic<int> running{0}, max_running{0}, done{0};
  std::atomic<uint64_t> sink{0};
  {
    Executor ex(sem, threads);
    for (int i = 0; i < tasks; i++) {
      ex.submit([&, i] {
        const int now = running.fetch_add(1) + 1;
        int seen = max_running.load();
        while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
        }
        uint64_t h = static_cast<uint64_t>(i);
        for (int k = 0; k < 1000; k++)
          h = h * 6364136223846793005u + 1442695040888963407u;
        sink.fetch_add(h, std::memory_order_relaxed);
        running.fetch_sub(1);  // before the lease goes back
        done.fetch_add(1);
        done.notify_one();
      });
    }
    for (int d = done.load(); d < tasks; d = done.load()) done.wait(d);
  }  // ~Executor: stops its idle workers
  std::printf(
      "task-executor: %d tasks on %d threads, at most %d running at once (K = "
      "%u)\n",
      done.load(), threads, max_running.load(), kPermits);
  expect(done.load() == tasks, "every task ran");
  expect(max_running.load() <= static_cast<int>(kPermits),
         "never more than K tasks at once");
  expect(sem.stat().acquisitions == static_cast<uint64_t>(tasks),
         "one acquisition per task");

  // Phase 2: shutdown cancels acquires queued in the semaphore.
  std::atomic<int> ran_late{0};
  std::vector<shmsem::lease> held;
  for (uint32_t i = 0; i < kPermits; i++)
    held.push_back(sem.acquire());  // no permit left
  const struct shmsem_stat before = sem.stat();
  {
    Executor ex(sem, threads);
    for (int i = 0; i < threads; i++) ex.submit([&] { ran_late.fetch_add(1); });
    const bool queued = wait_for_waiters(sem, static_cast<uint32_t>(threads),
                                         std::chrono::seconds(20));
    expect(queued, "every worker queued in acquire before the shutdown");
    ex.shutdown();
    std::printf(
        "task-executor: shutdown with %d acquires queued: %d returned nullopt, "
        "%zu tasks dropped\n",
        queued ? threads : -1, ex.cancelled(), ex.dropped());
    expect(ex.cancelled() == threads, "every queued acquire returned nullopt");
    expect(ex.dropped() == 0, "no task was left in the executor's queue");
  }
  expect(ran_late.load() == 0, "no task ran without a permit");
  struct shmsem_stat st = sem.stat();
  expect(st.waiting == 0 && st.reserved == 0,
         "nobody left in the semaphore's queue");
  expect(st.held == kPermits,
         "the main thread's permits are the only ones held");
  expect(
      st.cancellations - before.cancellations == static_cast<uint64_t>(threads),
      "the semaphore counted every cancellation");
  held.clear();  // the main thread gives its permits back
  st = sem.stat();
  expect(st.available == kPermits && st.held == 0,
         "stat: available == K, no permit leaked");
  expect(shmsem_check(sem.native_handle()) == 0, "shmsem_check() == 0");
  return failures == 0 ? 0 : 1;
}

int positive_arg(const char *s) {
  char *end = nullptr;
  const long v = std::strtol(s, &end, 10);
  return *s && !*end && v > 0 && v <= 1000000 ? static_cast<int>(v) : -1;
}

}  // namespace

int main(int argc, char **argv) {
  const int threads = argc > 1 ? positive_arg(argv[1]) : kDefaultThreads;
  const int tasks = argc > 2 ? positive_arg(argv[2]) : kDefaultTasks;
  if (argc > 3 || threads < 0 || tasks < 0 || threads > 256) {
    std::fprintf(stderr, "usage: %s [THREADS (1-256) [TASKS]]\n", argv[0]);
    return 2;
  }
  try {
    const int rc = run(threads, tasks);
    std::printf("task-executor: %s\n",
                rc == 0 ? "all checks passed" : "FAILED");
    return rc;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "task-executor: %s\n", e.what());
    return 1;
  }
}
