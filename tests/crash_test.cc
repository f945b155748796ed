// Crash robustness, proven by killing real processes at every hook point.
//
// FaultInjection: a victim process runs a script that passes through every
// operation (fast acquire, release to waiters, queued acquire, timeout,
// cancellation, reclamation, repair, shutdown) while two survivor processes
// contend. It kills itself (SIGKILL or _exit) at the n-th time it reaches
// hook point P. Afterwards the survivors must all finish their work, and
// after one reclamation pass available + held + reserved = N with nothing
// held, nothing queued and every invariant intact.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <thread>

#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

using testing::HookPoint;
constexpr int kPoints = int(HookPoint::kCount);

// shmsem_create's steps have their own test (create_test.cc): the victim
// opens an existing semaphore and never passes them.
// Points the victim's script does not pass through on purpose: create (it
// opens an existing semaphore), a lock waiter's verdict that a holder is
// alive (only a holder slower than 1 ms gets one) and a waiter leaving
// without the lock (only past its limit while a stopped process holds the
// lock), a report of the death watch (only when an owner dies while the
// victim watches), and shmsem_check, SHMSEM_SNAPSHOT opens and shmsem_inspect's
// reads without the lock (never called by the victim; the last writes
// nothing shared, so a kill there has nothing to leave behind).
// tests/create_test.cc, tests/lock_test.cc, tests/deathwatch_test.cc,
// tests/fastpath_test.cc and tests/inspect_test.cc cover them.
bool is_create_point(int point) {
  switch (HookPoint(point)) {
    case HookPoint::LOCK_HOLDER_ALIVE:
    case HookPoint::WAIT_LEAVING:
    case HookPoint::WATCH_DEATH_SEEN:
    case HookPoint::CHECK_LEASE_READ:
    case HookPoint::CREATE_OPENED:
    case HookPoint::CREATE_SIZED:
    case HookPoint::CREATE_INITIALISED:
    case HookPoint::CREATE_LINKED:
    case HookPoint::SNAPSHOT_COPY:
    case HookPoint::INSPECT_SCANNED:
    // The bounded policy's (its own script, below): this one's semaphores
    // are FIFO.
    case HookPoint::POLICY_HAND_OFF:
    case HookPoint::HEAD_BARGE_TAKEN:
      return true;
    default:
      return false;
  }
}

// The victim's script, one step per operation; `op` names the step running.
enum Op {
  kOpFast,
  kOpReleaseToWaiters,
  kOpQueued,
  kOpTimeout,
  kOpCancel,
  kOpReclaim,
  kOpHandoff,
  kOpRepair,
  kOpShutdown,
  kOpAsync,
  kOpWeighted,
  kOpPartial,
  kOpResize,
  kOpRace,
  kOpCount
};
const char *const kOpNames[] = {"fast-acquire",
                                "release-to-waiters",
                                "queued-acquire",
                                "timeout",
                                "cancel",
                                "reclaim",
                                "lock-free-handoff",
                                "repair",
                                "shutdown",
                                "async",
                                "weighted",
                                "partial-reservation",
                                "resize",
                                "head-race"};

struct Board {
  std::atomic<int> op{-1};         // victim's current step
  std::atomic<int> killed_at{-1};  // hook point it died at (-1: survived)
  std::atomic<int> holding{0};     // victim holds all N permits
  std::atomic<int> survivors_started{0};
  std::atomic<int> blocker_ready{0};
  std::atomic<int> step{0};       // victim's timeout/cancel rounds started
  std::atomic<int> step_done{0};  // ... and finished
  std::atomic<int> victim_queued{
      0};                    // times the victim reached ACQUIRE_ENQUEUED
  std::atomic<int> race{0};  // bounded policy: the victim races as head
};

// Process-local kill switch read by the hook.
struct KillSwitch {
  int point = -1;
  int countdown = 0;
  bool sigkill = true;
  Board *board = nullptr;
} g_kill;

// The lock-free release that crosses the opening of the gate: armed, the
// victim's next FAST_RELEASE_NAMED (its release read the gate shut) waits
// until a grandchild has queued behind it, so that the release finds the
// gate open once it has freed its lease and hands it on under the lock.
struct Cross {
  bool armed = false;
  shmsem_t *s = nullptr;
} g_cross;

void queue_behind(shmsem_t *s) {
  g_cross.armed = false;
  if (fork() == 0) {
    g_kill.point = -1;
    shmsem_lease_t x;
    timespec d;
    clock_gettime(CLOCK_MONOTONIC, &d);
    d.tv_sec += 10;
    if (shmsem_acquire_until(s, &d, &x) == 0) shmsem_release(s, &x);
    _exit(0);
  }
  wait_until(
      [&] {
        struct shmsem_stat st;
        return shmsem_stat(s, &st) == 0 && st.waiting >= 1;
      },
      std::chrono::seconds(10));
}

void kill_hook(HookPoint p, void *) {
  if (p == HookPoint::FAST_RELEASE_NAMED && g_cross.armed)
    queue_behind(g_cross.s);
  if (p == HookPoint::ACQUIRE_ENQUEUED && g_kill.board)
    g_kill.board->victim_queued++;
  if (int(p) != g_kill.point || --g_kill.countdown != 0) return;
  g_kill.board->killed_at = int(p);
  if (g_kill.sigkill) raise(SIGKILL);
  _exit(99);
}

timespec in_us(long us) {
  timespec d;
  clock_gettime(CLOCK_MONOTONIC, &d);
  d.tv_nsec += us * 1000;
  d.tv_sec += d.tv_nsec / 1'000'000'000;
  d.tv_nsec %= 1'000'000'000;
  return d;
}

// A grandchild that holds all N permits for `hold_us`, so the victim's next
// acquire really queues. Its hook is off. Reaped by the test (subreaper).
// until_closed: hold until the semaphore is closed instead (at most 10 s,
// for a victim killed before it could close it), so that a waiter queues
// behind it whatever the scheduling.
void spawn_blocker(shmsem_t *s, uint32_t permits, Board *b, long hold_us,
                   bool until_closed = false, int until_step_done = 0,
                   int until_queued = -1) {
  b->blocker_ready = 0;
  if (fork() == 0) {
    g_kill.point = -1;
    g_kill.board = nullptr;
    shmsem_lease_t x[4];
    for (uint32_t i = 0; i < permits; i++) shmsem_acquire(s, &x[i]);
    b->blocker_ready = 1;
    if (until_closed)
      wait_until(
          [&] {
            struct shmsem_stat st;
            return shmsem_stat(s, &st) == 0 && st.closed;
          },
          std::chrono::seconds(10));
    else if (until_queued >= 0)  // until the victim queued again
      wait_until(
          [&] {
            return b->victim_queued.load() > until_queued ||
                   b->killed_at.load() >= 0;
          },
          std::chrono::seconds(10));
    else if (until_step_done)  // or until the victim was killed
      wait_until(
          [&] {
            return b->step_done.load() >= until_step_done ||
                   b->killed_at.load() >= 0;
          },
          std::chrono::seconds(10));
    else
      std::this_thread::sleep_for(std::chrono::microseconds(hold_us));
    for (uint32_t i = 0; i < permits; i++) shmsem_release(s, &x[i]);
    _exit(0);
  }
  wait_until([&] { return b->blocker_ready.load() == 1; });
}

// The victim: every operation in turn. Returns normally if never killed.
void victim_script(const std::string &name, uint32_t permits, Board *b,
                   bool with_shutdown) {
  shmsem_t *s = nullptr;
  if (shmsem_open(name.c_str(), 0, &s) != 0) _exit(20);
  shmsem_lease_t l[4];

  b->op = kOpFast;
  // Taken, given back and taken again while alone (the survivors start
  // once we hold everything): the release and the second acquire are the
  // lock-free path's, so its points are reached whatever the survivors'
  // timing does later (under load they were not, once).
  if (shmsem_acquire(s, &l[0]) != 0) _exit(21);
  if (shmsem_release(s, &l[0]) != 0) _exit(21);
  for (uint32_t i = 0; i < permits; i++)
    if (shmsem_acquire(s, &l[i]) != 0) _exit(21);
  b->holding = 1;

  b->op = kOpReleaseToWaiters;
  // Survivors queue behind us; release hands our permits to them.
  wait_until([&] { return b->survivors_started.load() == 2; },
             std::chrono::seconds(5));
  wait_until(
      [&] {
        struct shmsem_stat st;
        shmsem_stat(s, &st);
        return st.waiting >= 1;
      },
      std::chrono::milliseconds(200));
  for (uint32_t i = 0; i < permits; i++)
    if (shmsem_release(s, &l[i]) != 0) _exit(22);

  b->op = kOpQueued;
  for (int i = 0; i < 3; i++) {
    if (shmsem_acquire(s, &l[0]) != 0) _exit(23);
    if (shmsem_release(s, &l[0]) != 0) _exit(24);
  }

  // Timeout and cancel: the blocker holds every permit until the round is
  // over, so the victim really queues, and the canceller fires only once
  // the victim is queued: which steps run depends on no timing (a 3 ms
  // blocker and a 50 us canceller once missed CANCEL_LOCKED in every case
  // on a loaded machine).
  b->op = kOpTimeout;
  for (int i = 0; i < 3; i++) {
    int round = ++b->step;
    spawn_blocker(s, permits, b, 0, false, round);
    timespec d = in_us(5000);
    int r = shmsem_acquire_until(s, &d, &l[0]);
    b->step_done = round;
    if (r == 0)
      shmsem_release(s, &l[0]);
    else if (r != -ETIMEDOUT)
      _exit(25);
  }

  b->op = kOpCancel;
  for (int i = 0; i < 3; i++) {
    int round = ++b->step;
    spawn_blocker(s, permits, b, 0, false, round);
    shmsem_cancel_t c;
    shmsem_cancel_init(&c);
    int queued = b->victim_queued.load();
    std::thread canceller([&] {
      wait_until([&] { return b->victim_queued.load() > queued; },
                 std::chrono::seconds(10));
      shmsem_cancel(&c);
    });
    int r = shmsem_acquire_ex(s, nullptr, &c, 0, &l[0]);
    b->step_done = round;
    canceller.join();
    if (r == 0)
      shmsem_release(s, &l[0]);
    else if (r != -ECANCELED)
      _exit(26);
  }

  if (b->race.load()) {
    // The bounded policy: a blocker releases once we queued, into the
    // pool, and we, the head within our bound, race for it (nudged).
    b->op = kOpRace;
    for (int i = 0; i < 3; i++) {
      spawn_blocker(s, permits, b, 0, false, 0, b->victim_queued.load());
      if (shmsem_acquire(s, &l[0]) != 0) _exit(29);
      shmsem_release(s, &l[0]);
    }
  }

  b->op = kOpReclaim;
  {
    // A holder that dies without releasing; then reclaim it ourselves.
    pid_t g = fork();
    if (g == 0) {
      g_kill.point = -1;
      shmsem_lease_t x;
      shmsem_acquire(s, &x);
      _exit(0);
    }
    waitpid(g, nullptr, 0);
    shmsem_recover(s);
  }

  b->op = kOpHandoff;
  for (uint32_t i = 0; i < permits; i++)
    if (shmsem_acquire(s, &l[i]) != 0) _exit(27);
  g_cross.s = s;
  g_cross.armed = true;
  for (uint32_t i = 0; i < permits; i++)
    if (shmsem_release(s, &l[i]) != 0) _exit(28);
  g_cross.armed = false;

  b->op = kOpRepair;
  {
    // A process that dies holding the segment lock; our next call repairs.
    pid_t g = fork();
    if (g == 0) {
      g_kill.point = int(HookPoint::ACQUIRE_LOCKED);
      g_kill.countdown = 1;
      g_kill.sigkill = true;
      testing::set_hook(
          [](HookPoint p, void *) {
            if (int(p) == g_kill.point) raise(SIGKILL);
          },
          nullptr);
      shmsem_lease_t x;
      shmsem_acquire(s, &x);
      _exit(0);
    }
    waitpid(g, nullptr, 0);
    struct shmsem_stat st;
    shmsem_stat(s, &st);  // takes the lock: EOWNERDEAD -> repair
  }

  if (with_shutdown) {
    b->op = kOpShutdown;
    // A blocker and a queued grandchild, so shutdown has a waiter to fail.
    spawn_blocker(s, permits, b, 0, true);
    if (fork() == 0) {
      g_kill.point = -1;
      shmsem_lease_t x;
      if (shmsem_acquire(s, &x) == 0) shmsem_release(s, &x);
      _exit(0);
    }
    wait_until([&] {
      struct shmsem_stat st;
      shmsem_stat(s, &st);
      return st.waiting >= 1;
    });
    shmsem_shutdown(s);
  }
  b->op = kOpCount;
  shmsem_detach(s);
}

// The async victim (shmsem_waiter_*): hands its permits to the survivors
// as the other script does, then three rounds of a non-blocking waiter
// driven by a plain futex loop, as an event loop would: granted, cancelled,
// timed out. A blocker holds every permit until the round says so, so the
// waiter really queues.
int async_wait(shmsem_waiter_t *w, shmsem_lease_t *l) {
  for (;;) {
    int r = shmsem_waiter_poll(w, l);
    if (r != -EINPROGRESS) return r;
    uint32_t *word, value;
    timespec at;
    if (shmsem_waiter_futex(w, &word, &value) || shmsem_waiter_wake_by(w, &at))
      return -EPROTO;
    timespec rel = in_us(0);
    long ns =
        (at.tv_sec - rel.tv_sec) * 1'000'000'000L + (at.tv_nsec - rel.tv_nsec);
    ns = std::clamp(ns, 0L, 10'000'000L);
    rel = timespec{0, ns};
    syscall(SYS_futex, word, FUTEX_WAIT, value, &rel, nullptr, 0);
  }
}

void async_script(const std::string &name, uint32_t permits, Board *b) {
  shmsem_t *s = nullptr;
  if (shmsem_open(name.c_str(), 0, &s) != 0) _exit(20);
  shmsem_lease_t l[4];
  b->op = kOpFast;
  for (uint32_t i = 0; i < permits; i++)
    if (shmsem_acquire(s, &l[i]) != 0) _exit(21);
  b->holding = 1;
  b->op = kOpReleaseToWaiters;
  wait_until([&] { return b->survivors_started.load() == 2; },
             std::chrono::seconds(5));
  for (uint32_t i = 0; i < permits; i++)
    if (shmsem_release(s, &l[i]) != 0) _exit(22);

  b->op = kOpAsync;
  for (int mode = 0; mode < 3; mode++) {
    int round = ++b->step;
    spawn_blocker(s, permits, b, 0, false, round);
    shmsem_waiter_t w;
    timespec d = in_us(3000);
    int r = shmsem_waiter_start(s, &w, mode == 2 ? &d : nullptr, &l[0]);
    if (r == SHMSEM_QUEUED) {
      if (mode == 0) {
        b->step_done = round;  // the blocker lets go: the grant comes
        r = async_wait(&w, &l[0]);
      } else if (mode == 1) {
        r = shmsem_waiter_cancel(&w, &l[0]);
      } else {
        r = async_wait(&w, &l[0]);
      }
    }
    b->step_done = round;
    if (r == 0) {
      if (shmsem_release(s, &l[0]) != 0) _exit(23);
    } else if (r != -ECANCELED && r != -ETIMEDOUT) {
      _exit(24);
    }
  }
  b->op = kOpCount;
  shmsem_detach(s);
}

// The weighted victim (issue 12): weighted leases taken at once and after
// queueing, a head that times out holding part of what it asked for, and
// resizes, all with survivors of weight 1 going on around it.
// A grandchild that holds all N permits, gives one back once the victim
// has queued (so that it becomes the victim's partial reservation), and
// the rest when the round is over (or the victim died).
void spawn_partial_blocker(shmsem_t *s, uint32_t permits, Board *b, int round) {
  b->blocker_ready = 0;
  if (fork() == 0) {
    g_kill.point = -1;
    g_kill.board = nullptr;
    shmsem_lease_t x[4];
    for (uint32_t i = 0; i < permits; i++) shmsem_acquire(s, &x[i]);
    int queued = b->victim_queued.load();
    b->blocker_ready = 1;
    wait_until(
        [&] {
          return b->victim_queued.load() > queued || b->killed_at.load() >= 0;
        },
        std::chrono::seconds(10));
    shmsem_release(s, &x[0]);
    wait_until(
        [&] {
          return b->step_done.load() >= round || b->killed_at.load() >= 0;
        },
        std::chrono::seconds(10));
    for (uint32_t i = 1; i < permits; i++) shmsem_release(s, &x[i]);
    _exit(0);
  }
  wait_until([&] { return b->blocker_ready.load() == 1; });
}

void weighted_script(const std::string &name, uint32_t permits, Board *b) {
  shmsem_t *s = nullptr;
  if (shmsem_open(name.c_str(), 0, &s) != 0) _exit(20);
  shmsem_lease_t l[4];
  b->op = kOpFast;
  if (shmsem_acquire_n(s, permits, &l[0]) != 0) _exit(21);
  b->holding = 1;
  b->op = kOpReleaseToWaiters;
  wait_until([&] { return b->survivors_started.load() == 2; },
             std::chrono::seconds(5));
  if (shmsem_release(s, &l[0]) != 0) _exit(22);

  b->op = kOpWeighted;
  for (int i = 0; i < 3; i++) {
    if (shmsem_acquire_n(s, 2, &l[0]) != 0) _exit(23);
    if (shmsem_release(s, &l[0]) != 0) _exit(24);
  }

  b->op = kOpPartial;
  for (int i = 0; i < 2; i++) {
    int round = ++b->step;
    spawn_partial_blocker(s, permits, b, round);
    timespec d = in_us(5000);
    int r = shmsem_acquire_until_n(s, permits, &d, &l[0]);
    b->step_done = round;
    if (r == 0)
      shmsem_release(s, &l[0]);
    else if (r != -ETIMEDOUT)
      _exit(25);
  }

  b->op = kOpResize;
  // Never below 2: the survivors need a permit to finish.
  for (uint32_t c : {2u, 4u, permits}) {
    if (shmsem_acquire_n(s, 2, &l[0]) != 0) _exit(26);
    if (shmsem_set_permits(s, c) != 0) _exit(27);
    if (shmsem_release(s, &l[0]) != 0) _exit(28);
  }
  b->op = kOpCount;
  shmsem_detach(s);
}

// A survivor: three acquire/release rounds; a closed semaphore ends it.
int survivor(const std::string &name, Board *b) {
  shmsem_t *s = nullptr;
  if (shmsem_open(name.c_str(), 0, &s) != 0) return 30;
  // Start once the victim holds everything, or died before it could.
  wait_until(
      [&] { return b->holding.load() == 1 || b->killed_at.load() >= 0; });
  b->survivors_started++;
  for (int i = 0; i < 3; i++) {
    shmsem_lease_t l;
    timespec d = in_us(10'000'000);  // 10 s: only a lost permit hits it
    int r = shmsem_acquire_until(s, &d, &l);
    if (r == -ESHUTDOWN) break;
    if (r != 0) return 31;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (shmsem_release(s, &l) != 0) return 32;
  }
  shmsem_detach(s);
  return 0;
}

struct CaseResult {
  bool reached = false;
  int op = -1;
};

enum class Script { kPlain, kAsync, kWeighted, kBounded };

// One (hook point, occurrence, kill mode, N) case.
CaseResult run_case(int point, int nth, bool sigkill, uint32_t permits,
                    bool with_shutdown, Script script = Script::kPlain) {
  CaseResult res;
  shmsem_config cfg{};
  cfg.permits = permits;
  cfg.max_waiters = 8;
  // The weighted script resizes between 2 and 4.
  if (script == Script::kWeighted) cfg.max_permits = 4;
  // The plain script under the bounded policy: a bound short enough that
  // the timeout and cancel rounds' heads pass it (the hand-off), long
  // enough that heads race newcomers for released permits before.
  // (A head races only within its bound: for the kill there, a bound the
  // 5 ms timeout rounds never reach.)
  if (script == Script::kBounded) {
    cfg.policy = SHMSEM_POLICY_BOUNDED;
    cfg.max_bypass_ns =
        point == int(HookPoint::HEAD_BARGE_TAKEN) ? 50'000'000 : 2'000'000;
  }
  Segment seg(cfg, "crash");
  Shared<Board> board;
  board->race = script == Script::kBounded;
  Children kids;
  pid_t victim = kids.spawn([&] {
    g_kill.point = point;
    g_kill.countdown = nth;
    g_kill.sigkill = sigkill;
    g_kill.board = &*board;
    testing::set_hook(kill_hook, nullptr);
    if (script == Script::kAsync)
      async_script(seg.name(), permits, &*board);
    else if (script == Script::kWeighted)
      weighted_script(seg.name(), permits, &*board);
    else  // kPlain, kBounded
      victim_script(seg.name(), permits, &*board, with_shutdown);
    return 0;
  });
  pid_t s1 = kids.spawn([&] { return survivor(seg.name(), &*board); });
  pid_t s2 = kids.spawn([&] { return survivor(seg.name(), &*board); });

  int vr = kids.wait(victim, std::chrono::seconds(60));
  res.reached = board->killed_at.load() == point;
  res.op = board->op.load();
  std::string where =
      std::string(testing::hook_name(HookPoint(point))) + " #" +
      std::to_string(nth) + " in " +
      (res.op >= 0 && res.op < kOpCount ? kOpNames[res.op] : "-") +
      (sigkill ? " (SIGKILL)" : " (_exit)") + " N=" + std::to_string(permits);
  if (res.reached)
    EXPECT_EQ(vr, sigkill ? 128 + SIGKILL : 99) << where;
  else
    EXPECT_EQ(vr, 0) << "victim failed without being killed: " << where;
  // The survivors make progress: the dead victim's permits come back.
  EXPECT_EQ(kids.wait(s1, std::chrono::seconds(60)), 0) << where;
  EXPECT_EQ(kids.wait(s2, std::chrono::seconds(60)), 0) << where;

  // Reap the victim's grandchildren (we are their subreaper); each ends on
  // its own within milliseconds.
  for (;;) {
    pid_t r = waitpid(-1, nullptr, 0);
    if (r < 0 && errno != EINTR) break;
  }
  shmsem_t *s = seg.get();
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_INVARIANTS(s) << where;
  SCOPED_TRACE(where);
  // A resize cut short by the kill ends at one of the script's capacities.
  struct shmsem_stat st;
  EXPECT_EQ(shmsem_stat(s, &st), 0);
  if (script == Script::kWeighted) {
    EXPECT_TRUE(st.permits == 2 || st.permits == 4 || st.permits == permits)
        << st.permits;
    EXPECT_EQ(st.retiring, 0u);
    permits = st.permits;
  }
  EXPECT_COUNTS(s, permits, 0, 0, 0);
  auto c = testing::census(s);
  EXPECT_EQ(c.free_slots, 8u) << "no ghost slots: " << where;
  return res;
}

TEST(Crash, FaultInjectionAtEveryHookPointOfEveryOperation) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int ran = 0, reached = 0;
  int per_op[kOpCount] = {};
  int per_point[kPoints] = {};
  // Seeds: which occurrence of the point kills (1..seeds). `make soak` and
  // SHMSEM_CRASH_SEEDS run more.
  const char *env = getenv("SHMSEM_CRASH_SEEDS");
  const int seeds = env ? atoi(env) : 3;
  for (int point = 0; point < kPoints; point++)
    for (int nth = 1; nth <= seeds; nth++)
      if (!is_create_point(point))
        for (uint32_t permits : {1u, 2u})
          for (bool sigkill : {true, false}) {
            bool shutdown = true;
            if (point == int(HookPoint::CAPACITY_SET) ||
                point == int(HookPoint::CAPACITY_ONE))
              continue;  // the weighted script's (below)
            CaseResult r = run_case(point, nth, sigkill, permits, shutdown);
            ran++;
            if (r.reached) {
              reached++;
              per_op[r.op]++;
              per_point[point]++;
            }
            if (::testing::Test::HasFailure()) {
              ADD_FAILURE() << "stopping after the first failing case";
              return;
            }
          }
  std::string summary;
  for (int op = 0; op < kOpCount; op++)
    summary +=
        std::string(kOpNames[op]) + "=" + std::to_string(per_op[op]) + " ";
  ::testing::Test::RecordProperty("cases_run", ran);
  ::testing::Test::RecordProperty("cases_killed", reached);
  printf(
      "fault injection: %d cases run, %d killed at their point; by operation: "
      "%s\n",
      ran, reached, summary.c_str());
  // Every hook point must be reached by the script, or the test is blind.
  for (int point = 0; point < kPoints; point++) {
    // (A weighted lease's release, RELEASE_CHAIN_READ, is the weighted
    // script's too: a lease of one held under a process record is released
    // without the lock, or as HELD_FAST.)
    if (is_create_point(point) || point == int(HookPoint::CAPACITY_SET) ||
        point == int(HookPoint::CAPACITY_ONE) ||
        point == int(HookPoint::RELEASE_CHAIN_READ))
      continue;
    EXPECT_GT(per_point[point], 0)
        << "never killed at " << testing::hook_name(HookPoint(point));
  }
}

// The same for the non-blocking waiter: the victim kills itself at the
// n-th time it reaches each hook point while it starts, polls, cancels and
// times out async waits; nothing may be lost, nothing left queued.
TEST(Crash, FaultInjectionAtEveryHookPointOfAnAsyncWaiter) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int ran = 0, reached = 0;
  int per_point[kPoints] = {};
  for (int point = 0; point < kPoints; point++)
    for (int nth = 1; nth <= 2; nth++)
      if (!is_create_point(point))
        for (bool sigkill : {true, false}) {
          CaseResult r =
              run_case(point, nth, sigkill, 1, false, Script::kAsync);
          ran++;
          if (r.reached) {
            reached++;
            per_point[point]++;
          }
          if (::testing::Test::HasFailure()) {
            ADD_FAILURE() << "stopping after the first failing case";
            return;
          }
        }
  printf("async fault injection: %d cases run, %d killed at their point\n", ran,
         reached);
  // The steps of the waiter itself must each have been killed at.
  for (HookPoint p :
       {HookPoint::ACQUIRE_LOCKED, HookPoint::ENQUEUE_SLOT_POPPED,
        HookPoint::ENQUEUE_COMMITTED, HookPoint::ACQUIRE_ENQUEUED,
        HookPoint::WAIT_RETURN_LOCKED, HookPoint::WAIT_CANCEL_SEEN,
        HookPoint::WAIT_TIMEOUT_FIRED, HookPoint::WAIT_CONSUME_COMMITTED,
        HookPoint::RELEASE_GRANTED})
    EXPECT_GT(per_point[int(p)], 0)
        << "never killed at " << testing::hook_name(p);
}

// The plain script on a semaphore of the bounded policy (issue 28): every
// hook point, the policy's own two included (the head that took permits
// from the pool and is still queued; the hand-off turned on, the pool not
// yet fed to the head).
TEST(Crash, FaultInjectionAtEveryHookPointUnderTheBoundedPolicy) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int ran = 0, reached = 0;
  int per_point[kPoints] = {};
  const HookPoint own[] = {HookPoint::POLICY_HAND_OFF,
                           HookPoint::HEAD_BARGE_TAKEN};
  for (int point = 0; point < kPoints; point++) {
    const bool policy_point = std::find(std::begin(own), std::end(own),
                                        HookPoint(point)) != std::end(own);
    if (is_create_point(point) && !policy_point) continue;
    if (point == int(HookPoint::CAPACITY_SET) ||
        point == int(HookPoint::CAPACITY_ONE))
      continue;  // the weighted script's
    // The policy's points: more occurrences, as which of the processes
    // races for the pool depends on the scheduler.
    for (int nth = 1; nth <= (policy_point ? 6 : 1); nth++)
      for (bool sigkill : {true, false}) {
        CaseResult r = run_case(point, nth, sigkill, 1, true, Script::kBounded);
        ran++;
        if (r.reached) {
          reached++;
          per_point[point]++;
        }
        if (::testing::Test::HasFailure()) {
          ADD_FAILURE() << "stopping after the first failing case";
          return;
        }
      }
  }
  printf("bounded fault injection: %d cases run, %d killed at their point\n",
         ran, reached);
  for (HookPoint p : own)
    EXPECT_GT(per_point[int(p)], 0)
        << "never killed at " << testing::hook_name(p);
}

// The same for weighted leases and resizes (issue 12): killed at every
// hook point of a weighted acquire taken at once and after queueing, of a
// head that times out holding a partial reservation, and of a resize.
TEST(Crash, FaultInjectionAtEveryHookPointOfWeightedLeasesAndResizes) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int ran = 0, reached = 0;
  int per_point[kPoints] = {};
  int per_op[kOpCount] = {};
  for (int point = 0; point < kPoints; point++)
    for (int nth = 1; nth <= 2; nth++)
      if (!is_create_point(point))
        for (bool sigkill : {true, false}) {
          CaseResult r =
              run_case(point, nth, sigkill, 3, false, Script::kWeighted);
          ran++;
          if (r.reached) {
            reached++;
            per_point[point]++;
            per_op[r.op]++;
          }
          if (::testing::Test::HasFailure()) {
            ADD_FAILURE() << "stopping after the first failing case";
            return;
          }
        }
  printf(
      "weighted fault injection: %d cases run, %d killed at their point; "
      "weighted=%d partial-reservation=%d resize=%d\n",
      ran, reached, per_op[kOpWeighted], per_op[kOpPartial], per_op[kOpResize]);
  for (HookPoint p :
       {HookPoint::ACQUIRE_LEASE_POPPED, HookPoint::ACQUIRE_COMMITTED,
        HookPoint::ENQUEUE_COMMITTED, HookPoint::RELEASE_CHOSEN,
        HookPoint::RELEASE_RESERVED, HookPoint::RELEASE_FREED,
        HookPoint::WAIT_TIMEOUT_FIRED, HookPoint::WAIT_RETURN_LOCKED,
        HookPoint::WAIT_CONSUME_COMMITTED, HookPoint::WAIT_CHAIN_READ,
        HookPoint::RELEASE_CHAIN_READ, HookPoint::CAPACITY_SET,
        HookPoint::CAPACITY_ONE})
    EXPECT_GT(per_point[int(p)], 0)
        << "never killed at " << testing::hook_name(p);
  for (int op : {kOpWeighted, kOpPartial, kOpResize})
    EXPECT_GT(per_op[op], 0) << "never killed in " << kOpNames[op];
}

// Random crash stress: workers doing random acquire / timed acquire / try /
// cancel / release while a killer SIGKILLs random ones and respawns them.
// At the end the last generation finishes its work (no survivor is stuck),
// and after reclamation nothing is lost, nothing created, nothing queued.
int stress_worker(const std::string &name, unsigned seed,
                  std::atomic<bool> *stop, std::atomic<uint64_t> *grants) {
  shmsem_t *s = nullptr;
  if (shmsem_open(name.c_str(), 0, &s) != 0) return 40;
  std::mt19937 rng(seed);
  while (!stop->load()) {
    shmsem_lease_t l;
    int r;
    switch (rng() % 5) {
      case 0:
        r = shmsem_acquire(s, &l);
        break;
      case 4: {
        timespec d = in_us(long(rng() % 2000));
        r = shmsem_acquire_until_n(s, 2, &d, &l);  // both permits
        break;
      }
      case 1:
        r = shmsem_try_acquire(s, &l);
        break;
      case 2: {
        timespec d = in_us(long(rng() % 2000));
        r = shmsem_acquire_until(s, &d, &l);
        break;
      }
      default: {
        shmsem_cancel_t c;
        shmsem_cancel_init(&c);
        long us = long(rng() % 500);
        std::thread t([&] {
          std::this_thread::sleep_for(std::chrono::microseconds(us));
          shmsem_cancel(&c);
        });
        r = shmsem_acquire_ex(s, nullptr, &c, 0, &l);
        t.join();
      }
    }
    if (r == -EAGAIN || r == -ETIMEDOUT || r == -ECANCELED || r == -EBUSY)
      continue;
    if (r != 0) return 41;
    (*grants)++;
    for (volatile unsigned k = 0, n = rng() % 20000; k < n; k = k + 1) {
    }
    if (shmsem_release(s, &l) != 0) return 42;
  }
  shmsem_detach(s);
  return 0;
}

TEST(Crash, RandomKillsDuringRandomOperationsLoseNothing) {
  const char *env = getenv("SHMSEM_STRESS_SECONDS");
  const auto run = std::chrono::milliseconds(env ? atoi(env) * 1000 : 2000);
  constexpr uint32_t kPermits = 2;
  constexpr int kWorkers = 5;
  Segment seg(kPermits, 16, "stress");
  struct Board {
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> grants{0};
  };
  Shared<Board> board;
  Children kids;
  std::vector<pid_t> live;
  unsigned seed = 1;
  auto spawn = [&] {
    unsigned sd = seed++;
    live.push_back(kids.spawn([&, sd] {
      return stress_worker(seg.name(), sd, &board->stop, &board->grants);
    }));
  };
  for (int i = 0; i < kWorkers; i++) spawn();
  std::mt19937 rng(12345);
  int kills = 0, checks = 0;
  auto end = std::chrono::steady_clock::now() + run;
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::microseconds(500 + rng() % 4000));
    size_t victim = rng() % live.size();
    kill(live[victim], SIGKILL);
    EXPECT_EQ(kids.wait(live[victim], std::chrono::seconds(10)), 128 + SIGKILL);
    live.erase(live.begin() + long(victim));
    kills++;
    spawn();
    ASSERT_INVARIANTS(seg.get());  // holds at every step, kills included
    checks++;
  }
  board->stop = true;
  for (pid_t p : live)
    EXPECT_EQ(kids.wait(p, std::chrono::seconds(30)), 0)
        << "a surviving worker did not finish";
  shmsem_t *s = seg.get();
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_INVARIANTS(s);
  EXPECT_COUNTS(s, kPermits, 0, 0, 0);
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  EXPECT_GE(st.acquisitions, board->grants.load());
  printf(
      "stress: %d kills, %d invariant checks, %llu grants, %llu holders and "
      "%llu waiters reclaimed, %llu repairs\n",
      kills, checks, (unsigned long long)board->grants.load(),
      (unsigned long long)st.reclaimed_holders,
      (unsigned long long)st.reclaimed_waiters, (unsigned long long)st.repairs);
}

}  // namespace
}  // namespace shmsem::test
