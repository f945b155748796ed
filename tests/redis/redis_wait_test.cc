// The non-blocking waiter (shmsem_waiter_*) on a Redis pool, against a
// real redis-server (redis_server.h): granted at once; queued and granted
// by a release in another real process, seen through the waiter's futex
// word, the notifier's eventfd (epoll) and an io_uring; cancel on either
// side of the grant, with the order fixed by the server's state; the
// deadline; shutdown; garbage and stale waiters; a fork child's copy; many
// waiters at once; detach with waiters queued.
#include <gtest/gtest.h>
#include <liburing.h>
#include <linux/futex.h>
#include <poll.h>
#include <shmsem/shmsem.h>
#include <shmsem/uring.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kMs = 1'000'000;

RedisServer *g_server = nullptr;

class Env : public ::testing::Environment {
 public:
  void SetUp() override {
    g_server = new RedisServer;
    if (!g_server->start()) {
      fprintf(stderr, "redis-server: %s\n", g_server->error().c_str());
      delete g_server;
      g_server = nullptr;
    }
  }
  void TearDown() override {
    delete g_server;
    g_server = nullptr;
  }
};
const auto *g_env = ::testing::AddGlobalTestEnvironment(new Env);

timespec mono_in(uint64_t ns) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t t =
      uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec) + ns;
  return timespec{time_t(t / 1'000'000'000), long(t % 1'000'000'000)};
}

uint64_t ts_ns(const timespec &ts) {
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

// FUTEX_WAIT on a waiter's word as a loop would (shared: no
// FUTEX_PRIVATE_FLAG) until it no longer holds `value`; false after 20 s.
bool await_word(const shmsem_waiter_t *w) {
  uint32_t *word, value;
  if (shmsem_waiter_futex(w, &word, &value) != 0) return false;
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == value) {
    if (Clock::now() >= until) return false;
    const timespec rel{0, 100 * long(kMs)};
    syscall(SYS_futex, word, FUTEX_WAIT, value, &rel, nullptr, 0);
  }
  return true;
}

// Threads of this process now (each queued remote waiter has one).
size_t thread_count() {
  size_t n = 0;
  for (const auto &e : std::filesystem::directory_iterator("/proc/self/task"))
    n += e.is_directory() ? 1 : 0;
  return n;
}

// This process's resident memory (kB), from /proc/self/status.
long rss_kb() {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

// Another real process that holds `n` permits of `name` until told to
// release them: hold() returns once it holds them, release() once it
// released them and exited.
class Holder {
 public:
  Holder(const std::string &name, uint32_t n) {
    if (pipe(up_) != 0 || pipe(down_) != 0) abort();
    pid_ = kids_.spawn([&] {
      shmsem_t *s = nullptr;
      if (shmsem_open(name.c_str(), 0, &s) != 0) return 1;
      shmsem_lease_t l;
      if (shmsem_acquire_n(s, n, &l) != 0) return 2;
      char c = 'h';
      if (write(up_[1], &c, 1) != 1) return 3;
      if (read(down_[0], &c, 1) != 1) return 4;
      const int r = shmsem_release(s, &l);
      shmsem_detach(s);
      return r == 0 ? 0 : 5;
    });
  }
  ~Holder() {
    for (int fd : {up_[0], up_[1], down_[0], down_[1]}) close(fd);
  }
  bool hold() {
    char c;
    return read(up_[0], &c, 1) == 1;
  }
  bool release() {
    const char c = 'r';
    return write(down_[1], &c, 1) == 1 && kids_.wait(pid_) == 0;
  }

 private:
  Children kids_;
  pid_t pid_ = -1;
  int up_[2]{-1, -1}, down_[2]{-1, -1};
};

// A pool on the test server, unlinked at the end.
class RedisWait : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_server) GTEST_SKIP() << "redis-server could not be started";
    if (!g_server->running() && !g_server->start())
      GTEST_SKIP() << "redis-server: " << g_server->error();
    pool_ = unique_pool("w");
    name_ = g_server->unix_name(pool_);
  }
  void TearDown() override {
    if (g_server) g_server->resume();
    if (s_) shmsem_detach(s_);
    if (g_server && g_server->running()) shmsem_unlink(name_.c_str());
  }
  void make(uint32_t permits, uint32_t max_waiters = 0, uint32_t ttl_ms = 0) {
    shmsem_config cfg{};
    cfg.permits = permits;
    cfg.max_waiters = max_waiters;
    cfg.lease_ttl_ms = ttl_ms;
    ASSERT_EQ(shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &s_), 0);
  }
  struct shmsem_stat pool_stat() {
    struct shmsem_stat st {};
    EXPECT_EQ(shmsem_stat(s_, &st), 0);
    return st;
  }

  std::string pool_, name_;
  shmsem_t *s_ = nullptr;
};

TEST_F(RedisWait, StartTakesAFreePermitAtOnce) {
  make(1);
  shmsem_waiter_t w;
  memset(&w, 0, sizeof w);
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), 0);
  uint32_t *word, value;
  EXPECT_EQ(shmsem_waiter_futex(&w, &word, &value), -EINVAL) << "not queued";
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINVAL);
  EXPECT_EQ(pool_stat().held, 1u);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
}

TEST_F(RedisWait, QueuedWaiterIsGrantedByAnotherProcessThroughItsWord) {
  make(1);
  Holder holder(name_, 1);
  ASSERT_TRUE(holder.hold());
  shmsem_waiter_t w;
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), -EINVAL)
      << "a queued waiter is not restarted";
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINPROGRESS);
  timespec at;
  ASSERT_EQ(shmsem_waiter_wake_by(&w, &at), 0);
  EXPECT_GT(ts_ns(at), ts_ns(mono_in(0))) << "no deadline: nothing due soon";
  EXPECT_EQ(pool_stat().waiting, 1u);
  ASSERT_TRUE(holder.release());
  ASSERT_TRUE(await_word(&w));
  ASSERT_EQ(shmsem_waiter_poll(&w, &l), 0);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINVAL) << "complete: unused again";
  EXPECT_EQ(pool_stat().held, 1u);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
  EXPECT_EQ(shmsem_check(s_), 0);
}

TEST_F(RedisWait, NotifierEventfdReportsTheGrantToEpoll) {
  make(1);
  Holder holder(name_, 1);
  ASSERT_TRUE(holder.hold());
  shmsem_notifier_t *n = nullptr;
  ASSERT_EQ(shmsem_notifier_create(&n), 0);
  shmsem_waiter_t w;
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n, &w, 42), 0);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, shmsem_notifier_fd(n), &ev), 0);
  EXPECT_EQ(epoll_wait(ep, &ev, 1, 0), 0) << "nothing ready while queued";
  ASSERT_TRUE(holder.release());
  ASSERT_EQ(epoll_wait(ep, &ev, 1, 20'000), 1);
  uint64_t ud = 0;
  ASSERT_EQ(shmsem_notifier_next(n, &ud), 0);
  EXPECT_EQ(ud, 42u);
  EXPECT_EQ(shmsem_notifier_next(n, &ud), -EAGAIN);
  ASSERT_EQ(shmsem_waiter_poll(&w, &l), 0);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
  close(ep);
  shmsem_notifier_destroy(n);
}

// One notifier, one loop: a local waiter and a remote one side by side,
// each reported when its own permit comes.
TEST_F(RedisWait, NotifierServesLocalAndRemoteWaitersTogether) {
  make(1);
  Segment local(1);
  shmsem_lease_t held_remote, held_local, l;
  ASSERT_EQ(shmsem_acquire(s_, &held_remote), 0);
  ASSERT_EQ(shmsem_acquire(local.get(), &held_local), 0);
  shmsem_notifier_t *n = nullptr;
  ASSERT_EQ(shmsem_notifier_create(&n), 0);
  shmsem_waiter_t wr, wl;
  ASSERT_EQ(shmsem_waiter_start(s_, &wr, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_waiter_start(local.get(), &wl, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n, &wr, 1), 0);
  ASSERT_EQ(shmsem_notifier_add(n, &wl, 2), 0);
  EXPECT_EQ(shmsem_notifier_add(n, &wr, 3), -EINVAL) << "added already";
  pollfd p{shmsem_notifier_fd(n), POLLIN, 0};
  uint64_t ud = 0;
  ASSERT_EQ(shmsem_release(local.get(), &held_local), 0);
  ASSERT_EQ(poll(&p, 1, 20'000), 1);
  ASSERT_EQ(shmsem_notifier_next(n, &ud), 0);
  EXPECT_EQ(ud, 2u);
  ASSERT_EQ(shmsem_waiter_poll(&wl, &l), 0);
  EXPECT_EQ(shmsem_release(local.get(), &l), 0);
  ASSERT_EQ(shmsem_release(s_, &held_remote), 0);
  ASSERT_EQ(poll(&p, 1, 20'000), 1);
  ASSERT_EQ(shmsem_notifier_next(n, &ud), 0);
  EXPECT_EQ(ud, 1u);
  ASSERT_EQ(shmsem_waiter_poll(&wr, &l), 0);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
  shmsem_notifier_destroy(n);
}

TEST_F(RedisWait, RingFutexWaitCompletesOnTheGrant) {
  if (shmsem_uring_probe() != 0)
    GTEST_SKIP() << "this kernel has no IORING_OP_FUTEX_WAIT (Linux 6.7+) or"
                    " io_uring is disabled: shmsem_uring_probe() == "
                 << shmsem_uring_probe();
  make(1);
  Holder holder(name_, 1);
  ASSERT_TRUE(holder.hold());
  io_uring ring;
  ASSERT_EQ(io_uring_queue_init(8, &ring, 0), 0);
  shmsem_waiter_t w;
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_uring_prep_wait(&ring, &w, 7), 0);
  ASSERT_EQ(io_uring_submit(&ring), 2);
  ASSERT_TRUE(holder.release());
  int r = -EINPROGRESS;
  for (int round = 0; round < 100 && r == -EINPROGRESS; round++) {
    io_uring_cqe *cqe = nullptr;
    __kernel_timespec ts{20, 0};
    ASSERT_EQ(io_uring_wait_cqe_timeout(&ring, &cqe, &ts), 0);
    const uint64_t tag = io_uring_cqe_get_data64(cqe);
    io_uring_cqe_seen(&ring, cqe);
    if (tag == SHMSEM_URING_IGNORE) continue;
    ASSERT_EQ(tag, 7u);
    r = shmsem_waiter_poll(&w, &l);
    if (r == -EINPROGRESS) {
      ASSERT_EQ(shmsem_uring_prep_wait(&ring, &w, 7), 0);
      io_uring_submit(&ring);
    }
  }
  ASSERT_EQ(r, 0);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
  io_uring_queue_exit(&ring);
}

TEST_F(RedisWait, CancelBeforeTheGrantOwnsNothingAndEndsThePopAtOnce) {
  make(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  // Let the thread reach its BLPOP: the server shows it blocked.
  ASSERT_TRUE(g_server->await_blocked(1));
  const uint64_t before = g_server->unblock_calls();
  const auto t0 = Clock::now();
  EXPECT_EQ(shmsem_waiter_cancel(&w, &l), -ECANCELED);
  const auto took = Clock::now() - t0;
  EXPECT_GT(g_server->unblock_calls(), before)
      << "the canceller ends the BLPOP";
  // A BLPOP lasts a third of the waiter TTL (2 s): the cancel did not wait
  // for it (a bound, not a race: typically a few round trips).
  EXPECT_LT(took, milliseconds(600));
  printf("remote waiter cancel took %lld us\n",
         (long long)std::chrono::duration_cast<std::chrono::microseconds>(took)
             .count());
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINVAL) << "unused again";
  const struct shmsem_stat st = pool_stat();
  EXPECT_EQ(st.waiting, 0u);
  EXPECT_EQ(st.cancellations, 1u);
  EXPECT_EQ(st.held, 1u);
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  EXPECT_EQ(pool_stat().available, 1u) << "nothing went to the cancelled one";
}

TEST_F(RedisWait, CancelAfterTheGrantReturnsTheLease) {
  make(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  // The release grants the waiter on the server, in the same function
  // call: from here on the grant has won, whatever the thread has seen.
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  const struct shmsem_stat st = pool_stat();
  ASSERT_EQ(st.waiting, 0u);
  ASSERT_EQ(st.held, 1u);
  ASSERT_EQ(shmsem_waiter_cancel(&w, &l), 0) << "the grant won";
  EXPECT_EQ(pool_stat().cancellations, 0u);
  EXPECT_EQ(shmsem_lease_renew(s_, &l), 0) << "held, and kept alive";
  EXPECT_EQ(shmsem_release(s_, &l), 0);
  EXPECT_EQ(pool_stat().available, 1u);
}

// Cancel and grant in whatever order the machine picks, many times: the
// server decides each one, and the permit is never lost nor doubled (the
// cancel returns the lease exactly when the grant won).
TEST_F(RedisWait, CancelRacingTheGrantNeverLosesNorDoublesThePermit) {
  make(1);
  int won = 0, withdrawn = 0;
  for (int i = 0; i < 40; i++) {
    shmsem_lease_t held, l;
    ASSERT_EQ(shmsem_acquire(s_, &held), 0);
    shmsem_waiter_t w;
    ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
    std::thread releaser([&] { EXPECT_EQ(shmsem_release(s_, &held), 0); });
    const int r = shmsem_waiter_cancel(&w, &l);
    releaser.join();
    if (r == 0) {
      won++;
      ASSERT_EQ(shmsem_release(s_, &l), 0) << i;
    } else {
      ASSERT_EQ(r, -ECANCELED) << i;
      withdrawn++;
    }
    const struct shmsem_stat st = pool_stat();
    ASSERT_EQ(st.available, 1u) << i;
    ASSERT_EQ(st.waiting, 0u) << i;
  }
  EXPECT_EQ(shmsem_check(s_), 0);
  printf("cancel vs grant: the grant won %d times, the cancel %d\n", won,
         withdrawn);
}

TEST_F(RedisWait, DeadlineEndsTheWaitOwningNothing) {
  make(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_waiter_t w;
  const timespec deadline = mono_in(200 * kMs);
  ASSERT_EQ(shmsem_waiter_start(s_, &w, &deadline, &l), SHMSEM_QUEUED);
  timespec at;
  ASSERT_EQ(shmsem_waiter_wake_by(&w, &at), 0);
  EXPECT_GE(ts_ns(at), ts_ns(deadline)) << "the thread ends it at the deadline";
  ASSERT_TRUE(await_word(&w));
  EXPECT_GE(ts_ns(mono_in(0)), ts_ns(deadline));
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -ETIMEDOUT);
  const struct shmsem_stat st = pool_stat();
  EXPECT_EQ(st.timeouts, 1u);
  EXPECT_EQ(st.waiting, 0u);
  // A deadline already past and no permit free: at once, nothing queued.
  const timespec past = mono_in(0);
  EXPECT_EQ(shmsem_waiter_start(s_, &w, &past, &l), -ETIMEDOUT);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINVAL);
  ASSERT_EQ(shmsem_release(s_, &held), 0);
}

TEST_F(RedisWait, ShutdownWakesTheWaiterWithEshutdown) {
  make(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_shutdown(s_), 1);
  ASSERT_TRUE(await_word(&w));
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_release(s_, &held), 0);
}

TEST_F(RedisWait, GarbageAndStaleWaitersAreRefusedNotFollowed) {
  make(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_waiter_t w, stale;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  // A remote waiter's bytes: magic, index | generation << 32, pid.
  const shmsem_waiter_t live = w;
  std::vector<shmsem_waiter_t> bad;
  shmsem_waiter_t x = live;
  x.__opaque[1] += 1000;  // another index, none there
  bad.push_back(x);
  x = live;
  x.__opaque[1] ^= uint64_t(1) << 40;  // another generation
  bad.push_back(x);
  x = live;
  x.__opaque[2] ^= 0x4000;  // another process's
  bad.push_back(x);
  x = live;
  x.__opaque[1] = UINT64_MAX;
  bad.push_back(x);
  memset(&x, 0xff, sizeof x);  // all ones: nobody's
  bad.push_back(x);
  for (const shmsem_waiter_t &b : bad) {
    shmsem_waiter_t c = b;
    uint32_t *word, value;
    timespec at;
    EXPECT_EQ(shmsem_waiter_futex(&c, &word, &value), -EINVAL);
    EXPECT_EQ(shmsem_waiter_wake_by(&c, &at), -EINVAL);
    EXPECT_EQ(shmsem_waiter_poll(&c, &l), -EINVAL);
    EXPECT_EQ(shmsem_waiter_cancel(&c, &l), -EINVAL);
  }
  EXPECT_EQ(pool_stat().waiting, 1u) << "none of them touched the real one";
  stale = w;
  ASSERT_EQ(shmsem_waiter_cancel(&w, &l), -ECANCELED);
  EXPECT_EQ(shmsem_waiter_poll(&stale, &l), -EINVAL) << "completed: stale";
  EXPECT_EQ(shmsem_waiter_cancel(&stale, &l), -EINVAL);
  // Its record is reused by the next waiter; the stale copy still names
  // the old generation.
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_poll(&stale, &l), -EINVAL);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINPROGRESS);
  ASSERT_EQ(shmsem_waiter_cancel(&w, &l), -ECANCELED);
  ASSERT_EQ(shmsem_release(s_, &held), 0);
}

TEST_F(RedisWait, ForkChildCopyIsNotQueuedButItsOwnWaitersWork) {
  make(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  // Fork once the parent's waiter thread is in its BLPOP, not while it
  // connects: a thread inside malloc at fork leaves the allocator's lock
  // held in the child. glibc's malloc resets its locks in the child; GCC
  // 12's AddressSanitizer allocator does not, and the child's own waiter
  // thread then hung at its start (make test's ASan suite, once).
  ASSERT_TRUE(g_server->await_blocked(1));
  Children kids;
  const pid_t child = kids.spawn([&] {
    shmsem_lease_t cl;
    uint32_t *word, value;
    timespec at;
    if (shmsem_waiter_futex(&w, &word, &value) != -EINVAL) return 1;
    if (shmsem_waiter_wake_by(&w, &at) != -EINVAL) return 2;
    if (shmsem_waiter_poll(&w, &cl) != -EINVAL) return 3;
    if (shmsem_waiter_cancel(&w, &cl) != -EINVAL) return 4;
    // The inherited handle queues waiters of the child's own.
    shmsem_waiter_t mine;
    if (shmsem_waiter_start(s_, &mine, nullptr, &cl) != SHMSEM_QUEUED) return 5;
    if (shmsem_waiter_cancel(&mine, &cl) != -ECANCELED) return 6;
    return 0;
  });
  EXPECT_EQ(kids.wait(child), 0);
  EXPECT_EQ(pool_stat().waiting, 1u) << "the parent's waiter is untouched";
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  ASSERT_TRUE(await_word(&w));
  ASSERT_EQ(shmsem_waiter_poll(&w, &l), 0);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
}

TEST_F(RedisWait, ManyWaitersCompleteInFifoOrderWithAThreadEach) {
  constexpr int kWaiters = 100;
  make(1, 256);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  const size_t threads_before = thread_count();
  const long rss_before = rss_kb();
  std::vector<shmsem_waiter_t> ws(kWaiters);
  shmsem_lease_t l;
  const auto t0 = Clock::now();
  for (auto &w : ws) {
    ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  }
  const auto started = Clock::now() - t0;
  EXPECT_EQ(thread_count(), threads_before + kWaiters);
  EXPECT_EQ(pool_stat().waiting, uint32_t(kWaiters));
  // Each blocks in BLPOP on a connection of its own.
  EXPECT_TRUE(g_server->await_blocked(kWaiters));
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(started).count();
  printf("%d remote waiters started in %lld us, resident memory +%ld kB\n",
         kWaiters, (long long)us, rss_kb() - rss_before);
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  for (int i = 0; i < kWaiters; i++) {
    ASSERT_TRUE(await_word(&ws[i])) << i;
    ASSERT_EQ(shmsem_waiter_poll(&ws[i], &l), 0) << i;
    if (i + 1 < kWaiters) {  // FIFO: the next one is not granted yet
      EXPECT_EQ(shmsem_waiter_poll(&ws[i + 1], &held), -EINPROGRESS) << i;
    }
    ASSERT_EQ(shmsem_release(s_, &l), 0);
  }
  EXPECT_TRUE(wait_until([&] { return thread_count() == threads_before; }));
  EXPECT_EQ(pool_stat().available, 1u);
}

TEST_F(RedisWait, DetachCancelsWaitersStillQueued) {
  make(1);
  shmsem_t *other = nullptr;
  ASSERT_EQ(shmsem_open(name_.c_str(), 0, &other), 0);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(other, &w, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(pool_stat().waiting, 1u);
  shmsem_detach(other);
  EXPECT_EQ(pool_stat().waiting, 0u);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINVAL) << "stale after detach";
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  EXPECT_EQ(pool_stat().available, 1u);
}

// A server that does not answer (SIGSTOP): the cancel cannot reach it,
// gives up with -ECOMM within its I/O timeouts (1 s each with a 1 s TTL),
// and the place it left lapses on the server within the waiter TTL.
TEST_F(RedisWait, CancelWithTheServerPausedGivesUpAndThePlaceLapses) {
  make(1, 0, 1000);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s_, &w, nullptr, &l), SHMSEM_QUEUED);
  g_server->pause();
  const auto t0 = Clock::now();
  EXPECT_EQ(shmsem_waiter_cancel(&w, &l), -ECOMM);
  const auto took = Clock::now() - t0;
  EXPECT_LT(took, milliseconds(6000));
  printf("cancel with the server paused: %lld ms\n",
         (long long)std::chrono::duration_cast<milliseconds>(took).count());
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINVAL) << "unused again";
  g_server->resume();
  EXPECT_TRUE(wait_until([&] {
    struct shmsem_stat st {};
    return shmsem_stat(s_, &st) == 0 && st.waiting == 0;
  }));
  (void)shmsem_release(s_, &held);  // may have expired while paused
}

TEST_F(RedisWait, BadArgumentsAndReadOnlyHandlesAreRefused) {
  make(2);
  shmsem_waiter_t w;
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_waiter_start_n(s_, &w, 0, nullptr, &l), -EINVAL);
  EXPECT_EQ(shmsem_waiter_start_n(s_, &w, 3, nullptr, &l), -EINVAL);
  const timespec bad{0, 1'000'000'000};
  EXPECT_EQ(shmsem_waiter_start(s_, &w, &bad, &l), -EINVAL);
  EXPECT_EQ(shmsem_waiter_start(s_, &w, nullptr, nullptr), -EINVAL);
  shmsem_t *ro = nullptr;
  ASSERT_EQ(shmsem_open(name_.c_str(), SHMSEM_RDONLY, &ro), 0);
  EXPECT_EQ(shmsem_waiter_start(ro, &w, nullptr, &l), -EBADF);
  shmsem_detach(ro);
  ASSERT_EQ(shmsem_waiter_start_n(s_, &w, 2, nullptr, &l), 0);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
}

}  // namespace
}  // namespace shmsem::test
