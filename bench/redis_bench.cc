// The Redis backend against its floors and against a minimal Lua
// semaphore (issue 27), on redis-servers this binary starts itself
// (tests/redis/redis_server.h: appendonly yes, one with appendfsync
// everysec and one with always), over the unix socket and TCP loopback,
// in one run:
//   Uncontended   acquire + release against two PINGs on one connection
//                 (the floor: two round trips; aim <= 1.3x), and the Lua
//                 semaphore's EVALSHA + DECR beside it, interleaved.
//   HandOff       a release in one process to the return of the acquire
//                 blocked in another (CLOCK_MONOTONIC in both) against one
//                 PING round trip (aim <= 2x); the Lua waiter polls every
//                 1 ms, as redis-semaphore's waiters do.
//   Contended     K = 8 processes on one permit: throughput, Jain's index
//                 of acquisitions per process, p99 wait.
//   Queue10k      10,000 waiters queued by raw FCALLs on a few pipelined
//                 connections (no process behind them: the pool's waiter
//                 keep-alive is stretched to 10 minutes by hand so none is
//                 reaped), then shmsem_stat, shmsem_inspect and `shmsem
//                 status` over them; beside them the server time of one
//                 keep-alive round of 10,000 waiters against one 1 ms
//                 polling round of 10,000 Lua waiters.
//   ServerCost    INFO commandstats around 1,000 calls: the server's
//                 microseconds per FCALL/EVALSHA and the commands each runs
//                 (redis.call count); the server's CPU per pair against two
//                 PINGs (/proc/PID/schedstat). appendfsync everysec only.
// Ratios are counters. Benchmarks report; nothing here asserts a timing.
// Usage: shmsem_redis_bench [--cli PATH_TO_shmsem] [benchmark flags]
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../tests/redis/redis_server.h"
#include "common.h"

namespace {

using bench::now_ns;
using shmsem::test::RedisServer;

std::string g_cli;  // the shmsem command, for `shmsem status`

// ---------------------------------------------------------------- helpers

struct Target {
  RedisServer *srv;
  bool tcp;
  std::string name(const std::string &pool) const {
    return tcp ? srv->tcp_name(pool) : srv->unix_name(pool);
  }
};

redisContext *dial(const Target &t) {
  const timeval tv{5, 0};
  redisContext *c =
      t.tcp ? redisConnectWithTimeout("127.0.0.1", t.srv->port(), tv)
            : redisConnectUnixWithTimeout(t.srv->socket_path().c_str(), tv);
  if (!c || c->err) {
    fprintf(stderr, "bench: cannot connect: %s\n", c ? c->errstr : "oom");
    if (c) redisFree(c);
    return nullptr;
  }
  if (t.tcp) redisEnableKeepAlive(c);
  return c;
}

// One command, its reply discarded; false on a broken connection.
bool run(redisContext *c, const std::vector<std::string> &args) {
  std::vector<const char *> v;
  std::vector<size_t> l;
  for (const std::string &a : args) {
    v.push_back(a.data());
    l.push_back(a.size());
  }
  void *r = redisCommandArgv(c, int(v.size()), v.data(), l.data());
  if (!r) return false;
  freeReplyObject(r);
  return true;
}

uint64_t ping_ns(redisContext *c, int n) {
  const uint64_t t0 = now_ns();
  for (int i = 0; i < n; i++) run(c, {"PING"});
  return now_ns() - t0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = size_t(q * double(v.size()));
  return v[std::min(i, v.size() - 1)];
}

// A shmsem pool on `t`, created afresh, unlinked on scope exit.
class Pool {
 public:
  Pool(const Target &t, const char *tag, uint32_t max_waiters = 0,
       uint32_t permits = 1)
      : pool_(shmsem::test::unique_pool(tag)), name_(t.name(pool_)) {
    shmsem_config cfg{};
    cfg.permits = permits;
    cfg.max_waiters = max_waiters;
    const int e = shmsem_create(name_.c_str(), &cfg, SHMSEM_EXCL, &s_);
    if (e < 0) fprintf(stderr, "bench: create %s: %d\n", name_.c_str(), e);
  }
  ~Pool() {
    if (s_) shmsem_detach(s_);
    shmsem_unlink(name_.c_str());
  }
  shmsem_t *get() const { return s_; }
  const std::string &name() const { return name_; }
  const std::string &pool() const { return pool_; }

 private:
  std::string pool_, name_;
  shmsem_t *s_ = nullptr;
};

// ------------------------------------------------- the Lua semaphore
// A counting semaphore in the manner of redis-semaphore: one key holding
// the count, acquired by a script that increments it if below the limit,
// released by DECR; a waiter retries every 1 ms. No queue, no lease.

constexpr char kLuaAcquire[] =
    "local v = tonumber(redis.call('GET', KEYS[1]) or '0') "
    "if v < tonumber(ARGV[1]) then redis.call('INCR', KEYS[1]) return 1 end "
    "return 0";
constexpr uint64_t kPollNs = 1000000;

class LuaSem {
 public:
  LuaSem(const Target &t, std::string key) : key_(std::move(key)) {
    c_ = dial(t);
    if (!c_) return;
    auto *r = static_cast<redisReply *>(
        redisCommand(c_, "SCRIPT LOAD %s", kLuaAcquire));
    if (r && r->type == REDIS_REPLY_STRING) sha_.assign(r->str, r->len);
    if (r) freeReplyObject(r);
  }
  ~LuaSem() {
    if (c_) redisFree(c_);
  }
  bool ok() const { return c_ && !sha_.empty(); }
  redisContext *conn() const { return c_; }
  bool try_acquire() {
    auto *r = static_cast<redisReply *>(
        redisCommand(c_, "EVALSHA %s 1 %s 1", sha_.c_str(), key_.c_str()));
    const bool got = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (r) freeReplyObject(r);
    return got;
  }
  // Blocks, polling every 1 ms; `first_miss` runs after the first failed
  // try (the waiter is now polling).
  template <class F>
  void acquire(F first_miss) {
    if (try_acquire()) return;
    first_miss();
    do bench::sleep_ns(kPollNs);
    while (!try_acquire());
  }
  void acquire() {
    acquire([] {});
  }
  void release() { run(c_, {"DECR", key_}); }

 private:
  redisContext *c_ = nullptr;
  std::string key_, sha_;
};

std::string lua_key() { return "luasem:" + shmsem::test::unique_pool("lua"); }

// ---------------------------------------------------------- Uncontended

// Each iteration: two PINGs, a shmsem acquire + release, a Lua EVALSHA +
// DECR, on three connections of this thread, interleaved so that drift
// falls on all three alike. The iteration time is shmsem's.
void BM_Uncontended(benchmark::State &state, Target t) {
  Pool pool(t, "unc");
  LuaSem lua(t, lua_key());
  redisContext *pc = dial(t);
  if (!pool.get() || !lua.ok() || !pc) {
    state.SkipWithError("no server");
    if (pc) redisFree(pc);
    return;
  }
  uint64_t ping = 0, sem = 0, luans = 0;
  for (auto _ : state) {
    ping += ping_ns(pc, 2);
    shmsem_lease_t l;
    uint64_t t0 = now_ns();
    if (shmsem_acquire(pool.get(), &l) != 0 ||
        shmsem_release(pool.get(), &l) != 0) {
      state.SkipWithError("acquire/release failed");
      break;
    }
    const uint64_t d = now_ns() - t0;
    sem += d;
    state.SetIterationTime(double(d) / 1e9);
    t0 = now_ns();
    lua.acquire();
    lua.release();
    luans += now_ns() - t0;
  }
  const double n = double(state.iterations()) * 1000;
  state.counters["ping2_us"] = double(ping) / n;
  state.counters["shmsem_us"] = double(sem) / n;
  state.counters["lua_us"] = double(luans) / n;
  state.counters["shmsem_x_2ping"] = double(sem) / double(ping);
  state.counters["lua_x_2ping"] = double(luans) / double(ping);
  state.counters["shmsem_x_lua"] = double(sem) / double(luans);
  redisFree(pc);
}

}  // namespace

namespace {

// ------------------------------------------------------------- HandOff

// One round i: the parent holds the permit and lets the child go; the
// child blocks (shmsem: queued on the server; Lua: polling); the parent
// releases at t0; the child stamps its return and gives the permit back.
struct HandOffShared {
  std::atomic<uint32_t> go, queued, done, stop;
  std::atomic<uint64_t> returned_ns;
};

// Wait until *w >= v (or stop).
void wait_at_least(HandOffShared *sh, std::atomic<uint32_t> *w, uint32_t v) {
  for (;;) {
    const uint32_t cur = w->load(std::memory_order_acquire);
    if (cur >= v || sh->stop.load()) return;
    bench::futex_wait(w, cur);
  }
}

void shmsem_waiter(HandOffShared *sh, const std::string &name) {
  shmsem_t *s = nullptr;
  if (shmsem_open(name.c_str(), 0, &s) != 0) _exit(1);
  for (uint32_t i = 1;; i++) {
    wait_at_least(sh, &sh->go, i);
    if (sh->stop.load()) break;
    shmsem_lease_t l;
    if (shmsem_acquire(s, &l) != 0) _exit(2);
    sh->returned_ns.store(now_ns());
    shmsem_release(s, &l);
    bench::store_and_wake(&sh->done, i);
  }
  shmsem_detach(s);
}

void lua_waiter(HandOffShared *sh, const Target &t, const std::string &key) {
  LuaSem lua(t, key);
  if (!lua.ok()) _exit(1);
  for (uint32_t i = 1;; i++) {
    wait_at_least(sh, &sh->go, i);
    if (sh->stop.load()) break;
    lua.acquire([&] { bench::store_and_wake(&sh->queued, i); });
    sh->returned_ns.store(now_ns());
    lua.release();
    bench::store_and_wake(&sh->done, i);
  }
}

// Until the pool shows one waiter queued: a few round trips.
bool until_queued(shmsem_t *s) {
  for (int k = 0; k < 100000; k++) {
    struct shmsem_stat st;
    if (shmsem_stat(s, &st) != 0) return false;
    if (st.waiting == 1) return true;
    bench::sleep_ns(20000);
  }
  return false;
}

// One shmsem round; the hand-off in ns (0 on failure).
// *release_ns: the releasing call's own time (a round trip and the
// function's run on the server).
uint64_t shmsem_round(HandOffShared *sh, shmsem_t *s, shmsem_lease_t *held,
                      uint32_t i, uint64_t *release_ns) {
  bench::store_and_wake(&sh->go, i);
  if (!until_queued(s)) return 0;
  const uint64_t t0 = now_ns();
  if (shmsem_release(s, held) != 0) return 0;
  *release_ns = now_ns() - t0;
  bench::wait_until_equal(&sh->done, i);
  const uint64_t d = sh->returned_ns.load() - t0;
  return shmsem_acquire(s, held) == 0 ? d : 0;
}

uint64_t lua_round(HandOffShared *sh, LuaSem *lua, uint32_t i) {
  bench::store_and_wake(&sh->go, i);
  bench::wait_until_equal(&sh->queued, i);
  const uint64_t t0 = now_ns();
  lua->release();
  bench::wait_until_equal(&sh->done, i);
  const uint64_t d = sh->returned_ns.load() - t0;
  lua->acquire();
  return d;
}

void stop_children(HandOffShared *a, HandOffShared *b, bench::Children *ch) {
  for (HandOffShared *sh : {a, b}) {
    sh->stop.store(1);
    bench::store_and_wake(&sh->go, UINT32_MAX);
  }
  ch->wait_all(10'000'000'000u);
}

void handoff_counters(benchmark::State &state, const std::vector<double> &rtt,
                      const std::vector<double> &sem,
                      const std::vector<double> &lua) {
  const double r = median(rtt), s = median(sem), l = median(lua);
  state.counters["ping_us"] = r;
  state.counters["shmsem_med_us"] = s;
  state.counters["shmsem_p99_us"] = quantile(sem, 0.99);
  state.counters["lua_med_us"] = l;
  state.counters["lua_p99_us"] = quantile(lua, 0.99);
  state.counters["shmsem_x_rtt"] = s / r;
  state.counters["lua_x_rtt"] = l / r;
  state.counters["shmsem_x_lua"] = s / l;
}

// Each iteration: one PING (the round trip), one shmsem hand-off, one Lua
// hand-off, each to its own waiting child process.
void BM_HandOff(benchmark::State &state, Target t) {
  Pool pool(t, "ho");
  const std::string key = lua_key();
  LuaSem lua(t, key);
  redisContext *pc = dial(t);
  shmsem_lease_t held;
  if (!pool.get() || !lua.ok() || !pc || shmsem_acquire(pool.get(), &held)) {
    state.SkipWithError("no server");
    if (pc) redisFree(pc);
    return;
  }
  lua.acquire();
  auto *a = bench::shared_new<HandOffShared>();
  auto *b = bench::shared_new<HandOffShared>();
  bench::Children ch;
  ch.spawn(0, [&](int) { shmsem_waiter(a, pool.name()); });
  ch.spawn(1, [&](int) { lua_waiter(b, t, key); });
  std::vector<double> rtt, sem, luas, release;
  uint32_t i = 0;
  for (auto _ : state) {
    i++;
    rtt.push_back(double(ping_ns(pc, 1)) / 1e3);
    uint64_t rel = 0;
    const uint64_t d = shmsem_round(a, pool.get(), &held, i, &rel);
    if (d == 0) {
      state.SkipWithError("shmsem hand-off failed");
      break;
    }
    release.push_back(double(rel) / 1e3);
    state.SetIterationTime(double(d) / 1e9);
    sem.push_back(double(d) / 1e3);
    luas.push_back(double(lua_round(b, &lua, i)) / 1e3);
  }
  stop_children(a, b, &ch);
  handoff_counters(state, rtt, sem, luas);
  state.counters["release_med_us"] = median(release);
  shmsem_release(pool.get(), &held);
  lua.release();
  bench::shared_delete(a);
  bench::shared_delete(b);
  redisFree(pc);
}

}  // namespace

namespace {

// ----------------------------------------------------------- Contended

constexpr int kK = 8;
constexpr uint64_t kWindowNs = 1'000'000'000u;

struct KShared {
  std::atomic<uint32_t> ready, start;
  uint64_t end_ns;
  uint64_t count[kK];
  bench::Histogram hist[kK];  // acquire's wait (ns)
};

// A process of the window: acquire, release, as fast as it can; counts
// and waits of acquires that returned within the window.
template <class Acquire, class Release>
void contend(KShared *sh, int i, Acquire acquire, Release release) {
  sh->ready.fetch_add(1);
  bench::futex_wake(&sh->ready, 1);
  bench::wait_until_equal(&sh->start, 1);
  const uint64_t end = sh->end_ns;
  for (;;) {
    const uint64_t t0 = now_ns();
    if (t0 >= end || !acquire()) break;
    const uint64_t t1 = now_ns();
    release();
    if (t1 > end) break;
    sh->count[i]++;
    sh->hist[i].add(t1 - t0);
  }
}

void shmsem_contender(KShared *sh, int i, const std::string &name) {
  shmsem_t *s = nullptr;
  if (shmsem_open(name.c_str(), 0, &s) != 0) _exit(1);
  shmsem_lease_t l;
  auto acquire = [&] {
    // Read after the start: the window's end is set just before it.
    const uint64_t late = sh->end_ns + 5'000'000'000u;  // never stuck
    const timespec dl{time_t(late / 1'000'000'000u),
                      long(late % 1'000'000'000u)};
    const int e = shmsem_acquire_until(s, &dl, &l);
    if (e != 0) fprintf(stderr, "bench: K=8 acquire: %s\n", strerror(-e));
    return e == 0;
  };
  contend(sh, i, acquire, [&] { shmsem_release(s, &l); });
  shmsem_detach(s);
}

void lua_contender(KShared *sh, int i, const Target &t,
                   const std::string &key) {
  LuaSem lua(t, key);
  if (!lua.ok()) _exit(1);
  contend(
      sh, i,
      [&] {
        lua.acquire();
        return true;
      },
      [&] { lua.release(); });
}

// One window of K processes; their counts and waits added to `tot`.
void window(KShared *sh, const std::function<void(int)> &body, KShared *tot) {
  memset(static_cast<void *>(sh), 0, sizeof *sh);
  bench::Children ch;
  for (int i = 0; i < kK; i++) ch.spawn(i, body);
  for (uint32_t r; (r = sh->ready.load()) < kK;)
    bench::futex_wait(&sh->ready, r);
  sh->end_ns = now_ns() + kWindowNs;
  bench::store_and_wake(&sh->start, 1);
  ch.wait_all(kWindowNs + 20'000'000'000u);
  for (int i = 0; i < kK; i++) {
    tot->count[i] += sh->count[i];
    tot->hist[i].merge(sh->hist[i]);
  }
}

struct KResult {
  double per_s, jain, p50_us, p99_us;
};

KResult k_result(const KShared &tot, int windows) {
  std::vector<double> x;
  bench::Histogram all{};
  double sum = 0;
  for (int i = 0; i < kK; i++) {
    x.push_back(double(tot.count[i]));
    sum += double(tot.count[i]);
    all.merge(tot.hist[i]);
  }
  return {sum / (windows * double(kWindowNs) / 1e9), bench::jain_index(x),
          double(all.quantile(0.5)) / 1e3, double(all.quantile(0.99)) / 1e3};
}

// K = 8 processes on one permit, acquiring and releasing back to back:
// two 1 s windows each, shmsem and Lua alternating.
void BM_Contended(benchmark::State &state, Target t) {
  Pool pool(t, "k8");
  const std::string key = lua_key();
  if (!pool.get()) {
    state.SkipWithError("no server");
    return;
  }
  auto *sh = bench::shared_new<KShared>();
  auto *ts = bench::shared_new<KShared>();
  auto *tl = bench::shared_new<KShared>();
  constexpr int kWindows = 2;
  for (auto _ : state) {
    for (int w = 0; w < kWindows; w++) {
      window(
          sh, [&](int i) { shmsem_contender(sh, i, pool.name()); }, ts);
      window(
          sh, [&](int i) { lua_contender(sh, i, t, key); }, tl);
    }
  }
  const KResult s = k_result(*ts, kWindows), l = k_result(*tl, kWindows);
  state.counters["shmsem_per_s"] = s.per_s;
  state.counters["shmsem_jain"] = s.jain;
  state.counters["shmsem_p50_us"] = s.p50_us;
  state.counters["shmsem_p99_us"] = s.p99_us;
  state.counters["lua_per_s"] = l.per_s;
  state.counters["lua_jain"] = l.jain;
  state.counters["lua_p50_us"] = l.p50_us;
  state.counters["lua_p99_us"] = l.p99_us;
  state.counters["shmsem_x_lua"] = s.per_s / l.per_s;
  bench::shared_delete(sh);
  bench::shared_delete(ts);
  bench::shared_delete(tl);
}

}  // namespace

namespace {

// ------------------------------------------------------------ Queue10k

constexpr int kQueued = 10000;
constexpr int kPipes = 4;

// `cmds` pipelined over `cs` (round robin); `each(i, reply)` for every
// reply, in order per connection. false on a broken connection.
template <class F>
bool pipeline(const std::vector<redisContext *> &cs,
              const std::vector<std::vector<std::string>> &cmds, F each) {
  for (size_t i = 0; i < cmds.size(); i++) {
    std::vector<const char *> v;
    std::vector<size_t> l;
    for (const std::string &a : cmds[i]) {
      v.push_back(a.data());
      l.push_back(a.size());
    }
    redisAppendCommandArgv(cs[i % cs.size()], int(v.size()), v.data(),
                           l.data());
  }
  for (size_t i = 0; i < cmds.size(); i++) {
    void *r = nullptr;
    if (redisGetReply(cs[i % cs.size()], &r) != REDIS_OK || !r) return false;
    each(i, static_cast<redisReply *>(r));
    freeReplyObject(r);
  }
  return true;
}

// INFO commandstats: command -> {calls, usec}.
std::map<std::string, std::pair<double, double>> commandstats(redisContext *c) {
  std::map<std::string, std::pair<double, double>> m;
  auto *r = static_cast<redisReply *>(redisCommand(c, "INFO commandstats"));
  if (!r || r->type != REDIS_REPLY_STRING) {
    if (r) freeReplyObject(r);
    return m;
  }
  const char *p = r->str;
  char name[64];
  double calls, usec;
  while ((p = strstr(p, "cmdstat_")) != nullptr) {
    if (sscanf(p, "cmdstat_%63[^:]:calls=%lf,usec=%lf", name, &calls, &usec) ==
        3)
      m[name] = {calls, usec};
    p += 8;
  }
  freeReplyObject(r);
  return m;
}

double server_ms(redisContext *c, const char *cmd) {
  return commandstats(c)[cmd].second / 1e3;
}

// Milliseconds of `f`, median of `reps`.
template <class F>
double time_ms(int reps, F f) {
  std::vector<double> v;
  for (int i = 0; i < reps; i++) {
    const uint64_t t0 = now_ns();
    f();
    v.push_back(double(now_ns() - t0) / 1e6);
  }
  return median(v);
}

// `shmsem status [--json] NAME` to /dev/null.
void cli_status(const std::string &name, bool json) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(126);
    if (json)
      execl(g_cli.c_str(), "shmsem", "status", "--json", name.c_str(),
            static_cast<char *>(nullptr));
    else
      execl(g_cli.c_str(), "shmsem", "status", name.c_str(),
            static_cast<char *>(nullptr));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) > 1)
    fprintf(stderr, "bench: shmsem status exited %d\n", WEXITSTATUS(st));
}

struct Queue {
  std::vector<redisContext *> cs;
  std::string base, id;
  std::vector<std::string> tickets;
  ~Queue() {
    for (redisContext *c : cs) redisFree(c);
  }
};

// kQueued waiters by raw FCALL shmsem_acquire (mode 1: queue), their
// keep-alive stretched first. Microseconds per waiter, or -1.
double enqueue(const Target &t, const Pool &pool, Queue *q) {
  for (int i = 0; i < kPipes; i++) q->cs.push_back(dial(t));
  for (const redisContext *c : q->cs)
    if (!c) return -1;
  q->base = "shmsem:{" + pool.pool() + "}";
  auto *r = static_cast<redisReply *>(
      redisCommand(q->cs[0], "HGET %s id", q->base.c_str()));
  if (r && r->type == REDIS_REPLY_STRING) q->id.assign(r->str, r->len);
  if (r) freeReplyObject(r);
  // No process renews these waiters: 10 minutes of keep-alive.
  run(q->cs[0], {"HSET", q->base, "wttl_ms", "600000"});
  std::vector<std::vector<std::string>> cmds(
      kQueued, {"FCALL", "shmsem_acquire", "1", q->base, q->id, "1", "1",
                std::to_string(getpid())});
  const uint64_t t0 = now_ns();
  const bool ok = pipeline(q->cs, cmds, [&](size_t, redisReply *x) {
    if (x->type == REDIS_REPLY_ARRAY && x->elements == 2 &&
        x->element[1]->type == REDIS_REPLY_INTEGER)
      q->tickets.push_back(std::to_string(x->element[1]->integer));
  });
  const double us = double(now_ns() - t0) / 1e3 / kQueued;
  return ok && q->tickets.size() == size_t(kQueued) ? us : -1;
}

// Server milliseconds of one keep-alive round of the queue (every waiter
// renews every wttl/3) and of one 1 ms polling round of as many Lua
// waiters on a full Lua semaphore.
void idle_costs(benchmark::State &state, const Target &t, Queue *q) {
  std::vector<std::vector<std::string>> renew;
  for (const std::string &tk : q->tickets)
    renew.push_back({"FCALL", "shmsem_wait_renew", "1", q->base, q->id, tk});
  const double f0 = server_ms(q->cs[0], "fcall");
  pipeline(q->cs, renew, [](size_t, redisReply *) {});
  const double renew_ms = server_ms(q->cs[0], "fcall") - f0;
  const std::string key = lua_key();
  LuaSem lua(t, key);
  lua.acquire();  // full: every try below fails
  std::vector<std::vector<std::string>> polls;
  auto *r = static_cast<redisReply *>(
      redisCommand(q->cs[0], "SCRIPT LOAD %s", kLuaAcquire));
  const std::string sha = r && r->str ? std::string(r->str, r->len) : "";
  if (r) freeReplyObject(r);
  for (int i = 0; i < kQueued; i++)
    polls.push_back({"EVALSHA", sha, "1", key, "1"});
  const double e0 = server_ms(q->cs[0], "evalsha");
  pipeline(q->cs, polls, [](size_t, redisReply *) {});
  const double poll_ms = server_ms(q->cs[0], "evalsha") - e0;
  lua.release();
  state.counters["renew_round_ms"] = renew_ms;
  state.counters["renew_cpu_share"] = renew_ms / (2000.0 / 3);
  state.counters["lua_poll_round_ms"] = poll_ms;
  state.counters["lua_poll_cpu_share"] = poll_ms / 1.0;
  state.counters["lua_status_us"] = time_ms(20,
                                            [&] {
                                              run(lua.conn(), {"GET", "x"});
                                            }) *
                                    1e3;
}

// 10,000 queued waiters: what stat, inspect and `shmsem status` cost over
// them (and over an empty queue, the same pool before enqueueing).
void BM_Queue10k(benchmark::State &state, Target t) {
  Pool pool(t, "q10k", kQueued + 64);
  shmsem_lease_t held;
  if (!pool.get() || shmsem_acquire(pool.get(), &held) != 0) {
    state.SkipWithError("no server");
    return;
  }
  struct shmsem_stat st;
  const double stat0 = time_ms(20, [&] { shmsem_stat(pool.get(), &st); });
  Queue q;
  std::vector<shmsem_waiter_info> w(kQueued + 64);
  std::vector<shmsem_holder> h(4);
  shmsem_inspection in;
  for (auto _ : state) {
    const double enq = enqueue(t, pool, &q);
    if (enq < 0 || shmsem_stat(pool.get(), &st) != 0 || st.waiting != kQueued) {
      state.SkipWithError("enqueue failed");
      break;
    }
    state.counters["enqueue_us"] = enq;
    state.counters["stat0_ms"] = stat0;
    state.counters["stat_ms"] =
        time_ms(20, [&] { shmsem_stat(pool.get(), &st); });
    state.counters["inspect_ms"] = time_ms(5, [&] {
      shmsem_inspect(pool.get(), &in, h.data(), 4, w.data(), kQueued + 64);
    });
    state.counters["status_ms"] =
        time_ms(3, [&] { cli_status(pool.name(), false); });
    state.counters["status_json_ms"] =
        time_ms(3, [&] { cli_status(pool.name(), true); });
    idle_costs(state, t, &q);
  }
  shmsem_release(pool.get(), &held);
}

}  // namespace

namespace {

// ---------------------------------------------------------- ServerCost

constexpr int kPairs = 1000;

// Commands run inside the calls (every command but the callers') and the
// callers' server microseconds, per call, between two INFO commandstats.
struct Cost {
  double inner = 0, us = 0;
  std::string detail;
};

template <class F>
Cost cost_of(redisContext *c, const char *caller, F f) {
  run(c, {"CONFIG", "RESETSTAT"});
  f();
  Cost k;
  for (const auto &[cmd, v] : commandstats(c)) {
    if (cmd.compare(0, 6, "config") == 0 || cmd == "info") continue;
    if (cmd == caller) {
      k.us = v.second / kPairs;
      continue;
    }
    k.inner += v.first / kPairs;
    char buf[80];
    snprintf(buf, sizeof buf, " %s %.2f", cmd.c_str(), v.first / kPairs);
    k.detail += buf;
  }
  return k;
}

// The server's process id (INFO server).
pid_t server_pid(redisContext *c) {
  auto *r = static_cast<redisReply *>(redisCommand(c, "INFO server"));
  long pid = 0;
  const char *p = r && r->str ? strstr(r->str, "process_id:") : nullptr;
  if (p) pid = strtol(p + 11, nullptr, 10);
  if (r) freeReplyObject(r);
  return pid_t(pid);
}

// Nanoseconds the server's main thread has run on a CPU (schedstat): what
// a call costs the server, system calls included, without the time it
// waited for a CPU (commandstats' usec counts that too).
uint64_t server_cpu_ns(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/schedstat";
  FILE *f = fopen(path.c_str(), "r");
  unsigned long long ns = 0;
  if (f) {
    if (fscanf(f, "%llu", &ns) != 1) ns = 0;
    fclose(f);
  }
  return ns;
}

// Server CPU microseconds per pair of each: two PINGs, shmsem acquire +
// release, Lua EVALSHA + DECR.
void server_cpu(benchmark::State &state, redisContext *c, shmsem_t *s,
                LuaSem *lua) {
  const pid_t pid = server_pid(c);
  constexpr int kN = 2000;
  auto per_pair = [&](auto f) {
    const uint64_t t0 = server_cpu_ns(pid);
    for (int i = 0; i < kN; i++) f();
    return double(server_cpu_ns(pid) - t0) / 1e3 / kN;
  };
  const double ping = per_pair([&] { ping_ns(c, 2); });
  const double sem = per_pair([&] {
    shmsem_lease_t l;
    if (shmsem_acquire(s, &l) == 0) shmsem_release(s, &l);
  });
  const double lu = per_pair([&] { lua->try_acquire(), lua->release(); });
  state.counters["cpu_ping2_us"] = ping;
  state.counters["cpu_shmsem_us"] = sem;
  state.counters["cpu_lua_us"] = lu;
}

// kPairs acquires, then kPairs releases (a pool of kPairs permits, so
// each acquire grants at once), then kPairs Lua EVALSHA and DECR.
void BM_ServerCost(benchmark::State &state, Target t) {
  Pool pool(t, "cost", 0, kPairs);
  const std::string key = lua_key();
  LuaSem lua(t, key);
  redisContext *c = dial(t);
  if (!pool.get() || !lua.ok() || !c) {
    state.SkipWithError("no server");
    if (c) redisFree(c);
    return;
  }
  std::vector<shmsem_lease_t> l(kPairs);
  Cost a, r, la;
  for (auto _ : state) {
    a = cost_of(c, "fcall", [&] {
      for (auto &x : l) shmsem_acquire(pool.get(), &x);
    });
    r = cost_of(c, "fcall", [&] {
      for (auto &x : l) shmsem_release(pool.get(), &x);
    });
    la = cost_of(c, "evalsha", [&] {
      for (int i = 0; i < kPairs; i++) lua.try_acquire(), lua.release();
    });
    server_cpu(state, c, pool.get(), &lua);
  }
  state.counters["acquire_server_us"] = a.us;
  state.counters["acquire_calls"] = a.inner;
  state.counters["release_server_us"] = r.us;
  state.counters["release_calls"] = r.inner;
  state.counters["lua_evalsha_server_us"] = la.us;
  state.counters["lua_calls"] = la.inner;
  printf("bench: redis.calls per acquire:%s\n", a.detail.c_str());
  printf("bench: redis.calls per release:%s\n", r.detail.c_str());
  printf("bench: commands per Lua try+DECR:%s\n", la.detail.c_str());
  redisFree(c);
}

// The shmsem command beside this binary (build/bench -> build/tools).
std::string default_cli() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "shmsem";
  std::string p(buf, size_t(n));
  return p.substr(0, p.rfind('/')) + "/../tools/shmsem";
}

std::string loadavg() {
  char buf[128] = "";
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
    fclose(f);
  }
  std::string s(buf);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

void register_all(RedisServer *srv, const char *fsync) {
  for (bool tcp : {false, true}) {
    const Target t{srv, tcp};
    const std::string at =
        std::string("/") + fsync + "/" + (tcp ? "tcp" : "unix");
    benchmark::RegisterBenchmark(("Redis/Uncontended" + at).c_str(),
                                 BM_Uncontended, t)
        ->Iterations(3000)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("Redis/HandOff" + at).c_str(), BM_HandOff, t)
        ->Iterations(300)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("Redis/Contended/K8" + at).c_str(),
                                 BM_Contended, t)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Redis/Queue10k" + at).c_str(), BM_Queue10k,
                                 t)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
    // The functions' run on the server does not depend on appendfsync
    // (the AOF is written and fsync'd after the calls, in beforeSleep);
    // under `always` these 10,000 writes would take a minute of fsyncs.
    if (strcmp(fsync, "everysec") == 0)
      benchmark::RegisterBenchmark(("Redis/ServerCost" + at).c_str(),
                                   BM_ServerCost, t)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char **argv) {
  g_cli = default_cli();
  std::vector<char *> rest{argv[0]};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--cli") == 0 && i + 1 < argc)
      g_cli = argv[++i];
    else
      rest.push_back(argv[i]);
  }
  int n = int(rest.size());
  // The servers: appendonly yes; everysec, then always (the safety
  // envelope, docs/REDIS.md).
  RedisServer everysec(false), always(true);
  for (RedisServer *s : {&everysec, &always}) {
    if (!s->start()) {
      fprintf(stderr, "bench: redis-server: %s\n", s->error().c_str());
      return 1;
    }
  }
  register_all(&everysec, "everysec");
  register_all(&always, "always");
  benchmark::AddCustomContext("loadavg_before", loadavg());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fprintf(stderr, "bench: loadavg after: %s\n", loadavg().c_str());
  return 0;
}
