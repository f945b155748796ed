// The lock-free path (docs/DESIGN.md section 11): what takes no lock, the
// races of a lock-free acquire or release with the locked path, processes
// stopped or killed at each of its steps, fork, lanes, and many threads and
// processes at once. Every interleaving is forced with hook points.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "support/hook_gate.h"
#include "support/process.h"
#include "support/segment.h"
#include "handle.h"
#include "testing.h"

namespace shmsem::test {
namespace {

using namespace std::chrono_literals;

// Counts the lock holders' hook points (every locked operation passes one).
std::atomic<int> g_locked{0};
void count_locked(HookPoint p, void *) {
  switch (p) {
    case HookPoint::ACQUIRE_LOCKED:
    case HookPoint::RELEASE_LOCKED:
    case HookPoint::FAST_HANDOFF_LOCKED:
      g_locked++;
      break;
    default:
      break;
  }
}

TEST(FastPath, UncontendedPairsTakeNoLockAfterTheFirst) {
  for (uint32_t n : {1u, 3u, 4096u}) {
    Segment seg(n);
    shmsem_t *s = seg.get();
    shmsem_lease_t l;
    ASSERT_EQ(shmsem_acquire(s, &l), 0);  // registers this process: locked
    ASSERT_EQ(shmsem_release(s, &l), 0);
    g_locked = 0;
    testing::set_hook(count_locked, nullptr);
    for (int i = 0; i < 1000; i++) {
      ASSERT_EQ(i % 2 ? shmsem_acquire(s, &l) : shmsem_try_acquire(s, &l), 0);
      ASSERT_EQ(shmsem_release(s, &l), 0);
    }
    testing::set_hook(nullptr, nullptr);
    EXPECT_EQ(g_locked.load(), 0) << n << " permits";
    EXPECT_COUNTS(s, n, 0, 0, 0);
    EXPECT_EQ(counts(s).available, n);
    struct shmsem_stat st;
    ASSERT_EQ(shmsem_stat(s, &st), 0);
    EXPECT_EQ(st.acquisitions, 1001u) << "lock-free ones are counted too";
    EXPECT_EQ(st.wait_hist[0], 1001u);
    EXPECT_INVARIANTS(s);
  }
}

// A permit another thread (or process) freed lock-free is taken lock-free
// too: processes that hand one permit back and forth take no lock while
// nobody queues.
TEST(FastPath, PermitFreedByAnotherThreadIsTakenWithoutTheLock) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  shmsem_lease_t a, b;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);  // registers this process
  ASSERT_EQ(shmsem_acquire(s, &b), 0);
  ASSERT_EQ(shmsem_release(s, &a), 0);  // our lane names a
  ASSERT_EQ(shmsem_acquire(s, &a), 0);  // a again: our lane names a, held
  std::atomic<int> locked{-1};
  std::thread other([&] {
    g_locked = 0;
    testing::set_hook(count_locked, nullptr);
    EXPECT_EQ(shmsem_release(s, &b), 0);  // b, freed into its lane
    testing::set_hook(nullptr, nullptr);
    locked = g_locked.load();
  });
  other.join();
  EXPECT_EQ(locked.load(), 0);
  g_locked = 0;
  testing::set_hook(count_locked, nullptr);
  shmsem_lease_t c;
  ASSERT_EQ(shmsem_acquire(s, &c), 0);  // b, named by the other lane
  testing::set_hook(nullptr, nullptr);
  EXPECT_EQ(g_locked.load(), 0);
  EXPECT_EQ(c.index, b.index);
  EXPECT_EQ(shmsem_release(s, &a), 0);
  EXPECT_EQ(shmsem_release(s, &c), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// A lock-free acquire that read the lease LOOSE (and the gate shut) is
// overtaken by the locked path, which takes that lease: its CAS fails and
// it goes the locked way, finding nothing.
TEST(FastPath, AcquireOvertakenBeforeItsCasFindsNothing) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  HookGate gate;
  int read = gate.arm(HookPoint::FAST_ACQUIRE_READ, 1);
  std::atomic<int> r{1};
  std::thread a([&] {
    shmsem_lease_t l;
    ASSERT_EQ(shmsem_acquire(s, &l), 0);
    ASSERT_EQ(shmsem_release(s, &l), 0);  // LOOSE in this thread's lane
    HookGate::tag_this_thread(1);
    r = shmsem_try_acquire(s, &l);
  });
  ASSERT_TRUE(gate.wait_arrived(read));
  shmsem_lease_t other;
  ASSERT_EQ(shmsem_try_acquire(s, &other), 0) << "the free lease, by the lock";
  gate.resume(read);
  a.join();
  EXPECT_EQ(r.load(), -EAGAIN);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  ASSERT_EQ(shmsem_release(s, &other), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// A lock-free release that read the gate shut crosses a waiter queueing.
// Either the waiter's gate opening (unlock: gate, fence, sweep) finds the
// lease already LOOSE and grants it, or the release finds the gate open
// after its CAS and hands the lease on itself: the waiter gets the permit
// and nobody else does, in both orders.
TEST(FastPath, ReleaseCrossingAWaiterHandsTheLeaseToIt) {
  for (bool freed_first : {true, false}) {
    Segment seg(1);
    shmsem_t *s = seg.get();
    shmsem_lease_t held;
    ASSERT_EQ(shmsem_acquire(s, &held), 0);
    HookGate gate;
    int named = gate.arm(HookPoint::FAST_RELEASE_NAMED, 1);
    int freed = gate.arm(HookPoint::FAST_RELEASE_FREED, 1);
    int opened = gate.arm(HookPoint::GATE_OPENED, 2);
    std::thread releaser([&] {
      HookGate::tag_this_thread(1);
      ASSERT_EQ(shmsem_release(s, &held), 0);
    });
    ASSERT_TRUE(gate.wait_arrived(named));  // gate read shut, still HELD
    std::atomic<int> wr{1};
    shmsem_lease_t wl;
    std::thread waiter([&] {
      HookGate::tag_this_thread(2);
      wr = shmsem_acquire(s, &wl);
    });
    ASSERT_TRUE(gate.wait_arrived(opened));  // queued, lock held, no sweep
    if (freed_first) {
      gate.resume(named);
      ASSERT_TRUE(gate.wait_arrived(freed));  // LOOSE, gate not read
      gate.resume(opened);                    // the sweep grants it
      ASSERT_TRUE(wait_until([&] { return counts(s).waiting == 0; }));
      gate.resume(freed);  // reads the gate shut again: done
    } else {
      gate.resume(opened);  // the sweep finds it still held
      ASSERT_TRUE(waiting_is(s, 1));
      gate.resume(named);
      ASSERT_TRUE(gate.wait_arrived(freed));
      gate.resume(freed);  // reads the gate open: hands it on
    }
    releaser.join();
    waiter.join();
    EXPECT_EQ(wr.load(), 0);
    shmsem_lease_t nl;
    EXPECT_EQ(shmsem_try_acquire(s, &nl), -EAGAIN) << "one permit, granted";
    EXPECT_COUNTS(s, 0, 1, 0, 0);
    EXPECT_INVARIANTS(s);
    ASSERT_EQ(shmsem_release(s, &wl), 0);
    EXPECT_COUNTS(s, 1, 0, 0, 0);
    EXPECT_INVARIANTS(s);
  }
}

// While someone is queued no lock-free acquire succeeds, even of a lease
// its own lane names: the newcomer queues behind.
TEST(FastPath, NewcomerQueuesBehindAWaiterEvenWithALooseLease) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  shmsem_lease_t a, b;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  ASSERT_EQ(shmsem_acquire(s, &b), 0);
  std::atomic<int> order{0}, first{0}, second{0};
  shmsem_lease_t w1, w2;
  std::thread t1([&] {
    ASSERT_EQ(shmsem_acquire(s, &w1), 0);
    first = ++order;
  });
  ASSERT_TRUE(waiting_is(s, 1));
  // Our release goes to the head (the gate is open: the locked path).
  ASSERT_EQ(shmsem_release(s, &a), 0);
  t1.join();
  EXPECT_EQ(first.load(), 1);
  std::thread t2([&] {
    ASSERT_EQ(shmsem_acquire(s, &w2), 0);
    second = ++order;
  });
  ASSERT_TRUE(waiting_is(s, 1));
  shmsem_lease_t nl;
  EXPECT_EQ(shmsem_try_acquire(s, &nl), -EAGAIN);
  ASSERT_EQ(shmsem_release(s, &b), 0);
  t2.join();
  EXPECT_EQ(second.load(), 2);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &w1), 0);
  ASSERT_EQ(shmsem_release(s, &w2), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// After shutdown the gate is closed: a lease this thread's lane names is
// not taken lock-free; acquires fail, held leases can still be released.
TEST(FastPath, ShutdownClosesTheLockFreePathToo) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  shmsem_lease_t a, b;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  ASSERT_EQ(shmsem_release(s, &a), 0);
  ASSERT_EQ(shmsem_acquire(s, &a), 0);  // lock-free
  ASSERT_EQ(shmsem_acquire(s, &b), 0);
  ASSERT_EQ(shmsem_release(s, &b), 0);  // LOOSE in our lane
  ASSERT_EQ(shmsem_shutdown(s), 0);
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_acquire(s, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_try_acquire(s, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_release(s, &a), 0);
  EXPECT_EQ(shmsem_release(s, &a), -EALREADY);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Two threads release one token at the same instant, many times: exactly
// one of them frees it, never an extra permit.
TEST(FastPath, ConcurrentDoubleReleaseFreesOnce) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  for (int round = 0; round < 2000; round++) {
    shmsem_lease_t l;
    ASSERT_EQ(shmsem_acquire(s, &l), 0);
    std::atomic<int> go{0}, zeros{0}, already{0};
    auto rel = [&] {
      shmsem_lease_t copy = l;
      go++;
      while (go.load() < 2) {
      }
      int r = shmsem_release(s, &copy);
      if (r == 0)
        zeros++;
      else if (r == -EALREADY)
        already++;
    };
    std::thread x(rel), y(rel);
    x.join();
    y.join();
    ASSERT_EQ(zeros.load(), 1) << "round " << round;
    ASSERT_EQ(already.load(), 1) << "round " << round;
    ASSERT_EQ(counts(s).available, 1u) << "round " << round;
  }
  EXPECT_INVARIANTS(s);
}

// A holder stopped right after its lock-free acquire is alive: never
// reclaimed while stopped; its permit comes back once it is killed.
TEST(FastPath, StoppedHolderIsKeptUntilKilled) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Shared<std::atomic<int>> ready;
  Children kids;
  pid_t child = kids.spawn([&] {
    shmsem_t *c = seg.open_again();
    shmsem_lease_t l;
    if (shmsem_acquire(c, &l) || shmsem_release(c, &l)) return 1;
    // The second acquire is lock-free; stop right after it commits.
    testing::set_hook(
        [](HookPoint p, void *) {
          if (p == HookPoint::FAST_ACQUIRE_TAKEN) raise(SIGSTOP);
        },
        nullptr);
    *ready = 1;
    if (shmsem_acquire(c, &l)) return 2;
    pause();
    return 0;
  });
  ASSERT_TRUE(wait_until([&] {
    int st;
    return ready->load() == 1 &&
           waitpid(child, &st, WNOHANG | WUNTRACED) == child && WIFSTOPPED(st);
  }));
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_recover(s), 0) << "a stopped process is alive";
  timespec d;
  clock_gettime(CLOCK_MONOTONIC, &d);
  d.tv_nsec += 50'000'000;
  if (d.tv_nsec >= 1'000'000'000) {
    d.tv_sec++;
    d.tv_nsec -= 1'000'000'000;
  }
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_acquire_until(s, &d, &l), -ETIMEDOUT);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  kill(child, SIGKILL);
  EXPECT_EQ(kids.wait(child), 128 + SIGKILL);
  EXPECT_EQ(shmsem_recover(s), 1);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// A releaser stopped after freeing its lease lock-free, with a waiter that
// queued after it read the gate: the lease is free, and the waiter gets it
// (the watcher's pass sweeps the lanes) while the releaser is still stopped.
TEST(FastPath, ReleaserStoppedAfterFreeingStillReachesTheWaiter) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Shared<std::atomic<int>> stage;
  Children kids;
  pid_t child = kids.spawn([&] {
    shmsem_t *c = seg.open_again();
    shmsem_lease_t l;
    if (shmsem_acquire(c, &l)) return 1;
    // Sits at FAST_RELEASE_NAMED (gate read shut) until the parent has a
    // waiter queued, then stops right after the freeing CAS.
    testing::set_hook(
        [](HookPoint p, void *ctx) {
          auto *st = static_cast<std::atomic<int> *>(ctx);
          if (p == HookPoint::FAST_RELEASE_NAMED) {
            *st = 1;
            while (st->load() != 2) usleep(100);
          } else if (p == HookPoint::FAST_RELEASE_FREED) {
            raise(SIGSTOP);
          }
        },
        &*stage);
    shmsem_release(c, &l);
    return 0;
  });
  ASSERT_TRUE(wait_until([&] { return stage->load() == 1; }));
  std::atomic<int> wr{1};
  shmsem_lease_t wl;
  std::thread waiter([&] { wr = shmsem_acquire(s, &wl); });
  ASSERT_TRUE(waiting_is(s, 1));
  *stage = 2;
  ASSERT_TRUE(wait_until([&] {
    int st;
    return waitpid(child, &st, WNOHANG | WUNTRACED) == child && WIFSTOPPED(st);
  }));
  waiter.join();  // within one watch period or so, not when it resumes
  EXPECT_EQ(wr.load(), 0);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_INVARIANTS(s);
  kill(child, SIGCONT);
  EXPECT_EQ(kids.wait(child), 0);
  ASSERT_EQ(shmsem_release(s, &wl), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Killed (SIGKILL and _exit) at every step of the lock-free path and of the
// registration of its process record: one pass returns every permit and
// the survivors go on.
class FastKillTest
    : public ::testing::TestWithParam<std::tuple<HookPoint, bool>> {};

TEST_P(FastKillTest, KilledAtTheStepLosesNoPermit) {
  const HookPoint point = std::get<0>(GetParam());
  const bool sigkill = std::get<1>(GetParam());
  Segment seg(2);
  shmsem_t *s = seg.get();
  Shared<std::atomic<int>> queued;
  Children kids;
  static HookPoint g_point;
  static bool g_sigkill;
  g_point = point;
  g_sigkill = sigkill;
  pid_t victim = kids.spawn([&] {
    shmsem_t *c = seg.open_again();
    testing::set_hook(
        [](HookPoint p, void *) {
          if (p != g_point) return;
          if (g_sigkill) raise(SIGKILL);
          _exit(99);
        },
        nullptr);
    shmsem_lease_t l[2];
    for (int round = 0; round < 3; round++) {
      if (shmsem_acquire(c, &l[0]) || shmsem_acquire(c, &l[1])) return 1;
      if (round == 2) {
        // A waiter queues behind us before we release: the hand-off.
        if (fork() == 0) {
          testing::set_hook(nullptr, nullptr);
          shmsem_t *g = seg.open_again();
          shmsem_lease_t x;
          timespec d;
          clock_gettime(CLOCK_MONOTONIC, &d);
          d.tv_sec += 20;
          if (shmsem_acquire_until(g, &d, &x) == 0) shmsem_release(g, &x);
          _exit(0);
        }
        wait_until([&] {
          struct shmsem_stat st;
          return shmsem_stat(c, &st) == 0 && st.waiting >= 1;
        });
      }
      if (shmsem_release(c, &l[0]) || shmsem_release(c, &l[1])) return 2;
    }
    return 0;
  });
  // Every one of these steps is on the victim's way: it died there.
  EXPECT_EQ(kids.wait(victim), sigkill ? 128 + SIGKILL : 99);
  // Whatever it held comes back; a queued grandchild gets its permit.
  ASSERT_TRUE(wait_until(
      [&] {
        shmsem_recover(s);
        auto c = counts(s);
        return c.held == 0 && c.waiting == 0 && c.reserved == 0;
      },
      30s));
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
  shmsem_lease_t a, b;
  EXPECT_EQ(shmsem_try_acquire(s, &a), 0);
  EXPECT_EQ(shmsem_try_acquire(s, &b), 0);
  EXPECT_EQ(shmsem_release(s, &a), 0);
  EXPECT_EQ(shmsem_release(s, &b), 0);
  EXPECT_INVARIANTS(s);
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

INSTANTIATE_TEST_SUITE_P(
    Steps, FastKillTest,
    ::testing::Combine(::testing::Values(HookPoint::PROC_NAMED,
                                         HookPoint::FAST_ACQUIRE_READ,
                                         HookPoint::FAST_ACQUIRE_TAKEN,
                                         HookPoint::FAST_RELEASE_NAMED,
                                         HookPoint::FAST_RELEASE_FREED),
                       ::testing::Bool()),
    [](const auto &info) {
      return std::string(testing::hook_name(std::get<0>(info.param))) +
             (std::get<1>(info.param) ? "_sigkill" : "_exit");
    });

// A child of fork() that uses the inherited handle registers a process
// record of its own: its leases are its own, reclaimed when it dies, and
// the parent's stay the parent's.
TEST(FastPath, ForkedChildHoldsUnderItsOwnRecord) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  shmsem_lease_t mine;
  ASSERT_EQ(shmsem_acquire(s, &mine), 0);
  ASSERT_EQ(shmsem_release(s, &mine), 0);
  ASSERT_EQ(shmsem_acquire(s, &mine), 0);  // lock-free
  EXPECT_EQ(testing::lease_owner_pid(s, mine), getpid());
  Shared<std::atomic<int>> owner;
  Children kids;
  pid_t child = kids.spawn([&] {
    shmsem_lease_t l;
    if (shmsem_acquire(s, &l)) return 1;  // the inherited handle
    *owner = testing::lease_owner_pid(s, l);
    raise(SIGKILL);
    return 2;
  });
  EXPECT_EQ(kids.wait(child), 128 + SIGKILL);
  EXPECT_EQ(owner->load(), child);
  EXPECT_EQ(shmsem_recover(s), 1) << "the child's lease only";
  EXPECT_EQ(testing::lease_owner_pid(s, mine), getpid());
  EXPECT_EQ(shmsem_release(s, &mine), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Lanes are given back when threads exit: a hundred short-lived threads in
// turn (more than the 16 lanes) each get one, and take no lock after their
// first pair.
TEST(FastPath, ExitedThreadsGiveTheirLanesBack) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  std::atomic<int> locked_after_first{0};
  for (int i = 0; i < 100; i++) {
    std::thread t([&] {
      shmsem_lease_t l;
      ASSERT_EQ(shmsem_acquire(s, &l), 0);
      ASSERT_EQ(shmsem_release(s, &l), 0);
      g_locked = 0;
      testing::set_hook(count_locked, nullptr);
      ASSERT_EQ(shmsem_acquire(s, &l), 0);
      ASSERT_EQ(shmsem_release(s, &l), 0);
      testing::set_hook(nullptr, nullptr);
      locked_after_first += g_locked.load();
    });
    t.join();
  }
  EXPECT_EQ(locked_after_first.load(), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Many threads of several processes (more threads than lanes) on the
// lock-free and locked paths at once, with queued waiters timing out: never
// more holders than permits, every permit back at the end.
TEST(FastPath, ThreadsAndProcessesNeverExceedThePermits) {
  constexpr uint32_t kPermits = 2;
  Segment seg(kPermits, 256);
  struct Board {
    std::atomic<int> inside{0}, over{0}, errors{0};
    std::atomic<long> grants{0};
  };
  Shared<Board> b;
  Children kids;
  for (int p = 0; p < 3; p++)
    kids.spawn([&, p] {
      shmsem_t *s = seg.open_again();
      std::vector<std::thread> ts;
      for (int t = 0; t < 20; t++)
        ts.emplace_back([&, t] {
          std::mt19937 rng(unsigned(p * 100 + t));
          auto end = std::chrono::steady_clock::now() + 1500ms;
          while (std::chrono::steady_clock::now() < end) {
            shmsem_lease_t l;
            int r;
            if (rng() % 4 == 0) {
              timespec d;
              clock_gettime(CLOCK_MONOTONIC, &d);
              d.tv_nsec += long(rng() % 200'000);
              if (d.tv_nsec >= 1'000'000'000) {
                d.tv_sec++;
                d.tv_nsec -= 1'000'000'000;
              }
              r = shmsem_acquire_until(s, &d, &l);
            } else {
              r = shmsem_try_acquire(s, &l);
            }
            if (r == -EAGAIN || r == -ETIMEDOUT || r == -EBUSY) continue;
            if (r) {
              b->errors++;
              continue;
            }
            if (++b->inside > int(kPermits)) b->over++;
            b->grants++;
            --b->inside;
            if (shmsem_release(s, &l)) b->errors++;
          }
        });
      for (auto &t : ts) t.join();
      shmsem_detach(s);
      return 0;
    });
  EXPECT_TRUE(kids.wait_all_ok(60s));
  EXPECT_EQ(b->over.load(), 0);
  EXPECT_EQ(b->errors.load(), 0);
  EXPECT_GT(b->grants.load(), 0);
  EXPECT_COUNTS(seg.get(), kPermits, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// A thread that calls the library after its lane was given back at thread
// exit (from a pthread key's destructor, which glibc runs after the
// thread_local destructors) has no lane any more: it takes the locked
// path. Using the lane it had, it shared it with the next thread given that
// lane, and the two could leave a free lease no lane names, a permit lost
// (found by an adversarial test).
struct KeyCtx {
  shmsem_t *s;
  std::atomic<int> locked{-1};
  std::atomic<int> errors{0};
};
KeyCtx *g_key_ctx;

void key_destructor(void *) {
  KeyCtx *k = g_key_ctx;
  g_locked = 0;
  testing::set_hook(count_locked, nullptr);
  for (int i = 0; i < 4; i++) {
    shmsem_lease_t l;
    if (shmsem_acquire(k->s, &l) || shmsem_release(k->s, &l)) k->errors++;
  }
  testing::set_hook(nullptr, nullptr);
  k->locked = g_locked.load();
}

TEST(FastPath, LibraryCalledFromAThreadExitDestructorUsesNoLane) {
  Segment seg(2);
  auto k = std::make_unique<KeyCtx>();
  k->s = seg.get();
  g_key_ctx = k.get();
  pthread_key_t key;
  ASSERT_EQ(pthread_key_create(&key, key_destructor), 0);
  std::thread t([&] {
    shmsem_lease_t l;
    ASSERT_EQ(shmsem_acquire(k->s, &l), 0);  // takes a lane
    ASSERT_EQ(shmsem_release(k->s, &l), 0);
    pthread_setspecific(key, k.get());
  });
  t.join();
  pthread_key_delete(key);
  g_key_ctx = nullptr;
  EXPECT_EQ(k->errors.load(), 0);
  EXPECT_EQ(k->locked.load(), 8) << "every call after the lane was given back "
                                    "takes the lock";
  EXPECT_COUNTS(k->s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(k->s);
}

// shmsem_check runs under the lock while lock-free acquires and releases go
// on: a LOOSE lease it read may be taken, and its lane moved to another
// lease, before it looks at the lanes. Not a broken invariant.
TEST(FastPath, CheckDuringLockFreeTrafficFindsNothingBroken) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  HookGate gate;
  int read = gate.arm(HookPoint::CHECK_LEASE_READ, 3);
  std::atomic<int> step{0};
  std::thread worker([&] {
    shmsem_lease_t a, b;
    ASSERT_EQ(shmsem_acquire(s, &a), 0);
    ASSERT_EQ(shmsem_acquire(s, &b), 0);
    ASSERT_EQ(shmsem_release(s, &a), 0);  // a LOOSE, named by our lane
    step = 1;
    while (step.load() != 2) std::this_thread::yield();
    ASSERT_EQ(shmsem_acquire(s, &a), 0);  // takes a back, lock-free
    ASSERT_EQ(shmsem_release(s, &b), 0);  // the lane now names b
    step = 3;
    while (step.load() != 4) std::this_thread::yield();
    ASSERT_EQ(shmsem_release(s, &a), 0);
  });
  ASSERT_TRUE(wait_until([&] { return step.load() == 1; }));
  std::atomic<int> r{1};
  std::thread checker([&] {
    HookGate::tag_this_thread(3);
    r = shmsem_check(s);
  });
  ASSERT_TRUE(gate.wait_arrived(read));  // read a's word LOOSE
  step = 2;
  ASSERT_TRUE(wait_until([&] { return step.load() == 3; }));
  gate.resume(read);
  checker.join();
  EXPECT_EQ(r.load(), 0);
  step = 4;
  worker.join();
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// A free lease that no lane names (a writer cleared the name) is found by
// shmsem_check and given back by shmsem_recover.
TEST(FastPath, RecoverGivesBackAFreeLeaseNoLaneNames) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(s, &l), 0);
  ASSERT_EQ(shmsem_release(s, &l), 0);  // LOOSE, named by our lane
  uint32_t p = s->fast_proc.load();
  ASSERT_LT(p, s->max_procs);
  for (auto &ln : s->procs[p].lanes) ln.loose.store(detail::kNone);
  EXPECT_EQ(shmsem_check(s), -EUCLEAN);
  EXPECT_EQ(invariant_violation(s), "INV-LOOSE: free lease no lane names");
  std::thread other([&] {
    shmsem_lease_t x;
    EXPECT_EQ(shmsem_try_acquire(s, &x), -EAGAIN) << "lost until recovered";
  });
  other.join();
  EXPECT_EQ(shmsem_recover(s), 1);
  EXPECT_INVARIANTS(s);
  EXPECT_EQ(shmsem_try_acquire(s, &l), 0);
  EXPECT_EQ(shmsem_release(s, &l), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
}

// The gate's sweep takes a lease a lock-free release has just freed, and
// its process dies before passing it on: the token of that release is
// stale for good, whatever repair and reclamation do with the permit (a
// sweep that kept the generation let a second release of it return 0; the
// SPIN model found it, verify/MODEL.md F1).
TEST(FastPath, TokenFreedBeforeASweeperDiedStaysStale) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(s, &l), 0);
  Shared<std::atomic<int>> stage;
  Children kids;
  pid_t sweeper = kids.spawn([&] {
    shmsem_t *c = seg.open_again();
    testing::set_hook(
        [](HookPoint p, void *ctx) {
          auto *st = static_cast<std::atomic<int> *>(ctx);
          if (p == HookPoint::ENQUEUE_COMMITTED) {
            *st = 1;  // queued under the lock, the gate still shut
            while (st->load() != 2) usleep(100);
          } else if (p == HookPoint::RELEASE_CHOSEN) {
            raise(SIGKILL);  // in the sweep's pass_permit, before its commit
          }
        },
        &*stage);
    shmsem_lease_t x;
    shmsem_acquire(c, &x);
    return 1;
  });
  ASSERT_TRUE(wait_until([&] { return stage->load() == 1; }));
  ASSERT_EQ(shmsem_release(s, &l), 0);  // lock-free: the gate reads shut
  *stage = 2;
  EXPECT_EQ(kids.wait(sweeper), 128 + SIGKILL);
  EXPECT_EQ(shmsem_release(s, &l), -EALREADY);
  ASSERT_TRUE(wait_until([&] {
    shmsem_recover(s);
    auto c = counts(s);
    return c.available == 1 && c.waiting == 0;
  }));
  EXPECT_EQ(shmsem_release(s, &l), -EALREADY);
  EXPECT_INVARIANTS(s);
  shmsem_lease_t again;
  EXPECT_EQ(shmsem_try_acquire(s, &again), 0);
  EXPECT_EQ(shmsem_release(s, &again), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
}

}  // namespace
}  // namespace shmsem::test
