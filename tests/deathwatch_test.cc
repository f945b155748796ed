// The death watch: a queue of live processes stays quiet, and a death wakes
// the watcher, on the io_uring event path and on the forced polling
// fallback (testing::limit_liveness(kLimitNoUring)). Real processes, real
// SIGKILL, real rings.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <shmsem/shmsem.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "deathwatch.h"
#include "support/hook_gate.h"
#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

enum class Path { kEvents, kPolling };

std::string path_name(const ::testing::TestParamInfo<Path> &p) {
  return p.param == Path::kEvents ? "Events" : "Polling";
}

class DeathWatchTest : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    if (GetParam() == Path::kEvents) {
      if (!detail::events_available())
        GTEST_SKIP()
            << "this kernel (or a seccomp filter, or "
               "kernel.io_uring_disabled) refuses IORING_OP_FUTEX_WAIT";
    } else {
      testing::limit_liveness(detail::kLimitNoUring);
    }
  }
  void TearDown() override { testing::limit_liveness(0); }
};

// A child that takes one permit and keeps it until killed.
pid_t spawn_holder(Children &kids, const std::string &name,
                   std::atomic<int> *held) {
  return kids.spawn([name, held] {
    shmsem_t *s = nullptr;
    if (shmsem_open(name.c_str(), 0, &s) != 0) return 1;
    shmsem_lease_t l;
    if (shmsem_acquire(s, &l) != 0) return 2;
    held->store(1);
    for (;;) pause();
  });
}

// A child that queues for one permit: 0 if it got one, else 10 + errno.
// It raises *armed when its watch arms a ring (WATCH_EVENTS_ARMED).
pid_t spawn_waiter(Children &kids, const std::string &name,
                   std::atomic<int> *armed) {
  return kids.spawn([name, armed] {
    testing::set_hook(
        [](HookPoint p, void *ctx) {
          if (p == HookPoint::WATCH_EVENTS_ARMED)
            static_cast<std::atomic<int> *>(ctx)->store(1);
        },
        armed);
    shmsem_t *s = nullptr;
    if (shmsem_open(name.c_str(), 0, &s) != 0) return 1;
    shmsem_lease_t l;
    int r = shmsem_acquire(s, &l);
    return r == 0 ? 0 : 10 - r;
  });
}

void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
}

// Counts the wake-ups of this process's queued threads while `waiters`
// threads wait behind a holder in another (live) process. Bounds: on
// events, the watcher wakes about once per kEventSafetyNs (or per period)
// and the backups 1/kBackupEventNs times a second in all, so about 7 in
// 1.5 s; polling, about 1/kBackupPeriodNs a second plus the watcher's
// passes, a few hundred. Each bound is several times that, and an order of
// magnitude under a queue whose backups each woke every 4 ms.
TEST_P(DeathWatchTest, IdleQueueOfLiveProcessesWakesRarely) {
  constexpr int kWaiters = 16;
  Segment seg(1, 64);
  Shared<std::atomic<int>> held;
  Children kids;
  spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  HookGate gate;
  std::atomic<int> woken{0}, armed{0};
  gate.on_every([&](HookPoint p) {
    if (p == HookPoint::WAIT_WOKEN) woken++;
    if (p == HookPoint::WATCH_EVENTS_ARMED) armed++;
  });
  std::vector<std::thread> threads;
  std::atomic<int> results{0};
  for (int i = 0; i < kWaiters; i++)
    threads.emplace_back([&] {
      shmsem_lease_t l;
      if (shmsem_acquire(seg.get(), &l) == -ESHUTDOWN) results++;
    });
  ASSERT_TRUE(
      wait_until([&] { return counts(seg.get()).waiting == kWaiters; }));
  if (GetParam() == Path::kEvents) {
    ASSERT_TRUE(wait_until([&] { return armed.load() > 0; }));
  }
  // Let the roles settle (each newcomer took the watcher role from the
  // last), then count.
  std::this_thread::sleep_for(seconds(1));
  int w0 = woken.load();
  std::this_thread::sleep_for(milliseconds(1500));
  int wakes = woken.load() - w0;
  RecordProperty("wakeups_in_1500ms", wakes);
  printf("%d idle waiters: %d wake-ups in 1.5 s\n", kWaiters, wakes);
  EXPECT_LE(wakes, GetParam() == Path::kEvents ? 40 : 1500)
      << kWaiters << " idle waiters woke " << wakes << " times in 1.5 s";
  EXPECT_EQ(shmsem_shutdown(seg.get()), kWaiters);  // the waiters it failed
  for (auto &t : threads) t.join();
  EXPECT_EQ(results.load(), kWaiters);
  EXPECT_INVARIANTS(seg.get());
}

// The holder dies while the watcher sleeps: the watcher learns it (from
// its ring on the event path, at its next pass when polling) and the
// permit reaches the head.
TEST_P(DeathWatchTest, KilledHolderPermitReachesTheWaiter) {
  Segment seg(1, 64);
  Shared<std::atomic<int>> held;
  Children kids;
  pid_t h = spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  HookGate gate;
  std::atomic<int> seen{0};
  gate.on_every([&](HookPoint p) {
    if (p == HookPoint::WATCH_DEATH_SEEN) seen++;
  });
  // On the event path the waiter pauses right after arming its ring: the
  // holder dies before it sleeps, so its pidfd's poll has completed when it
  // does, and the death is reported by the ring, whatever the timing.
  int armed = GetParam() == Path::kEvents
                  ? gate.arm(HookPoint::WATCH_EVENTS_ARMED, 1)
                  : -1;
  int result = 1;
  std::thread w([&] {
    HookGate::tag_this_thread(1);
    shmsem_lease_t l;
    result = shmsem_acquire(seg.get(), &l);
    if (result == 0) result = shmsem_release(seg.get(), &l);
  });
  ASSERT_TRUE(wait_until([&] { return counts(seg.get()).waiting == 1; }));
  if (armed >= 0) {
    ASSERT_TRUE(gate.wait_arrived(armed));
  }
  kill_and_reap(h);
  if (armed >= 0) gate.resume(armed);
  w.join();
  EXPECT_EQ(result, 0);
  if (GetParam() == Path::kEvents) {
    EXPECT_GE(seen.load(), 1);
  }
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// The watcher itself is killed, in the middle of its watch (on the event
// path: with its ring armed, pidfds open). Then the holder dies too. The
// remaining backup notices the watcher is late, takes over and reclaims
// both: nobody waits forever behind two dead processes.
TEST_P(DeathWatchTest, KilledWatcherIsReplacedAndTheHolderStillReclaimed) {
  Segment seg(1, 64);
  Shared<std::atomic<int>> held;
  Children kids;
  pid_t h = spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  // Queued first: the watcher, in a child (the first waiter takes the role).
  Shared<std::atomic<int>> armed;
  pid_t b = spawn_waiter(kids, seg.name(), &*armed);
  ASSERT_TRUE(wait_until([&] { return counts(seg.get()).waiting == 1; }));
  // On the event path, go on only once its ring is armed.
  if (GetParam() == Path::kEvents) {
    ASSERT_TRUE(wait_until([&] { return armed->load() == 1; }));
  }
  // Queued second: a backup, in this process.
  int result = 1;
  std::thread a([&] {
    shmsem_lease_t l;
    result = shmsem_acquire(seg.get(), &l);
    if (result == 0) result = shmsem_release(seg.get(), &l);
  });
  if (!wait_until([&] { return counts(seg.get()).waiting == 2; })) {
    shmsem_shutdown(seg.get());
    a.join();
    FAIL() << "the backup did not queue";
  }
  kill_and_reap(b);
  kill_and_reap(h);
  a.join();
  EXPECT_EQ(result, 0);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// Nothing but the hand-off on the hand-off path: a waiter that takes the
// watcher role sleeps first, without a reclamation pass (which would judge
// every owner, allocate and read /proc). The old watcher ran a full pass
// before its first sleep whenever the last one was a period old, so every
// contended acquire of two processes paid for one.
TEST(DeathWatch, NewWatcherSleepsBeforeAnyPass) {
  Segment seg(1, 64);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  HookGate gate;
  std::atomic<int> judged{0};
  gate.on_every([&](HookPoint p) {
    if (p == HookPoint::RECLAIM_JUDGED || p == HookPoint::RECLAIM_SCANNED)
      judged++;
  });
  int sleeping = gate.arm(HookPoint::WAIT_SLEEPING, 1);
  int result = 1;
  std::thread w([&] {
    HookGate::tag_this_thread(1);
    shmsem_lease_t l;
    result = shmsem_acquire(s, &l);
    if (result == 0) result = shmsem_release(s, &l);
  });
  ASSERT_TRUE(gate.wait_arrived(sleeping));  // about to sleep the first time
  EXPECT_EQ(judged.load(), 0) << "a pass ran before the first sleep";
  ASSERT_EQ(shmsem_release(s, &held), 0);  // granted before it sleeps
  gate.resume(sleeping);
  w.join();
  EXPECT_EQ(result, 0);
  EXPECT_EQ(judged.load(), 0) << "a pass ran on the hand-off path";
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// The descriptors open in this process, and the one naming an io_uring.
std::vector<int> open_fds(std::string *ring_link = nullptr,
                          int *ring = nullptr) {
  std::vector<int> fds;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return fds;
  int self = dirfd(d);
  while (dirent *e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd == self) continue;
    fds.push_back(fd);
    char buf[128];
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
    if (ring && n > 0) {
      buf[n] = 0;
      if (strstr(buf, "io_uring")) *ring = fd;
      if (ring_link) *ring_link = buf;
    }
  }
  closedir(d);
  return fds;
}

class EventsOnly : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!detail::events_available())
      GTEST_SKIP() << "no IORING_OP_FUTEX_WAIT here: no ring to test";
  }
};

// pthread_cancel of a watcher asleep in its ring: the library is built
// without exceptions, so the cancellation unwind runs none of its
// destructors; the cleanup handler must close the ring (an adversarial test
// saw each cancelled watcher leak a ring and a pidfd).
TEST_F(EventsOnly, CancelledWatcherLeavesNoDescriptorBehind) {
  Segment seg(1, 64);
  Shared<std::atomic<int>> held;
  Children kids;
  spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  size_t before = open_fds().size();
  for (int round = 0; round < 3; round++) {
    HookGate gate;
    std::atomic<int> armed{0};
    gate.on_every([&](HookPoint p) {
      if (p == HookPoint::WATCH_EVENTS_ARMED) armed++;
    });
    pthread_t t;
    ASSERT_EQ(pthread_create(
                  &t, nullptr,
                  [](void *arg) -> void * {
                    shmsem_lease_t l;
                    shmsem_acquire(static_cast<shmsem_t *>(arg), &l);
                    return nullptr;
                  },
                  seg.get()),
              0);
    ASSERT_TRUE(wait_until([&] { return armed.load() > 0; }));
    pthread_cancel(t);  // acted on when its sleep in the ring ends
    void *ret = nullptr;
    pthread_join(t, &ret);
    EXPECT_EQ(ret, PTHREAD_CANCELED);
  }
  EXPECT_EQ(open_fds().size(), before)
      << "descriptors leaked by cancelled waits";
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// Another thread closes the ring's descriptor while the watcher sleeps and
// opens a file under the same number (closefrom() and open() in a daemon's
// other thread). The watcher must not close that file when its call ends.
TEST_F(EventsOnly, RingNumberReusedByAnotherThreadIsNotClosed) {
  Segment seg(1, 64);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  HookGate gate;
  std::atomic<int> armed{0};
  gate.on_every([&](HookPoint p) {
    if (p == HookPoint::WATCH_EVENTS_ARMED) armed++;
  });
  int result = 1;
  std::thread w([&] {
    shmsem_lease_t l;
    result = shmsem_acquire(seg.get(), &l);
    if (result == 0) result = shmsem_release(seg.get(), &l);
  });
  ASSERT_TRUE(wait_until([&] { return armed.load() > 0; }));
  int ring = -1;
  open_fds(nullptr, &ring);
  ASSERT_GE(ring, 0) << "the watcher's ring is not open";
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(null, 0);
  ASSERT_EQ(dup2(null, ring), ring);  // the number now names /dev/null
  close(null);
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  w.join();
  EXPECT_EQ(result, 0);
  struct stat st;
  ASSERT_EQ(fstat(ring, &st), 0) << "the library closed a descriptor it "
                                    "did not own";
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  close(ring);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

INSTANTIATE_TEST_SUITE_P(Paths, DeathWatchTest,
                         ::testing::Values(Path::kEvents, Path::kPolling),
                         path_name);

}  // namespace
}  // namespace shmsem::test
