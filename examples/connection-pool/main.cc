// connection-pool: a pool of N database connections shared by W worker
// processes, with one shmsem permit per connection (<shmsem/shmsem.hpp>).
//
//   connection-pool [WORKERS [ROUNDS]]
//
// The parent creates the semaphore (N permits) and forks the workers. Each
// worker opens the semaphore by name, as a separate program would, and, for
// every round, takes a lease with a timeout (acquire_for), "uses"
// connection number lease.resource() (the permit's index: no other lease
// names it while this one is held) and gives it back exactly once: by the
// lease's destructor on even rounds, by an explicit release() on odd ones.
// Every process checks at every step that no more than N connections are open
// at once and that no connection is used by two at once (counters in a
// MAP_SHARED page). At the end the parent checks the
// semaphore's own accounts (shmsem_stat, shmsem_check) and shows that a
// second release of one token is refused.
//
// Exit status: 0 all checks passed, 1 a check failed, 2 usage. The
// semaphore's name is unique (it has the parent's PID) and is unlinked on
// every exit path of the parent; no worker outlives the run.
#include <signal.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <shmsem/shmsem.h>
#include <shmsem/shmsem.hpp>

namespace {

constexpr uint32_t kConnections = 3;  // N: permits, i.e. database connections
constexpr int kDefaultWorkers = 5;    // W
constexpr int kDefaultRounds = 1000;  // R per worker
constexpr std::chrono::seconds kAcquireTimeout(
    2);  // per lease: a stuck pool shows as timeouts
constexpr std::chrono::seconds kRunBudget(
    30);  // the parent kills workers still running then

// What the processes share besides the semaphore: an anonymous MAP_SHARED
// page (inherited by fork). std::atomic of these sizes is lock-free, hence
// address-free, so it works across processes.
struct Board {
  std::atomic<int> open{0};                  // connections open right now
  std::atomic<int> max_open{0};              // the most ever seen at once
  std::atomic<uint64_t> uses{0};             // leases taken and used
  std::atomic<uint64_t> timeouts{0};         // acquire_for gave up
  std::atomic<uint64_t> overflows{0};        // a step saw more than N open
  std::atomic<int> busy[kConnections] = {};  // connection i in use
  std::atomic<uint64_t> shared{0};           // a connection taken while in use
};
static_assert(std::atomic<int>::is_always_lock_free &&
              std::atomic<uint64_t>::is_always_lock_free);

// The semaphore's name is removed when the parent leaves run(), however.
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

// A connection in use: counts itself open for its lifetime and checks the
// bound. Declared after the lease, so it closes before the permit goes back.
class Connection {
 public:
  Connection(Board &b, uint32_t i) : b_(b), i_(i) {
    if (i_ >= kConnections ||
        b_.busy[i_].exchange(1, std::memory_order_relaxed))
      b_.shared.fetch_add(1, std::memory_order_relaxed);
    const int now = b_.open.fetch_add(1, std::memory_order_relaxed) + 1;
    if (now > static_cast<int>(kConnections))
      b_.overflows.fetch_add(1, std::memory_order_relaxed);
    int seen = b_.max_open.load(std::memory_order_relaxed);
    while (now > seen && !b_.max_open.compare_exchange_weak(
                             seen, now, std::memory_order_relaxed)) {
    }
  }
  Connection(const Connection &) = delete;
  Connection &operator=(const Connection &) = delete;
  ~Connection() {
    if (i_ < kConnections) b_.busy[i_].store(0, std::memory_order_relaxed);
    b_.open.fetch_sub(1, std::memory_order_relaxed);
  }

  // "Run a query": a little work, so that connections overlap.
  uint64_t query(uint64_t seed) const {
    uint64_t h = seed;
    for (int i = 0; i < 2000; i++)
      h = h * 6364136223846793005u + 1442695040888963407u;
    if (b_.open.load(std::memory_order_relaxed) >
        static_cast<int>(kConnections))
      b_.overflows.fetch_add(1, std::memory_order_relaxed);
    return h;
  }

 private:
  Board &b_;
  uint32_t i_;  // which of the N connections
};

// One worker process: R rounds of lease, use, give back. Returns its exit
// status (0 ok).
int worker(const std::string &name, Board &board, int id, int rounds) {
  try {
    auto pool = shmsem::semaphore::open(name);
    uint64_t sink = 0;
    for (int r = 0; r < rounds; r++) {
      std::optional<shmsem::lease> lease = pool.acquire_for(kAcquireTimeout);
      if (!lease) {
        board.timeouts.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      {
        const Connection conn(board, lease->resource());
        sink += conn.query(static_cast<uint64_t>(id) * 1000003u +
                           static_cast<uint64_t>(r));
        board.uses.fetch_add(1, std::memory_order_relaxed);
      }  // closed before the permit is given back
      if (r % 2 == 1) lease->release();  // explicit, reporting errors
    }  // even rounds: the lease's destructor gives the connection back
    return sink == 42 ? 3 : 0;  // keep the "queries" from being optimised away
  } catch (const std::exception &e) {
    std::fprintf(stderr, "connection-pool: worker %d: %s\n", id, e.what());
    return 1;
  }
}

// Waits for every child until `budget` runs out, then kills the rest (they
// are ours: their PIDs came from fork) and reaps them. True if all exited 0.
bool reap(std::vector<pid_t> &pids,
          std::chrono::steady_clock::duration budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  bool ok = true;
  while (!pids.empty()) {
    int status = 0;
    const pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      std::erase(pids, p);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr,
                     "connection-pool: worker %d failed (status 0x%x)\n",
                     int(p), status);
        ok = false;
      }
    } else if (p < 0 && errno != EINTR) {
      break;
    } else if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "connection-pool: %zu workers still running; killing them\n",
                   pids.size());
      for (pid_t q : pids) kill(q, SIGKILL);
      for (pid_t q : pids) waitpid(q, &status, 0);
      pids.clear();
      return false;
    } else {
      // Waiting for exits, not ordering anything.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return ok;
}

// Checks, counting failures.
int failures = 0;
void expect(bool ok, const char *what) {
  if (!ok) {
    std::fprintf(stderr, "connection-pool: CHECK FAILED: %s\n", what);
    failures++;
  }
}

int run(int workers, int rounds) {
  const std::string name = "/shmsem-example-pool-" + std::to_string(getpid());
  void *page = mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED)
    throw std::system_error(errno, std::generic_category(), "mmap");
  Board &board = *new (page) Board();

  shmsem_config cfg{};
  cfg.permits = kConnections;
  auto pool = shmsem::semaphore::create(name, cfg, SHMSEM_EXCL);
  const Unlinker unlinker(name);

  if (std::fflush(nullptr) != 0)  // nothing buffered twice by the children
    std::perror("connection-pool: fflush");
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; w++) {
    const pid_t p = fork();
    if (p < 0) {
      std::perror("connection-pool: fork");
      failures++;
      break;
    }
    if (p == 0)
      _exit(worker(name, board, w,
                   rounds));  // no parent destructors in the child
    pids.push_back(p);
  }
  expect(reap(pids, kRunBudget), "every worker exited with 0");

  const struct shmsem_stat st = pool.stat();
  const uint64_t uses = board.uses.load();
  const uint64_t timeouts = board.timeouts.load();
  std::printf(
      "connection-pool: %d workers x %d rounds over %u connections: %llu uses, "
      "%llu timeouts, at most %d open at once\n",
      workers, rounds, kConnections, static_cast<unsigned long long>(uses),
      static_cast<unsigned long long>(timeouts), board.max_open.load());
  expect(board.overflows.load() == 0,
         "never more than N connections open at once");
  expect(board.shared.load() == 0, "no connection used by two leases at once");
  expect(board.max_open.load() <= static_cast<int>(kConnections),
         "max open <= N");
  expect(uses + timeouts ==
             static_cast<uint64_t>(workers) * static_cast<uint64_t>(rounds),
         "every round either used a connection or timed out");
  expect(st.available == kConnections, "stat: available == N");
  expect(st.held == 0, "stat: held == 0");
  expect(st.reserved == 0 && st.waiting == 0,
         "stat: nothing reserved or waiting");
  expect(st.acquisitions == uses, "stat: acquisitions == uses");
  expect(st.timeouts == timeouts, "stat: timeouts == timeouts seen");
  expect(shmsem_check(pool.native_handle()) == 0, "shmsem_check() == 0");

  // A connection handed back twice is refused, and changes nothing.
  {
    shmsem::lease first = pool.acquire();
    shmsem::lease copy(pool.native_handle(),
                       first.token());  // a second owner: a bug
    first.release();
    std::error_code ec;
    copy.release(ec);
    std::printf("connection-pool: second release of one token: %s (%s)\n",
                ec ? ec.message().c_str() : "accepted",
                ec ? "refused, as it must" : "BUG");
    expect(ec == std::errc::connection_already_in_progress &&
               ec.value() == EALREADY,
           "second release is -EALREADY");
    const struct shmsem_stat after = pool.stat();
    expect(after.available == kConnections && after.held == 0,
           "refused release changes nothing");
    expect(shmsem_check(pool.native_handle()) == 0,
           "shmsem_check() == 0 after the refusal");
  }

  board.~Board();
  munmap(page, sizeof(Board));
  return failures == 0 ? 0 : 1;
}

int positive_arg(const char *s) {
  char *end = nullptr;
  const long v = std::strtol(s, &end, 10);
  return *s && !*end && v > 0 && v <= 1000000 ? static_cast<int>(v) : -1;
}

}  // namespace

int main(int argc, char **argv) {
  const int workers = argc > 1 ? positive_arg(argv[1]) : kDefaultWorkers;
  const int rounds = argc > 2 ? positive_arg(argv[2]) : kDefaultRounds;
  if (argc > 3 || workers < 0 || rounds < 0 || workers > 64) {
    std::fprintf(stderr, "usage: %s [WORKERS (1-64) [ROUNDS]]\n", argv[0]);
    return 2;
  }
  try {
    const int rc = run(workers, rounds);
    std::printf("connection-pool: %s\n",
                rc == 0 ? "all checks passed" : "FAILED");
    return rc;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "connection-pool: %s\n", e.what());
    return 1;
  }
}
