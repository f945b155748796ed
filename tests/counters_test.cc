// The counters of struct shmsem_stat keep the header's promise: every
// outcome of every entry point is counted exactly once, in the counter the
// header names, and in no other. One test per counter; each step asserts
// the exact change of all eight counters (every one not named must stay
// put). Interleavings are forced with hook points and the manual clock;
// deaths are real processes killed with SIGKILL at a known point.
#include <gtest/gtest.h>
#include <pthread.h>
#include <shmsem/shmsem.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <initializer_list>
#include <string>
#include <thread>
#include <utility>

#include "support/hook_gate.h"
#include "support/manual_clock.h"
#include "support/process.h"
#include "support/segment.h"
#include "support/waiter_thread.h"
#include "testing.h"

namespace shmsem::test {
namespace {

constexpr uint64_t kMs = 1'000'000;

enum Counter {
  kAcquisitions,
  kTimeouts,
  kCancellations,
  kQueueFull,
  kShutdownFailures,
  kReclaimedHolders,
  kReclaimedWaiters,
  kRepairs,
  kCounters
};
const char *const kNames[kCounters] = {
    "acquisitions",      "timeouts",          "cancellations",     "queue_full",
    "shutdown_failures", "reclaimed_holders", "reclaimed_waiters", "repairs"};

struct Tally {
  uint64_t v[kCounters];
};

Tally tally(shmsem_t *s) {
  struct shmsem_stat st;
  EXPECT_EQ(shmsem_stat(s, &st), 0);
  return Tally{{st.acquisitions, st.timeouts, st.cancellations, st.queue_full,
                st.shutdown_failures, st.reclaimed_holders,
                st.reclaimed_waiters, st.repairs}};
}

// Remembers the counters; expect() asserts what changed since (exactly the
// named changes, every other counter unchanged) and starts again from now.
class Counters {
 public:
  explicit Counters(shmsem_t *s) : s_(s), last_(tally(s)) {}
  void rebase() { last_ = tally(s_); }
  void expect(const char *what,
              std::initializer_list<std::pair<Counter, uint64_t>> changes) {
    uint64_t want[kCounters] = {};
    for (const auto &c : changes) want[c.first] += c.second;
    Tally now = tally(s_);
    for (int i = 0; i < kCounters; i++)
      EXPECT_EQ(now.v[i] - last_.v[i], want[i])
          << kNames[i] << " after: " << what;
    last_ = now;
  }

 private:
  shmsem_t *s_;
  Tally last_;
};

const timespec kPast{0, 0};

// --- acquisitions ------------------------------------------------------------

TEST(Counters, AcquisitionsCountEverySuccessfulAcquireOnce) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  Counters c(s);
  shmsem_lease_t a, b;

  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  c.expect("acquire under the lock", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_release(s, &a), 0);
  c.expect("release", {});
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  c.expect("lock-free acquire", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_try_acquire(s, &b), 0);
  c.expect("try_acquire", {{kAcquisitions, 1}});
  shmsem_lease_t x;
  EXPECT_EQ(shmsem_try_acquire(s, &x), -EAGAIN);
  c.expect("try_acquire that fails with -EAGAIN", {});
  ASSERT_EQ(shmsem_release(s, &a), 0);
  ASSERT_EQ(shmsem_release(s, &b), 0);

  timespec past = kPast;
  ASSERT_EQ(shmsem_acquire_until(s, &past, &a), 0);
  c.expect("acquire_until, past deadline, permit free", {{kAcquisitions, 1}});
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  ASSERT_EQ(
      shmsem_acquire_ex(s, nullptr, &cancel, SHMSEM_WAIT_INTERRUPTIBLE, &b), 0);
  c.expect("acquire_ex", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_release(s, &a), 0);
  ASSERT_EQ(shmsem_release(s, &b), 0);

  // Weighted: one lease of n is one acquisition.
  ASSERT_EQ(shmsem_acquire_n(s, 2, &a), 0);
  c.expect("acquire_n(2)", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_release(s, &a), 0);
  ASSERT_EQ(shmsem_try_acquire_n(s, 2, &a), 0);
  c.expect("try_acquire_n(2)", {{kAcquisitions, 1}});
  EXPECT_EQ(shmsem_try_acquire_n(s, 1, &b), -EAGAIN);
  c.expect("try_acquire_n that fails", {});
  ASSERT_EQ(shmsem_release(s, &a), 0);
  ASSERT_EQ(shmsem_acquire_until_n(s, 2, &past, &a), 0);
  c.expect("acquire_until_n(2)", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_release(s, &a), 0);
  ASSERT_EQ(shmsem_acquire_ex_n(s, 2, nullptr, nullptr, 0, &a), 0);
  c.expect("acquire_ex_n(2)", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_release(s, &a), 0);

  // Async, granted at once.
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &a), 0);
  c.expect("waiter_start granted at once", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_waiter_start_n(s, &w, 1, nullptr, &b), 0);
  c.expect("waiter_start_n granted at once", {{kAcquisitions, 1}});

  // Queued, then granted: counted when the waiter takes the grant, once.
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *l) { return shmsem_acquire(s, l); });
  ASSERT_TRUE(waiting_is(s, 1));
  c.expect("queued", {});
  ASSERT_EQ(shmsem_release(s, &a), 0);
  t.join();
  ASSERT_EQ(t.result, 0);
  c.expect("queued blocking acquire granted", {{kAcquisitions, 1}});

  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &a), SHMSEM_QUEUED);
  c.expect("async queued", {});
  ASSERT_EQ(shmsem_release(s, &b), 0);
  ASSERT_EQ(shmsem_waiter_poll(&w, &b), 0);
  c.expect("async waiter granted, poll", {{kAcquisitions, 1}});

  // An async cancel that loses to the grant is a success, not a cancel.
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &a), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_release(s, &b), 0);
  ASSERT_EQ(shmsem_waiter_cancel(&w, &a), 0);
  c.expect("async cancel after the grant won", {{kAcquisitions, 1}});

  // A timeout that loses to the grant is a success, not a timeout.
  {
    ManualClock clock;
    HookGate gate;
    int fired = gate.arm(HookPoint::WAIT_TIMEOUT_FIRED, 2);
    timespec deadline = clock.deadline_in(5 * kMs);
    WaiterThread u;
    u.start(2, [&](shmsem_lease_t *l) {
      return shmsem_acquire_until(s, &deadline, l);
    });
    ASSERT_TRUE(waiting_is(s, 1));
    clock.advance(10 * kMs);
    ASSERT_TRUE(gate.wait_arrived(fired));
    ASSERT_EQ(shmsem_release(s, &a), 0);  // granted before the timeout runs
    gate.resume(fired);
    u.join();
    ASSERT_EQ(u.result, 0);
    c.expect("grant won over a fired timeout", {{kAcquisitions, 1}});
    a = u.lease;
  }
  ASSERT_EQ(shmsem_release(s, &a), 0);
  ASSERT_EQ(shmsem_release(s, &t.lease), 0);
  c.expect("releases", {});
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// --- timeouts ----------------------------------------------------------------

TEST(Counters, TimeoutsCountEveryAcquireThatEndsInEtimedout) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  ManualClock clock;
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire_n(s, 2, &held), 0);
  Counters c(s);
  timespec past = kPast;

  EXPECT_EQ(shmsem_acquire_until(s, &past, &l), -ETIMEDOUT);
  c.expect("acquire_until, past deadline", {{kTimeouts, 1}});
  EXPECT_EQ(shmsem_acquire_until_n(s, 2, &past, &l), -ETIMEDOUT);
  c.expect("acquire_until_n, past deadline", {{kTimeouts, 1}});
  EXPECT_EQ(shmsem_acquire_ex(s, &past, nullptr, SHMSEM_WAIT_INTERRUPTIBLE, &l),
            -ETIMEDOUT);
  c.expect("acquire_ex, past deadline", {{kTimeouts, 1}});
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  EXPECT_EQ(shmsem_acquire_ex_n(s, 1, &past, &cancel, 0, &l), -ETIMEDOUT);
  c.expect("acquire_ex_n with an unfired handle, past deadline",
           {{kTimeouts, 1}});
  shmsem_waiter_t w;
  EXPECT_EQ(shmsem_waiter_start(s, &w, &past, &l), -ETIMEDOUT);
  c.expect("waiter_start, past deadline", {{kTimeouts, 1}});
  EXPECT_EQ(shmsem_waiter_start_n(s, &w, 2, &past, &l), -ETIMEDOUT);
  c.expect("waiter_start_n, past deadline", {{kTimeouts, 1}});
  EXPECT_EQ(shmsem_try_acquire(s, &l), -EAGAIN);
  c.expect("try_acquire -EAGAIN is no timeout", {});

  // Queued, then the deadline passes.
  timespec deadline = clock.deadline_in(5 * kMs);
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *x) {
    return shmsem_acquire_until(s, &deadline, x);
  });
  ASSERT_TRUE(waiting_is(s, 1));
  c.expect("queued", {});
  clock.advance(10 * kMs);
  t.join();
  EXPECT_EQ(t.result, -ETIMEDOUT);
  c.expect("queued acquire_until timed out", {{kTimeouts, 1}});

  deadline = clock.deadline_in(5 * kMs);
  WaiterThread tn;
  tn.start(2, [&](shmsem_lease_t *x) {
    return shmsem_acquire_ex_n(s, 2, &deadline, nullptr,
                               SHMSEM_WAIT_INTERRUPTIBLE, x);
  });
  ASSERT_TRUE(waiting_is(s, 1));
  clock.advance(10 * kMs);
  tn.join();
  EXPECT_EQ(tn.result, -ETIMEDOUT);
  c.expect("queued acquire_ex_n timed out", {{kTimeouts, 1}});

  // Async: the deadline passes, the poll completes the wait.
  deadline = clock.deadline_in(5 * kMs);
  ASSERT_EQ(shmsem_waiter_start(s, &w, &deadline, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINPROGRESS);
  c.expect("async queued, polled", {});
  clock.advance(10 * kMs);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -ETIMEDOUT);
  c.expect("async poll after the deadline", {{kTimeouts, 1}});

  EXPECT_COUNTS(s, 0, 2, 0, 0);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  // A past deadline with a permit free is a success.
  EXPECT_EQ(shmsem_acquire_until(s, &past, &l), 0);
  c.expect("past deadline, permit free", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_release(s, &l), 0);
  EXPECT_INVARIANTS(s);
}

// --- cancellations
// -------------------------------------------------------------

// The bug this suite was written for: an acquire that fails at once because
// its handle was already fired returned -ECANCELED without counting it (a
// deadline already past was counted as a timeout).
TEST(Counters, AcquireWithAnAlreadyFiredHandleCountsOneCancellation) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  Counters c(s);
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  shmsem_cancel(&cancel);
  shmsem_lease_t l;
  // A permit is free: a fired handle still fails at once.
  EXPECT_EQ(shmsem_acquire_ex(s, nullptr, &cancel, 0, &l), -ECANCELED);
  c.expect("fired handle, permit free", {{kCancellations, 1}});
  EXPECT_EQ(shmsem_acquire_ex_n(s, 2, nullptr, &cancel, 0, &l), -ECANCELED);
  c.expect("fired handle, acquire_ex_n", {{kCancellations, 1}});
  // Fired handle and a past deadline: -ECANCELED, counted as such only.
  timespec past = kPast;
  EXPECT_EQ(shmsem_acquire_ex(s, &past, &cancel, SHMSEM_WAIT_INTERRUPTIBLE, &l),
            -ECANCELED);
  c.expect("fired handle, past deadline", {{kCancellations, 1}});
  // A read-only handle cannot count (nor acquire): -EBADF, nothing counted.
  shmsem_t *ro = seg.open_again(SHMSEM_RDONLY);
  ASSERT_NE(ro, nullptr);
  EXPECT_EQ(shmsem_acquire_ex(ro, nullptr, &cancel, 0, &l), -EBADF);
  shmsem_detach(ro);
  c.expect("fired handle, read-only handle", {});
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Counters, CancellationsCountEveryEcanceledAndEintr) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  Counters c(s);
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);

  // Fired while the waiter sleeps (armed): the canceller wins and counts.
  {
    HookGate gate;
    int asleep = gate.arm(HookPoint::WAIT_SLEEPING, 1);
    WaiterThread t;
    t.start(1, [&](shmsem_lease_t *x) {
      return shmsem_acquire_ex(s, nullptr, &cancel, 0, x);
    });
    ASSERT_TRUE(gate.wait_arrived(asleep));
    c.expect("queued", {});
    shmsem_cancel(&cancel);
    c.expect("cancelled by the canceller", {{kCancellations, 1}});
    gate.resume(asleep);
    t.join();
    EXPECT_EQ(t.result, -ECANCELED);
    c.expect("cancelled waiter returned", {});
  }
  // Fired after the waiter queued, before it armed its handle: the waiter
  // withdraws itself and counts.
  shmsem_cancel_reset(&cancel);
  {
    HookGate gate;
    int queued = gate.arm(HookPoint::ACQUIRE_ENQUEUED, 2);
    WaiterThread t;
    t.start(2, [&](shmsem_lease_t *x) {
      return shmsem_acquire_ex_n(s, 1, nullptr, &cancel, 0, x);
    });
    ASSERT_TRUE(gate.wait_arrived(queued));
    shmsem_cancel(&cancel);
    c.expect("fired before arm: nothing to cancel yet", {});
    gate.resume(queued);
    t.join();
    EXPECT_EQ(t.result, -ECANCELED);
    c.expect("waiter found its handle fired at arm", {{kCancellations, 1}});
  }
  // Already fired when the acquire starts, the permit taken: at once.
  EXPECT_EQ(shmsem_acquire_ex(s, nullptr, &cancel, 0, &l), -ECANCELED);
  c.expect("already fired, no permit", {{kCancellations, 1}});
  // A cancel that loses to the grant is a success.
  shmsem_cancel_reset(&cancel);
  {
    HookGate gate;
    int asleep = gate.arm(HookPoint::WAIT_SLEEPING, 3);
    WaiterThread t;
    t.start(3, [&](shmsem_lease_t *x) {
      return shmsem_acquire_ex(s, nullptr, &cancel, 0, x);
    });
    ASSERT_TRUE(gate.wait_arrived(asleep));
    ASSERT_EQ(shmsem_release(s, &held), 0);  // granted
    shmsem_cancel(&cancel);
    gate.resume(asleep);
    t.join();
    ASSERT_EQ(t.result, 0);
    c.expect("grant won over the cancel", {{kAcquisitions, 1}});
    held = t.lease;
  }

  // Async cancel: withdrawn owning nothing.
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_cancel(&w, &l), -ECANCELED);
  c.expect("async cancel", {{kCancellations, 1}});
  ASSERT_EQ(shmsem_waiter_start_n(s, &w, 1, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_cancel(&w, &l), -ECANCELED);
  c.expect("async cancel of waiter_start_n", {{kCancellations, 1}});

  EXPECT_COUNTS(s, 0, 1, 0, 0);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  EXPECT_INVARIANTS(s);
}

std::atomic<int> g_signals{0};
void on_signal(int) { g_signals++; }

TEST(Counters, CancellationsCountAnInterruptedWaitOnce) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART
  sigaction(SIGUSR1, &sa, nullptr);
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  Counters c(s);
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *l) {
    return shmsem_acquire_ex(s, nullptr, nullptr, SHMSEM_WAIT_INTERRUPTIBLE, l);
  });
  ASSERT_TRUE(waiting_is(s, 1));
  // A signal that lands while the waiter is awake is not seen (documented):
  // signal until the wait ends, however many it takes.
  for (int i = 0; i < 20000 && !t.done.load(); i++) {
    pthread_kill(t.t.native_handle(), SIGUSR1);
    wait_until([&] { return t.done.load(); }, std::chrono::milliseconds(1));
  }
  t.join();
  EXPECT_EQ(t.result, -EINTR);
  c.expect("interrupted wait", {{kCancellations, 1}});
  // A plain wait ignores signals: nothing counted until it is granted.
  WaiterThread p;
  p.start(2, [&](shmsem_lease_t *l) { return shmsem_acquire(s, l); });
  ASSERT_TRUE(waiting_is(s, 1));
  g_signals = 0;
  pthread_kill(p.t.native_handle(), SIGUSR1);
  ASSERT_TRUE(wait_until([] { return g_signals.load() >= 1; }));
  c.expect("signal to a plain wait", {});
  ASSERT_EQ(shmsem_release(s, &held), 0);
  p.join();
  ASSERT_EQ(p.result, 0);
  c.expect("plain wait granted", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_release(s, &p.lease), 0);
  EXPECT_INVARIANTS(s);
  signal(SIGUSR1, SIG_DFL);
}

// pthread_cancel() of a thread asleep in the queue. In a child: a thread
// that never acts on its cancellation could not be joined otherwise.
struct CancelledThread {
  shmsem_t *s;
  std::atomic<int> r{1};
};

void *acquire_cancellable(void *p) {
  auto *a = static_cast<CancelledThread *>(p);
  HookGate::tag_this_thread(7);
  shmsem_lease_t l;
  int r = shmsem_acquire(a->s, &l);
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
  a->r = r;
  return nullptr;
}

// In the child: park the thread at WAIT_SLEEPING (cancellation disabled
// there), optionally release `held` (the grant wins), pthread_cancel it,
// let it go on into its cancellable sleep. 0 if it ended PTHREAD_CANCELED.
int cancel_sleeping_thread(shmsem_t *s, shmsem_lease_t *held_or_null) {
  HookGate gate;
  int asleep = gate.arm(HookPoint::WAIT_SLEEPING, 7);
  CancelledThread a;
  a.s = s;
  pthread_t t;
  if (pthread_create(&t, nullptr, acquire_cancellable, &a) != 0) return 2;
  if (!gate.wait_arrived(asleep)) return 3;
  if (held_or_null && shmsem_release(s, held_or_null) != 0) return 4;
  if (pthread_cancel(t) != 0) return 5;
  gate.resume(asleep);
  timespec abs;
  clock_gettime(CLOCK_REALTIME, &abs);
  abs.tv_sec += 10;
  void *ret = nullptr;
  if (pthread_timedjoin_np(t, &ret, &abs) != 0) return 6;
  if (a.r.load() != 1) return 7;  // the acquire returned: not cancelled
  return ret == PTHREAD_CANCELED ? 0 : 8;
}

TEST(Counters, CancellationsCountAThreadCancelledInTheQueue) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  Counters c(s);
  Children kids;
  pid_t k = kids.spawn([&] { return cancel_sleeping_thread(s, nullptr); });
  ASSERT_EQ(kids.wait(k), 0);
  c.expect("pthread_cancel while queued", {{kCancellations, 1}});
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  // The grant wins: the thread's cleanup takes the lease and releases it.
  // Counted as the acquisition it was (header: "a permit granted at that
  // instant is passed on").
  k = kids.spawn([&] { return cancel_sleeping_thread(s, &held); });
  ASSERT_EQ(kids.wait(k), 0);
  c.expect("pthread_cancel after the grant won", {{kAcquisitions, 1}});
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// --- queue_full
// -----------------------------------------------------------------

TEST(Counters, QueueFullCountsEveryEbusyRejection) {
  Segment seg(1, /*max_waiters=*/1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  Counters c(s);
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *x) { return shmsem_acquire(s, x); });
  ASSERT_TRUE(waiting_is(s, 1));
  c.expect("the one slot taken", {});

  EXPECT_EQ(shmsem_acquire(s, &l), -EBUSY);
  c.expect("acquire", {{kQueueFull, 1}});
  EXPECT_EQ(shmsem_acquire_n(s, 1, &l), -EBUSY);
  c.expect("acquire_n", {{kQueueFull, 1}});
  timespec far{time(nullptr) + 3600 * 24 * 365, 0};
  timespec later;
  clock_gettime(CLOCK_MONOTONIC, &later);
  later.tv_sec += 3600;
  EXPECT_EQ(shmsem_acquire_until(s, &later, &l), -EBUSY);
  c.expect("acquire_until", {{kQueueFull, 1}});
  EXPECT_EQ(shmsem_acquire_until_n(s, 1, &far, &l), -EBUSY);
  c.expect("acquire_until_n", {{kQueueFull, 1}});
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  EXPECT_EQ(
      shmsem_acquire_ex(s, nullptr, &cancel, SHMSEM_WAIT_INTERRUPTIBLE, &l),
      -EBUSY);
  c.expect("acquire_ex", {{kQueueFull, 1}});
  EXPECT_EQ(shmsem_acquire_ex_n(s, 1, &later, nullptr, 0, &l), -EBUSY);
  c.expect("acquire_ex_n", {{kQueueFull, 1}});
  shmsem_waiter_t w;
  EXPECT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), -EBUSY);
  c.expect("waiter_start", {{kQueueFull, 1}});
  EXPECT_EQ(shmsem_waiter_start_n(s, &w, 1, &later, &l), -EBUSY);
  c.expect("waiter_start_n", {{kQueueFull, 1}});
  // Calls that may not wait never reach the queue: not rejections.
  EXPECT_EQ(shmsem_try_acquire(s, &l), -EAGAIN);
  c.expect("try_acquire", {});
  timespec past = kPast;
  EXPECT_EQ(shmsem_acquire_until(s, &past, &l), -ETIMEDOUT);
  c.expect("past deadline, queue full", {{kTimeouts, 1}});
  EXPECT_EQ(shmsem_waiter_start(s, &w, &past, &l), -ETIMEDOUT);
  c.expect("waiter_start, past deadline, queue full", {{kTimeouts, 1}});

  ASSERT_EQ(shmsem_release(s, &held), 0);
  t.join();
  ASSERT_EQ(t.result, 0);
  c.expect("the queued waiter granted", {{kAcquisitions, 1}});
  ASSERT_EQ(shmsem_release(s, &t.lease), 0);
  EXPECT_INVARIANTS(s);
}

// --- shutdown_failures
// ------------------------------------------------------------

TEST(Counters, ShutdownFailuresCountTheQueuedWaitersShutdownFailed) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  Counters c(s);
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *x) { return shmsem_acquire(s, x); });
  ASSERT_TRUE(waiting_is(s, 1));
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  WaiterThread u;
  u.start(2, [&](shmsem_lease_t *x) {
    return shmsem_acquire_ex_n(s, 1, nullptr, &cancel,
                               SHMSEM_WAIT_INTERRUPTIBLE, x);
  });
  ASSERT_TRUE(waiting_is(s, 2));
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), SHMSEM_QUEUED);
  c.expect("three queued", {});

  EXPECT_EQ(shmsem_shutdown(s), 3);
  c.expect("shutdown failed three waiters", {{kShutdownFailures, 3}});
  t.join();
  u.join();
  EXPECT_EQ(t.result, -ESHUTDOWN);
  EXPECT_EQ(u.result, -ESHUTDOWN);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -ESHUTDOWN);
  c.expect("the failed waiters returned", {});
  shmsem_cancel(&cancel);
  c.expect("a cancel after shutdown won", {});

  // Refused after shutdown: not waiters failed by it, and not counted.
  EXPECT_EQ(shmsem_acquire(s, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_try_acquire(s, &l), -ESHUTDOWN);
  timespec past = kPast;
  EXPECT_EQ(shmsem_acquire_until(s, &past, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_acquire_ex_n(s, 1, nullptr, nullptr, 0, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_waiter_start(s, &w, nullptr, &l), -ESHUTDOWN);
  c.expect("acquires refused after shutdown", {});
  EXPECT_EQ(shmsem_shutdown(s), 0);
  c.expect("a second shutdown", {});
  ASSERT_EQ(shmsem_release(s, &held), 0);
  c.expect("release after shutdown", {});
  EXPECT_INVARIANTS(s);
}

// --- reclaimed_holders / reclaimed_waiters
// -----------------------------------------

// A child that takes leases, says so, and waits to be killed.
struct Board {
  std::atomic<int> ready{0};
};

TEST(Counters, ReclaimedHoldersCountThePermitsOfDeadHolders) {
  Segment seg(3);
  shmsem_t *s = seg.get();
  Shared<Board> board;
  Children kids;
  pid_t k = kids.spawn([&] {
    shmsem_lease_t one, two;
    if (shmsem_acquire(s, &one) != 0) return 1;
    if (shmsem_acquire_n(s, 2, &two) != 0) return 2;
    board->ready = 1;
    for (;;) pause();
  });
  ASSERT_TRUE(wait_until([&] { return board->ready.load() == 1; }));
  EXPECT_COUNTS(s, 0, 3, 0, 0);
  Counters c(s);  // the child's two acquisitions are counted already
  ASSERT_EQ(kill(k, SIGKILL), 0);
  ASSERT_EQ(kids.wait(k), 128 + SIGKILL);
  c.expect("holder killed, not yet reclaimed", {});
  EXPECT_EQ(shmsem_recover(s), 3);
  c.expect("a lease of 1 and a lease of 2 reclaimed", {{kReclaimedHolders, 3}});
  EXPECT_EQ(shmsem_recover(s), 0);
  c.expect("a second pass", {});
  EXPECT_COUNTS(s, 3, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Parks a child's waiter at ACQUIRE_ENQUEUED (queued, lock released) until
// it is killed.
std::atomic<int> *g_parked = nullptr;
void park_when_queued(HookPoint p, void *) {
  if (p != HookPoint::ACQUIRE_ENQUEUED) return;
  g_parked->store(1);
  for (;;) pause();
}

TEST(Counters, ReclaimedWaitersCountTheSlotsOfDeadWaiters) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  Counters c(s);
  Children kids;
  for (int granted = 0; granted < 2; granted++) {
    Shared<std::atomic<int>> parked;
    pid_t k = kids.spawn([&] {
      g_parked = &*parked;
      testing::set_hook(park_when_queued, nullptr);
      shmsem_lease_t l;
      shmsem_acquire(s, &l);
      return 1;
    });
    ASSERT_TRUE(wait_until([&] { return parked->load() == 1; }));
    EXPECT_COUNTS(s, 0, 1, 0, 1);
    if (granted) {
      // Granted while parked: the permit is reserved for the dead waiter.
      ASSERT_EQ(shmsem_release(s, &held), 0);
      EXPECT_COUNTS(s, 0, 0, 1, 0);
    }
    c.expect("waiter queued", {});
    ASSERT_EQ(kill(k, SIGKILL), 0);
    ASSERT_EQ(kids.wait(k), 128 + SIGKILL);
    c.expect("waiter killed, not yet reclaimed", {});
    if (!granted) {
      EXPECT_EQ(shmsem_recover(s), 1);
      c.expect("dead queued waiter", {{kReclaimedWaiters, 1}});
      EXPECT_COUNTS(s, 0, 1, 0, 0);
    } else {
      EXPECT_EQ(shmsem_recover(s), 2);
      c.expect("dead granted waiter: its slot and its permit",
               {{kReclaimedWaiters, 1}, {kReclaimedHolders, 1}});
      EXPECT_COUNTS(s, 1, 0, 0, 0);
    }
    EXPECT_INVARIANTS(s);
  }
}

// --- repairs
// -------------------------------------------------------------------

int g_kill_at = -1;
void kill_at_hook(HookPoint p, void *) {
  if (int(p) == g_kill_at) raise(SIGKILL);
}

TEST(Counters, RepairsCountEachTakeoverOfTheLockFromADeadHolder) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  Counters c(s);
  Children kids;
  // Where the holder dies inside a weighted acquire of 2, and what it has
  // then: records HELD by it (reclaimed afterwards) and whether its
  // acquisition was counted.
  struct Case {
    HookPoint point;
    int held;
    uint64_t acquired;
  };
  for (Case k : {Case{HookPoint::ACQUIRE_LOCKED, 0, 0},
                 Case{HookPoint::ACQUIRE_LEASE_POPPED, 1, 0},
                 Case{HookPoint::ACQUIRE_COMMITTED, 2, 1}}) {
    SCOPED_TRACE(testing::hook_name(k.point));
    pid_t child = kids.spawn([&] {
      g_kill_at = int(k.point);
      testing::set_hook(kill_at_hook, nullptr);
      shmsem_lease_t l;
      shmsem_acquire_n(s, 2, &l);  // takes the lock: no lock-free path
      return 1;
    });
    ASSERT_EQ(kids.wait(child), 128 + SIGKILL);
    // shmsem_stat (in expect) takes the lock over and repairs.
    c.expect("lock holder killed; the next lock taker repaired",
             {{kRepairs, 1}, {kAcquisitions, k.acquired}});
    EXPECT_EQ(shmsem_recover(s), k.held);
    c.expect("recover after the repair",
             {{kReclaimedHolders, uint64_t(k.held)}});
    EXPECT_COUNTS(s, 2, 0, 0, 0);
    EXPECT_INVARIANTS(s);
    c.expect("check", {});
  }
}

// --- waiters that leave the queue without the lock
// ------------------------------

// A waiter whose limit runs out while another process holds the segment
// lock leaves without it (waiter.cc leave_unlocked): it cannot count its
// outcome, so it records why in its slot, and the lock holder that frees the
// slot later counts it (grant.cc free_left). The regression: every such slot
// was counted as a timeout, whatever ended the wait and whether or not it
// had been counted already.
//
// The lock is held by a child stopped (SIGSTOP) at RELEASE_LOCKED inside
// the release of its lease of every permit (HELD records: that release
// takes the lock); SIGCONT lets it go on, and that release passes the
// permits, sweeping a head that left on the way.
struct LockHolder {
  std::atomic<int> ready{0};
  std::atomic<int> go{0};
};

std::atomic<bool> g_stop_armed{false};
void stop_at_release_locked(HookPoint p, void *) {
  if (p == HookPoint::RELEASE_LOCKED && g_stop_armed.exchange(false))
    raise(SIGSTOP);
}

// Spawn before any thread or HookGate of the test exists: the child must
// not inherit a hook or a lock of them.
pid_t spawn_lock_holder(Children &kids, shmsem_t *s, uint32_t n,
                        LockHolder *h) {
  pid_t k = kids.spawn([s, n, h] {
    shmsem_lease_t l;
    if (shmsem_acquire_n(s, n, &l) != 0) return 1;
    h->ready = 1;
    if (!wait_until([h] { return h->go.load() == 1; },
                    std::chrono::seconds(60)))
      return 2;
    g_stop_armed = true;
    testing::set_hook(stop_at_release_locked, nullptr);
    int r = shmsem_release(s, &l);
    testing::set_hook(nullptr, nullptr);
    return r == 0 ? 0 : 3;
  });
  EXPECT_TRUE(wait_until([h] { return h->ready.load() == 1; }));
  return k;
}

// Sends the holder into its release; true once it is stopped in it with the
// lock held. (No shmsem_stat until it goes on: that takes the lock.)
bool holder_stops_with_the_lock(pid_t k, LockHolder *h) {
  h->go = 1;
  return wait_until([k] {
    int st = 0;
    return waitpid(k, &st, WNOHANG | WUNTRACED) == k && WIFSTOPPED(st);
  });
}

// Not a regression (it was right before too): pins that the deadline case
// still counts one timeout, in the sweeping lock holder.
TEST(Counters, WaiterLeavingWithoutTheLockAtItsDeadlineCountsOneTimeout) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  Children kids;
  Shared<LockHolder> h;
  pid_t k = spawn_lock_holder(kids, s, 2, &*h);
  Counters c(s);  // the holder's acquisition is counted already
  ManualClock clock;
  HookGate gate;
  int leaving = gate.arm(HookPoint::WAIT_LEAVING, 1);
  timespec deadline = clock.deadline_in(5 * kMs);
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *l) {
    return shmsem_acquire_until(s, &deadline, l);
  });
  ASSERT_TRUE(waiting_is(s, 1));
  c.expect("queued", {});
  ASSERT_TRUE(holder_stops_with_the_lock(k, &*h));
  clock.advance(10 * kMs);
  ASSERT_TRUE(gate.wait_arrived(leaving));  // lock still held: leaves without
  gate.resume(leaving);
  t.join();
  EXPECT_EQ(t.result, -ETIMEDOUT);
  ASSERT_EQ(kill(k, SIGCONT), 0);
  ASSERT_EQ(kids.wait(k), 0);  // its release swept the slot left queued
  c.expect("left at its deadline, swept by the releaser", {{kTimeouts, 1}});
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Counters, WaiterLeavingWithoutTheLockOnItsFiredHandleCountsACancellation) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  Children kids;
  Shared<LockHolder> h;
  pid_t k = spawn_lock_holder(kids, s, 2, &*h);
  Counters c(s);
  HookGate gate;
  int queued = gate.arm(HookPoint::ACQUIRE_ENQUEUED, 1);
  int leaving = gate.arm(HookPoint::WAIT_LEAVING, 1);
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *l) {
    return shmsem_acquire_ex(s, nullptr, &cancel, 0, l);
  });
  ASSERT_TRUE(gate.wait_arrived(queued));
  // Fired before the waiter armed it: no canceller takes the slot; the
  // waiter withdraws itself, and finds the lock held.
  shmsem_cancel(&cancel);
  c.expect("queued; handle fired before arm", {});
  ASSERT_TRUE(holder_stops_with_the_lock(k, &*h));
  gate.resume(queued);
  ASSERT_TRUE(gate.wait_arrived(leaving));
  gate.resume(leaving);
  t.join();
  EXPECT_EQ(t.result, -ECANCELED);
  ASSERT_EQ(kill(k, SIGCONT), 0);
  ASSERT_EQ(kids.wait(k), 0);
  c.expect("left on its fired handle, swept by the releaser",
           {{kCancellations, 1}});
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Counters, WaiterLeavingWithoutTheLockOnASignalCountsACancellation) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART
  sigaction(SIGUSR1, &sa, nullptr);
  Segment seg(2);
  shmsem_t *s = seg.get();
  Children kids;
  Shared<LockHolder> h;
  pid_t k = spawn_lock_holder(kids, s, 2, &*h);
  Counters c(s);
  HookGate gate;
  int leaving = gate.arm(HookPoint::WAIT_LEAVING, 1);
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *l) {
    return shmsem_acquire_ex(s, nullptr, nullptr, SHMSEM_WAIT_INTERRUPTIBLE, l);
  });
  ASSERT_TRUE(waiting_is(s, 1));
  c.expect("queued", {});
  ASSERT_TRUE(holder_stops_with_the_lock(k, &*h));
  // One signal ends the sleep in the queue, a later one the wait for the
  // lock (once its holder was judged); a signal that lands while the waiter
  // is awake is not seen: signal until it leaves.
  bool left = false;
  for (int i = 0; i < 20000 && !left; i++) {
    pthread_kill(t.t.native_handle(), SIGUSR1);
    left = gate.wait_arrived(leaving, std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(left);
  gate.resume(leaving);
  t.join();
  EXPECT_EQ(t.result, -EINTR);
  ASSERT_EQ(kill(k, SIGCONT), 0);
  ASSERT_EQ(kids.wait(k), 0);
  c.expect("left on a signal, swept by the releaser", {{kCancellations, 1}});
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
  signal(SIGUSR1, SIG_DFL);
}

TEST(Counters, CancelledWaiterLeavingWithoutTheLockIsNotCountedAgain) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  Children kids;
  Shared<LockHolder> h;
  pid_t k = spawn_lock_holder(kids, s, 2, &*h);
  Counters c(s);
  HookGate gate;
  int asleep = gate.arm(HookPoint::WAIT_SLEEPING, 1);
  int leaving = gate.arm(HookPoint::WAIT_LEAVING, 1);
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *l) {
    return shmsem_acquire_ex(s, nullptr, &cancel, 0, l);
  });
  ASSERT_TRUE(gate.wait_arrived(asleep));
  shmsem_cancel(&cancel);  // the canceller wins: CANCELLED, and counted
  c.expect("cancelled by the canceller", {{kCancellations, 1}});
  // The waiter sees it only after the holder took the lock: it leaves
  // without the lock (its limit, the fired handle, ended that wait).
  ASSERT_TRUE(holder_stops_with_the_lock(k, &*h));
  gate.resume(asleep);
  ASSERT_TRUE(gate.wait_arrived(leaving));
  gate.resume(leaving);
  t.join();
  EXPECT_EQ(t.result, -ECANCELED);
  ASSERT_EQ(kill(k, SIGCONT), 0);
  ASSERT_EQ(kids.wait(k), 0);
  c.expect("cancelled waiter left without the lock", {});
  // Out of the queue (the canceller unlinked it): reclamation frees it.
  // (Not pinned here: that shmsem_recover returns 1 for it.)
  EXPECT_EQ(testing::census(s).other_slots, 1u);  // LEFT
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_EQ(testing::census(s).other_slots, 0u);
  c.expect("its slot freed", {});
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Counters, ShutDownWaiterLeavingWithoutTheLockIsNotCountedAgain) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  Children kids;
  Shared<LockHolder> h;
  pid_t k = spawn_lock_holder(kids, s, 2, &*h);
  Counters c(s);
  ManualClock clock;
  HookGate gate;
  int asleep = gate.arm(HookPoint::WAIT_SLEEPING, 1);
  int leaving = gate.arm(HookPoint::WAIT_LEAVING, 1);
  timespec deadline = clock.deadline_in(5 * kMs);
  WaiterThread t;
  t.start(1, [&](shmsem_lease_t *l) {
    return shmsem_acquire_until(s, &deadline, l);
  });
  ASSERT_TRUE(gate.wait_arrived(asleep));
  EXPECT_EQ(shmsem_shutdown(s), 1);
  c.expect("shutdown failed the waiter", {{kShutdownFailures, 1}});
  // The waiter sees CLOSED only after the holder took the lock, and its
  // deadline ends its wait for the lock: it leaves without it.
  ASSERT_TRUE(holder_stops_with_the_lock(k, &*h));
  clock.advance(10 * kMs);
  gate.resume(asleep);
  ASSERT_TRUE(gate.wait_arrived(leaving));
  gate.resume(leaving);
  t.join();
  EXPECT_EQ(t.result, -ESHUTDOWN);
  ASSERT_EQ(kill(k, SIGCONT), 0);
  ASSERT_EQ(kids.wait(k), 0);
  c.expect("closed waiter left without the lock", {});
  EXPECT_EQ(testing::census(s).other_slots, 1u);  // LEFT
  EXPECT_GE(shmsem_recover(s), 0);
  EXPECT_EQ(testing::census(s).other_slots, 0u);
  c.expect("its slot freed", {});
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// --- reclaimed_holders: a dead waiter's weighted grant
// ---------------------------

// The regression: a dead waiter granted n permits (GRANTED, not consumed)
// counted 1 in reclaimed_holders and in shmsem_recover's return.
TEST(Counters, ReclaimedHoldersCountEveryPermitOfADeadWaitersWeightedGrant) {
  Segment seg(3);
  shmsem_t *s = seg.get();
  shmsem_lease_t two, one;
  ASSERT_EQ(shmsem_acquire_n(s, 2, &two), 0);
  ASSERT_EQ(shmsem_acquire(s, &one), 0);
  Counters c(s);
  Children kids;
  for (int granted = 0; granted < 2; granted++) {
    SCOPED_TRACE(granted ? "granted all 3" : "gathered 2 of 3");
    Shared<std::atomic<int>> parked;
    pid_t k = kids.spawn([&] {
      g_parked = &*parked;
      testing::set_hook(park_when_queued, nullptr);
      shmsem_lease_t l;
      shmsem_acquire_n(s, 3, &l);
      return 1;
    });
    ASSERT_TRUE(wait_until([&] { return parked->load() == 1; }));
    c.expect("weighted waiter queued", {});
    // Its reservation: 2 of 3 (a head gathering), then all 3 (GRANTED).
    ASSERT_EQ(shmsem_release(s, &two), 0);
    if (granted) {
      ASSERT_EQ(shmsem_release(s, &one), 0);
      EXPECT_COUNTS(s, 0, 0, 3, 0);
    } else {
      EXPECT_COUNTS(s, 0, 1, 2, 1);
    }
    ASSERT_EQ(kill(k, SIGKILL), 0);
    ASSERT_EQ(kids.wait(k), 128 + SIGKILL);
    c.expect("waiter killed, not yet reclaimed", {});
    if (granted) {
      EXPECT_EQ(shmsem_recover(s), 4);
      c.expect("dead granted waiter: its slot and its 3 permits",
               {{kReclaimedWaiters, 1}, {kReclaimedHolders, 3}});
      EXPECT_COUNTS(s, 3, 0, 0, 0);
    } else {
      // Reserved, never granted: nobody held them.
      EXPECT_EQ(shmsem_recover(s), 1);
      c.expect("dead gathering head: its slot only", {{kReclaimedWaiters, 1}});
      EXPECT_COUNTS(s, 2, 1, 0, 0);
      ASSERT_EQ(shmsem_acquire_n(s, 2, &two), 0);
      c.expect("the 2 taken again", {{kAcquisitions, 1}});
    }
    EXPECT_INVARIANTS(s);
  }
}

// --- shutdown_failures: repair finishing a shutdown
// ------------------------------

// The regression: the lock holder killed inside shmsem_shutdown after it
// failed one waiter; the repair that closes the others counted none of them.
TEST(Counters, RepairFinishingADeadShutdownCountsEveryWaiterItFails) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  Counters c(s);
  shmsem_waiter_t w[3];
  shmsem_lease_t l;
  for (auto &x : w)
    ASSERT_EQ(shmsem_waiter_start(s, &x, nullptr, &l), SHMSEM_QUEUED);
  c.expect("three queued", {});
  Children kids;
  pid_t k = kids.spawn([&] {
    g_kill_at = int(HookPoint::SHUTDOWN_FAILED_ONE);
    testing::set_hook(kill_at_hook, nullptr);
    shmsem_shutdown(s);
    return 1;
  });
  ASSERT_EQ(kids.wait(k), 128 + SIGKILL);
  // shmsem_stat (in expect) takes the lock over, and the repair closes the
  // two waiters the shutdown did not get to.
  c.expect("shutdown killed after one; the repair failed the other two",
           {{kRepairs, 1}, {kShutdownFailures, 3}});
  for (auto &x : w) EXPECT_EQ(shmsem_waiter_poll(&x, &l), -ESHUTDOWN);
  c.expect("the failed waiters returned", {});
  EXPECT_EQ(shmsem_acquire(s, &l), -ESHUTDOWN);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  c.expect("refused after shutdown; release", {});
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

}  // namespace
}  // namespace shmsem::test
