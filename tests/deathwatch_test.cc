// The death watch: a queue of live processes stays quiet, and a death wakes
// the watcher, on the io_uring event path and on the forced polling
// fallback (testing::limit_liveness(kLimitNoUring)). Real processes, real
// SIGKILL, real rings.
// liburing.h first: it sets the feature macros it needs (uring.h).
#include <liburing.h>
// clang-format off
#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <shmsem/shmsem.h>
#include <shmsem/uring.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
// clang-format on

#include <atomic>
#include <thread>
#include <vector>

#include "clock.h"
#include "deathwatch.h"
#include "reclaim.h"
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

// The same for an async waiter parked in a ring (the watcher, the only
// waiter): on the event path the watch wakes its word; polling, its linked
// timeout brings its poll at the end of the period, which passes.
TEST_P(DeathWatchTest, KilledHolderPermitReachesAnAsyncWaiter) {
  testing::limit_liveness(0);  // the loop's ring needs the opcode...
  if (shmsem_uring_probe() != 0)
    GTEST_SKIP() << "no IORING_OP_FUTEX_WAIT here: no ring for the waiter";
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
  io_uring ring;
  ASSERT_EQ(io_uring_queue_init(8, &ring, 0), 0);
  // ... while the death watch may go without (Polling: taken away).
  if (GetParam() == Path::kPolling)
    testing::limit_liveness(detail::kLimitNoUring);
  shmsem_waiter_t w;
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_uring_prep_wait(&ring, &w, 7), 0);
  ASSERT_GE(io_uring_submit(&ring), 0);
  kill_and_reap(h);
  int r = -EINPROGRESS;
  while (r == -EINPROGRESS) {
    io_uring_cqe *cqe;
    ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
    const uint64_t tag = cqe->user_data;
    io_uring_cqe_seen(&ring, cqe);
    if (tag != 7) continue;
    r = shmsem_waiter_poll(&w, &l);
    if (r == -EINPROGRESS) {
      ASSERT_EQ(shmsem_uring_prep_wait(&ring, &w, 7), 0);
      ASSERT_GE(io_uring_submit(&ring), 0);
    }
  }
  io_uring_queue_exit(&ring);
  ASSERT_EQ(r, 0);
  if (GetParam() == Path::kEvents) {
    EXPECT_GE(seen.load(), 1);
  } else {
    EXPECT_EQ(seen.load(), 0) << "a report without a watch";
  }
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
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

// The watch keeps no descriptor in the caller's process: the helper's ring
// is entered through its registered index and every pidfd is closed once
// its poll is submitted, so an application's closefrom() or dup2() over
// "unknown" numbers can meet nothing of ours.
TEST_F(EventsOnly, ArmedWatchKeepsNoDescriptor) {
  Segment seg(1, 64);
  Shared<std::atomic<int>> held;
  Children kids;
  spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  const std::vector<int> before = open_fds();
  // A first wait starts the watch and has it follow the holder (a pidfd
  // lives in the helper between its opening and its poll's submission).
  timespec soon;
  clock_gettime(CLOCK_MONOTONIC, &soon);
  soon.tv_nsec += 2'000'000;
  if (soon.tv_nsec >= 1'000'000'000)
    soon.tv_sec++, soon.tv_nsec -= 1'000'000'000;
  shmsem_lease_t l0;
  ASSERT_EQ(shmsem_acquire_until(seg.get(), &soon, &l0), -ETIMEDOUT);
  ASSERT_TRUE(wait_until([&] { return open_fds() == before; }));
  HookGate gate;
  int armed = gate.arm(HookPoint::WAIT_SLEEPING, 1);
  int result = 1;
  std::thread w([&] {
    HookGate::tag_this_thread(1);
    shmsem_lease_t l;
    result = shmsem_acquire(seg.get(), &l);
    if (result == 0) result = shmsem_release(seg.get(), &l);
  });
  ASSERT_TRUE(gate.wait_arrived(armed));  // armed, about to sleep
  int ring = -1;
  const std::vector<int> during = open_fds(nullptr, &ring);
  EXPECT_EQ(ring, -1) << "a ring's descriptor is open while armed";
  EXPECT_EQ(during, before) << "descriptors opened by the watch";
  gate.resume(armed);
  EXPECT_EQ(shmsem_shutdown(seg.get()), 1);
  w.join();
  EXPECT_EQ(result, -ESHUTDOWN);
}

// The pass that set the watch period was expensive (the period is at its
// 10 s cap, as after a reclamation over a large in-use set): a new watcher
// still arms its death watch before its first sleep, and a holder killed
// then wakes it through the watch's report, not a timer, and its permit is
// reclaimed without a full pass (no owner judged).
TEST_F(EventsOnly, FirstSleepArmsWhateverTheLastPassCost) {
  Segment seg(1, 64);
  shmsem_t *s = seg.get();
  s->core->watch_period_ns.store(detail::kMaxWatchPeriodNs);
  s->core->last_reclaim_ns.store(detail::real_mono_ns());
  Shared<std::atomic<int>> held;
  Children kids;
  pid_t h = spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  HookGate gate;
  std::atomic<int> slept{0}, seen{0}, judged{0};
  gate.on_every([&](HookPoint p) {
    if (p == HookPoint::WAIT_SLEEPING) slept++;
    if (p == HookPoint::WATCH_DEATH_SEEN) seen++;
    if (p == HookPoint::RECLAIM_JUDGED) judged++;
  });
  int armed = gate.arm(HookPoint::WATCH_EVENTS_ARMED, 1);
  int result = 1;
  std::thread w([&] {
    HookGate::tag_this_thread(1);
    shmsem_lease_t l;
    result = shmsem_acquire(s, &l);
    if (result == 0) result = shmsem_release(s, &l);
  });
  ASSERT_TRUE(gate.wait_arrived(armed));
  EXPECT_EQ(slept.load(), 0) << "slept before arming its death watch";
  kill_and_reap(h);
  gate.resume(armed);
  w.join();
  EXPECT_EQ(result, 0);
  EXPECT_GE(seen.load(), 1) << "the wake-up did not come from the watch";
  EXPECT_EQ(judged.load(), 0) << "a full pass ran: the report was not used";
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// The state letter of thread `tid` of this process ('S': asleep).
char thread_state(pid_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", int(tid));
  FILE *f = fopen(path, "r");
  if (!f) return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p[2] : '?';
}

// A holder killed while the watcher sleeps (its first sleep, right after it
// queued): the watch's report wakes it, and the reclaimed permit is its.
TEST_F(EventsOnly, HolderKilledWhileTheNewWatcherSleepsWakesIt) {
  Segment seg(1, 64);
  shmsem_t *s = seg.get();
  Shared<std::atomic<int>> held;
  Children kids;
  pid_t h = spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  HookGate gate;
  std::atomic<int> seen{0}, judged{0}, woken{0};
  gate.on_every([&](HookPoint p) {
    if (p == HookPoint::WATCH_DEATH_SEEN) seen++;
    if (p == HookPoint::WAIT_WOKEN) woken++;
    if (p == HookPoint::RECLAIM_JUDGED) judged++;
  });
  int sleeping = gate.arm(HookPoint::WAIT_SLEEPING, 1);
  std::atomic<pid_t> tid{0};
  int result = 1;
  std::thread w([&] {
    HookGate::tag_this_thread(1);
    tid = pid_t(syscall(SYS_gettid));
    shmsem_lease_t l;
    result = shmsem_acquire(s, &l);
    if (result == 0) result = shmsem_release(s, &l);
  });
  ASSERT_TRUE(gate.wait_arrived(sleeping));
  gate.resume(sleeping);
  // Asleep in the kernel, not yet woken.
  ASSERT_TRUE(wait_until([&] { return thread_state(tid) == 'S'; }));
  EXPECT_EQ(woken.load(), 0);
  kill_and_reap(h);
  w.join();
  EXPECT_EQ(result, 0);
  EXPECT_GE(seen.load(), 1) << "woken by something else than the watch";
  EXPECT_EQ(judged.load(), 0) << "a full pass ran: the report was not used";
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// An async watcher parked in a ring is not polled on the watch period: its
// wake-by time is the kEventSafetyNs pass (in real time, as the ring's
// linked timeout reads it), and a holder's death wakes its futex wait
// (res 0) before that timeout (which would end it with -ECANCELED).
TEST_F(EventsOnly, ParkedAsyncWatcherIsWokenByTheWatchNotATimer) {
  Segment seg(1, 64);
  shmsem_t *s = seg.get();
  Shared<std::atomic<int>> held;
  Children kids;
  pid_t h = spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  HookGate gate;
  std::atomic<int> seen{0}, judged{0};
  gate.on_every([&](HookPoint p) {
    if (p == HookPoint::WATCH_DEATH_SEEN) seen++;
    if (p == HookPoint::RECLAIM_JUDGED) judged++;
  });
  io_uring ring;
  ASSERT_EQ(io_uring_queue_init(8, &ring, 0), 0);
  shmsem_waiter_t w;
  shmsem_lease_t l;
  const uint64_t t0 = detail::real_mono_ns();
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
  timespec at;
  ASSERT_EQ(shmsem_waiter_wake_by(&w, &at), 0);
  EXPECT_GE(detail::ts_to_ns(at), t0 + detail::kEventSafetyNs)
      << "an idle async watcher would be polled before the safety pass";
  ASSERT_EQ(shmsem_uring_prep_wait(&ring, &w, 7), 0);
  ASSERT_GE(io_uring_submit(&ring), 0);
  kill_and_reap(h);
  int r = -EINPROGRESS, first_res = 1;
  while (r == -EINPROGRESS) {
    io_uring_cqe *cqe;
    ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
    const uint64_t tag = cqe->user_data;
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (tag != 7) continue;
    if (first_res == 1) first_res = res;
    r = shmsem_waiter_poll(&w, &l);
    if (r == -EINPROGRESS) {
      ASSERT_EQ(shmsem_uring_prep_wait(&ring, &w, 7), 0);
      ASSERT_GE(io_uring_submit(&ring), 0);
    }
  }
  io_uring_queue_exit(&ring);
  ASSERT_EQ(r, 0);
  EXPECT_EQ(first_res, 0) << "the first wake-up was the linked timeout";
  EXPECT_GE(seen.load(), 1);
  EXPECT_EQ(judged.load(), 0) << "a full pass ran: the report was not used";
  EXPECT_EQ(shmsem_release(s, &l), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// No report is lost to an async watcher whose loop is not asleep yet: the
// watch wakes its word when the holder dies, before the loop has submitted
// its futex wait (a plain sleeper on the word stands witness to that
// first wake-up), and wakes it again until the poll takes the report, so
// the wait the loop then submits ends woken (res 0), long before its
// linked timeout at the safety pass.
TEST_F(EventsOnly, AsyncReportBeforeTheLoopSleepsIsWokenAgain) {
  Segment seg(1, 64);
  shmsem_t *s = seg.get();
  Shared<std::atomic<int>> held;
  Children kids;
  pid_t h = spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  shmsem_waiter_t w;
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
  uint32_t *word, value;
  ASSERT_EQ(shmsem_waiter_futex(&w, &word, &value), 0);
  std::atomic<int> witness{0};
  std::thread t([&] {
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == value &&
           syscall(SYS_futex, word, FUTEX_WAIT, value, nullptr, nullptr, 0) !=
               0 &&
           errno != EAGAIN) {
    }
    witness = 1;
  });
  kill_and_reap(h);
  t.join();  // the watch's first wake-up came: nobody's wait was in a ring
  ASSERT_EQ(witness.load(), 1);
  io_uring ring;
  ASSERT_EQ(io_uring_queue_init(8, &ring, 0), 0);
  ASSERT_EQ(shmsem_uring_prep_wait(&ring, &w, 7), 0);
  ASSERT_GE(io_uring_submit(&ring), 0);
  int r = -EINPROGRESS, first_res = 1;
  while (r == -EINPROGRESS) {
    io_uring_cqe *cqe;
    ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
    const uint64_t tag = cqe->user_data;
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (tag != 7) continue;
    if (first_res == 1) first_res = res;
    r = shmsem_waiter_poll(&w, &l);
    if (r == -EINPROGRESS) {
      ASSERT_EQ(shmsem_uring_prep_wait(&ring, &w, 7), 0);
      ASSERT_GE(io_uring_submit(&ring), 0);
    }
  }
  io_uring_queue_exit(&ring);
  ASSERT_EQ(r, 0);
  EXPECT_EQ(first_res, 0) << "the report's wake-up was lost: the linked "
                             "timeout ended the wait";
  EXPECT_EQ(shmsem_release(s, &l), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// A fork child does not use its parent's watch (whose thread it does not
// have) but starts its own: a holder killed while the child waits wakes it
// through its own watch's report.
TEST_F(EventsOnly, ForkChildWatchesThroughItsOwnHelper) {
  Segment seg(1, 64);
  {
    // The parent's watch exists (a watcher armed here once).
    shmsem_lease_t a, b;
    ASSERT_EQ(shmsem_acquire(seg.get(), &a), 0);
    std::thread t([&] {
      ASSERT_EQ(shmsem_acquire(seg.get(), &b), 0);
      ASSERT_EQ(shmsem_release(seg.get(), &b), 0);
    });
    ASSERT_TRUE(wait_until([&] { return counts(seg.get()).waiting == 1; }));
    ASSERT_EQ(shmsem_release(seg.get(), &a), 0);
    t.join();
  }
  Shared<std::atomic<int>> held, armed;
  Children kids;
  pid_t h = spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  const std::string name = seg.name();
  pid_t c = kids.spawn([&, name] {
    std::atomic<int> seen{0};
    HookGate gate;
    gate.on_every([&](HookPoint p) {
      if (p == HookPoint::WATCH_EVENTS_ARMED) armed->store(1);
      if (p == HookPoint::WATCH_DEATH_SEEN) seen++;
    });
    shmsem_lease_t l;
    int r = shmsem_acquire(seg.get(), &l);
    if (r != 0) return 10 - r;
    if (shmsem_release(seg.get(), &l) != 0) return 4;
    return seen.load() >= 1 ? 0 : 3;
  });
  ASSERT_TRUE(wait_until([&] { return armed->load() == 1; }));
  kill_and_reap(h);
  EXPECT_EQ(kids.wait(c), 0) << "3: woken by something else than the watch";
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// closefrom() in another thread while the watcher sleeps armed (a daemon's
// hygiene after a fork): nothing of the watch is closed, and a holder's
// death still wakes the watcher through the report. In a child, whose
// descriptors can all go.
TEST_F(EventsOnly, CloseFromWhileArmedLeavesTheWatchWorking) {
  Segment seg(1, 64);
  Shared<std::atomic<int>> held, closed;
  Children kids;
  pid_t h = spawn_holder(kids, seg.name(), &*held);
  ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
  pid_t c = kids.spawn([&] {
    std::atomic<int> seen{0}, armed{0};
    HookGate gate;
    gate.on_every([&](HookPoint p) {
      if (p == HookPoint::WATCH_EVENTS_ARMED) armed++;
      if (p == HookPoint::WATCH_DEATH_SEEN) seen++;
    });
    int r = 1;
    std::thread t([&] {
      shmsem_lease_t l;
      r = shmsem_acquire(seg.get(), &l);
      if (r == 0 && shmsem_release(seg.get(), &l) != 0) r = -1000;
    });
    while (armed.load() == 0) sched_yield();
    syscall(SYS_close_range, 3u, ~0u, 0u);
    closed->store(1);
    t.join();
    if (r != 0) return 10 - r;
    return seen.load() >= 1 ? 0 : 3;
  });
  ASSERT_TRUE(wait_until([&] { return closed->load() == 1; }));
  kill_and_reap(h);
  EXPECT_EQ(kids.wait(c), 0) << "3: woken by something else than the watch";
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

INSTANTIATE_TEST_SUITE_P(Paths, DeathWatchTest,
                         ::testing::Values(Path::kEvents, Path::kPolling),
                         path_name);

}  // namespace
}  // namespace shmsem::test
