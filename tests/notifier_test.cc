// shmsem_notifier_*: a real poll(2) loop on the notifier's eventfd drives
// non-blocking waiters (shmsem_waiter_*) on a real segment, with grants
// from this process and from a forked one, deadlines, cancellation,
// shutdown, and the polling fallback for kernels without futex_waitv.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <shmsem/shmsem.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "notifier.h"
#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kNone = ~uint64_t{0};

timespec mono_in(uint64_t ns) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t t = uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec) + ns;
  return timespec{time_t(t / 1'000'000'000), long(t % 1'000'000'000)};
}

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

// The eventfds open in this process: a notifier's one descriptor. Not
// every descriptor: the death watch's helper thread opens a pidfd and
// closes it once its poll is submitted, at a moment no test controls
// (deathwatch.h); counting all of them failed under load.
int open_fds() {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (const dirent *e = readdir(d)) {
    char path[300], target[64] = {};
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    if (readlink(path, target, sizeof target - 1) > 0 &&
        strcmp(target, "anon_inode:[eventfd]") == 0)
      n++;
  }
  closedir(d);
  return n;
}

// Takes the polling fallback's feature away for one test.
class NoWaitv {
 public:
  NoWaitv() { testing::limit_liveness(detail::kLimitNoWaitv); }
  ~NoWaitv() { testing::limit_liveness(0); }
  NoWaitv(const NoWaitv &) = delete;
  NoWaitv &operator=(const NoWaitv &) = delete;
};

// A notifier for one test, destroyed at its end.
class Notifier {
 public:
  Notifier() { EXPECT_EQ(shmsem_notifier_create(&n_), 0); }
  ~Notifier() { shmsem_notifier_destroy(n_); }
  Notifier(const Notifier &) = delete;
  Notifier &operator=(const Notifier &) = delete;
  shmsem_notifier_t *get() const { return n_; }
  int fd() const { return shmsem_notifier_fd(n_); }

 private:
  shmsem_notifier_t *n_ = nullptr;
};

struct Completion {
  uint64_t user_data = kNone;
  int result = 1;
  shmsem_lease_t lease{};
};

// The loop a user writes: poll() the descriptor, take each ready waiter,
// poll it, add it again while it is still queued (its wake-by time came:
// its share of the watch). user_data is the waiter's index in `ws`.
// Returns the first wait that completes, or user_data kNone if none did in
// time. Waiters found ready with it stay in the ready list for next time.
Completion next_completion(
    shmsem_notifier_t *n, shmsem_waiter_t *ws,
    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (!readable(shmsem_notifier_fd(n), 100)) continue;
    uint64_t ud;
    while (shmsem_notifier_next(n, &ud) == 0) {
      Completion c;
      c.user_data = ud;
      c.result = shmsem_waiter_poll(&ws[ud], &c.lease);
      if (c.result != -EINPROGRESS) return c;
      EXPECT_EQ(shmsem_notifier_add(n, &ws[ud], ud), 0);
    }
  }
  return Completion{};
}

// The grant and timeout cases, shared with the polling fallback.
void grant_is_reported(bool polls) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  EXPECT_EQ(detail::notifier_polls(n.get()), polls);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_waiter_t w[1];
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start(s, &w[0], nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n.get(), &w[0], 0), 0);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  Completion c = next_completion(n.get(), w);
  ASSERT_EQ(c.user_data, 0u);
  ASSERT_EQ(c.result, 0);
  EXPECT_FALSE(readable(n.fd(), 0)) << "nothing else is ready";
  EXPECT_EQ(detail::notifier_polls(n.get()), polls) << "after a wait";
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &c.lease), 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

void timeout_is_reported(bool polls) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  EXPECT_EQ(detail::notifier_polls(n.get()), polls);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_waiter_t w[1];
  shmsem_lease_t l;
  const timespec deadline = mono_in(50 * kMs);
  ASSERT_EQ(shmsem_waiter_start(s, &w[0], &deadline, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n.get(), &w[0], 0), 0);
  Completion c = next_completion(n.get(), w);
  ASSERT_EQ(c.user_data, 0u);
  EXPECT_EQ(c.result, -ETIMEDOUT);
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  EXPECT_TRUE(now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec &&
                                               now.tv_nsec >= deadline.tv_nsec))
      << "not before the deadline";
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(s, &st), 0);
  EXPECT_EQ(st.available, 0u);
  EXPECT_EQ(st.waiting, 0u) << "no ghost in the queue";
  EXPECT_EQ(st.timeouts, 1u);
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

TEST(Notifier, GrantFromAnotherProcessMakesTheWaiterReady) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  // The child is forked before the notifier's thread exists, and releases
  // when told to.
  Shared<std::atomic<int>> go;
  Children kids;
  pid_t child = kids.spawn([&] {
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (go->load() == 0) {
      if (std::chrono::steady_clock::now() > end) return 2;
      usleep(200);
    }
    shmsem_t *c = seg.open_again();
    if (!c) return 3;
    shmsem_lease_t l = held;
    int r = shmsem_release(c, &l);
    shmsem_detach(c);
    return r == 0 ? 0 : 4;
  });
  ASSERT_GT(child, 0);
  Notifier n;
  shmsem_waiter_t w[1];
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start(s, &w[0], nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n.get(), &w[0], 0), 0);
  go->store(1);
  Completion c = next_completion(n.get(), w);
  EXPECT_EQ(kids.wait(child), 0);
  ASSERT_EQ(c.user_data, 0u);
  ASSERT_EQ(c.result, 0) << shmsem_strerror(c.result);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &c.lease), 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

TEST(Notifier, UsesFutexWaitvWhenTheKernelHasIt) {
  // With no words, a kernel that has futex_waitv says -EINVAL.
  if (syscall(SYS_futex_waitv, nullptr, 0, 0, nullptr, CLOCK_MONOTONIC) < 0 &&
      errno == ENOSYS)
    GTEST_SKIP() << "kernel lacks futex_waitv (Linux < 5.16)";
  grant_is_reported(false);
}

TEST(Notifier, WaiterGrantedBeforeItWasAddedIsReady) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_waiter_t w[1];
  ASSERT_EQ(shmsem_waiter_start(s, &w[0], nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_release(s, &held), 0);  // the word changes before add
  ASSERT_EQ(shmsem_notifier_add(n.get(), &w[0], 7), 0);
  ASSERT_TRUE(readable(n.fd(), 20000));
  uint64_t ud = 0;
  ASSERT_EQ(shmsem_notifier_next(n.get(), &ud), 0);
  EXPECT_EQ(ud, 7u);
  ASSERT_EQ(shmsem_waiter_poll(&w[0], &l), 0);
  EXPECT_EQ(shmsem_release(s, &l), 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

TEST(Notifier, WaitersCompleteInTheOrderTheyStarted) {
  constexpr int kWaiters = 5;
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_waiter_t w[kWaiters];
  for (int i = 0; i < kWaiters; i++) {
    shmsem_lease_t l;
    ASSERT_EQ(shmsem_waiter_start(s, &w[i], nullptr, &l), SHMSEM_QUEUED);
  }
  // Added in reverse: the order is the queue's, not the notifier's.
  for (int i = kWaiters - 1; i >= 0; i--)
    ASSERT_EQ(shmsem_notifier_add(n.get(), &w[i], uint64_t(i)), 0);
  for (int i = 0; i < kWaiters; i++) {
    ASSERT_EQ(shmsem_release(s, &held), 0);
    Completion c = next_completion(n.get(), w);
    ASSERT_EQ(c.user_data, uint64_t(i)) << "completion order == start order";
    ASSERT_EQ(c.result, 0);
    held = c.lease;
    EXPECT_COUNTS(s, 0, 1, 0, kWaiters - 1 - i);
  }
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

TEST(Notifier, WaiterWithADeadlineIsReadyAtItsWakeByTime) {
  timeout_is_reported(false);
}

TEST(Notifier, RemoveThenCancelWithdrawsTheWait) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n.get(), &w, 1), 0);
  ASSERT_EQ(shmsem_notifier_remove(n.get(), &w), 0);
  EXPECT_EQ(shmsem_notifier_remove(n.get(), &w), -ENOENT);
  EXPECT_EQ(shmsem_waiter_cancel(&w, &l), -ECANCELED);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  uint64_t ud;
  EXPECT_EQ(shmsem_notifier_next(n.get(), &ud), -EAGAIN);
  EXPECT_FALSE(readable(n.fd(), 0));
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

// The grant came first and was reported: remove takes the waiter out of
// the ready list (the descriptor is no longer readable), and cancel
// returns the lease.
TEST(Notifier, CancelAfterAReportedGrantReturnsTheLease) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n.get(), &w, 1), 0);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  ASSERT_TRUE(readable(n.fd(), 20000));
  ASSERT_EQ(shmsem_notifier_remove(n.get(), &w), 0);
  EXPECT_FALSE(readable(n.fd(), 0)) << "the ready list is empty again";
  uint64_t ud;
  EXPECT_EQ(shmsem_notifier_next(n.get(), &ud), -EAGAIN);
  ASSERT_EQ(shmsem_waiter_cancel(&w, &l), 0) << "the grant won";
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &l), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

// Removed first, then granted, then cancelled: the notifier no longer
// reports it, and cancel returns the lease.
TEST(Notifier, CancelAfterAnUnreportedGrantReturnsTheLease) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n.get(), &w, 1), 0);
  ASSERT_EQ(shmsem_notifier_remove(n.get(), &w), 0);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  EXPECT_COUNTS(s, 0, 0, 1, 0);  // reserved for the waiter
  ASSERT_EQ(shmsem_waiter_cancel(&w, &l), 0) << "the grant won";
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &l), 0);
  uint64_t ud;
  EXPECT_EQ(shmsem_notifier_next(n.get(), &ud), -EAGAIN);
  EXPECT_FALSE(readable(n.fd(), 0));
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

TEST(Notifier, ShutdownMakesEveryWaiterReady) {
  constexpr int kWaiters = 3;
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_waiter_t w[kWaiters];
  for (int i = 0; i < kWaiters; i++) {
    shmsem_lease_t l;
    ASSERT_EQ(shmsem_waiter_start(s, &w[i], nullptr, &l), SHMSEM_QUEUED);
    ASSERT_EQ(shmsem_notifier_add(n.get(), &w[i], uint64_t(i)), 0);
  }
  ASSERT_EQ(shmsem_shutdown(s), kWaiters);
  bool seen[kWaiters] = {};
  for (int i = 0; i < kWaiters; i++) {
    Completion c = next_completion(n.get(), w);
    ASSERT_LT(c.user_data, uint64_t(kWaiters));
    EXPECT_FALSE(seen[c.user_data]);
    seen[c.user_data] = true;
    EXPECT_EQ(c.result, -ESHUTDOWN);
  }
  EXPECT_FALSE(readable(n.fd(), 0));
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &held), 0) << "accepted after shutdown";
  EXPECT_EQ(shmsem_check(s), 0);
}

TEST(Notifier, AddBeyondTheMaximumIsENOSPC) {
  constexpr int kWaiters = SHMSEM_NOTIFIER_MAX + 1;
  Segment seg(1, 256);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  std::vector<shmsem_waiter_t> w(kWaiters);
  for (int i = 0; i < kWaiters; i++)
    ASSERT_EQ(shmsem_waiter_start(s, &w[i], nullptr, &l), SHMSEM_QUEUED);
  for (int i = 0; i < SHMSEM_NOTIFIER_MAX; i++)
    ASSERT_EQ(shmsem_notifier_add(n.get(), &w[i], uint64_t(i)), 0);
  EXPECT_EQ(shmsem_notifier_add(n.get(), &w[kWaiters - 1], 0), -ENOSPC);
  // A removed waiter gives its place back.
  ASSERT_EQ(shmsem_notifier_remove(n.get(), &w[0]), 0);
  EXPECT_EQ(shmsem_notifier_add(n.get(), &w[kWaiters - 1], 0), 0);
  for (int i = 1; i < kWaiters; i++) {
    ASSERT_EQ(shmsem_notifier_remove(n.get(), &w[i]), 0);
  }
  for (int i = 0; i < kWaiters; i++)
    EXPECT_EQ(shmsem_waiter_cancel(&w[i], &l), -ECANCELED);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

TEST(Notifier, AddRefusesAWaiterNotQueuedOrAlreadyAdded) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_waiter_t unused{};
  EXPECT_EQ(shmsem_notifier_add(n.get(), &unused, 0), -EINVAL);
  shmsem_waiter_t taken;
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_waiter_start(s, &taken, nullptr, &held), 0);  // at once
  EXPECT_EQ(shmsem_notifier_add(n.get(), &taken, 0), -EINVAL);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n.get(), &w, 0), 0);
  EXPECT_EQ(shmsem_notifier_add(n.get(), &w, 1), -EINVAL) << "already added";
  EXPECT_EQ(shmsem_notifier_add(nullptr, &w, 0), -EINVAL);
  EXPECT_EQ(shmsem_notifier_add(n.get(), nullptr, 0), -EINVAL);
  uint64_t ud;
  EXPECT_EQ(shmsem_notifier_next(nullptr, &ud), -EINVAL);
  EXPECT_EQ(shmsem_notifier_next(n.get(), nullptr), -EINVAL);
  EXPECT_EQ(shmsem_notifier_fd(nullptr), -EINVAL);
  EXPECT_EQ(shmsem_notifier_create(nullptr), -EINVAL);
  ASSERT_EQ(shmsem_notifier_remove(n.get(), &w), 0);
  EXPECT_EQ(shmsem_waiter_cancel(&w, &l), -ECANCELED);
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

TEST(Notifier, RemoveOfAWaiterNeverAddedIsENOENT) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_waiter_t w{};
  EXPECT_EQ(shmsem_notifier_remove(n.get(), &w), -ENOENT);
  EXPECT_EQ(shmsem_notifier_remove(nullptr, &w), -EINVAL);
  EXPECT_EQ(shmsem_notifier_remove(n.get(), nullptr), -EINVAL);
  EXPECT_EQ(shmsem_check(s), 0);
}

// A waiter that next() returned is no longer added.
TEST(Notifier, RemoveAfterNextIsENOENT) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Notifier n;
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_notifier_add(n.get(), &w, 3), 0);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  ASSERT_TRUE(readable(n.fd(), 20000));
  uint64_t ud = 0;
  ASSERT_EQ(shmsem_notifier_next(n.get(), &ud), 0);
  EXPECT_EQ(ud, 3u);
  EXPECT_EQ(shmsem_notifier_remove(n.get(), &w), -ENOENT);
  ASSERT_EQ(shmsem_waiter_poll(&w, &l), 0);
  EXPECT_EQ(shmsem_release(s, &l), 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

TEST(Notifier, PollingFallbackReportsAGrant) {
  NoWaitv no_waitv;
  grant_is_reported(true);
}

TEST(Notifier, PollingFallbackReportsATimeout) {
  NoWaitv no_waitv;
  timeout_is_reported(true);
}

TEST(Notifier, DestroyWithWaitersAddedLeaksNothing) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  const int fds = open_fds();
  ASSERT_GE(fds, 0);
  shmsem_notifier_t *n = nullptr;
  ASSERT_EQ(shmsem_notifier_create(&n), 0);
  EXPECT_EQ(open_fds(), fds + 1) << "one eventfd";
  shmsem_waiter_t w[2];
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(shmsem_waiter_start(s, &w[i], nullptr, &l), SHMSEM_QUEUED);
    ASSERT_EQ(shmsem_notifier_add(n, &w[i], uint64_t(i)), 0);
  }
  shmsem_notifier_destroy(n);
  EXPECT_EQ(open_fds(), fds);
  for (auto &x : w) EXPECT_EQ(shmsem_waiter_cancel(&x, &l), -ECANCELED);
  shmsem_notifier_destroy(nullptr);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

// Many create/destroy rounds with a waiter being granted meanwhile: the
// thread always ends, and the descriptor is always closed.
TEST(Notifier, CreateAndDestroyRepeatedlyLeavesNoThreadOrDescriptor) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  const int fds = open_fds();
  for (int round = 0; round < 50; round++) {
    shmsem_notifier_t *n = nullptr;
    ASSERT_EQ(shmsem_notifier_create(&n), 0);
    shmsem_lease_t held, l;
    ASSERT_EQ(shmsem_acquire(s, &held), 0);
    shmsem_waiter_t w;
    ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
    ASSERT_EQ(shmsem_notifier_add(n, &w, 0), 0);
    ASSERT_EQ(shmsem_release(s, &held), 0);
    shmsem_notifier_destroy(n);
    ASSERT_EQ(shmsem_waiter_cancel(&w, &l), 0) << "granted";
    ASSERT_EQ(shmsem_release(s, &l), 0);
  }
  EXPECT_EQ(open_fds(), fds);
  EXPECT_TRUE(waiting_is(s, 0));
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_EQ(shmsem_check(s), 0);
}

}  // namespace
}  // namespace shmsem::test
