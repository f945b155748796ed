// Round trips of the Redis backend against the floor, on a server it
// starts (redis_server.h), over the unix socket and TCP loopback: an
// uncontended try_acquire + release against two PINGs on one connection
// (the floor: two round trips), a blocking acquire + release, and the
// hand-off from a release to a waiter blocked in another thread. Prints
// microseconds per operation and the ratios; not a test (no assertion):
// `shmsem_redis_roundtrip [ITERATIONS]`.
#include <hiredis/hiredis.h>
#include <shmsem/shmsem.h>
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "redis_server.h"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0, int n) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
         n;
}

double two_pings(const shmsem::test::RedisServer &srv, bool tcp, int n) {
  const timeval tv{2, 0};
  redisContext *c =
      tcp ? redisConnectWithTimeout("127.0.0.1", srv.port(), tv)
          : redisConnectUnixWithTimeout(srv.socket_path().c_str(), tv);
  if (!c || c->err) return -1;
  const auto t0 = Clock::now();
  for (int i = 0; i < 2 * n; i++) freeReplyObject(redisCommand(c, "PING"));
  const double us = us_since(t0, n);
  redisFree(c);
  return us;
}

double try_release(shmsem_t *s, int n) {
  shmsem_lease_t l;
  const auto t0 = Clock::now();
  for (int i = 0; i < n; i++) {
    if (shmsem_try_acquire(s, &l) != 0 || shmsem_release(s, &l) != 0) return -1;
  }
  return us_since(t0, n);
}

// One permit passed back and forth between two threads: each pass is a
// release that grants the other thread's queued acquire.
double handoff(shmsem_t *s, int n) {
  shmsem_lease_t mine;
  if (shmsem_acquire(s, &mine) != 0) return -1;
  std::atomic<int> done{0};
  std::thread other([&] {
    for (int i = 0; i < n; i++) {
      shmsem_lease_t l;
      if (shmsem_acquire(s, &l) != 0) break;
      shmsem_release(s, &l);
    }
    done = 1;
  });
  const auto t0 = Clock::now();
  for (int i = 0; i < n; i++) {
    shmsem_release(s, &mine);
    if (shmsem_acquire(s, &mine) != 0) break;
  }
  const double us = us_since(t0, 2 * n);
  shmsem_release(s, &mine);
  other.join();
  return us;
}

void measure(const shmsem::test::RedisServer &srv, bool tcp, int n) {
  const std::string pool = shmsem::test::unique_pool("rt");
  const std::string name = tcp ? srv.tcp_name(pool) : srv.unix_name(pool);
  shmsem_config cfg{};
  cfg.permits = 1;
  shmsem_t *s = nullptr;
  if (shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s) != 0) {
    fprintf(stderr, "cannot create %s\n", name.c_str());
    return;
  }
  const double floor = two_pings(srv, tcp, n);
  const double pair = try_release(s, n);
  const double pass = handoff(s, n / 4 + 1);
  printf(
      "%-5s two PINGs %7.1f us | try+release %7.1f us (%.2fx) | "
      "hand-off %7.1f us (%.2fx one round trip)\n",
      tcp ? "tcp" : "unix", floor, pair, pair / floor, pass,
      pass / (floor / 2));
  shmsem_detach(s);
  shmsem_unlink(name.c_str());
}

}  // namespace

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2000;
  for (bool fsync_always : {true, false}) {
    shmsem::test::RedisServer srv(fsync_always);
    if (!srv.start()) {
      fprintf(stderr, "redis-server: %s\n", srv.error().c_str());
      return 1;
    }
    printf("appendfsync %s:\n", fsync_always ? "always" : "everysec");
    measure(srv, false, n);
    measure(srv, true, n);
  }
  return 0;
}
