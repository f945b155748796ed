// The Redis backend against a real redis-server (redis_server.h): one
// server per test binary run, started on a unix socket and a free loopback
// port in a temporary directory, stopped at the end. Races are decided by
// the server: where a test needs an order (a cancel before or after a
// grant) it issues the functions' calls itself in that order. Waits for
// something that takes a TTL are bounded by a deadline, never asserted
// with a fixed sleep.
#include <errno.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>
#include <shmsem/shmsem.hpp>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "conn.h"
#include "endpoint.h"
#include "redis_server.h"
#include "support/process.h"

namespace shmsem::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

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

// A pool on the test server, unlinked at the end.
class RedisPool : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_server) GTEST_SKIP() << "redis-server could not be started";
    if (!g_server->running() && !g_server->start())
      GTEST_SKIP() << "redis-server: " << g_server->error();
    g_server->resume();
    pool_ = unique_pool("p");
    name_ = g_server->unix_name(pool_);
  }
  void TearDown() override {
    if (g_server) g_server->resume();
    if (s_) shmsem_detach(s_);
    if (g_server && g_server->running()) shmsem_unlink(name_.c_str());
  }
  // Create the pool: `permits`, a TTL of ttl_ms (0: the default).
  void make(uint32_t permits, uint32_t ttl_ms = 0, uint32_t max_permits = 0) {
    shmsem_config cfg{};
    cfg.permits = permits;
    cfg.max_permits = max_permits;
    cfg.lease_ttl_ms = ttl_ms;
    ASSERT_EQ(shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &s_), 0);
  }
  struct shmsem_stat pool_stat() {
    struct shmsem_stat st {};
    EXPECT_EQ(shmsem_stat(s_, &st), 0);
    return st;
  }
  // Wait (bounded) until `waiting` waiters queue.
  bool await_waiting(uint32_t waiting) {
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < until) {
      struct shmsem_stat st {};
      if (shmsem_stat(s_, &st) == 0 && st.waiting == waiting) return true;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return false;
  }
  // A function of the library called by hand: FCALL fn 1 base id args...
  std::vector<std::string> fcall(const std::string &fn,
                                 const std::vector<std::string> &args) {
    const std::string base = "shmsem:{" + pool_ + "}";
    std::vector<std::string> id = g_server->command({"HGET", base, "id"});
    std::vector<std::string> argv{"FCALL", fn, "1", base, id.at(0)};
    argv.insert(argv.end(), args.begin(), args.end());
    return g_server->command(argv);
  }

  std::string pool_, name_;
  shmsem_t *s_ = nullptr;
};

TEST(RedisNames, BadNamesAreInvalid) {
  shmsem_config cfg{};
  cfg.permits = 1;
  shmsem_t *s = nullptr;
  for (const char *name :
       {"redis://", "redis:///p", "redis://h:0/p", "redis://h:99999/p",
        "redis://h/", "redis://h/a{b}", "redis://h/a:b", "redis://[::1/p",
        "redis+unix://relative?pool=p", "redis+unix:///tmp/s",
        "redis+unix:///tmp/s?pool=", "redis+unix:///tmp/s?x=p"}) {
    EXPECT_EQ(shmsem_create(name, &cfg, 0, &s), -EINVAL) << name;
    EXPECT_EQ(s, nullptr);
  }
}

TEST(RedisNames, ParsedIntoServerAndPool) {
  shmsem::detail::Endpoint ep;
  ASSERT_EQ(shmsem::detail::parse_endpoint("redis://db1/jobs", &ep), 0);
  EXPECT_EQ(ep.host, "db1");
  EXPECT_EQ(ep.port, 6379);
  EXPECT_EQ(ep.base_key(), "shmsem:{jobs}");
  ASSERT_EQ(shmsem::detail::parse_endpoint("REDIS://[::1]:7000/a.b-c_d", &ep),
            0);
  EXPECT_EQ(ep.host, "::1");
  EXPECT_EQ(ep.port, 7000);
  EXPECT_EQ(ep.pool, "a.b-c_d");
  ASSERT_EQ(shmsem::detail::parse_endpoint(
                "redis+unix:///run/redis/redis.sock?pool=gpus", &ep),
            0);
  EXPECT_EQ(ep.unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(ep.pool, "gpus");
  EXPECT_EQ(shmsem::detail::parse_endpoint(
                ("redis://h/" + std::string(201, 'p')).c_str(), &ep),
            -EINVAL);
}

TEST(RedisNames, UnreachableServerIsECOMM) {
  shmsem_t *s = nullptr;
  EXPECT_EQ(shmsem_open("redis+unix:///nonexistent/redis.sock?pool=p", 0, &s),
            -ECOMM);
  EXPECT_EQ(s, nullptr);
}

TEST_F(RedisPool, CreateOpenUnlink) {
  make(3, 0, 5);
  shmsem_config cfg{};
  cfg.permits = 3;
  cfg.max_permits = 5;
  shmsem_t *again = nullptr;
  EXPECT_EQ(shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &again), -EEXIST);
  cfg.permits = 4;
  EXPECT_EQ(shmsem_create(name_.c_str(), &cfg, 0, &again), -EEXIST);
  cfg.permits = 3;
  ASSERT_EQ(shmsem_create(name_.c_str(), &cfg, 0, &again), 0);
  shmsem_detach(again);
  // The same pool over TCP.
  const std::string tcp = g_server->tcp_name(pool_);
  ASSERT_EQ(shmsem_open(tcp.c_str(), 0, &again), 0);
  struct shmsem_stat st {};
  ASSERT_EQ(shmsem_stat(again, &st), 0);
  EXPECT_EQ(st.permits, 3u);
  EXPECT_EQ(st.max_permits, 5u);
  EXPECT_EQ(st.available, 3u);
  shmsem_detach(again);
  EXPECT_EQ(shmsem_unlink(tcp.c_str()), 0);
  EXPECT_EQ(shmsem_unlink(tcp.c_str()), -ENOENT);
  EXPECT_EQ(shmsem_open(name_.c_str(), 0, &again), 0 - ENOENT);
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_try_acquire(s_, &l), -EIDRM);
}

TEST_F(RedisPool, LocalOnlyConfigIsRefused) {
  shmsem_config cfg{};
  cfg.permits = 1;
  shmsem_t *s = nullptr;
  cfg.policy = SHMSEM_POLICY_BOUNDED;
  EXPECT_EQ(shmsem_create(name_.c_str(), &cfg, 0, &s), -EOPNOTSUPP);
}

TEST_F(RedisPool, ReleaseExactlyOnce) {
  make(1);
  shmsem_lease_t l, other;
  ASSERT_EQ(shmsem_acquire(s_, &l), 0);
  EXPECT_EQ(shmsem_try_acquire(s_, &other), -EAGAIN);
  EXPECT_EQ(shmsem_lease_resource(&l), 0u);
  shmsem_lease_t forged = l;
  forged.sem ^= 1;
  EXPECT_EQ(shmsem_release(s_, &forged), -EINVAL);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
  EXPECT_EQ(shmsem_release(s_, &l), -EALREADY);
  EXPECT_EQ(shmsem_lease_renew(s_, &l), -EALREADY);
  EXPECT_EQ(pool_stat().available, 1u);
  EXPECT_EQ(shmsem_check(s_), 0);
}

TEST_F(RedisPool, FifoAcrossProcesses) {
  make(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  constexpr int kChildren = 4;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  Children kids;
  for (int i = 0; i < kChildren; i++) {
    kids.spawn([&, i] {
      shmsem_lease_t l;
      if (shmsem_acquire(s_, &l) != 0) return 1;
      const char c = char('0' + i);
      if (write(fds[1], &c, 1) != 1) return 2;
      return shmsem_release(s_, &l) == 0 ? 0 : 3;
    });
    ASSERT_TRUE(await_waiting(uint32_t(i + 1)));  // queued in this order
  }
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  std::string order;
  for (int i = 0; i < kChildren; i++) {
    char c;
    ASSERT_EQ(read(fds[0], &c, 1), 1);
    order += c;
  }
  EXPECT_EQ(order, "0123");
  EXPECT_TRUE(kids.wait_all_ok());
  close(fds[0]);
  close(fds[1]);
}

TEST_F(RedisPool, WeightedHeadOfLineIsNotOvertaken) {
  make(3);
  shmsem_lease_t two;
  ASSERT_EQ(shmsem_acquire_n(s_, 2, &two), 0);
  std::vector<std::string> r = fcall("shmsem_acquire", {"2", "1", "1"});
  ASSERT_EQ(r.at(0), "queued");  // needs 2, 1 free: waits at the head
  shmsem_lease_t one;
  EXPECT_EQ(shmsem_try_acquire(s_, &one), -EAGAIN);  // no barging
  ASSERT_EQ(shmsem_release(s_, &two), 0);
  // The head's grant is in its mailbox.
  const std::string base = "shmsem:{" + pool_ + "}";
  const std::string id = g_server->command({"HGET", base, "id"}).at(0);
  r = g_server->command({"LPOP", base + ":mb:" + id + ":" + r.at(1)});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].substr(0, 2), "G ");
  EXPECT_EQ(pool_stat().held, 2u);
  EXPECT_EQ(shmsem_acquire_n(s_, 4, &one), -EINVAL);
}

// The server orders them: the grant first, then the cancel, which returns
// the lease; or the cancel first, which leaves owning nothing.
TEST_F(RedisPool, CancelAfterGrantReturnsTheLease) {
  make(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  std::vector<std::string> q = fcall("shmsem_acquire", {"1", "1", "1"});
  ASSERT_EQ(q.at(0), "queued");
  ASSERT_EQ(shmsem_release(s_, &held), 0);  // grants the waiter
  std::vector<std::string> c = fcall("shmsem_cancel", {q.at(1), "timeout"});
  ASSERT_EQ(c.at(0), "granted");
  EXPECT_EQ(pool_stat().held, 1u);
  EXPECT_EQ(pool_stat().timeouts, 0u);
  EXPECT_EQ(fcall("shmsem_release", {c.at(1), c.at(2)}).at(0), "ok");
}

TEST_F(RedisPool, CancelBeforeGrantOwnsNothing) {
  make(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  std::vector<std::string> q = fcall("shmsem_acquire", {"1", "1", "1"});
  ASSERT_EQ(q.at(0), "queued");
  EXPECT_EQ(fcall("shmsem_cancel", {q.at(1), "cancel"}).at(0), "canceled");
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  const struct shmsem_stat st = pool_stat();
  EXPECT_EQ(st.available, 1u);
  EXPECT_EQ(st.cancellations, 1u);
}

TEST_F(RedisPool, TimeoutOwnsNothing) {
  make(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  const auto t0 = Clock::now();
  EXPECT_EQ(shmsem_acquire_for(s_, 200000000, &l), -ETIMEDOUT);
  EXPECT_GE(Clock::now() - t0, milliseconds(190));
  EXPECT_EQ(shmsem_acquire_for(s_, 0, &l), -ETIMEDOUT);
  const struct shmsem_stat st = pool_stat();
  EXPECT_EQ(st.timeouts, 1u);
  EXPECT_EQ(st.waiting, 0u);
  ASSERT_EQ(shmsem_release(s_, &held), 0);
}

TEST_F(RedisPool, ShutdownFailsWaiters) {
  make(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  int result = 0;
  std::thread t([&] {
    shmsem_lease_t l;
    result = shmsem_acquire(s_, &l);
  });
  ASSERT_TRUE(await_waiting(1));
  EXPECT_EQ(shmsem_shutdown(s_), 1);
  t.join();
  EXPECT_EQ(result, -ESHUTDOWN);
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_try_acquire(s_, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_release(s_, &held), 0);  // still valid after shutdown
}

// SIGUSR1's handler for the interruptible-wait tests: counts its runs.
std::atomic<int> g_usr1_runs{0};
void on_usr1(int) { g_usr1_runs.fetch_add(1); }

// The handler installed with SA_RESTART (a restartable wait must still end
// when the flag asks for it), and removed again.
class Usr1Handler {
 public:
  Usr1Handler() {
    g_usr1_runs = 0;
    struct sigaction sa {};
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, &old_);
  }
  ~Usr1Handler() { sigaction(SIGUSR1, &old_, nullptr); }

 private:
  struct sigaction old_ {};
};

TEST_F(RedisPool, SignalEndsAnInterruptibleWaitWithEintrOwningNothing) {
  make(1);
  Usr1Handler handler;
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  const uint64_t unblocks = g_server->unblock_calls();
  std::atomic<int> result{1};
  shmsem_lease_t l{};
  std::thread t([&] {
    result =
        shmsem_acquire_ex(s_, nullptr, nullptr, SHMSEM_WAIT_INTERRUPTIBLE, &l);
  });
  ASSERT_TRUE(g_server->await_blocked(1));
  // A signal that lands while the waiter is awake between two steps does
  // not end the wait (shmsem_acquire_ex(3)); one that lands in its BLPOP
  // does. So signal until the call returns: only its outcome is checked.
  for (int i = 0; i < 200 && result == 1; i++) {
    pthread_kill(t.native_handle(), SIGUSR1);
    for (int k = 0; k < 50 && result == 1; k++)
      std::this_thread::sleep_for(milliseconds(1));
  }
  if (result == 1) {  // the signals did not end it: end it, and fail
    ASSERT_EQ(shmsem_release(s_, &held), 0);
    t.join();
    const int granted = result.load();  // after the release: the lease
    if (granted == 0) {
      EXPECT_EQ(shmsem_release(s_, &l), 0);
    }
    FAIL() << "no signal ended the interruptible wait";
  }
  t.join();
  EXPECT_EQ(result, -EINTR);
  EXPECT_GE(g_usr1_runs.load(), 1);
  EXPECT_GT(g_server->unblock_calls(), unblocks)
      << "the waiter ended its own BLPOP";
  EXPECT_TRUE(g_server->await_blocked(0));
  const struct shmsem_stat st = pool_stat();
  EXPECT_EQ(st.waiting, 0u);
  EXPECT_EQ(st.cancellations, 1u);
  EXPECT_EQ(st.held, 1u);
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  EXPECT_EQ(pool_stat().available, 1u) << "nothing went to the interrupted";
  EXPECT_EQ(shmsem_check(s_), 0);
}

TEST_F(RedisPool, CancelHandleEndsABlockedWaitAtOnceAndCanBeUsedAgain) {
  make(1);
  shmsem_lease_t held, l{};
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  std::atomic<int> result{1};
  std::thread t(
      [&] { result = shmsem_acquire_ex(s_, nullptr, &cancel, 0, &l); });
  ASSERT_TRUE(g_server->await_blocked(1));  // in its BLPOP, the handle armed
  const uint64_t unblocks = g_server->unblock_calls();
  const auto t0 = Clock::now();
  shmsem_cancel(&cancel);
  t.join();
  const auto took = Clock::now() - t0;
  EXPECT_EQ(result, -ECANCELED);
  EXPECT_GT(g_server->unblock_calls(), unblocks)
      << "the waiter ended its own BLPOP";
  printf("remote blocking cancel took %lld us\n",
         (long long)std::chrono::duration_cast<std::chrono::microseconds>(took)
             .count());
  struct shmsem_stat st = pool_stat();
  EXPECT_EQ(st.waiting, 0u);
  EXPECT_EQ(st.cancellations, 1u);
  // Reset, the same handle serves a wait that the grant ends; a fire after
  // that wait (the handle disarmed, its eventfd closed) touches nothing.
  shmsem_cancel_reset(&cancel);
  result = 1;
  std::thread t2(
      [&] { result = shmsem_acquire_ex(s_, nullptr, &cancel, 0, &l); });
  ASSERT_TRUE(g_server->await_blocked(1));
  ASSERT_EQ(shmsem_release(s_, &held), 0);  // grants the waiter
  t2.join();
  ASSERT_EQ(result, 0);
  shmsem_cancel(&cancel);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
  st = pool_stat();
  EXPECT_EQ(st.available, 1u);
  EXPECT_EQ(st.cancellations, 1u);
  EXPECT_EQ(shmsem_check(s_), 0);
}

timespec mono_after_ms(int ms) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += long(ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  return ts;
}

// A wait that can be ended early (cancel handle, interruptible) keeps its
// deadline when the server stops answering, even when it is cancelled or
// interrupted then: every call it makes is bounded by the deadline and
// its grace (250 ms), none by the handle's 5 s call timeout (before, such
// waits ended 5-6 s past a 1 s deadline).
TEST_F(RedisPool, EndableWaitKeepsItsDeadlineWithTheServerStopped) {
  make(1);
  Usr1Handler handler;
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  for (int how = 0; how < 3; how++) {  // nothing, cancel, signal
    shmsem_cancel_t cancel;
    shmsem_cancel_init(&cancel);
    std::atomic<int> result{1};
    shmsem_lease_t l{};
    const timespec at = mono_after_ms(1000);
    const auto t0 = Clock::now();
    std::thread t([&] {
      result =
          shmsem_acquire_ex(s_, &at, &cancel, SHMSEM_WAIT_INTERRUPTIBLE, &l);
    });
    ASSERT_TRUE(g_server->await_blocked(1)) << how;
    g_server->pause();
    if (how == 1) shmsem_cancel(&cancel);
    // Until the call returns: a signal that lands between two of its
    // steps is not an interruption (shmsem_acquire_ex(3)).
    for (int i = 0; how == 2 && i < 400 && result == 1; i++) {
      pthread_kill(t.native_handle(), SIGUSR1);
      std::this_thread::sleep_for(milliseconds(5));
    }
    t.join();
    const auto took = Clock::now() - t0;
    g_server->resume();
    EXPECT_TRUE(result == -ETIMEDOUT || result == -ECOMM)
        << how << " " << result;
    // The deadline plus two graces is 1.5 s; the bound leaves room for a
    // loaded machine and still fails the 6 s the 5 s call timeout gave.
    EXPECT_LT(took, milliseconds(3000)) << how;
    ASSERT_TRUE(g_server->await_blocked(0));
  }
  EXPECT_EQ(shmsem_release(s_, &held), 0);
}

// pthread_cancel does not cut a remote acquire short: it could take effect
// only at the caller's next cancellation point, after the call left the queue
// (before, the thread died in its poll with its place still queued, its
// connection open, its handle armed, or the handle's mutex held).
void *acquire_then_testcancel(void *arg) {
  auto *a = static_cast<std::pair<shmsem_t *, std::atomic<int> *> *>(arg);
  shmsem_lease_t l;
  const timespec at = mono_after_ms(300);
  a->second->store(shmsem_acquire_until(a->first, &at, &l));
  // The request pending once the call returned is not acted on: acting on
  // it unwinds the thread, which AddressSanitizer's runtime mishandles
  // (tests/liveness_test.cc); the call's end is what is checked.
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
  return nullptr;
}

TEST_F(RedisPool, PthreadCancelTakesEffectAfterTheRemoteWait) {
  make(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  std::atomic<int> result{1};
  std::pair<shmsem_t *, std::atomic<int> *> arg{s_, &result};
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, nullptr, acquire_then_testcancel, &arg), 0);
  ASSERT_TRUE(g_server->await_blocked(1));
  ASSERT_EQ(pthread_cancel(t), 0);
  ASSERT_EQ(pthread_join(t, nullptr), 0);
  EXPECT_EQ(result, -ETIMEDOUT) << "the call ran to its end";
  EXPECT_EQ(pool_stat().waiting, 0u) << "no place left queued";
  EXPECT_EQ(shmsem_release(s_, &held), 0);
  EXPECT_EQ(shmsem_check(s_), 0);
}

TEST_F(RedisPool, SignalDoesNotEndAWaitWithoutTheInterruptibleFlag) {
  make(1);
  Usr1Handler handler;
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  std::atomic<int> result{1};
  shmsem_lease_t l{};
  std::thread t(
      [&] { result = shmsem_acquire_ex(s_, nullptr, nullptr, 0, &l); });
  ASSERT_TRUE(g_server->await_blocked(1));
  // Five signals, each handled before the next is sent (a pending one
  // would absorb the next).
  for (int i = 1; i <= 5; i++) {
    pthread_kill(t.native_handle(), SIGUSR1);
    for (int k = 0; k < 5000 && g_usr1_runs.load() < i; k++)
      std::this_thread::sleep_for(milliseconds(1));
    ASSERT_EQ(g_usr1_runs.load(), i);
  }
  EXPECT_EQ(result, 1) << "still waiting";
  EXPECT_EQ(pool_stat().waiting, 1u);
  ASSERT_EQ(shmsem_release(s_, &held), 0);  // grants the waiter
  t.join();
  ASSERT_EQ(result, 0);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
}

TEST_F(RedisPool, GrowingHandsPermitsToTheQueue) {
  make(1, 0, 2);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  int result = 1;
  std::thread t([&] {
    shmsem_lease_t l;
    result = shmsem_acquire(s_, &l);
  });
  ASSERT_TRUE(await_waiting(1));
  EXPECT_EQ(shmsem_set_permits(s_, 2), 0);
  t.join();
  EXPECT_EQ(result, 0);
  EXPECT_EQ(shmsem_set_permits(s_, 3), -EINVAL);
}

TEST_F(RedisPool, FencingGenerationAndSequenceGrow) {
  make(1);
  shmsem_lease_t a, b;
  uint64_t seq_a = 0, seq_b = 0;
  ASSERT_EQ(shmsem_acquire(s_, &a), 0);
  ASSERT_EQ(shmsem_lease_sequence(s_, &a, &seq_a), 0);
  ASSERT_EQ(shmsem_release(s_, &a), 0);
  ASSERT_EQ(shmsem_acquire(s_, &b), 0);
  ASSERT_EQ(shmsem_lease_sequence(s_, &b, &seq_b), 0);
  EXPECT_EQ(a.index, b.index);
  EXPECT_GT(b.gen, a.gen);
  EXPECT_GT(seq_b, seq_a);
  EXPECT_EQ(shmsem_lease_sequence(s_, &a, &seq_a), -EALREADY);
  EXPECT_EQ(shmsem_release(s_, &b), 0);
}

// The C++ lease shows the same numbers (shmsem.hpp).
TEST_F(RedisPool, CxxLeaseShowsItsFencingNumbers) {
  make(1);
  auto sem = shmsem::semaphore::open(name_);
  shmsem::lease a = sem.acquire();
  const uint64_t gen_a = a.generation(), seq_a = a.sequence();
  uint64_t seq = 0;
  ASSERT_EQ(shmsem_lease_sequence(sem.native_handle(), &a.token(), &seq), 0);
  EXPECT_EQ(seq_a, seq);
  EXPECT_EQ(gen_a, a.token().gen);
  a.release();
  shmsem::lease b = sem.acquire();
  EXPECT_GT(b.generation(), gen_a);
  EXPECT_GT(b.sequence(), seq_a);
}

// Generations and the sequence belong to the pool, not its name: a pool
// removed and created anew starts them again (shmsem(7), "Across hosts"),
// and what tells the two pools apart is inspect's creation time. The TTL
// inspect reports is the one the pool was created with.
TEST_F(RedisPool, RecreatedPoolRestartsFencingNumbersAndHasItsOwnCreation) {
  make(1, 1500);
  shmsem_inspection first{};
  ASSERT_EQ(shmsem_inspect(s_, &first, nullptr, 0, nullptr, 0), 0);
  EXPECT_EQ(first.lease_ttl_ms, 1500u);
  shmsem_lease_t a;
  uint64_t seq_a = 0;
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(shmsem_acquire(s_, &a), 0);
    if (i < 2) {
      ASSERT_EQ(shmsem_release(s_, &a), 0);
    }
  }
  ASSERT_EQ(shmsem_lease_sequence(s_, &a, &seq_a), 0);
  ASSERT_EQ(shmsem_unlink(name_.c_str()), 0);
  shmsem_detach(s_);
  s_ = nullptr;
  // The creation time is in whole ms of the server's clock: let it move.
  std::this_thread::sleep_for(milliseconds(2));
  make(1);
  shmsem_inspection second{};
  ASSERT_EQ(shmsem_inspect(s_, &second, nullptr, 0, nullptr, 0), 0);
  EXPECT_EQ(second.lease_ttl_ms, SHMSEM_DEFAULT_LEASE_TTL_MS);
  EXPECT_NE(second.created_realtime_ns, first.created_realtime_ns);
  shmsem_lease_t b;
  uint64_t seq_b = 0;
  ASSERT_EQ(shmsem_acquire(s_, &b), 0);
  ASSERT_EQ(shmsem_lease_sequence(s_, &b, &seq_b), 0);
  EXPECT_EQ(b.index, a.index);
  EXPECT_LT(b.gen, a.gen) << "a resource must not compare across creations";
  EXPECT_LT(seq_b, seq_a);
  EXPECT_EQ(shmsem_release(s_, &b), 0);
}

TEST_F(RedisPool, InspectShowsHoldersAndQueueInOrder) {
  make(2);
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire_n(s_, 2, &l), 0);
  ASSERT_EQ(fcall("shmsem_acquire", {"1", "1", "77"}).at(0), "queued");
  ASSERT_EQ(fcall("shmsem_acquire", {"2", "1", "78"}).at(0), "queued");
  shmsem_inspection in{};
  shmsem_holder h[2];
  shmsem_waiter_info w[2];
  ASSERT_EQ(shmsem_inspect(s_, &in, h, 2, w, 2), 0);
  EXPECT_EQ(in.nholders, 1u);
  EXPECT_EQ(h[0].weight, 2u);
  EXPECT_EQ(h[0].pid, getpid());
  EXPECT_EQ(in.nwaiters, 2u);
  EXPECT_EQ(w[0].pid, 77);
  EXPECT_EQ(w[1].pid, 78);
  EXPECT_EQ(w[1].weight, 2u);
  EXPECT_LT(w[0].ticket, w[1].ticket);
}

TEST_F(RedisPool, FlushedLibraryIsLoadedAgain) {
  make(1);
  ASSERT_EQ(g_server->command({"FUNCTION", "FLUSH"}).at(0), "OK");
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(s_, &l), 0);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
}

// A waiter whose connection the server kills goes on waiting on a new one:
// no ghost in the queue, and the grant still reaches it.
TEST_F(RedisPool, KilledConnectionsReconnectWithoutGhosts) {
  make(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  int result = 1;
  std::thread t([&] {
    shmsem_lease_t l;
    result = shmsem_acquire(s_, &l);
    if (result == 0) result = shmsem_release(s_, &l);
  });
  ASSERT_TRUE(await_waiting(1));
  g_server->command({"CLIENT", "KILL", "TYPE", "normal"});
  EXPECT_TRUE(await_waiting(1));  // still one, the same
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  t.join();
  EXPECT_EQ(result, 0);
  EXPECT_EQ(pool_stat().waiting, 0u);
  EXPECT_EQ(shmsem_check(s_), 0);
}

// shmsem_list_at on a server: every pool created and not removed, once,
// sorted, read; 300 pools and their other keys take several SCAN steps of
// the library's shmsem_list (256 keys each).
TEST_F(RedisPool, ListAtFindsAServersPoolsAcrossScanSteps) {
  constexpr int kPools = 300;
  const std::string tag = unique_pool("many");
  const std::string where = "redis+unix://" + g_server->socket_path();
  std::vector<std::string> names;
  shmsem_config cfg{};
  cfg.permits = 2;
  for (int i = 0; i < kPools; i++) {
    char suffix[8];
    snprintf(suffix, sizeof suffix, "-%03d", i);
    names.push_back(g_server->unix_name(tag + suffix));
    shmsem_t *s = nullptr;
    ASSERT_EQ(shmsem_create(names.back().c_str(), &cfg, SHMSEM_EXCL, &s), 0);
    shmsem_detach(s);
  }
  ASSERT_EQ(shmsem_unlink(names[7].c_str()), 0);
  // More than one step: the first one's cursor is not the last.
  const std::vector<std::string> step =
      g_server->command({"FCALL", "shmsem_list", "0", "0"});
  ASSERT_GE(step.size(), 2u);
  EXPECT_NE(step[1], "0");
  const int n = shmsem_list_at(where.c_str(), nullptr, 0);
  ASSERT_GE(n, kPools - 1);
  std::vector<shmsem_list_entry> e(size_t(n) + 16);
  ASSERT_EQ(shmsem_list_at(where.c_str(), e.data(), uint32_t(e.size())), n);
  std::vector<std::string> found;
  const std::string mine = g_server->unix_name(tag);
  for (int i = 0; i < n; i++) {
    if (strncmp(e[size_t(i)].name, mine.c_str(), mine.size()) != 0) continue;
    found.push_back(e[size_t(i)].name);
    EXPECT_EQ(e[size_t(i)].error, 0) << found.back();
    EXPECT_EQ(e[size_t(i)].stat.permits, 2u) << found.back();
    EXPECT_EQ(e[size_t(i)].file_mode, 0u);
  }
  std::vector<std::string> want = names;
  want.erase(want.begin() + 7);
  EXPECT_EQ(found, want);  // sorted, each once, the removed one not
  // The same over TCP, named as `where` is written.
  const std::string tcp =
      "redis://127.0.0.1:" + std::to_string(g_server->port());
  std::vector<shmsem_list_entry> t(size_t(n) + 16);
  const int m = shmsem_list_at(tcp.c_str(), t.data(), uint32_t(t.size()));
  ASSERT_GE(m, kPools - 1);
  EXPECT_EQ(std::string(t[0].name).rfind(tcp + "/", 0), 0u) << t[0].name;
  for (const std::string &name : names) shmsem_unlink(name.c_str());
}

TEST(RedisNames, ListAtTakesPlacesNotNames) {
  shmsem_list_entry e;
  EXPECT_EQ(shmsem_list_at("redis://", &e, 1), -EINVAL);
  EXPECT_EQ(shmsem_list_at("redis://127.0.0.1:1/pool", &e, 1), -EINVAL);
  EXPECT_EQ(shmsem_list_at("redis+unix:///tmp/s?pool=p", &e, 1), -EINVAL);
  EXPECT_EQ(shmsem_list_at("/tmp", &e, 1), -EINVAL);
  EXPECT_EQ(shmsem_list_at("nosuch://x", &e, 1), -EPROTONOSUPPORT);
  EXPECT_EQ(shmsem_list_at("redis+unix:///nonexistent/s", &e, 1), -ECOMM);
  EXPECT_EQ(shmsem_list_at(nullptr, nullptr, 1), -EINVAL);
  // NULL and /dev/shm: shmsem_list itself.
  EXPECT_EQ(shmsem_list_at(nullptr, nullptr, 0), shmsem_list(nullptr, 0));
  EXPECT_EQ(shmsem_list_at("/dev/shm", nullptr, 0), shmsem_list(nullptr, 0));
}

// The keep-alive renews at the end of each period, not when a lease is
// added: a lease taken while another is held (its thread in a timed wait)
// is renewed within that period too. Both outlive several TTLs.
TEST_F(RedisPool, LeaseTakenWhileAnotherIsHeldIsKeptAlive) {
  make(2, 300);
  shmsem_lease_t a, b;
  ASSERT_EQ(shmsem_acquire(s_, &a), 0);
  std::this_thread::sleep_for(milliseconds(50));  // into a period
  ASSERT_EQ(shmsem_acquire(s_, &b), 0);
  std::this_thread::sleep_for(milliseconds(1200));  // four TTLs held
  EXPECT_EQ(pool_stat().held, 2u);
  EXPECT_EQ(shmsem_release(s_, &b), 0);
  EXPECT_EQ(shmsem_release(s_, &a), 0);
}

// A request written to a connection the server has closed fails with an
// error; it must not raise SIGPIPE, whose default action would kill the
// caller (hiredis writes with write(2)). In a child with SIGPIPE at its
// default disposition: the connection layer's own call on a killed
// connection (no reconnect in the way: that is the handle's), then a
// handle whose connections were killed, which reconnects.
TEST_F(RedisPool, WriteToAClosedConnectionDoesNotRaiseSigpipe) {
  make(1);
  Children kids;
  const pid_t pid = kids.spawn([&]() -> int {
    signal(SIGPIPE, SIG_DFL);
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_UNBLOCK, &pipe, nullptr);
    detail::Endpoint ep;
    if (detail::parse_endpoint(name_.c_str(), &ep) != 0) return 10;
    detail::Conn c;
    detail::Reply r;
    if (c.connect(ep, 2000) != 0 || c.call({"CLIENT", "ID"}, 2000, &r) != 0 ||
        !r.get() || r.get()->type != REDIS_REPLY_INTEGER)
      return 11;
    const std::string id = std::to_string(r.get()->integer);
    if (g_server->command({"CLIENT", "KILL", "ID", id}).at(0) != "1") return 12;
    if (c.call({"PING"}, 2000, &r) != -ECOMM) return 13;
    shmsem_t *s = nullptr;
    if (shmsem_open(name_.c_str(), 0, &s) != 0) return 14;
    struct shmsem_stat st;
    if (shmsem_stat(s, &st) != 0) return 15;
    g_server->command({"CLIENT", "KILL", "TYPE", "normal"});
    const int e = shmsem_stat(s, &st);
    shmsem_detach(s);
    return e == 0 ? 0 : 16;
  });
  EXPECT_EQ(kids.wait(pid), 0) << "128 + 13: killed by SIGPIPE";
}

// --- crashes, pauses and restarts ------------------------------------------

TEST_F(RedisPool, KilledHolderGivesPermitsBackWithinItsTtl) {
  make(1, 500);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  Children kids;
  const pid_t child = kids.spawn([&] {
    shmsem_lease_t l;
    if (shmsem_acquire(s_, &l) != 0) return 1;
    const char c = 'h';
    if (write(fds[1], &c, 1) != 1) return 2;
    ::pause();
    return 0;
  });
  char c;
  ASSERT_EQ(read(fds[0], &c, 1), 1);
  const auto t0 = Clock::now();
  kill(child, SIGKILL);
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire_for(s_, 10000000000ull, &l), 0);
  const auto took = Clock::now() - t0;
  // One TTL (500 ms) and the reaping's granularity; generous for a loaded
  // machine, but far below the 10 s the call would wait.
  EXPECT_LT(took, milliseconds(3000));
  fprintf(stderr, "kill -9 to regrant: %lld ms\n",
          static_cast<long long>(
              std::chrono::duration_cast<milliseconds>(took).count()));
  EXPECT_EQ(pool_stat().reclaimed_holders, 1u);
  close(fds[0]);
  close(fds[1]);
}

TEST_F(RedisPool, StoppedHolderPastItsTtlHearsExpired) {
  make(1, 300);
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  Children kids;
  const pid_t child = kids.spawn([&] {
    shmsem_lease_t l;
    if (shmsem_acquire(s_, &l) != 0) return 1;
    if (write(up[1], &l, sizeof l) != sizeof l) return 2;
    char c;
    if (read(down[0], &c, 1) != 1) return 3;
    const int r = shmsem_release(s_, &l);
    return r == -EKEYEXPIRED ? 0 : 10 + (-r % 100);
  });
  shmsem_lease_t theirs;
  ASSERT_EQ(read(up[0], &theirs, sizeof theirs), ssize_t(sizeof theirs));
  kill(child, SIGSTOP);
  shmsem_lease_t mine;
  ASSERT_EQ(shmsem_acquire_for(s_, 10000000000ull, &mine), 0);
  EXPECT_EQ(mine.index, theirs.index);
  EXPECT_GT(mine.gen, theirs.gen);  // a fence keeping the highest rejects it
  kill(child, SIGCONT);
  ASSERT_EQ(write(down[1], "g", 1), 1);
  EXPECT_EQ(kids.wait(child), 0);
  EXPECT_EQ(shmsem_release(s_, &mine), 0);
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
}

TEST_F(RedisPool, DeadWaiterLeavesTheQueue) {
  make(1, 1000);  // the holder's lease must outlive the waiter's reaping
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  Children kids;
  const pid_t child = kids.spawn([&] {
    shmsem_lease_t l;
    return shmsem_acquire(s_, &l) == 0 ? 0 : 1;
  });
  ASSERT_TRUE(await_waiting(1));
  kill(child, SIGKILL);
  kids.wait(child);
  EXPECT_TRUE(await_waiting(0));  // reaped within its keep-alive TTL
  EXPECT_EQ(shmsem_release(s_, &held), 0);
  EXPECT_EQ(pool_stat().available, 1u);
}

// R1 (verify/MODEL.md): a waiter without deadline whose grant was popped
// but never reached it (its connection killed between the BLPOP's pop and
// its reply) heard "done" from wait_renew for ever. The loss is made real:
// the release that grants the waiter and an LPOP of its mailbox run in one
// MULTI, so the server serves the waiter's BLPOP only after the message is
// gone. The wait must end (-ECOMM), and the lost lease, never renewed,
// expires within its TTL.
TEST_F(RedisPool, LostGrantMessageIsResolvedNotLoopedOn) {
  make(1, 600);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  Children kids;
  const pid_t child = kids.spawn([&] {
    shmsem_lease_t l;
    const int r = shmsem_acquire(s_, &l);
    return r == -ECOMM ? 0 : 10 + (-r % 100);
  });
  ASSERT_TRUE(await_waiting(1));
  const std::string base = "shmsem:{" + pool_ + "}";
  const std::string id = g_server->command({"HGET", base, "id"}).at(0);
  const std::string t =
      g_server->command({"ZRANGE", base + ":q", "0", "0"}).at(0);
  redisContext *c = redisConnectUnix(g_server->socket_path().c_str());
  ASSERT_TRUE(c && !c->err);
  const std::string idx = std::to_string(held.index);
  const std::string gen = std::to_string(held.gen);
  const std::string mb = base + ":mb:" + id + ":" + t;
  redisAppendCommand(c, "MULTI");
  redisAppendCommand(c, "FCALL shmsem_release 1 %s %s %s %s", base.c_str(),
                     id.c_str(), idx.c_str(), gen.c_str());
  redisAppendCommand(c, "LPOP %s", mb.c_str());
  redisAppendCommand(c, "EXEC");
  redisReply *r = nullptr;
  for (int i = 0; i < 4; i++) {
    if (r) freeReplyObject(r);
    ASSERT_EQ(redisGetReply(c, reinterpret_cast<void **>(&r)), REDIS_OK);
  }
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  ASSERT_EQ(r->element[1]->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(r->element[1]->str, 2), "G ");  // the lost grant
  freeReplyObject(r);
  redisFree(c);
  EXPECT_EQ(kids.wait(child, std::chrono::seconds(20)), 0);
  EXPECT_EQ(pool_stat().waiting, 0u);
  shmsem_lease_t l;  // the lost lease expires unrenewed: the permit is back
  ASSERT_EQ(shmsem_acquire_for(s_, 10000000000ull, &l), 0);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
  EXPECT_EQ(shmsem_check(s_), 0);
}

TEST_F(RedisPool, ServerRestartFromAofKeepsState) {
  make(2);
  shmsem_lease_t l;
  uint64_t seq = 0;
  ASSERT_EQ(shmsem_acquire(s_, &l), 0);
  ASSERT_EQ(shmsem_lease_sequence(s_, &l, &seq), 0);
  g_server->kill9();
  ASSERT_TRUE(g_server->start()) << g_server->error();
  // The handle's idle connection was closed by the kill: it reconnects.
  struct shmsem_stat st {};
  ASSERT_EQ(shmsem_stat(s_, &st), 0);
  EXPECT_EQ(st.held, 1u);
  shmsem_lease_t next;
  uint64_t seq_next = 0;
  ASSERT_EQ(shmsem_acquire(s_, &next), 0);
  ASSERT_EQ(shmsem_lease_sequence(s_, &next, &seq_next), 0);
  EXPECT_GT(seq_next, seq);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
  EXPECT_EQ(shmsem_release(s_, &next), 0);
}

TEST_F(RedisPool, PausedServerFailsCallsWithinTheirDeadline) {
  make(1, 1000);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  g_server->pause();
  auto t0 = Clock::now();
  const int r = shmsem_acquire_for(s_, 300000000, &l);
  EXPECT_TRUE(r == -ETIMEDOUT || r == -ECOMM) << r;
  EXPECT_LT(Clock::now() - t0, milliseconds(2500));
  t0 = Clock::now();
  struct shmsem_stat st {};
  EXPECT_EQ(shmsem_stat(s_, &st), -ECOMM);
  EXPECT_LT(Clock::now() - t0, milliseconds(2500));
  g_server->resume();
}

}  // namespace
}  // namespace shmsem::test
