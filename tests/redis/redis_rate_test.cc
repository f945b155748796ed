// The rate limit of a Redis pool (GCRA on the server's clock: shmsem.lua,
// redis/rate.h) against a real redis-server started for this binary. The
// server decides every token; a head that has its permits but no token is
// told when it is due ("R us" in its mailbox) and sleeps that long on its
// own clock. Races are ordered by the server (a test issues the functions'
// calls itself in the order it needs), waits for the server are bounded
// polls, and timings are asserted only as bounds that separate "on time"
// from the alternatives (a keep-alive poll, a client's clock).
#include <gtest/gtest.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "support/process.h"
#include "testing.h"

namespace shmsem::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kSec = 1000000000;

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

int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
}

// A rate-limited pool on the test server, unlinked at the end.
class RatePool : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_server) GTEST_SKIP() << "redis-server could not be started";
    pool_ = unique_pool("rate");
    name_ = g_server->unix_name(pool_);
    base_ = "shmsem:{" + pool_ + "}";
  }
  void TearDown() override {
    if (s_) shmsem_detach(s_);
    if (g_server) shmsem_unlink(name_.c_str());
  }
  // `rate` acquisitions per `period_ns`, `burst` at once, `permits` (0: no
  // concurrency limit).
  void make(uint32_t permits, uint32_t rate, uint32_t burst,
            uint64_t period_ns = 0) {
    shmsem_config cfg{};
    cfg.permits = permits;
    cfg.rate = rate;
    cfg.burst = burst;
    cfg.rate_period_ns = period_ns;
    ASSERT_EQ(shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &s_), 0);
  }
  struct shmsem_stat pool_stat() {
    struct shmsem_stat st {};
    EXPECT_EQ(shmsem_stat(s_, &st), 0);
    return st;
  }
  // Take the bucket's only token (burst 1): the next is an interval away.
  void take_token() {
    shmsem_lease_t l;
    ASSERT_EQ(shmsem_try_acquire(s_, &l), 0);
    ASSERT_EQ(shmsem_release(s_, &l), 0);
  }
  // Poll (bounded, 20 s) until pred(stat) holds; each stat also lets the
  // server grant a head whose token is due.
  template <typename Pred>
  bool await(Pred pred) {
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < until) {
      struct shmsem_stat st {};
      if (shmsem_stat(s_, &st) == 0 && pred(st)) return true;
      std::this_thread::sleep_for(milliseconds(2));
    }
    return false;
  }
  bool await_waiting(uint32_t n) {
    return await([n](const struct shmsem_stat &st) { return st.waiting == n; });
  }
  std::vector<std::string> fcall(const std::string &fn,
                                 const std::vector<std::string> &args) {
    std::vector<std::string> id = g_server->command({"HGET", base_, "id"});
    std::vector<std::string> argv{"FCALL", fn, "1", base_, id.at(0)};
    argv.insert(argv.end(), args.begin(), args.end());
    return g_server->command(argv);
  }

  std::string pool_, name_, base_;
  shmsem_t *s_ = nullptr;
};

// 40 grants at 100/s with a burst of 4, taken by 4 processes: the first 4
// at once, then one every 10 ms on the server's clock, so at least 360 ms.
TEST_F(RatePool, RateHoldsAcrossProcessesOnTheServersClock) {
  make(8, 100, 4);
  constexpr int kChildren = 4, kEach = 10;
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  Children kids;
  for (int i = 0; i < kChildren; i++)
    kids.spawn([&] {
      char c;
      if (read(gate[0], &c, 1) != 1) return 1;
      for (int k = 0; k < kEach; k++) {
        shmsem_lease_t l;
        if (shmsem_acquire(s_, &l) != 0) return 2;
        if (shmsem_release(s_, &l) != 0) return 3;
      }
      return 0;
    });
  const auto t0 = Clock::now();
  ASSERT_EQ(write(gate[1], "gogo", kChildren), kChildren);
  EXPECT_TRUE(kids.wait_all_ok());
  const int64_t ms = ms_since(t0);
  printf("40 grants at 100/s, burst 4, 4 processes: %lld ms\n", (long long)ms);
  EXPECT_GE(ms, 355);
  EXPECT_LE(ms, 1000);
  const struct shmsem_stat st = pool_stat();
  EXPECT_EQ(st.acquisitions, uint64_t(kChildren * kEach));
  EXPECT_EQ(st.held, 0u);
  EXPECT_EQ(shmsem_check(s_), 0);
  close(gate[0]);
  close(gate[1]);
}

// Queued behind a held permit, then released one by one at 5/s: the
// grants keep the queue's order, a token each.
TEST_F(RatePool, FifoIsKeptUnderTheRate) {
  make(1, 5, 1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);  // the permit and the token
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
    ASSERT_TRUE(await_waiting(uint32_t(i + 1)));
  }
  const auto t0 = Clock::now();
  ASSERT_EQ(shmsem_release(s_, &held), 0);
  std::string order;
  for (int i = 0; i < kChildren; i++) {
    char c;
    ASSERT_EQ(read(fds[0], &c, 1), 1);
    order += c;
  }
  const int64_t ms = ms_since(t0);
  printf("4 queued grants at 5/s: %lld ms after the release\n", (long long)ms);
  EXPECT_EQ(order, "0123");
  EXPECT_GE(ms, 3 * 200 - 5);  // 3 intervals between 4 grants at least
  EXPECT_TRUE(kids.wait_all_ok());
  close(fds[0]);
  close(fds[1]);
}

// The head learns when its token is due and wakes for it: within a few ms
// of it, not at its next keep-alive (a third of 2 s) nor a BLPOP's late
// timeout (up to 100 ms).
TEST_F(RatePool, HeadWakesOnTimeForItsToken) {
  make(1, 10, 1, 3 * kSec);  // one every 300 ms
  const auto t0 = Clock::now();
  take_token();
  const auto t1 = Clock::now();
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(s_, &l), 0);
  const int64_t early = ms_since(t0), late = ms_since(t1);
  printf("token due 300 ms after it was taken: granted %lld..%lld ms after\n",
         (long long)late, (long long)early);
  EXPECT_GE(early, 300);
  EXPECT_LT(late, 300 + 120);  // a keep-alive round would be 667 ms
  EXPECT_EQ(shmsem_release(s_, &l), 0);
}

// A head waiting for its token (one every 10 s) that times out, or is
// cancelled, leaves owning nothing and takes no token.
TEST_F(RatePool, RateDelayedHeadTimesOutOrCancelsOwningNothing) {
  make(1, 1, 1, 10 * kSec);
  take_token();
  shmsem_lease_t l;
  const auto t0 = Clock::now();
  EXPECT_EQ(shmsem_acquire_for(s_, 300000000, &l), -ETIMEDOUT);
  const int64_t ms = ms_since(t0);
  EXPECT_GE(ms, 295);
  EXPECT_LT(ms, 2000);
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  int result = 1;
  std::thread t(
      [&] { result = shmsem_acquire_ex(s_, nullptr, &cancel, 0, &l); });
  ASSERT_TRUE(await_waiting(1));
  shmsem_cancel(&cancel);
  t.join();
  EXPECT_EQ(result, -ECANCELED);
  const struct shmsem_stat st = pool_stat();
  EXPECT_EQ(st.held, 0u);
  EXPECT_EQ(st.waiting, 0u);
  EXPECT_EQ(st.available, 1u);
  EXPECT_EQ(st.timeouts, 1u);
  EXPECT_EQ(st.cancellations, 1u);
  EXPECT_EQ(st.rate_tokens, 0u);  // neither took the token
  EXPECT_EQ(shmsem_check(s_), 0);
}

// The server orders it: "R us" in the mailbox, then the grant (a stat's
// pass once the token is due), then the waiter's cancel: the cancel skips
// the R and returns the lease. And a cancel that comes first owns nothing.
TEST_F(RatePool, CancelSkipsTheRateMessage) {
  make(1, 5, 1);  // one every 200 ms
  take_token();
  std::vector<std::string> q = fcall("shmsem_acquire", {"1", "1", "1"});
  ASSERT_EQ(q.at(0), "queued");
  const std::string id = g_server->command({"HGET", base_, "id"}).at(0);
  const std::string mb = base_ + ":mb:" + id + ":" + q.at(1);
  std::vector<std::string> m = g_server->command({"LRANGE", mb, "0", "-1"});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].substr(0, 2), "R ");
  ASSERT_TRUE(await([](const struct shmsem_stat &st) { return st.held == 1; }));
  std::vector<std::string> c = fcall("shmsem_cancel", {q.at(1), "timeout"});
  ASSERT_EQ(c.at(0), "granted");
  EXPECT_EQ(fcall("shmsem_release", {c.at(1), c.at(2)}).at(0), "ok");

  q = fcall("shmsem_acquire", {"1", "1", "1"});  // no token for 200 ms
  ASSERT_EQ(q.at(0), "queued");
  EXPECT_EQ(fcall("shmsem_cancel", {q.at(1), "cancel"}).at(0), "canceled");
  EXPECT_EQ(g_server->command({"EXISTS", mb}).at(0), "0");
  EXPECT_EQ(pool_stat().held, 0u);
  EXPECT_EQ(shmsem_check(s_), 0);
}

TEST_F(RatePool, ShutdownReachesARateDelayedHead) {
  make(1, 1, 1, 10 * kSec);
  take_token();
  int result = 1;
  std::thread t([&] {
    shmsem_lease_t l;
    result = shmsem_acquire(s_, &l);
  });
  ASSERT_TRUE(await_waiting(1));
  const auto t0 = Clock::now();
  EXPECT_EQ(shmsem_shutdown(s_), 1);
  t.join();
  EXPECT_EQ(result, -ESHUTDOWN);
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_EQ(pool_stat().held, 0u);
}

TEST_F(RatePool, BadRateConfigIsRefused) {
  struct Case {
    uint32_t permits, rate, burst;
    uint64_t period_ns;
  };
  const Case bad[] = {
      {0, 0, 0, 0},                            // no limit at all
      {1, 0, 2, 0},                            // a burst without a rate
      {1, 0, 0, kSec},                         // a period without a rate
      {1, 10, SHMSEM_MAX_BURST + 1, 0},        // a burst too large
      {1, 2000000000, 0, 0},                   // an interval under 1 ns
      {1, 1, 0, 2 * 86400 * kSec},             // an interval over a day
      {1, 1, SHMSEM_MAX_BURST, 86400 * kSec},  // a refill over 2^62 ns
  };
  for (const Case &c : bad) {
    shmsem_config cfg{};
    cfg.permits = c.permits;
    cfg.rate = c.rate;
    cfg.burst = c.burst;
    cfg.rate_period_ns = c.period_ns;
    shmsem_t *s = nullptr;
    EXPECT_EQ(shmsem_create(name_.c_str(), &cfg, 0, &s), -EINVAL)
        << c.permits << " " << c.rate << " " << c.burst << " " << c.period_ns;
    EXPECT_EQ(s, nullptr);
  }
  // An open compares the rate as created: 6 per 2 s is not 3 per 1 s.
  make(2, 3, 2);
  shmsem_config cfg{};
  cfg.permits = 2;
  cfg.rate = 6;
  cfg.burst = 2;
  cfg.rate_period_ns = 2 * kSec;
  shmsem_t *again = nullptr;
  EXPECT_EQ(shmsem_create(name_.c_str(), &cfg, 0, &again), -EEXIST);
  cfg.rate = 0;
  cfg.burst = 0;
  cfg.rate_period_ns = 0;
  EXPECT_EQ(shmsem_create(name_.c_str(), &cfg, 0, &again), -EEXIST);
  cfg.rate = 3;
  cfg.burst = 2;
  cfg.rate_period_ns = kSec;  // the default, spelled out
  ASSERT_EQ(shmsem_create(name_.c_str(), &cfg, 0, &again), 0);
  shmsem_detach(again);
}

TEST_F(RatePool, StatAndInspectShowTheRate) {
  make(0, 10, 3);  // no concurrency limit: the rate only
  struct shmsem_stat st = pool_stat();
  EXPECT_EQ(st.permits, SHMSEM_DEFAULT_RATE_ONLY_PERMITS);
  EXPECT_EQ(st.max_permits, SHMSEM_DEFAULT_RATE_ONLY_PERMITS);
  EXPECT_EQ(st.rate, 10u);
  EXPECT_EQ(st.burst, 3u);
  EXPECT_EQ(st.rate_period_ns, kSec);
  EXPECT_EQ(st.rate_tokens, 3u);
  shmsem_lease_t l[3];
  for (auto &x : l) ASSERT_EQ(shmsem_try_acquire(s_, &x), 0);
  shmsem_lease_t more;
  EXPECT_EQ(shmsem_try_acquire(s_, &more), -EAGAIN);  // no token
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t mono = uint64_t(now.tv_sec) * kSec + uint64_t(now.tv_nsec);
  struct shmsem_inspection in {};
  ASSERT_EQ(shmsem_inspect(s_, &in, nullptr, 0, nullptr, 0), 0);
  EXPECT_EQ(in.stat.rate, 10u);
  EXPECT_EQ(in.stat.held, 3u);
  EXPECT_EQ(in.stat.rate_tokens, 0u);
  EXPECT_GT(in.stat.rate_next_ns, mono);
  EXPECT_LE(in.stat.rate_next_ns, mono + kSec / 10);
  EXPECT_EQ(in.nholders, 3u);
  for (auto &x : l) ASSERT_EQ(shmsem_release(s_, &x), 0);
  EXPECT_EQ(shmsem_check(s_), 0);
}

// One token per acquisition, whatever its weight (as locally).
TEST_F(RatePool, WeightedAcquireTakesOneToken) {
  make(0, 10, 2);
  shmsem_lease_t five, one, none;
  ASSERT_EQ(shmsem_try_acquire_n(s_, 5, &five), 0);
  EXPECT_EQ(pool_stat().rate_tokens, 1u);
  ASSERT_EQ(shmsem_try_acquire(s_, &one), 0);
  EXPECT_EQ(shmsem_try_acquire(s_, &none), -EAGAIN);
  EXPECT_EQ(pool_stat().held, 6u);
  EXPECT_EQ(shmsem_release(s_, &five), 0);
  EXPECT_EQ(shmsem_release(s_, &one), 0);
}

// shmsem_stat (inspect with no waiters asked for) does not read the
// queue: with 3 queued, one ZRANGE (pump's look at the head), not two.
// Redis counts the commands a function runs in INFO commandstats.
TEST_F(RatePool, StatDoesNotReadTheQueue) {
  make(1, 1000, 1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s_, &held), 0);
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(fcall("shmsem_acquire", {"1", "1", "1"}).at(0), "queued");
  g_server->command({"CONFIG", "RESETSTAT"});
  EXPECT_EQ(pool_stat().waiting, 3u);
  const std::string info = g_server->command({"INFO", "commandstats"}).at(0);
  EXPECT_NE(info.find("cmdstat_zrange:calls=1,"), std::string::npos) << info;
  EXPECT_EQ(shmsem_release(s_, &held), 0);
}

// A server restarted from its AOF with its clock behind finds a tat far in
// the future: shmsem_check names REDIS-RATE, and the pool is stopped for
// at most a burst's refill (the first call stores the bucket clamped).
TEST_F(RatePool, ServerClockGoingBackStopsThePoolForAtMostABurst) {
  make(1, 10, 2);  // 100 ms, a refill of 200 ms
  std::vector<std::string> t = g_server->command({"TIME"});
  const long long hour_ahead =
      std::stoll(t.at(0)) * 1000000 + std::stoll(t.at(1)) + 3600000000ll;
  g_server->command({"HSET", base_, "tat_us", std::to_string(hour_ahead)});
  EXPECT_EQ(shmsem_check(s_), -EUCLEAN);
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_try_acquire(s_, &l), -EAGAIN);  // stores the clamp
  EXPECT_EQ(shmsem_check(s_), 0);
  const auto t0 = Clock::now();
  ASSERT_EQ(shmsem_acquire(s_, &l), 0);
  const int64_t ms = ms_since(t0);
  printf("a tat an hour ahead stopped the pool for %lld ms\n", (long long)ms);
  EXPECT_LE(ms, 200 + 80);
  EXPECT_EQ(shmsem_release(s_, &l), 0);
}

// The client's clock runs 1000 times fast: its head wakes far too early
// and asks, the server tells it again how long on its own clock, and the
// grants still come at 100/s.
std::atomic<uint64_t> g_fast_base{0};
uint64_t fast_clock() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t real = uint64_t(ts.tv_sec) * kSec + uint64_t(ts.tv_nsec);
  const uint64_t base = g_fast_base.load();
  return base + (real - base) * 1000;
}

TEST_F(RatePool, TheServersClockDecidesNotTheClients) {
  make(1, 100, 1);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  g_fast_base = uint64_t(ts.tv_sec) * kSec + uint64_t(ts.tv_nsec);
  shmsem::testing::set_clock(fast_clock);
  const auto t0 = Clock::now();
  int failed = 0;
  for (int i = 0; i < 20; i++) {
    shmsem_lease_t l;
    if (shmsem_acquire(s_, &l) != 0 || shmsem_release(s_, &l) != 0) failed++;
  }
  const int64_t ms = ms_since(t0);
  shmsem::testing::set_clock(nullptr);
  printf("20 grants at 100/s with a client clock 1000x fast: %lld ms\n",
         (long long)ms);
  EXPECT_EQ(failed, 0);
  EXPECT_GE(ms, 185);  // 19 intervals of 10 ms on the server's clock
  EXPECT_LE(ms, 1000);
}

}  // namespace
}  // namespace shmsem::test
