// The Redis backend against a hostile co-user of its server and a broken
// network, through the public API only (plus direct commands to the
// server). The promise (docs/REDIS.md, "Safety envelope"): a co-user who
// can write the pool's keys may deny service, bounded by the caller's
// deadline, but never crash the caller, hang it past its deadline, or
// make it believe it holds a lease it does not; errors are clear.
#include <errno.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

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

// A pool on the test server, unlinked at the end; `base_` its hash.
class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_server) GTEST_SKIP() << "redis-server could not be started";
    if (!g_server->running() && !g_server->start())
      GTEST_SKIP() << "redis-server: " << g_server->error();
    g_server->resume();
    pool_ = unique_pool("adv");
    name_ = g_server->unix_name(pool_);
    base_ = "shmsem:{" + pool_ + "}";
  }
  void TearDown() override {
    if (g_server) g_server->resume();
    if (s_) shmsem_detach(s_);
    if (g_server && g_server->running()) shmsem_unlink(name_.c_str());
  }
  void make(uint32_t permits, uint32_t ttl_ms = 0) {
    shmsem_config cfg{};
    cfg.permits = permits;
    cfg.lease_ttl_ms = ttl_ms;
    ASSERT_EQ(shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &s_), 0);
  }
  // The first queued ticket, once one queues (bounded wait); "" if none.
  std::string await_ticket() {
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < until) {
      std::vector<std::string> q =
          g_server->command({"ZRANGE", base_ + ":q", "0", "0"});
      if (!q.empty()) return q[0];
      std::this_thread::sleep_for(milliseconds(2));
    }
    return "";
  }

  // Ticket t's mailbox (shmsem.lua: base:mb:ID:T).
  std::string mailbox(const std::string &t) {
    const std::string id = g_server->command({"HGET", base_, "id"}).at(0);
    return base_ + ":mb:" + id + ":" + t;
  }

  std::string pool_, name_, base_;
  shmsem_t *s_ = nullptr;
};

// Another co-user pushes a grant message into a queued waiter's mailbox
// naming the lease somebody else holds. The waiter must not take it as
// its own: with one permit that would be two holders.
//
// Fails today: take_message (acquire.cc) accepts any "G idx gen seq n"
// that is in range. A fix needs the server to vouch for the grant: the
// lease record keeps the ticket it was granted to (grant() in shmsem.lua,
// LIBRARY_VERSION bumped) and a popped "G" is confirmed by one call
// (e.g. shmsem_lease with the ticket: 'held' only for that ticket's
// record) before the caller hears 0; a forged one is dropped and the wait
// goes on. The real message can also carry a per-grant nonce the waiter
// checks against the record. It costs a round trip per queued grant, and
// a co-user who may FUNCTION LOAD defeats it anyway (docs/REDIS.md, "Who
// can connect is trusted"): left for the lead to decide.
TEST_F(Hostile, DISABLED_ForgedGrantInMailboxIsNotALease) {
  make(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  std::atomic<int> result{1};
  shmsem_lease_t got{};
  std::thread waiter(
      [&] { result = shmsem_acquire_for(s_, 1500000000, &got); });
  const std::string t = await_ticket();
  ASSERT_FALSE(t.empty());
  const std::string forged = "G " + std::to_string(held.index) + " " +
                             std::to_string(held.gen) + " 1 1";
  g_server->command({"LPUSH", mailbox(t), forged});
  waiter.join();
  EXPECT_NE(result.load(), 0) << "a forged grant was taken as a lease";
  if (result.load() == 0) shmsem_release(s_, &got);
  EXPECT_EQ(shmsem_release(s_, &held), 0);
}

// A pool unlinked and created anew under its name starts its tickets at 1
// again. A waiter of the old pool still blocked in BLPOP on its mailbox
// (ticket 1) must not pop the grant the new pool posts to its own ticket
// 1: it would return a lease of a pool that is gone, for an index the new
// pool's waiter holds, while that waiter loses its grant.
TEST_F(Hostile, RecreatedPoolsGrantDoesNotReachAnOldWaiter) {
  make(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  shmsem_t *old_h = nullptr;
  ASSERT_EQ(shmsem_open(name_.c_str(), 0, &old_h), 0);
  std::atomic<int> result{1};
  shmsem_lease_t got{};
  std::thread waiter(
      [&] { result = shmsem_acquire_for(old_h, 3000000000ull, &got); });
  ASSERT_EQ(await_ticket(), "1");
  ASSERT_EQ(shmsem_unlink(name_.c_str()), 0);
  shmsem_t *fresh = nullptr;
  shmsem_config cfg{};
  cfg.permits = 1;
  ASSERT_EQ(shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &fresh), 0);
  shmsem_lease_t held2;
  ASSERT_EQ(shmsem_acquire(fresh, &held2), 0);
  // The new pool's first waiter, by hand: ticket 1 again.
  const std::string id = g_server->command({"HGET", base_, "id"}).at(0);
  std::vector<std::string> q = g_server->command(
      {"FCALL", "shmsem_acquire", "1", base_, id, "1", "1", "1"});
  ASSERT_EQ(q.at(0), "queued");
  ASSERT_EQ(q.at(1), "1");
  ASSERT_EQ(shmsem_release(fresh, &held2), 0);  // grants the new ticket 1
  waiter.join();
  EXPECT_NE(result.load(), 0) << "an old pool's waiter took a new grant";
  // The new pool's waiter still finds its grant.
  std::vector<std::string> c = g_server->command(
      {"FCALL", "shmsem_cancel", "1", base_, id, "1", "cancel"});
  EXPECT_EQ(c.at(0), "granted");
  shmsem_detach(old_h);
  shmsem_detach(fresh);
}

// Forged rate messages ("R" with a huge, a negative or a garbage delay)
// cannot keep a waiter past its deadline.
TEST_F(Hostile, ForgedRateMessageDoesNotOutliveTheDeadline) {
  make(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  for (const char *m : {"R 99999999999999999999999", "R 999999999999999999",
                        "R -5", "R abc", "G 0 0 0 0", "G 99 1 1 1", "junk"}) {
    std::atomic<int> result{1};
    const auto t0 = Clock::now();
    std::thread waiter([&] { result = shmsem_acquire_for(s_, 400000000, &l); });
    const std::string t = await_ticket();
    ASSERT_FALSE(t.empty());
    g_server->command({"LPUSH", mailbox(t), m});
    waiter.join();
    EXPECT_LT(Clock::now() - t0, milliseconds(1500)) << m;
    EXPECT_NE(result.load(), 0) << m;
    EXPECT_LT(result.load(), 0) << m;
    // Whatever happened, the waiter is not left queued behind the holder
    // for longer than its waiter TTL; remove it to start clean.
    g_server->command({"DEL", base_ + ":q"});
  }
  EXPECT_EQ(shmsem_release(s_, &held), 0);
}

// Counters scribbled over (huge, negative, not numbers): every call ends
// with an errno or a lease whose index is in range, and never crashes.
TEST_F(Hostile, ScribbledCountersFailCleanly) {
  make(2);
  for (const char *field : {"held", "permits", "max_permits", "seq", "ticket",
                            "ttl_ms", "wttl_ms", "max_waiters"}) {
    for (const char *v : {"-99999999999999999999", "99999999999999999999",
                          "abc", "-1", "1e300", "nan"}) {
      g_server->command({"HSET", base_, field, v});
      shmsem_lease_t l{};
      const int r = shmsem_try_acquire(s_, &l);
      if (r == 0) {
        EXPECT_LT(l.index, 2u) << field << "=" << v;
        shmsem_release(s_, &l);
      }
      struct shmsem_stat st {};
      shmsem_stat(s_, &st);
      shmsem_check(s_);
    }
  }
  SUCCEED();
}

// The largest geometry a remote pool takes: 2^16 permits, all taken as
// one lease, released, and a single permit after. Each is one function
// run on the server that must answer within a call's timeout.
//
// Failed before: create took SHMSEM_MAX_PERMITS (2^20), and already 2^18
// missed the timeout: -ECOMM for a create (or an acquire of all) that the
// server made. A larger capacity is now -EINVAL, at once.
TEST_F(Hostile, LargestGeometryAnswersWithinTheCallTimeout) {
  shmsem_config cfg{};
  cfg.permits = SHMSEM_MAX_PERMITS;
  shmsem_t *big = nullptr;
  EXPECT_EQ(shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &big), -EINVAL);
  cfg.permits = 1u << 16;
  cfg.max_waiters = SHMSEM_MAX_WAITERS;
  ASSERT_EQ(shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &s_), 0);
  shmsem_lease_t all, one;
  ASSERT_EQ(shmsem_acquire_n(s_, cfg.permits, &all), 0);
  EXPECT_EQ(shmsem_try_acquire(s_, &one), -EAGAIN);
  ASSERT_EQ(shmsem_release(s_, &all), 0);
  ASSERT_EQ(shmsem_acquire(s_, &one), 0);
  EXPECT_EQ(shmsem_release(s_, &one), 0);
  EXPECT_EQ(shmsem_check(s_), 0);
}

// The pool's hash deleted, the library flushed, or replaced by a newer
// version while a waiter is queued: the wait ends by its deadline with a
// clear error (-EIDRM, -EPROTO, -ETIMEDOUT), never 0.
TEST_F(Hostile, PoolOrLibraryPulledAwayMidWaitEndsByTheDeadline) {
  const std::string newer =
      "#!lua name=shmsem\nredis.register_function('shmsem_version', "
      "function() return 999 end)";
  const std::vector<std::vector<std::string>> attacks = {
      {"DEL", base_},
      {"FUNCTION", "FLUSH"},
      {"FUNCTION", "LOAD", "REPLACE", newer},
      {"HSET", base_, "id", "0123456789abcdef"},
  };
  for (const auto &attack : attacks) {
    shmsem_t *h = nullptr;
    shmsem_config cfg{};
    cfg.permits = 1;
    ASSERT_EQ(shmsem_create(name_.c_str(), &cfg, 0, &h), 0) << attack[0];
    shmsem_lease_t held, l;
    ASSERT_EQ(shmsem_acquire(h, &held), 0);
    std::atomic<int> result{1};
    const auto t0 = Clock::now();
    std::thread waiter([&] { result = shmsem_acquire_for(h, 1500000000, &l); });
    ASSERT_FALSE(await_ticket().empty());
    g_server->command(attack);
    waiter.join();
    EXPECT_LT(Clock::now() - t0, milliseconds(3000)) << attack[0];
    EXPECT_LT(result.load(), 0) << attack[0] << " " << attack[1];
    fprintf(
        stderr, "%s %s: %d after %lld ms\n", attack[0].c_str(),
        attack[1].c_str(), result.load(),
        (long long)std::chrono::duration_cast<milliseconds>(Clock::now() - t0)
            .count());
    g_server->command({"FUNCTION", "FLUSH"});  // ours is loaded again
    shmsem_detach(h);
    shmsem_unlink(name_.c_str());
  }
}

// The pool's hash gone (DEL by a co-user, or evicted) while its other
// keys stay: a pool created anew under the name starts empty, not behind
// the old pool's queue and leases (a ghost waiter at its head took the
// new pool's permit for a whole TTL, and the new tickets, from 1 again,
// merged with the ghosts').
TEST_F(Hostile, CreateAfterTheHashVanishedStartsClean) {
  make(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  const std::string id = g_server->command({"HGET", base_, "id"}).at(0);
  ASSERT_EQ(
      g_server
          ->command({"FCALL", "shmsem_acquire", "1", base_, id, "1", "1", "1"})
          .at(0),
      "queued");
  g_server->command({"DEL", base_});
  shmsem_detach(s_);
  s_ = nullptr;
  make(1);
  EXPECT_EQ(shmsem_try_acquire(s_, &l), 0);
  struct shmsem_stat st {};
  ASSERT_EQ(shmsem_stat(s_, &st), 0);
  EXPECT_EQ(st.waiting, 0u);
  EXPECT_EQ(st.held, 1u);
  EXPECT_EQ(shmsem_check(s_), 0);
}

// Threads sharing one handle, taking and giving back permits (some
// released by another thread than the one that took them): never more
// holders than permits, and the pool checks clean after.
TEST_F(Hostile, ThreadsSharingAHandleNeverExceedThePermits) {
  make(2, 2000);
  std::atomic<int> holding{0}, most{0}, errors{0};
  std::vector<shmsem_lease_t> handoff(64);
  std::atomic<int> next{0};
  auto body = [&](int id) {
    const auto until = Clock::now() + milliseconds(1500);
    while (Clock::now() < until) {
      shmsem_lease_t l;
      const int r = shmsem_acquire_for(s_, 200000000, &l);
      if (r == -ETIMEDOUT) continue;
      if (r != 0) {
        errors++;
        continue;
      }
      const int now = ++holding;
      int m = most.load();
      while (now > m && !most.compare_exchange_weak(m, now)) {
      }
      holding--;
      if (id % 2 == 0 && shmsem_release(s_, &l) != 0) errors++;
      if (id % 2 == 1) {
        // Handed to another thread, which releases it.
        std::thread([&, l]() mutable {
          if (shmsem_release(s_, &l) != 0) errors++;
        }).join();
      }
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++) ts.emplace_back(body, i);
  for (auto &t : ts) t.join();
  EXPECT_LE(most.load(), 2);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(shmsem_check(s_), 0);
  struct shmsem_stat st {};
  ASSERT_EQ(shmsem_stat(s_, &st), 0);
  EXPECT_EQ(st.held, 0u);
}

// Garbage in the queue, the free set and the lease records: service may
// be denied, but a wait ends by its deadline, a lease returned names an
// index in range, and stat, inspect and check answer (an error is fine).
TEST_F(Hostile, ScribbledQueueAndLeasesDenyServiceOnlyUntilTheDeadline) {
  make(2, 1000);
  const std::vector<std::vector<std::string>> attacks = {
      {"ZADD", base_ + ":q", "0", "abc"},
      {"ZADD", base_ + ":q", "-5", "-1"},
      {"HSET", base_ + ":wn", "abc", "99999999999999999999"},
      {"ZADD", base_ + ":free", "-1", "-1"},
      {"ZADD", base_ + ":free", "0", "zz"},
      {"ZADD", base_ + ":free", "99", "99999"},
      {"HSET", base_ + ":l", "0", "1 1 99999999999 0 0 0 0"},
      {"HSET", base_ + ":l", "1", "garbage"},
      {"ZADD", base_ + ":lexp", "0", "1"},
  };
  for (const auto &attack : attacks) {
    g_server->command(attack);
    for (int i = 0; i < 3; i++) {
      shmsem_lease_t l{};
      const auto t0 = Clock::now();
      const int r = shmsem_acquire_for(s_, 300000000, &l);
      EXPECT_LT(Clock::now() - t0, milliseconds(1500)) << attack[1];
      if (r == 0) {
        EXPECT_LT(l.index, 2u) << attack[1];
        shmsem_release(s_, &l);
      }
    }
    shmsem_inspection in{};
    shmsem_holder h[4];
    shmsem_waiter_info w[4];
    shmsem_inspect(s_, &in, h, 4, w, 4);
    struct shmsem_stat st {};
    shmsem_stat(s_, &st);
    shmsem_check(s_);
  }
}

// A fork while another thread of the parent is inside a call (its lock
// held, the server paused): the child's first call on the inherited
// handle does not wait for that lock, and works once the server answers.
TEST_F(Hostile, ForkDuringACallOfAnotherThreadDoesNotDeadlockTheChild) {
  make(2, 1000);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  g_server->pause();
  std::atomic<bool> in_call{false};
  std::thread caller([&] {
    in_call = true;
    struct shmsem_stat st {};
    shmsem_stat(s_, &st);  // blocks on the paused server, lock held
  });
  while (!in_call) std::this_thread::sleep_for(milliseconds(1));
  std::this_thread::sleep_for(milliseconds(50));  // let it send the call
  Children kids;
  const pid_t child = kids.spawn([&] {
    const auto until = Clock::now() + std::chrono::seconds(10);
    shmsem_lease_t l;
    int r = -ECOMM;
    while (r == -ECOMM && Clock::now() < until) r = shmsem_try_acquire(s_, &l);
    if (r != 0) return 10;
    return shmsem_release(s_, &l) == 0 ? 0 : 11;
  });
  std::this_thread::sleep_for(milliseconds(200));
  g_server->resume();
  caller.join();
  EXPECT_EQ(kids.wait(child, std::chrono::seconds(20)), 0);
  EXPECT_EQ(shmsem_release(s_, &held), 0);
}

// The thread's CPU time (ns).
uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
}

// A waiter whose server is gone (killed), or whose mailbox a co-user made
// a hash (every BLPOP an error), waits out its deadline without spinning:
// a failed round is followed by a pause, not by the next at once.
TEST_F(Hostile, FailingRoundsDoNotSpinUntilTheDeadline) {
  make(1, 1000);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  for (int attack = 0; attack < 2; attack++) {
    std::atomic<int> result{1};
    std::atomic<uint64_t> cpu{0};
    std::thread waiter([&] {
      const uint64_t c0 = thread_cpu_ns();
      result = shmsem_acquire_for(s_, 2000000000ull, &l);
      cpu = thread_cpu_ns() - c0;
    });
    const std::string t = await_ticket();
    ASSERT_FALSE(t.empty());
    if (attack == 0) {
      g_server->command({"DEL", mailbox(t)});
      g_server->command({"HSET", mailbox(t), "x", "y"});
    } else {
      g_server->kill9();
    }
    waiter.join();
    EXPECT_LT(result.load(), 0) << attack;
    EXPECT_LT(cpu.load(), 300000000u) << attack;  // of a 2 s wait
    fprintf(stderr, "attack %d: %d, %llu ms of CPU\n", attack, result.load(),
            (unsigned long long)(cpu.load() / 1000000));
    g_server->command({"DEL", base_ + ":q"});
  }
  ASSERT_TRUE(g_server->start()) << g_server->error();
}

volatile sig_atomic_t g_signals = 0;
void on_signal(int) { g_signals = g_signals + 1; }

// A process that takes signals often (a profiler's SIGPROF, a timer) while
// the server does not answer: each signal interrupts the receive; the
// call must still end by its deadline, not restart its socket timeout.
//
// Failed before: hiredis's redisGetReply retries a recv that failed with
// EINTR, and SO_RCVTIMEO starts again each time, so signals every 20 ms
// kept a 300 ms acquire blocked for as long as they came.
TEST_F(Hostile, SignalsDuringAPausedServerDoNotExtendTheDeadline) {
  make(1, 1000);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  struct sigaction sa {
  }, old{};
  sa.sa_handler = on_signal;  // no SA_RESTART: recv fails with EINTR
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  g_server->pause();
  std::atomic<bool> done{false};
  std::atomic<int> result{1};
  const auto t0 = Clock::now();
  std::thread waiter([&] {
    result = shmsem_acquire_for(s_, 300000000, &l);
    done = true;
  });
  const pthread_t th = waiter.native_handle();
  while (!done && Clock::now() - t0 < std::chrono::seconds(6)) {
    pthread_kill(th, SIGUSR1);
    std::this_thread::sleep_for(milliseconds(20));
  }
  const auto took = Clock::now() - t0;
  waiter.join();
  g_server->resume();
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_TRUE(result == -ETIMEDOUT || result == -ECOMM) << result;
  EXPECT_LT(took, milliseconds(2500));
  EXPECT_GT(g_signals, 0);
}

// A "server" on the port that answers one byte at a time, each within the
// socket's timeout but never finishing its reply: the call still ends
// within its own timeout (at most 5 s), -ECOMM.
//
// Failed before: SO_RCVTIMEO bounds each recv, not the call, so the
// open waited for as long as the bytes kept coming (over 60 s here).
TEST(HostileNames, DrippingServerCannotHoldACallPastItsTimeout) {
  const int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(ls, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(ls, reinterpret_cast<sockaddr *>(&a), len), 0);
  ASSERT_EQ(listen(ls, 4), 0);
  ASSERT_EQ(getsockname(ls, reinterpret_cast<sockaddr *>(&a), &len), 0);
  std::atomic<bool> stop{false};
  std::thread server([&] {
    const int c = accept(ls, nullptr, nullptr);
    if (c < 0) return;
    char buf[4096];
    if (recv(c, buf, sizeof buf, 0) > 0 &&
        send(c, "$100000\r\n", 9, MSG_NOSIGNAL) == 9)
      while (!stop && send(c, "x", 1, MSG_NOSIGNAL) == 1)
        std::this_thread::sleep_for(milliseconds(200));
    close(c);
  });
  const std::string name =
      "redis://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/p";
  shmsem_t *s = nullptr;
  std::atomic<int> r{1};
  const auto t0 = Clock::now();
  std::thread opener([&] { r = shmsem_open(name.c_str(), 0, &s); });
  while (r == 1 && Clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(milliseconds(10));
  const auto took = Clock::now() - t0;
  stop = true;
  shutdown(ls, SHUT_RDWR);
  opener.join();
  server.join();
  close(ls);
  EXPECT_EQ(r.load(), -ECOMM);
  EXPECT_LT(took, milliseconds(6000));
}

// Names that are not servers: clear errors, at once.
TEST(HostileNames, OddNamesFailClearly) {
  shmsem_t *s = nullptr;
  const std::string long_host = "redis://" + std::string(5000, 'h') + "/p";
  EXPECT_EQ(shmsem_open(long_host.c_str(), 0, &s), -EINVAL);
  const std::string long_path =
      "redis+unix:///" + std::string(5000, 'd') + "?pool=p";
  const int r = shmsem_open(long_path.c_str(), 0, &s);
  EXPECT_TRUE(r == -EINVAL || r == -ECOMM) << r;
  // A path that is a file, not a socket; a directory.
  EXPECT_EQ(shmsem_open("redis+unix:///etc/passwd?pool=p", 0, &s), -ECOMM);
  EXPECT_EQ(shmsem_open("redis+unix:///tmp?pool=p", 0, &s), -ECOMM);
  EXPECT_EQ(shmsem_open("redis://127.0.0.1:1/p", 0, &s), -ECOMM);
  EXPECT_EQ(shmsem_open("redis://h/p%00q", 0, &s), -EINVAL);
  EXPECT_EQ(shmsem_open("redis://h/p q", 0, &s), -EINVAL);
  EXPECT_EQ(s, nullptr);
}

}  // namespace
}  // namespace shmsem::test
