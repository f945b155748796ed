// The public non-blocking waiter (shmsem_waiter_*) and <shmsem/uring.h>:
// the blocking calls' state machine driven from a loop, through a real
// io_uring on a real segment, across real processes.
#include <gtest/gtest.h>
#include <liburing.h>
#include <shmsem/shmsem.h>
#include <shmsem/uring.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "support/hook_gate.h"
#include "support/manual_clock.h"
#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

constexpr uint64_t kMs = 1'000'000;

timespec mono_in(uint64_t ns) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t t = uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec) + ns;
  return timespec{time_t(t / 1'000'000'000), long(t % 1'000'000'000)};
}

uint64_t ts_ns(const timespec &ts) {
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

// ---- The waiter without a ring ---------------------------------------------

TEST(Waiter, StartTakesAFreePermitAtOnce) {
  Segment seg(1);
  shmsem_waiter_t w;
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), 0);
  uint32_t *word;
  uint32_t value;
  EXPECT_EQ(shmsem_waiter_futex(&w, &word, &value), -EINVAL) << "not queued";
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINVAL);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Waiter, QueuedWaiterIsGrantedThroughItsWord) {
  Segment seg(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), -EINVAL)
      << "a queued waiter is not restarted (its place would be stranded)";
  uint32_t *word;
  uint32_t value;
  ASSERT_EQ(shmsem_waiter_futex(&w, &word, &value), 0);
  EXPECT_EQ(__atomic_load_n(word, __ATOMIC_ACQUIRE), value);
  timespec at;
  ASSERT_EQ(shmsem_waiter_wake_by(&w, &at), 0);
  EXPECT_GT(ts_ns(at), 0u);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINPROGRESS);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 1);
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  EXPECT_NE(__atomic_load_n(word, __ATOMIC_ACQUIRE), value)
      << "the grant changes the word";
  ASSERT_EQ(shmsem_waiter_poll(&w, &l), 0);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINVAL) << "completed once";
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_EQ(shmsem_release(seg.get(), &l), -EALREADY);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Waiter, CancelBeforeTheGrantOwnsNothingAndCountsOnce) {
  Segment seg(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t a, b;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &a, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &b, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_cancel(&a, &l), -ECANCELED);
  EXPECT_EQ(shmsem_waiter_cancel(&a, &l), -EINVAL);
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(seg.get(), &st), 0);
  EXPECT_EQ(st.cancellations, 1u);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 1);
  // The permit skips the withdrawn head and goes to the next.
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  ASSERT_EQ(shmsem_waiter_poll(&b, &l), 0);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Waiter, CancelAfterTheGrantReturnsTheLease) {
  Segment seg(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  ASSERT_EQ(shmsem_waiter_cancel(&w, &l), 0) << "the grant won";
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(seg.get(), &st), 0);
  EXPECT_EQ(st.cancellations, 0u);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Waiter, DeadlinePassedWhileQueuedTimesOutAtThePoll) {
  ManualClock clock;
  Segment seg(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  timespec dl = clock.deadline_in(10 * kMs);
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, &dl, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINPROGRESS);
  clock.advance(10 * kMs);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -ETIMEDOUT);
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(seg.get(), &st), 0);
  EXPECT_EQ(st.timeouts, 1u);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Waiter, GrantBeatsADeadlineThatPassedBeforeThePoll) {
  ManualClock clock;
  Segment seg(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  timespec dl = clock.deadline_in(10 * kMs);
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, &dl, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  clock.advance(20 * kMs);
  ASSERT_EQ(shmsem_waiter_poll(&w, &l), 0);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Waiter, PastDeadlineAndNoPermitIsATimeoutAtOnce) {
  Segment seg(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  timespec past{0, 0};
  EXPECT_EQ(shmsem_waiter_start(seg.get(), &w, &past, &l), -ETIMEDOUT);
  timespec bad{0, 1'000'000'000};
  EXPECT_EQ(shmsem_waiter_start(seg.get(), &w, &bad, &l), -EINVAL);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(seg.get(), &held), 0);
}

TEST(Waiter, ShutdownFailsAQueuedWaiter) {
  Segment seg(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_shutdown(seg.get()), 1);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), -ESHUTDOWN);
  EXPECT_EQ(shmsem_release(seg.get(), &held), 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Waiter, FullQueueIsEbusy) {
  Segment seg(1, 2);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w[3];
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w[0], nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w[1], nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_start(seg.get(), &w[2], nullptr, &l), -EBUSY);
  EXPECT_EQ(shmsem_waiter_cancel(&w[0], &l), -ECANCELED);
  EXPECT_EQ(shmsem_waiter_cancel(&w[1], &l), -ECANCELED);
  EXPECT_EQ(shmsem_release(seg.get(), &held), 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Waiter, ReadOnlyHandleAndBadArgumentsAreRefused) {
  Segment seg(1);
  shmsem_t *ro = seg.open_again(SHMSEM_RDONLY);
  ASSERT_NE(ro, nullptr);
  shmsem_waiter_t w;
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_waiter_start(ro, &w, nullptr, &l), -EBADF);
  EXPECT_EQ(shmsem_waiter_start(nullptr, &w, nullptr, &l), -EINVAL);
  EXPECT_EQ(shmsem_waiter_start(seg.get(), nullptr, nullptr, &l), -EINVAL);
  EXPECT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, nullptr), -EINVAL);
  shmsem_waiter_t zero{};
  EXPECT_EQ(shmsem_waiter_poll(&zero, &l), -EINVAL);
  EXPECT_EQ(shmsem_waiter_cancel(&zero, &l), -EINVAL);
  timespec at;
  EXPECT_EQ(shmsem_waiter_wake_by(&zero, &at), -EINVAL);
  shmsem_detach(ro);
}

// A fork child inherits the waiter's memory but not the wait: it may not
// complete its parent's wait.
TEST(Waiter, ForkChildCannotCompleteItsParentsWait) {
  Segment seg(1);
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), SHMSEM_QUEUED);
  Children kids;
  pid_t pid = kids.spawn([&] {
    shmsem_lease_t cl;
    return shmsem_waiter_poll(&w, &cl) == -EINVAL &&
                   shmsem_waiter_cancel(&w, &cl) == -EINVAL
               ? 0
               : 1;
  });
  EXPECT_EQ(kids.wait(pid), 0);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 1);
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  ASSERT_EQ(shmsem_waiter_poll(&w, &l), 0);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_INVARIANTS(seg.get());
}

// A wait belongs to the thread that started it: when that thread ends, a
// pass withdraws the wait, and the waiter's next poll says so instead of
// completing a slot that may serve someone else by then.
TEST(Waiter, WaitOfAnEndedThreadIsWithdrawnAndItsPollSaysSo) {
  Segment seg(1, 1);  // one slot: the next waiter reuses it
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  int r = 0;
  std::thread t([&] { r = shmsem_waiter_start(seg.get(), &w, nullptr, &l); });
  t.join();
  ASSERT_EQ(r, SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_recover(seg.get()), 1);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  // The slot now serves another waiter: the old one must not touch it.
  shmsem_waiter_t other;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &other, nullptr, &l), SHMSEM_QUEUED);
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -ENOTRECOVERABLE);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 1);
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  ASSERT_EQ(shmsem_waiter_poll(&other, &l), 0);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_INVARIANTS(seg.get());
}

// ---- Through io_uring -------------------------------------------------------

class Ring {
 public:
  explicit Ring(unsigned entries = 256) {
    ok_ = io_uring_queue_init(entries, &ring_, 0) == 0;
  }
  ~Ring() {
    if (ok_) io_uring_queue_exit(&ring_);
  }
  Ring(const Ring &) = delete;
  Ring &operator=(const Ring &) = delete;
  bool ok() const { return ok_; }
  io_uring *get() { return &ring_; }
  // Prepares a wait, submitting first if the SQ is full.
  void prep_wait(shmsem_waiter_t *w, uint64_t tag) {
    int r = shmsem_uring_prep_wait(&ring_, w, tag);
    if (r == -EBUSY) {
      io_uring_submit(&ring_);
      r = shmsem_uring_prep_wait(&ring_, w, tag);
    }
    ASSERT_EQ(r, 0);
  }
  void prep_cancel(uint64_t tag) {
    if (shmsem_uring_prep_cancel(&ring_, tag) == -EBUSY) {
      io_uring_submit(&ring_);
      ASSERT_EQ(shmsem_uring_prep_cancel(&ring_, tag), 0);
    }
  }
  // The next CQE that is not the library's own: its user_data and res.
  bool next(uint64_t *tag, int *res, int timeout_ms = 30'000) {
    for (;;) {
      io_uring_submit(&ring_);
      io_uring_cqe *cqe;
      __kernel_timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000};
      int r = io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
      if (r == -EINTR) continue;
      if (r < 0) return false;
      uint64_t ud = io_uring_cqe_get_data64(cqe);
      int rs = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (ud == SHMSEM_URING_IGNORE) continue;
      *tag = ud;
      *res = rs;
      return true;
    }
  }

 private:
  io_uring ring_;
  bool ok_ = false;
};

#define REQUIRE_RING_FUTEX()                                                 \
  do {                                                                       \
    if (shmsem_uring_probe() != 0)                                           \
      GTEST_SKIP() << "this kernel has no IORING_OP_FUTEX_WAIT (Linux 6.7+)" \
                      " or io_uring is disabled: shmsem_uring_probe() == "   \
                   << shmsem_uring_probe();                                  \
  } while (0)

TEST(Uring, ProbeSaysWhetherTheKernelWaitsOnFutexesInARing) {
  int r = shmsem_uring_probe();
  EXPECT_TRUE(r == 0 || r == -EOPNOTSUPP) << r;
  // Without the opcode (a test limit stands for an older kernel) the probe
  // says so plainly.
  testing::limit_liveness(detail::kLimitNoUring);
  EXPECT_EQ(shmsem_uring_probe(), -EOPNOTSUPP);
  testing::limit_liveness(0);
  EXPECT_EQ(shmsem_uring_probe(), r);
}

// Waits completed by one loop: poll each CQE's waiter, re-arm the ones
// still queued. Returns the tags of the completed waits in completion
// order, with their results.
struct Loop {
  Ring *ring;
  std::vector<shmsem_waiter_t> *w;
  std::vector<shmsem_lease_t> leases;
  std::vector<int> results;
  explicit Loop(Ring *r, std::vector<shmsem_waiter_t> *ws)
      : ring(r), w(ws), leases(ws->size()), results(ws->size(), 1) {}
  // Handles one CQE; returns the tag completed or -1.
  int step() {
    uint64_t tag;
    int res;
    if (!ring->next(&tag, &res)) return -2;
    if (tag >= w->size() || results[tag] != 1) return -1;  // stale CQE
    int r = shmsem_waiter_poll(&(*w)[tag], &leases[tag]);
    if (r == -EINPROGRESS) {
      ring->prep_wait(&(*w)[tag], tag);
      return -1;
    }
    results[tag] = r;
    return int(tag);
  }
};

// Starts every waiter of `w` (each must queue) and parks it in `ring` with
// its index as the tag.
void start_all(shmsem_t *s, Ring *ring, std::vector<shmsem_waiter_t> *w) {
  shmsem_lease_t unused;
  for (size_t i = 0; i < w->size(); i++) {
    ASSERT_EQ(shmsem_waiter_start(s, &(*w)[i], nullptr, &unused), SHMSEM_QUEUED)
        << "waiter " << i;
    ring->prep_wait(&(*w)[i], i);
  }
  io_uring_submit(ring->get());
}

// The loop completes the waiters `order` one after another, each granted;
// each lease is released at once, which grants the next.
void expect_granted_in_order(Loop *loop, shmsem_t *s,
                             std::initializer_list<int> order) {
  for (int want : order) {
    int t;
    while ((t = loop->step()) == -1) {
    }
    ASSERT_EQ(t, want) << "completed out of FIFO order";
    ASSERT_EQ(loop->results[t], 0);
    ASSERT_EQ(shmsem_release(s, &loop->leases[t]), 0);
  }
}

// 10,000 acquires pending on one ring, completed in FIFO order: each
// completion releases its lease, which the next waiter receives.
TEST(Uring, TenThousandPendingWaitersCompleteInFifoOrder) {
  REQUIRE_RING_FUTEX();
  constexpr uint32_t kN = 10'000;
  Segment seg(1, kN);
  Ring ring(4096);
  ASSERT_TRUE(ring.ok());
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  std::vector<shmsem_waiter_t> w(kN);
  ASSERT_NO_FATAL_FAILURE(start_all(seg.get(), &ring, &w));
  EXPECT_COUNTS(seg.get(), 0, 1, 0, kN);
  Loop loop(&ring, &w);
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  uint32_t next = 0;
  while (next < kN) {
    int t = loop.step();
    ASSERT_NE(t, -2) << "no CQE within 30 s; next expected " << next;
    if (t < 0) continue;
    ASSERT_EQ(uint32_t(t), next) << "completed out of FIFO order";
    ASSERT_EQ(loop.results[t], 0);
    ASSERT_EQ(shmsem_release(seg.get(), &loop.leases[t]), 0);
    next++;
  }
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// A long idle queue on one ring stays quiet: its backups' timeouts are
// rare (each one that fires makes the kernel walk the ring's futex waits).
// With the blocking backups' 2-minute cap, 20,000 idle waits saw about 330
// timeouts in 2 s (an adversarial test left 60,000 for 40 s: the head's
// CQE then came a minute after the grant); with the async nap, a handful.
TEST(Uring, LongIdleQueueOnOneRingFiresFewTimeouts) {
  REQUIRE_RING_FUTEX();
  constexpr uint32_t kN = 20'000;
  Segment seg(1, kN);
  Ring ring(4096);
  ASSERT_TRUE(ring.ok());
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  std::vector<shmsem_waiter_t> w(kN);
  shmsem_lease_t l;
  ASSERT_NO_FATAL_FAILURE(start_all(seg.get(), &ring, &w));
  // Two seconds of an idle loop: every CQE is a timeout (or the watcher's
  // period); count the backups woken, re-arm everyone.
  std::vector<char> woken(kN, 0);
  uint64_t end = ts_ns(mono_in(2'000 * kMs));
  while (ts_ns(mono_in(0)) < end) {
    uint64_t tag;
    int res;
    if (!ring.next(&tag, &res, 100)) continue;
    ASSERT_LT(tag, kN);
    ASSERT_EQ(shmsem_waiter_poll(&w[tag], &l), -EINPROGRESS);
    woken[tag] = 1;
    ring.prep_wait(&w[tag], tag);
  }
  int backups = 0;
  for (uint32_t i = 1; i < kN; i++) backups += woken[i];
  EXPECT_LT(backups, 60) << "backups woken in 2 s of an idle queue of " << kN;
  for (uint32_t i = 0; i < kN; i++)
    ASSERT_EQ(shmsem_waiter_cancel(&w[i], &l), -ECANCELED);
  EXPECT_EQ(shmsem_release(seg.get(), &held), 0);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// Loops in several processes, waits started in one global order: the
// grants follow that order across the processes.
TEST(Uring, FifoCompletionOrderAcrossProcesses) {
  REQUIRE_RING_FUTEX();
  constexpr int kProcs = 3, kPer = 20;
  Segment seg(1, 256);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  struct Log {
    std::atomic<int> turn{0};     // next global start index
    std::atomic<int> started{0};  // waits queued so far
    std::atomic<int> n{0};
    int order[kProcs * kPer];
  };
  Shared<Log> log;
  Children kids;
  for (int p = 0; p < kProcs; p++) {
    kids.spawn([&, p] {
      Ring ring;
      if (!ring.ok()) return 10;
      std::vector<shmsem_waiter_t> w(kPer);
      shmsem_lease_t l;
      // Start index i = k * kProcs + p, in turn with the others.
      for (int k = 0; k < kPer; k++) {
        int i = k * kProcs + p;
        if (!wait_until([&] { return log->turn.load() == i; })) return 11;
        if (shmsem_waiter_start(seg.get(), &w[k], nullptr, &l) != SHMSEM_QUEUED)
          return 12;
        ring.prep_wait(&w[k], uint64_t(k));
        log->turn.store(i + 1);
      }
      io_uring_submit(ring.get());
      log->started.fetch_add(kPer);
      Loop loop(&ring, &w);
      for (int done = 0; done < kPer;) {
        int t = loop.step();
        if (t == -2) return 13;
        if (t < 0) continue;
        if (loop.results[t] != 0) return 14;
        log->order[log->n.fetch_add(1)] = t * kProcs + p;
        if (shmsem_release(seg.get(), &loop.leases[t]) != 0) return 15;
        done++;
      }
      return 0;
    });
  }
  ASSERT_TRUE(wait_until([&] { return log->started.load() == kProcs * kPer; }));
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  ASSERT_TRUE(kids.wait_all_ok());
  ASSERT_EQ(log->n.load(), kProcs * kPer);
  for (int i = 0; i < kProcs * kPer; i++)
    ASSERT_EQ(log->order[i], i) << "grant " << i << " out of FIFO order";
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// Cancelling the head and a middle waiter through the ring: they own
// nothing, and the permit goes to the others in order.
TEST(Uring, CancelOfHeadAndMiddleWaitersLeavesNoGhost) {
  REQUIRE_RING_FUTEX();
  Segment seg(1);
  Ring ring;
  ASSERT_TRUE(ring.ok());
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  std::vector<shmsem_waiter_t> w(5);
  ASSERT_NO_FATAL_FAILURE(start_all(seg.get(), &ring, &w));
  // Through the ring first: the wait's CQE, then the one-shot decision.
  // Other waits may wake meanwhile (the head held the watch, which passes
  // to the tail with a wake-up): they poll as still queued.
  for (uint64_t victim : {0u, 2u}) {
    ring.prep_cancel(victim);
    uint64_t tag;
    int res;
    for (;;) {
      ASSERT_TRUE(ring.next(&tag, &res));
      if (tag == victim) break;
      ASSERT_EQ(shmsem_waiter_poll(&w[tag], &l), -EINPROGRESS);
      ring.prep_wait(&w[tag], tag);
    }
    EXPECT_EQ(res, -ECANCELED);
    EXPECT_EQ(shmsem_waiter_cancel(&w[victim], &l), -ECANCELED);
  }
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 3);
  Loop loop(&ring, &w);
  loop.results[0] = loop.results[2] = -ECANCELED;
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  ASSERT_NO_FATAL_FAILURE(expect_granted_in_order(&loop, seg.get(), {1, 3, 4}));
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// The grant is committed (word GRANTED) and its wake-up not yet sent when
// the loop cancels through the ring: the ring's wait is withdrawn
// (-ECANCELED), and the one-shot decision hands the caller the lease.
TEST(Uring, CancelCrossingAGrantThatWonReturnsTheLease) {
  REQUIRE_RING_FUTEX();
  Segment seg(1);
  Ring ring;
  ASSERT_TRUE(ring.ok());
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), SHMSEM_QUEUED);
  ring.prep_wait(&w, 7);
  io_uring_submit(ring.get());
  HookGate gate;
  int p = gate.arm(HookPoint::RELEASE_GRANTED, 1);
  std::thread releaser([&] {
    HookGate::tag_this_thread(1);
    EXPECT_EQ(shmsem_release(seg.get(), &held), 0);
  });
  ASSERT_TRUE(gate.wait_arrived(p));
  EXPECT_COUNTS(seg.get(), 0, 0, 1, 0);
  ring.prep_cancel(7);
  uint64_t tag;
  int res;
  ASSERT_TRUE(ring.next(&tag, &res));
  EXPECT_EQ(tag, 7u);
  EXPECT_EQ(res, -ECANCELED) << "the wake-up was not sent yet";
  ASSERT_EQ(shmsem_waiter_cancel(&w, &l), 0) << "the grant won";
  gate.resume(p);
  releaser.join();
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// The cancel wins first; the release that follows finds nobody queued and
// the permit goes back to the pool. The ring's wait, withdrawn afterwards,
// ends with -ECANCELED.
TEST(Uring, CancelBeforeTheGrantLeavesThePermitInThePool) {
  REQUIRE_RING_FUTEX();
  Segment seg(1);
  Ring ring;
  ASSERT_TRUE(ring.ok());
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  shmsem_waiter_t w;
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w, nullptr, &l), SHMSEM_QUEUED);
  ring.prep_wait(&w, 7);
  io_uring_submit(ring.get());
  HookGate gate;
  int p = gate.arm(HookPoint::WAIT_RETURN_LOCKED, 1);
  std::thread canceller([&] {
    HookGate::tag_this_thread(1);
    EXPECT_EQ(shmsem_waiter_cancel(&w, &l), -ECANCELED);
  });
  ASSERT_TRUE(gate.wait_arrived(p));
  // The release waits for the lock the canceller holds.
  std::thread releaser([&] { EXPECT_EQ(shmsem_release(seg.get(), &held), 0); });
  gate.resume(p);
  canceller.join();
  releaser.join();
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  ring.prep_cancel(7);
  uint64_t tag;
  int res;
  ASSERT_TRUE(ring.next(&tag, &res));
  EXPECT_EQ(tag, 7u);
  EXPECT_TRUE(res == -ECANCELED || res == 0) << res;
  EXPECT_INVARIANTS(seg.get());
}

// The deadline through the ring: its linked timeout ends the futex wait,
// and the poll that follows times the waiter out.
TEST(Uring, RingTimeoutEndsTheWaitAtTheDeadline) {
  REQUIRE_RING_FUTEX();
  Segment seg(1);
  Ring ring;
  ASSERT_TRUE(ring.ok());
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  std::vector<shmsem_waiter_t> w(2);
  timespec dl = mono_in(30 * kMs);
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w[0], nullptr, &l), SHMSEM_QUEUED);
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w[1], &dl, &l), SHMSEM_QUEUED);
  ring.prep_wait(&w[0], 0);
  ring.prep_wait(&w[1], 1);
  Loop loop(&ring, &w);
  int t;
  while ((t = loop.step()) == -1) {
  }
  ASSERT_EQ(t, 1);
  EXPECT_EQ(loop.results[1], -ETIMEDOUT);
  EXPECT_GE(ts_ns(mono_in(0)), ts_ns(dl)) << "not before the deadline";
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 1);
  EXPECT_EQ(shmsem_waiter_cancel(&w[0], &l), -ECANCELED);
  EXPECT_EQ(shmsem_release(seg.get(), &held), 0);
  EXPECT_INVARIANTS(seg.get());
}

// The same with the manual clock: the ring wakes the waiter every
// millisecond of real time to look at it.
TEST(Uring, ManualClockDeadlineIsSeenThroughTheRing) {
  REQUIRE_RING_FUTEX();
  ManualClock clock;
  Segment seg(1);
  Ring ring;
  ASSERT_TRUE(ring.ok());
  shmsem_lease_t held, l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  std::vector<shmsem_waiter_t> w(1);
  timespec dl = clock.deadline_in(kMs);
  ASSERT_EQ(shmsem_waiter_start(seg.get(), &w[0], &dl, &l), SHMSEM_QUEUED);
  ring.prep_wait(&w[0], 0);
  Loop loop(&ring, &w);
  // Still queued through several ring wake-ups while the clock stands.
  for (int i = 0; i < 3; i++) ASSERT_EQ(loop.step(), -1);
  clock.advance(kMs);
  int t;
  while ((t = loop.step()) == -1) {
  }
  ASSERT_EQ(t, 0);
  EXPECT_EQ(loop.results[0], -ETIMEDOUT);
  EXPECT_EQ(shmsem_release(seg.get(), &held), 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Uring, ShutdownFailsEveryPendingRingWait) {
  REQUIRE_RING_FUTEX();
  constexpr int kN = 50;
  Segment seg(1);
  Ring ring;
  ASSERT_TRUE(ring.ok());
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  std::vector<shmsem_waiter_t> w(kN);
  ASSERT_NO_FATAL_FAILURE(start_all(seg.get(), &ring, &w));
  Children kids;
  pid_t pid =
      kids.spawn([&] { return shmsem_shutdown(seg.get()) == kN ? 0 : 1; });
  ASSERT_EQ(kids.wait(pid), 0);
  Loop loop(&ring, &w);
  for (int done = 0; done < kN;) {
    int t = loop.step();
    ASSERT_NE(t, -2);
    if (t < 0) continue;
    EXPECT_EQ(loop.results[t], -ESHUTDOWN);
    done++;
  }
  EXPECT_EQ(shmsem_release(seg.get(), &held), 0);
  EXPECT_INVARIANTS(seg.get());
}

// A process with waits pending in its ring is killed (it was first in the
// queue, so it also held the watch): its slots are reclaimed and the
// waiters of another process's ring get the permits.
TEST(Uring, KilledProcessWithPendingRingWaitsIsReclaimed) {
  REQUIRE_RING_FUTEX();
  Segment seg(1);
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire(seg.get(), &held), 0);
  Shared<std::atomic<int>> ready;
  Children kids;
  pid_t victim = kids.spawn([&] {
    Ring ring;
    std::vector<shmsem_waiter_t> w(4);
    shmsem_lease_t cl;
    for (int i = 0; i < 4; i++) {
      if (shmsem_waiter_start(seg.get(), &w[i], nullptr, &cl) != SHMSEM_QUEUED)
        return 1;
      ring.prep_wait(&w[i], uint64_t(i));
    }
    io_uring_submit(ring.get());
    ready->store(1);
    pause();
    return 0;
  });
  ASSERT_TRUE(wait_until([&] { return ready->load() == 1; }));
  Ring ring;
  ASSERT_TRUE(ring.ok());
  std::vector<shmsem_waiter_t> w(3);
  ASSERT_NO_FATAL_FAILURE(start_all(seg.get(), &ring, &w));
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  EXPECT_EQ(kids.wait(victim), 128 + SIGKILL);
  ASSERT_EQ(shmsem_release(seg.get(), &held), 0);
  // Nobody else calls the library: the watch runs in this loop's polls.
  Loop loop(&ring, &w);
  ASSERT_NO_FATAL_FAILURE(expect_granted_in_order(&loop, seg.get(), {0, 1, 2}));
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(seg.get(), &st), 0);
  EXPECT_EQ(st.reclaimed_waiters, 4u);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// The holder dies while every waiter waits in a ring: the waiters' own
// polls (the ring wakes the watcher on its period) reclaim the permit.
TEST(Uring, KilledHolderWhileEveryWaiterIsAsyncIsReclaimed) {
  REQUIRE_RING_FUTEX();
  Segment seg(1);
  Shared<std::atomic<int>> ready;
  Children kids;
  pid_t holder = kids.spawn([&] {
    shmsem_lease_t hl;
    if (shmsem_acquire(seg.get(), &hl) != 0) return 1;
    ready->store(1);
    pause();
    return 0;
  });
  ASSERT_TRUE(wait_until([&] { return ready->load() == 1; }));
  Ring ring;
  ASSERT_TRUE(ring.ok());
  std::vector<shmsem_waiter_t> w(3);
  ASSERT_NO_FATAL_FAILURE(start_all(seg.get(), &ring, &w));
  ASSERT_EQ(kill(holder, SIGKILL), 0);
  EXPECT_EQ(kids.wait(holder), 128 + SIGKILL);
  Loop loop(&ring, &w);
  ASSERT_NO_FATAL_FAILURE(expect_granted_in_order(&loop, seg.get(), {0, 1, 2}));
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(seg.get(), &st), 0);
  EXPECT_EQ(st.reclaimed_holders, 1u);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

}  // namespace
}  // namespace shmsem::test
