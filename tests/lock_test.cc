// The segment lock (lock.cc): a holder that is stopped is waited for, one
// that died (killed, or ended by another thread's exec) is taken over and
// the state repaired, and a read-only process that requeues the lock's
// sleepers delays them by at most one check interval. Real processes, real
// SIGSTOP/SIGKILL/exec; hook points decide where each one stands.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <shmsem/shmsem.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <thread>

#include "handle.h"
#include "layout.h"
#include "lock.h"
#include "reclaim.h"
#include "support/hook_gate.h"
#include "support/manual_clock.h"
#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

using std::chrono::seconds;
using testing::HookPoint;

std::atomic<int> g_alive_verdicts{0};
HookPoint g_stop_at;
std::atomic<bool> g_armed{false};

// In the holder process: stop (or die) the first time `g_stop_at` is
// reached. In the test process: count the lock waiters' "alive" verdicts.
void holder_hook(HookPoint p, void *ctx) {
  if (p == HookPoint::LOCK_HOLDER_ALIVE) g_alive_verdicts++;
  if (p != g_stop_at || !g_armed.exchange(false)) return;
  int sig = int(reinterpret_cast<intptr_t>(ctx));
  raise(sig);
}

// A child that stops itself (or dies, sig) at `point` inside its next
// try_acquire. Returns its pid once it has stopped (or died, unreaped).
pid_t spawn_holder_at(Children &kids, const Segment &seg, HookPoint point,
                      int sig) {
  pid_t pid = kids.spawn([&, point, sig] {
    shmsem_t *s = seg.open_again();
    g_stop_at = point;
    g_armed = true;
    testing::set_hook(holder_hook, reinterpret_cast<void *>(intptr_t(sig)));
    shmsem_lease_t l;
    int r = shmsem_try_acquire(s, &l);
    testing::set_hook(nullptr, nullptr);
    return r == 0 && shmsem_release(s, &l) == 0 ? 0 : 1;
  });
  int status = 0;
  int opts = sig == SIGSTOP ? WUNTRACED : WNOWAIT | WEXITED;
  siginfo_t si{};
  if (sig == SIGSTOP)
    EXPECT_EQ(waitpid(pid, &status, opts), pid);
  else
    EXPECT_EQ(waitid(P_PID, id_t(pid), &si, opts), 0);
  return pid;
}

uint32_t lock_word_now(shmsem_t *s) { return s->core->lock_word.load(); }

uint64_t repairs(shmsem_t *s) {
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  return st.repairs;
}

TEST(Lock, StoppedHolderIsWaitedForNotRobbed) {
  Segment seg(1);
  Children kids;
  pid_t holder = spawn_holder_at(kids, seg, HookPoint::ACQUIRE_LOCKED, SIGSTOP);
  g_alive_verdicts = 0;
  testing::set_hook(holder_hook, nullptr);
  std::atomic<int> r{1};
  std::atomic<bool> done{false};
  std::thread t([&] {
    shmsem_lease_t l;
    r = shmsem_acquire(seg.get(), &l);  // no limit: waits as long as it takes
    if (r == 0) shmsem_release(seg.get(), &l);
    done = true;
  });
  // The waiter has looked at the stopped holder three times (1, 2, 4 ms
  // apart) and found it alive each time: it must still be waiting.
  ASSERT_TRUE(wait_until([] { return g_alive_verdicts.load() >= 3; }));
  EXPECT_FALSE(done.load()) << "a stopped lock holder was robbed";
  kill(holder, SIGCONT);
  t.join();
  testing::set_hook(nullptr, nullptr);
  EXPECT_EQ(kids.wait(holder), 0);
  EXPECT_EQ(repairs(seg.get()), 0u);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// A stopped holder is waited for, but never past the waiter's own limit:
// its deadline (a try has one that has already passed), its cancel handle,
// or a signal if the wait is interruptible. The waiter leaves owning
// nothing and changing nothing; when the holder goes on, all is well.
shmsem_cancel_t *g_cancel_on_alive;

void cancel_on_alive_hook(HookPoint p, void *) {
  if (p == HookPoint::LOCK_HOLDER_ALIVE && g_cancel_on_alive)
    shmsem_cancel(g_cancel_on_alive);
}

void on_usr1(int) {}

timespec in_ms(int ms) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_nsec += long(ms) * 1'000'000;
  ts.tv_sec += ts.tv_nsec / 1'000'000'000;
  ts.tv_nsec %= 1'000'000'000;
  return ts;
}

TEST(Lock, StoppedHolderHoldsNoCallPastItsLimit) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Children kids;
  pid_t holder = spawn_holder_at(kids, seg, HookPoint::ACQUIRE_LOCKED, SIGSTOP);
  ASSERT_NE(lock_word_now(s), 0u);
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_try_acquire(s, &l), -EAGAIN);
  timespec soon = in_ms(20);
  EXPECT_EQ(shmsem_acquire_until(s, &soon, &l), -ETIMEDOUT);
  timespec past = in_ms(0);
  EXPECT_EQ(shmsem_acquire_until(s, &past, &l), -ETIMEDOUT);

  // Cancelled from a hook at the waiter's first "holder alive" verdict, so
  // the handle fires while the wait for the lock is on.
  shmsem_cancel_t c;
  shmsem_cancel_init(&c);
  g_cancel_on_alive = &c;
  testing::set_hook(cancel_on_alive_hook, nullptr);
  EXPECT_EQ(shmsem_acquire_ex(s, nullptr, &c, 0, &l), -ECANCELED);
  testing::set_hook(nullptr, nullptr);
  g_cancel_on_alive = nullptr;

  // A signal ends an interruptible wait for the lock; a plain one goes on.
  // Signalled until the call returns, so the outcome does not depend on
  // where the signal lands.
  struct sigaction sa {};
  sa.sa_handler = on_usr1;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);
  std::atomic<int> r{1};
  std::atomic<bool> done{false};
  std::thread t([&] {
    shmsem_lease_t tl;
    r = shmsem_acquire_ex(s, nullptr, nullptr, SHMSEM_WAIT_INTERRUPTIBLE, &tl);
    done = true;
  });
  for (int i = 0; i < 20000 && !done.load(); i++) {
    pthread_kill(t.native_handle(), SIGUSR1);
    wait_until([&] { return done.load(); }, std::chrono::milliseconds(1));
  }
  t.join();
  signal(SIGUSR1, SIG_DFL);
  EXPECT_EQ(r.load(), -EINTR);

  // Nothing changed while the holder was stopped; it finishes its call.
  EXPECT_NE(lock_word_now(s), 0u);
  kill(holder, SIGCONT);
  EXPECT_EQ(kids.wait(holder), 0);
  EXPECT_EQ(repairs(s), 0u);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
  EXPECT_EQ(shmsem_try_acquire(s, &l), 0);
  EXPECT_EQ(shmsem_release(s, &l), 0);
}

// A holder seen runnable is preempted, not stuck: a try (or a past
// deadline) waits for it up to kLockRunningFloorNs instead of the 100 ms a
// stopped or sleeping one gets, so a busy machine does not fail tries. The
// bound is a lower one, from the protocol: the call cannot return sooner.
std::atomic<bool> g_spin_in_lock{false};

void spin_in_lock_hook(HookPoint p, void *) {
  if (p != HookPoint::ACQUIRE_LOCKED || HookGate::this_thread_tag() != 3)
    return;
  while (g_spin_in_lock.load()) {
  }
}

TEST(Lock, RunningHolderIsWaitedForLongerThanAStoppedOne) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  g_spin_in_lock = true;
  testing::set_hook(spin_in_lock_hook, nullptr);
  std::thread holder([&] {
    HookGate::tag_this_thread(3);
    shmsem_lease_t l;
    if (shmsem_try_acquire(s, &l) == 0) shmsem_release(s, &l);
  });
  ASSERT_TRUE(wait_until([&] { return lock_word_now(s) != 0; }));
  auto t0 = std::chrono::steady_clock::now();
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_try_acquire(s, &l), -EAGAIN);
  auto waited = std::chrono::steady_clock::now() - t0;
  g_spin_in_lock = false;
  holder.join();
  testing::set_hook(nullptr, nullptr);
  EXPECT_GE(waited, std::chrono::nanoseconds(detail::kLockRunningFloorNs));
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// A queued waiter needs the lock to complete. If its limit is reached while
// a stopped process holds the lock, it leaves without it: one CAS on its
// own slot word (WAITING -> LEFT_QUEUED, GRANTED -> LEFT), and the next
// lock holder that meets the slot frees it. Those queued behind it are not
// blocked by it. (Before: it waited, past its limit, until the holder went
// on; and so did its canceller.)
uint32_t word_of(shmsem_t *s, uint32_t slot) {
  return s->slots[slot].word.load();
}

TEST(Lock, QueuedWaiterLeavesWithoutTheLockWhenItsLimitIsReached) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_cancel_t c;
  shmsem_cancel_init(&c);
  std::atomic<int> r{1}, r2{1};
  std::atomic<bool> done{false}, end{false};
  std::thread t([&] {
    shmsem_lease_t l;
    r = shmsem_acquire_ex(s, nullptr, &c, 0, &l);
    done = true;
    while (!end.load()) usleep(1000);  // alive: nothing reclaims its slot
  });
  ASSERT_TRUE(wait_until([&] { return s->core->waiting.load() == 1; }));
  const uint32_t slot = s->core->head;
  shmsem_lease_t l2;
  std::thread t2([&] {  // behind it; 10 s: a lost permit fails, not hangs
    timespec d;
    clock_gettime(CLOCK_MONOTONIC, &d);
    d.tv_sec += 10;
    r2 = shmsem_acquire_until(s, &d, &l2);
  });
  ASSERT_TRUE(wait_until([&] { return s->core->waiting.load() == 2; }));
  Children kids;
  pid_t holder = spawn_holder_at(kids, seg, HookPoint::ACQUIRE_LOCKED, SIGSTOP);
  shmsem_cancel(&c);  // returns once the waiter has left by itself
  ASSERT_TRUE(wait_until([&] { return done.load(); }));
  EXPECT_EQ(r.load(), -ECANCELED);
  EXPECT_EQ(word_of(s, slot), detail::kSlotLeftQueued);
  EXPECT_NE(lock_word_now(s), 0u) << "the stopped holder still has the lock";
  kill(holder, SIGCONT);
  EXPECT_EQ(kids.wait(holder), 1);  // its try found no permit
  // The permit passes over the slot that was left, to the waiter behind.
  ASSERT_EQ(shmsem_release(s, &held), 0);
  t2.join();
  end = true;
  t.join();
  ASSERT_EQ(r2.load(), 0) << "the permit went to a waiter that had left";
  EXPECT_EQ(word_of(s, slot), detail::kSlotFree);
  EXPECT_EQ(shmsem_release(s, &l2), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// The grant won, but the waiter cannot take the lock to turn it into its
// lease before its limit: it gives the grant up (GRANTED -> LEFT) and the
// permit goes on to the next waiter, through whoever meets the slot next
// (here a reclamation pass).
TEST(Lock, GrantThatCannotBeTakenBeforeTheLimitGoesToTheNextWaiter) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_cancel_t c;
  shmsem_cancel_init(&c);
  HookGate gate;
  std::atomic<int> r{1}, r2{1};
  std::atomic<bool> done{false}, end{false};
  std::thread t([&] {
    HookGate::tag_this_thread(1);
    shmsem_lease_t l;
    r = shmsem_acquire_ex(s, nullptr, &c, 0, &l);
    done = true;
    while (!end.load()) usleep(1000);  // alive: nothing reclaims its slot
  });
  ASSERT_TRUE(wait_until([&] { return s->core->waiting.load() == 1; }));
  const uint32_t slot = s->core->head;
  shmsem_lease_t l2;
  std::thread t2([&] {  // behind it; 10 s: a lost permit fails, not hangs
    timespec d;
    clock_gettime(CLOCK_MONOTONIC, &d);
    d.tv_sec += 10;
    r2 = shmsem_acquire_until(s, &d, &l2);
  });
  ASSERT_TRUE(wait_until([&] { return s->core->waiting.load() == 2; }));
  // Park the waiter at its next wake-up, before it looks at its word.
  int p = gate.arm(HookPoint::WAIT_WOKEN, 1);
  ASSERT_TRUE(gate.wait_arrived(p));
  ASSERT_EQ(shmsem_release(s, &held), 0);  // granted to it
  EXPECT_EQ(word_of(s, slot), detail::kSlotGranted);
  Children kids;
  pid_t holder = spawn_holder_at(kids, seg, HookPoint::ACQUIRE_LOCKED, SIGSTOP);
  shmsem_cancel(&c);  // too late to cancel: the grant won
  gate.resume(p);
  ASSERT_TRUE(wait_until([&] { return done.load(); }));
  EXPECT_EQ(r.load(), -ECANCELED) << "the grant is given up, not kept";
  EXPECT_EQ(word_of(s, slot), detail::kSlotLeft);
  kill(holder, SIGCONT);
  EXPECT_EQ(kids.wait(holder), 1);  // its try found no permit
  EXPECT_GE(shmsem_recover(s), 0);  // meets the slot if nobody did yet
  t2.join();
  end = true;
  t.join();
  ASSERT_EQ(r2.load(), 0) << "the permit went to a waiter that had left";
  EXPECT_EQ(word_of(s, slot), detail::kSlotFree);
  EXPECT_EQ(shmsem_release(s, &l2), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// The releaser has chosen the head and reserved the lease for it when the
// head leaves without the lock (its limit reached while the releaser holds
// it). The grant's CAS from WAITING fails, the slot is freed, and the
// permit goes to the next waiter. A plain store of GRANTED would hand the
// permit to a waiter that is gone, and the one behind would wait forever.
TEST(Lock, WaiterLeavingWhileItsGrantIsUnderWayIsPassedOver) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_cancel_t c;
  shmsem_cancel_init(&c);
  std::atomic<int> r{1}, r2{1}, rr{1};
  std::atomic<bool> done{false}, end{false};
  std::thread t([&] {
    shmsem_lease_t l;
    r = shmsem_acquire_ex(s, nullptr, &c, 0, &l);
    done = true;
    while (!end.load()) usleep(1000);  // alive: nothing reclaims its slot
  });
  ASSERT_TRUE(wait_until([&] { return s->core->waiting.load() == 1; }));
  const uint32_t slot = s->core->head;
  shmsem_lease_t l2;
  std::thread t2([&] {  // behind it; 10 s: a lost permit fails, not hangs
    timespec d;
    clock_gettime(CLOCK_MONOTONIC, &d);
    d.tv_sec += 10;
    r2 = shmsem_acquire_until(s, &d, &l2);
  });
  ASSERT_TRUE(wait_until([&] { return s->core->waiting.load() == 2; }));
  HookGate gate;
  int p = gate.arm(HookPoint::RELEASE_RESERVED, 2);
  std::thread rel([&] {
    HookGate::tag_this_thread(2);
    rr = shmsem_release(s, &held);
  });
  ASSERT_TRUE(gate.wait_arrived(p));  // holds the lock; word still WAITING
  shmsem_cancel(&c);  // returns once the waiter has left by itself
  ASSERT_TRUE(wait_until([&] { return done.load(); }));
  EXPECT_EQ(r.load(), -ECANCELED);
  EXPECT_EQ(word_of(s, slot), detail::kSlotLeftQueued);
  gate.resume(p);
  rel.join();
  EXPECT_EQ(rr.load(), 0);
  t2.join();
  end = true;
  t.join();
  ASSERT_EQ(r2.load(), 0) << "the permit went to a waiter that had left";
  EXPECT_EQ(word_of(s, slot), detail::kSlotFree);
  EXPECT_EQ(shmsem_release(s, &l2), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// A reclamation pass collects a slot because its owner left it, without a
// verdict (the owner is alive). Before the pass takes the lock, the slot is
// freed and the same thread queues again in it, under the same name: the
// pass must leave that live waiter alone. (It took the dead-owner path,
// freed the slot and sent the waiter -ENOTRECOVERABLE: found by an
// adversarial test, in 5 of 6 random runs too.)
TEST(Lock, PassThatSawASlotLeftNeverFreesItsOwnersNextWait) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  shmsem_cancel_t c;
  shmsem_cancel_init(&c);
  std::atomic<int> r{1}, r_again{1}, step{0};
  shmsem_lease_t l_again;
  std::thread t([&] {  // one thread, so both waits carry the same name
    shmsem_lease_t l;
    r = shmsem_acquire_ex(s, nullptr, &c, 0, &l);
    step = 1;
    while (step.load() != 2) usleep(1000);
    r_again = shmsem_acquire(s, &l_again);
  });
  ASSERT_TRUE(wait_until([&] { return s->core->waiting.load() == 1; }));
  const uint32_t slot = s->core->head;
  Children kids;
  pid_t holder = spawn_holder_at(kids, seg, HookPoint::ACQUIRE_LOCKED, SIGSTOP);
  shmsem_cancel(&c);  // the waiter leaves without the lock
  ASSERT_TRUE(wait_until([&] { return step.load() == 1; }));
  ASSERT_EQ(r.load(), -ECANCELED);
  ASSERT_EQ(word_of(s, slot), detail::kSlotLeftQueued);
  // The holder's try, finding no permit, runs a lazy pass unless one ran
  // within the watch period; that pass would free the left slot before the
  // one below can collect it. Make it the rate limit's to skip (the test
  // used to rely on the waiter's own pass before its first sleep, which
  // the hand-off path no longer runs).
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  s->core->watch_period_ns.store(detail::kMaxWatchPeriodNs);
  s->core->last_reclaim_ns.store(uint64_t(now.tv_sec) * 1'000'000'000u +
                                 uint64_t(now.tv_nsec));
  kill(holder, SIGCONT);
  EXPECT_EQ(kids.wait(holder), 1);
  EXPECT_EQ(word_of(s, slot), detail::kSlotLeftQueued);
  // A pass collects the left slot, then stops before taking the lock.
  HookGate gate;
  int p = gate.arm(HookPoint::RECLAIM_SCANNED, 4);
  std::thread pass([&] {
    HookGate::tag_this_thread(4);
    shmsem_recover(s);
  });
  ASSERT_TRUE(gate.wait_arrived(p));
  // Meanwhile the slot is freed (a release sweeps it), the permit taken
  // back, and the same thread queues again, in the same slot.
  ASSERT_EQ(shmsem_release(s, &held), 0);
  ASSERT_EQ(word_of(s, slot), detail::kSlotFree);
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  step = 2;
  ASSERT_TRUE(wait_until([&] { return s->core->waiting.load() == 1; }));
  ASSERT_EQ(s->core->head, slot) << "the freed slot is reused first";
  gate.resume(p);
  pass.join();
  EXPECT_EQ(word_of(s, slot), detail::kSlotWaiting) << "a live wait was freed";
  ASSERT_EQ(shmsem_release(s, &held), 0);
  t.join();
  EXPECT_EQ(r_again.load(), 0);
  EXPECT_EQ(shmsem_release(s, &l_again), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// A queued waiter whose deadline passes while a stopped process holds the
// lock waits for it in several steps (the watcher's passes, then the lock
// to leave the queue). The floor counts from the start of the call, so the
// last step gives up at its first look at the holder instead of starting a
// floor of its own (an adversarial test saw calls 2-3 floors late). The
// deadline is on a manual clock: it passes when the test says, after the
// holder has been looked at 8 times (1 + 2 + ... + 64 ms > the 100 ms
// floor of a stopped holder).
std::atomic<bool> g_after_timeout{false};
std::atomic<int> g_looks{0}, g_looks_after_timeout{0};

void count_looks(HookPoint p, void *) {
  if (p == HookPoint::WAIT_TIMEOUT_FIRED) g_after_timeout = true;
  if (p != HookPoint::LOCK_HOLDER_ALIVE) return;
  g_looks++;
  if (g_after_timeout.load()) g_looks_after_timeout++;
}

TEST(Lock, QueuedWaiterPastItsDeadlineGetsOneFloorNotOnePerStep) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(s, &held), 0);
  ManualClock clock;
  g_after_timeout = false;
  g_looks = 0;
  g_looks_after_timeout = 0;
  std::atomic<int> r{1};
  const timespec deadline = clock.deadline_in(1'000'000'000);
  std::thread t([&] {
    shmsem_lease_t l;
    r = shmsem_acquire_until(s, &deadline, &l);
  });
  ASSERT_TRUE(wait_until([&] { return s->core->waiting.load() == 1; }));
  Children kids;
  pid_t holder = spawn_holder_at(kids, seg, HookPoint::ACQUIRE_LOCKED, SIGSTOP);
  testing::set_hook(count_looks, nullptr);
  ASSERT_TRUE(wait_until([] { return g_looks.load() >= 8; }));
  clock.advance(2'000'000'000);
  t.join();
  testing::set_hook(nullptr, nullptr);
  EXPECT_EQ(r.load(), -ETIMEDOUT);
  EXPECT_GE(g_looks_after_timeout.load(), 1);
  EXPECT_LE(g_looks_after_timeout.load(), 2)
      << "leaving the queue waited out a floor of its own";
  kill(holder, SIGCONT);
  EXPECT_EQ(kids.wait(holder), 1);
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Killed after taking the word, before naming itself (the record names the
// previous holder): judged by the bare tid. And killed after naming itself.
class LockKillTest : public ::testing::TestWithParam<HookPoint> {};

TEST_P(LockKillTest, HolderKilledInsideIsTakenOverAndRepaired) {
  // Two permits: ours, left in our lane by the lock-free release, and one
  // on the free list for the holder to pop (ACQUIRE_LEASE_POPPED).
  Segment seg(2);
  shmsem_lease_t mine;
  ASSERT_EQ(shmsem_acquire(seg.get(), &mine), 0);  // names us in the record
  ASSERT_EQ(shmsem_release(seg.get(), &mine), 0);
  Children kids;
  pid_t holder = spawn_holder_at(kids, seg, GetParam(), SIGKILL);
  EXPECT_EQ(kids.wait(holder), 128 + SIGKILL);  // reaped: its tid is free
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_try_acquire(seg.get(), &l), 0);
  EXPECT_EQ(repairs(seg.get()), 1u);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_COUNTS(seg.get(), 2, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

INSTANTIATE_TEST_SUITE_P(Lock, LockKillTest,
                         ::testing::Values(HookPoint::LOCK_TAKEN,
                                           HookPoint::ACQUIRE_LOCKED,
                                           HookPoint::ACQUIRE_LEASE_POPPED),
                         [](const ::testing::TestParamInfo<HookPoint> &i) {
                           return std::string(testing::hook_name(i.param));
                         });

// exec from another thread ends a non-leader thread that holds the lock: its
// tid is gone, so the next locker takes over. If the holder is the leader,
// the exec'ing thread inherits the leader's tid and pidfd identity (the
// kernel's de_thread): the lock stays held until the process exits, which
// DESIGN.md section 2 states as the one window.
struct ExecBoard {
  std::atomic<int> parked{0};
};
ExecBoard *g_exec_board;
bool g_park_leader;

void park_hook(HookPoint p, void *) {
  if (p != HookPoint::ACQUIRE_LOCKED) return;
  bool leader = syscall(SYS_gettid) == getpid();
  if (leader != g_park_leader) return;
  g_exec_board->parked = 1;
  for (;;) pause();  // holds the lock until the exec ends this thread
}

void exec_while_holding(bool leader_holds, Shared<ExecBoard> &board,
                        const Segment &seg, int stdin_fd) {
  g_exec_board = &*board;
  g_park_leader = leader_holds;
  shmsem_t *s = seg.open_again();
  testing::set_hook(park_hook, nullptr);
  auto take = [s] {
    shmsem_lease_t l;
    shmsem_try_acquire(s, &l);
  };
  auto exec_cat = [stdin_fd] {
    dup2(stdin_fd, 0);
    execl("/bin/cat", "cat", static_cast<char *>(nullptr));
    _exit(127);
  };
  if (leader_holds) {
    std::thread t([&] {
      while (!g_exec_board->parked.load()) usleep(100);
      exec_cat();
    });
    take();
  } else {
    std::thread t(take);
    while (!g_exec_board->parked.load()) usleep(100);
    exec_cat();
  }
  _exit(126);
}

TEST(Lock, HolderThreadEndedByAnotherThreadsExecIsTakenOver) {
  Segment seg(1);
  Shared<ExecBoard> board;
  int in[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);  // cat gets only in[0], as stdin
  Children kids;
  pid_t p = kids.spawn([&] {
    exec_while_holding(false, board, seg, in[0]);
    return 0;
  });
  close(in[0]);
  ASSERT_TRUE(wait_until([&] { return board->parked.load() == 1; }));
  // Once cat runs, the parked thread is gone; our lock waits, proves it,
  // takes over and repairs. (Not a try: the exec may take longer than a
  // try waits for a live holder.)
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_acquire(seg.get(), &l), 0);
  EXPECT_EQ(repairs(seg.get()), 1u);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_INVARIANTS(seg.get());
  close(in[1]);  // cat sees EOF and exits
  EXPECT_EQ(kids.wait(p), 0);
}

TEST(Lock,
     LeaderEndedByAnotherThreadsExecHoldsTheLockAtMostUntilTheProcessExits) {
  Segment seg(1);
  Shared<ExecBoard> board;
  int in[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);  // cat gets only in[0], as stdin
  Children kids;
  pid_t p = kids.spawn([&] {
    exec_while_holding(true, board, seg, in[0]);
    return 0;
  });
  close(in[0]);
  ASSERT_TRUE(wait_until([&] { return board->parked.load() == 1; }));
  g_alive_verdicts = 0;
  testing::set_hook(holder_hook, nullptr);
  std::atomic<int> r{1};
  std::atomic<bool> done{false};
  std::thread t([&] {
    shmsem_lease_t l;
    r = shmsem_acquire(seg.get(), &l);  // no limit: waits as long as it takes
    if (r == 0) shmsem_release(seg.get(), &l);
    done = true;
  });
  // Either a check caught the old leader as a zombie while the kernel
  // handed its tid to the exec'ing thread (it did end: taken over), or the
  // exec'd cat now carries the leader's identity and is judged alive until
  // it exits. Both are correct; the lock must never stay held past that.
  bool waited =
      wait_until([&] { return done.load() || g_alive_verdicts.load() >= 3; });
  close(in[1]);  // cat exits: now the holder is provably dead
  t.join();
  testing::set_hook(nullptr, nullptr);
  EXPECT_TRUE(waited);
  EXPECT_EQ(r.load(), 0);
  EXPECT_EQ(repairs(seg.get()), 1u);
  EXPECT_EQ(kids.wait(p), 0);
  EXPECT_INVARIANTS(seg.get());
}

// A process with read access only can move the lock's sleepers to another
// futex (FUTEX_CMP_REQUEUE needs no write access), so the holder's wake
// misses them. Their sleep is bounded: they still get the lock.
TEST(Lock, RequeueByAReadOnlyProcessDelaysButNeverStrandsALockWaiter) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become uid 65534";
  std::string name = unique_name("ro");
  struct shmsem_config cfg {};
  cfg.permits = 1;
  cfg.mode = 0644;
  shmsem_t *s = nullptr;
  ASSERT_EQ(shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s), 0);
  struct Unlink {
    std::string n;
    ~Unlink() { shmsem_unlink(n.c_str()); }
  } unlink_guard{name};
  Children kids;
  pid_t holder = kids.spawn([&] {
    shmsem_t *h = nullptr;
    if (shmsem_open(name.c_str(), 0, &h) != 0) return 2;
    g_stop_at = HookPoint::ACQUIRE_LOCKED;
    g_armed = true;
    testing::set_hook(holder_hook, reinterpret_cast<void *>(intptr_t(SIGSTOP)));
    shmsem_lease_t l;
    int r = shmsem_try_acquire(h, &l);
    return r == 0 && shmsem_release(h, &l) == 0 ? 0 : 1;
  });
  int status;
  ASSERT_EQ(waitpid(holder, &status, WUNTRACED), holder);
  std::atomic<bool> done{false};
  std::thread t([&] {
    shmsem_lease_t l;
    if (shmsem_acquire(s, &l) == 0) shmsem_release(s, &l);  // no limit
    done = true;
  });
  ASSERT_TRUE(wait_until(
      [&] { return s->core->lock_word.load() & detail::kLockWaiters; }));
  Shared<std::atomic<long>> moved;
  *moved = -1;
  pid_t attacker = kids.spawn([&] {
    if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
      return 3;
    int fd = shm_open(name.c_str(), O_RDONLY, 0);
    if (fd < 0) return 4;
    struct stat st;
    fstat(fd, &st);
    void *m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return 5;
    auto *c = reinterpret_cast<detail::Core *>(static_cast<char *>(m) +
                                               detail::kCoreOff);
    static uint32_t elsewhere = 0;
    for (int i = 0; i < 20000; i++) {
      uint32_t v = c->lock_word.load();
      long n = syscall(SYS_futex, &c->lock_word, FUTEX_CMP_REQUEUE, 0,
                       reinterpret_cast<void *>(1), &elsewhere, v);
      if (n > 0) {
        *moved = n;
        return 0;
      }
      usleep(100);
    }
    return 6;
  });
  EXPECT_EQ(kids.wait(attacker), 0);
  EXPECT_GE(moved->load(), 1) << "the requeue never found the sleeper";
  kill(holder, SIGCONT);  // its unlock wakes nobody: the sleeper was moved
  EXPECT_EQ(kids.wait(holder), 0);
  ASSERT_TRUE(wait_until([&] { return done.load(); }, seconds(10)))
      << "a requeued lock waiter was stranded";
  t.join();
  EXPECT_EQ(shmsem_check(s), 0);
  shmsem_detach(s);
}

// The leader thread ends (SYS_exit: only that thread) inside the critical
// section while another thread keeps the process alive. A zombie leader's
// thread pidfd does not report its exit; /proc/<tid>/stat shows 'Z', and
// that is proof enough to take the lock over (an adversarial test had every
// other process blocked until the holder's process exited).
void end_leader_hook(HookPoint p, void *) {
  if (p == HookPoint::ACQUIRE_LOCKED && syscall(SYS_gettid) == getpid())
    syscall(SYS_exit, 0);  // ends the calling thread only
}

TEST(Lock, LeaderThreadEndedInsideIsTakenOver) {
  Segment seg(1);
  Shared<std::atomic<int>> alive;
  Children kids;
  pid_t p = kids.spawn([&] {
    shmsem_t *s = seg.open_again();
    std::thread keep([&] {
      *alive = 1;
      for (;;) pause();  // keeps the process alive after the leader ends
    });
    keep.detach();
    while (!alive->load()) usleep(100);
    testing::set_hook(end_leader_hook, nullptr);
    shmsem_lease_t l;
    shmsem_try_acquire(s, &l);  // the leader ends in here, holding the lock
    return 1;                   // never reached
  });
  ASSERT_TRUE(wait_until([&] {
    return (seg.get()->core->lock_word.load() & detail::kLockTidMask) ==
           uint32_t(p);
  }));
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_try_acquire(seg.get(), &l), 0);
  EXPECT_EQ(repairs(seg.get()), 1u);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_INVARIANTS(seg.get());
  EXPECT_EQ(kill(p, 0), 0) << "the holder's process is still alive";
  kill(p, SIGKILL);
}

// A waiter that reads the holder record while it is being rewritten (the
// sequence count is odd) must not judge the holder by that record: found by
// the SPIN model of the lock, where a record torn between two live threads
// (the word read the same before and after) made a live holder look dead.
// Here the holder is stopped inside the lock and its record is made to look
// half-written with a wrong thread inode: the old code judged it dead by
// the inode and robbed it.
TEST(Lock, RecordBeingRewrittenIsNeverUsedToJudgeTheHolder) {
  Segment seg(1);
  Children kids;
  pid_t holder = spawn_holder_at(kids, seg, HookPoint::ACQUIRE_LOCKED, SIGSTOP);
  detail::Core *c = seg.get()->core;
  ASSERT_EQ(int32_t(lock_word_now(seg.get()) & detail::kLockTidMask),
            c->lock_owner.tid);
  c->lock_seq.store(c->lock_seq.load() | 1);  // "being rewritten"
  c->lock_owner.tino ^= 0x5a5a;               // a torn copy would not match
  g_alive_verdicts = 0;
  testing::set_hook(holder_hook, nullptr);
  std::atomic<int> r{1};
  std::atomic<bool> done{false};
  std::thread t([&] {
    shmsem_lease_t l;
    r = shmsem_acquire(seg.get(), &l);  // no limit: waits as long as it takes
    if (r == 0) shmsem_release(seg.get(), &l);
    done = true;
  });
  ASSERT_TRUE(wait_until([] { return g_alive_verdicts.load() >= 3; }));
  EXPECT_FALSE(done.load())
      << "a live holder was judged by a half-written record";
  kill(holder, SIGCONT);
  t.join();
  testing::set_hook(nullptr, nullptr);
  EXPECT_EQ(kids.wait(holder), 0);
  EXPECT_EQ(repairs(seg.get()), 0u);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// After a normal unlock the record names no thread, so a later holder that
// the kernel gave the same tid is judged by its own (bare) tid until it has
// named itself, never by the earlier thread's record (SPIN model, tid
// recycling: the old record, of a thread since gone, made a live holder
// look dead). The identity fields stay, so the next lock by the same thread
// only stores its tid.
TEST(Lock, UnlockClearsTheHolderRecordsTid) {
  Segment seg(1);
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_try_acquire(seg.get(), &l), 0);
  const detail::Core *c = seg.get()->core;
  EXPECT_EQ(c->lock_owner.tid, 0);
  EXPECT_EQ(c->lock_owner.pid, getpid());
  EXPECT_EQ(c->lock_seq.load() & 1, 0u);
  uint32_t seq = c->lock_seq.load();
  ASSERT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_EQ(c->lock_owner.tid, 0);
  EXPECT_EQ(c->lock_seq.load(), seq) << "same thread: no rewrite expected";
}

// The word names our own tid, but we hold nothing: an earlier thread with
// this tid died holding the lock and the kernel reused its tid for us. The
// old code judged "that" holder alive (it is us) and waited forever. The
// takeover must also change the word although the tid is the same: another
// waiter that judged the dead thread would otherwise CAS from the same
// value and rob us (the SPIN model's F5).
std::atomic<uint32_t> g_word_when_taken{0};

void record_word_when_taken(HookPoint p, void *ctx) {
  if (p == HookPoint::LOCK_TAKEN && g_word_when_taken.load() == 0)
    g_word_when_taken = static_cast<shmsem_t *>(ctx)->core->lock_word.load();
}

TEST(Lock, WaiterFindingItsOwnTidInTheWordTakesOver) {
  Segment seg(1);
  Children kids;
  pid_t k = kids.spawn([&] {
    shmsem_t *s = seg.open_again();
    uint32_t me = uint32_t(syscall(SYS_gettid)) & detail::kLockTidMask;
    uint32_t dead = me | detail::kLockWaiters;
    s->core->lock_word.store(dead);
    testing::set_hook(record_word_when_taken, s);
    shmsem_lease_t l;
    int r = shmsem_try_acquire(s, &l);
    testing::set_hook(nullptr, nullptr);
    if (r != 0) return 1;
    uint32_t w = g_word_when_taken.load();
    if (w == dead || (w & detail::kLockTidMask) != me) return 3;
    if (shmsem_release(s, &l) != 0) return 2;
    shmsem_detach(s);
    return 0;
  });
  EXPECT_EQ(kids.wait(k, seconds(20)), 0);
  EXPECT_EQ(repairs(seg.get()), 1u);
  EXPECT_EQ(lock_word_now(seg.get()), 0u);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// A child that unshare()s a PID namespace and forks keeps its parent's
// writable handle. Its tids mean other threads here: if it took the lock,
// others would judge it dead and rob it (an adversarial test had two
// processes inside the lock at once). Every locking call is -EXDEV there;
// a read-only handle, which takes no lock, still reads.
TEST(Lock, HandleInheritedIntoAnotherPidNamespaceNeverTakesTheLock) {
  Segment seg(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_t *s = seg.get();
  shmsem_t *ro = seg.open_again(SHMSEM_RDONLY);
  Shared<std::atomic<int>> res;
  *res = -1;
  Children kids;
  pid_t outer = kids.spawn([&] {
    if (unshare(CLONE_NEWPID) != 0) {
      *res = 1000;
      return 0;
    }
    pid_t inner = fork();
    if (inner == 0) {
      struct shmsem_stat st;
      shmsem_lease_t copy = held;
      int bad = 0;
      if (shmsem_stat(s, &st) != -EXDEV) bad |= 1;
      if (shmsem_check(s) != -EXDEV) bad |= 2;
      if (shmsem_release(s, &copy) != -EXDEV) bad |= 4;
      if (shmsem_shutdown(s) != -EXDEV) bad |= 8;
      if (shmsem_recover(s) != -EXDEV) bad |= 16;
      if (shmsem_stat(ro, &st) != 0 || st.held != 1) bad |= 32;
      *res = bad;
      _exit(0);
    }
    int st = 0;
    waitpid(inner, &st, 0);
    return 0;
  });
  EXPECT_EQ(kids.wait(outer), 0);
  if (res->load() == 1000)
    GTEST_SKIP() << "unshare(CLONE_NEWPID) is not permitted here";
  EXPECT_EQ(res->load(), 0) << "bits: 1 stat 2 check 4 release 8 shutdown "
                               "16 recover 32 read-only stat";
  EXPECT_EQ(shmsem_release(s, &held), 0);
  EXPECT_EQ(lock_word_now(s), 0u);
  EXPECT_INVARIANTS(s);
  shmsem_detach(ro);
}

}  // namespace
}  // namespace shmsem::test
