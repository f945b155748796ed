// Weighted leases: n permits as one lease, strict FIFO with head-of-line
// blocking, a head's partial reservation passed on in order when it gives
// up, exactly-once release of all n.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "support/manual_clock.h"
#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

// A thread that acquires `n` permits, records its name in `order`, and
// keeps the lease in `out` (the test releases it).
struct Acquirer {
  std::thread t;
  shmsem_lease_t lease{};
  std::atomic<int> result{1};
};

void start(Acquirer *a, shmsem_t *s, uint32_t n, std::mutex *mu,
           std::vector<char> *order, char name) {
  a->t = std::thread([=] {
    int r = shmsem_acquire_n(s, n, &a->lease);
    if (r == 0 && mu) {
      std::lock_guard<std::mutex> g(*mu);
      order->push_back(name);
    }
    a->result = r;
  });
}

TEST(Weighted, OneLeaseOfNIsReleasedOnceAndReturnsAllN) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire_n(s, 3, &l), 0);
  EXPECT_COUNTS(s, 1, 3, 0, 0);
  EXPECT_INVARIANTS(s);
  shmsem_lease_t copy = l;
  ASSERT_EQ(shmsem_release(s, &l), 0);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
  // A second release is an error, never extra permits.
  EXPECT_EQ(shmsem_release(s, &copy), -EALREADY);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
  EXPECT_INVARIANTS(s);
  // All four as one lease, then one by one.
  ASSERT_EQ(shmsem_acquire_n(s, 4, &l), 0);
  shmsem_lease_t one;
  EXPECT_EQ(shmsem_try_acquire(s, &one), -EAGAIN);
  ASSERT_EQ(shmsem_release(s, &l), 0);
  ASSERT_EQ(shmsem_acquire_n(s, 1, &one), 0);  // weight 1 is a plain acquire
  EXPECT_COUNTS(s, 3, 1, 0, 0);
  ASSERT_EQ(shmsem_release(s, &one), 0);
  EXPECT_INVARIANTS(s);
}

TEST(Weighted, ZeroOrMoreThanMaxPermitsIsInvalidAtOnce) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  timespec past{0, 0};
  EXPECT_EQ(shmsem_acquire_n(s, 5, &l), -EINVAL);
  EXPECT_EQ(shmsem_acquire_n(s, 0, &l), -EINVAL);
  EXPECT_EQ(shmsem_try_acquire_n(s, 5, &l), -EINVAL);
  EXPECT_EQ(shmsem_acquire_until_n(s, 5, &past, &l), -EINVAL);
  EXPECT_EQ(shmsem_acquire_ex_n(s, 5, nullptr, nullptr, 0, &l), -EINVAL);
  shmsem_waiter_t w;
  EXPECT_EQ(shmsem_waiter_start_n(s, &w, 5, nullptr, &l), -EINVAL);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(s, &st), 0);
  EXPECT_EQ(st.timeouts, 0u);
  EXPECT_INVARIANTS(s);
}

TEST(Weighted, TryTakesAllOrNothing) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  shmsem_lease_t a, b;
  ASSERT_EQ(shmsem_acquire_n(s, 2, &a), 0);
  EXPECT_EQ(shmsem_try_acquire_n(s, 3, &b), -EAGAIN);
  EXPECT_COUNTS(s, 2, 2, 0, 0);  // nothing taken, nothing lost
  timespec past{0, 0};
  EXPECT_EQ(shmsem_acquire_until_n(s, 3, &past, &b), -ETIMEDOUT);
  EXPECT_COUNTS(s, 2, 2, 0, 0);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_try_acquire_n(s, 2, &b), 0);
  ASSERT_EQ(shmsem_release(s, &a), 0);
  ASSERT_EQ(shmsem_release(s, &b), 0);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
}

TEST(Weighted, HeadNeedingThreeIsNotOvertakenByALaterOneNeedingOne) {
  Segment seg(3);
  shmsem_t *s = seg.get();
  shmsem_lease_t held[3];
  for (auto &h : held) ASSERT_EQ(shmsem_acquire(s, &h), 0);
  std::mutex mu;
  std::vector<char> order;
  Acquirer a, b;
  start(&a, s, 3, &mu, &order, 'A');
  ASSERT_TRUE(waiting_is(s, 1));
  start(&b, s, 1, &mu, &order, 'B');
  ASSERT_TRUE(waiting_is(s, 2));
  // Each release goes to A's reservation, none to B.
  ASSERT_EQ(shmsem_release(s, &held[0]), 0);
  EXPECT_COUNTS(s, 0, 2, 1, 2);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &held[1]), 0);
  EXPECT_COUNTS(s, 0, 1, 2, 2);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &held[2]), 0);  // A has all three
  a.t.join();
  ASSERT_EQ(a.result.load(), 0);
  EXPECT_COUNTS(s, 0, 3, 0, 1);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &a.lease), 0);  // all three at once: B gets one
  b.t.join();
  ASSERT_EQ(b.result.load(), 0);
  EXPECT_EQ(order, (std::vector<char>{'A', 'B'}));
  EXPECT_COUNTS(s, 2, 1, 0, 0);
  ASSERT_EQ(shmsem_release(s, &b.lease), 0);
  EXPECT_COUNTS(s, 3, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Weighted, NewcomersQueueBehindAHeadGatheringItsReservation) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  shmsem_lease_t held;
  ASSERT_EQ(shmsem_acquire_n(s, 3, &held), 0);
  // A needs 4: it takes the free one as its reservation and queues.
  Acquirer a;
  start(&a, s, 4, nullptr, nullptr, 'A');
  ASSERT_TRUE(waiting_is(s, 1));
  EXPECT_COUNTS(s, 0, 3, 1, 1);
  EXPECT_INVARIANTS(s);
  // Nothing is free for a newcomer, even of weight 1.
  shmsem_lease_t x;
  EXPECT_EQ(shmsem_try_acquire(s, &x), -EAGAIN);
  ASSERT_EQ(shmsem_release(s, &held), 0);
  a.t.join();
  ASSERT_EQ(a.result.load(), 0);
  EXPECT_COUNTS(s, 0, 4, 0, 0);
  ASSERT_EQ(shmsem_release(s, &a.lease), 0);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// The head gives up (`how`) holding a reservation of 2 of the 3 it asked
// for: B (1) is granted one of them, C (2) gets the other as its own
// reservation, in that order, and nothing is lost.
enum class GiveUp { kTimeout, kCancel };

void head_gives_up_holding_two(GiveUp how) {
  ManualClock clock;
  Segment seg(3);
  shmsem_t *s = seg.get();
  shmsem_lease_t held[3];
  for (auto &h : held) ASSERT_EQ(shmsem_acquire(s, &h), 0);
  shmsem_cancel_t cancel;
  shmsem_cancel_init(&cancel);
  timespec deadline = clock.deadline_in(1'000'000'000);
  std::atomic<int> ra{1};
  std::thread a([&] {
    shmsem_lease_t l;
    int r = how == GiveUp::kTimeout
                ? shmsem_acquire_until_n(s, 3, &deadline, &l)
                : shmsem_acquire_ex_n(s, 3, nullptr, &cancel, 0, &l);
    ra = r;
  });
  ASSERT_TRUE(waiting_is(s, 1));
  Acquirer b, c;
  start(&b, s, 1, nullptr, nullptr, 'B');
  ASSERT_TRUE(waiting_is(s, 2));
  start(&c, s, 2, nullptr, nullptr, 'C');
  ASSERT_TRUE(waiting_is(s, 3));
  ASSERT_EQ(shmsem_release(s, &held[0]), 0);
  ASSERT_EQ(shmsem_release(s, &held[1]), 0);
  EXPECT_COUNTS(s, 0, 1, 2, 3);  // A holds a reservation of 2
  EXPECT_INVARIANTS(s);
  if (how == GiveUp::kTimeout)
    clock.advance(2'000'000'000);
  else
    shmsem_cancel(&cancel);
  a.join();
  EXPECT_EQ(ra.load(), how == GiveUp::kTimeout ? -ETIMEDOUT : -ECANCELED);
  b.t.join();
  ASSERT_EQ(b.result.load(), 0);
  // C is the head now, with one of A's two reserved for it.
  EXPECT_COUNTS(s, 0, 2, 1, 1);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &held[2]), 0);
  c.t.join();
  ASSERT_EQ(c.result.load(), 0);
  EXPECT_COUNTS(s, 0, 3, 0, 0);
  ASSERT_EQ(shmsem_release(s, &b.lease), 0);
  ASSERT_EQ(shmsem_release(s, &c.lease), 0);
  EXPECT_COUNTS(s, 3, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Weighted, HeadTimingOutPassesItsPartialReservationOnInOrder) {
  head_gives_up_holding_two(GiveUp::kTimeout);
}

TEST(Weighted, CancelledHeadPassesItsPartialReservationOnInOrder) {
  head_gives_up_holding_two(GiveUp::kCancel);
}

TEST(Weighted, KilledHeadPassesItsPartialReservationOn) {
  Segment seg(3);
  shmsem_t *s = seg.get();
  shmsem_lease_t held[3];
  for (auto &h : held) ASSERT_EQ(shmsem_acquire(s, &h), 0);
  Children kids;
  pid_t head = kids.spawn([&] {
    shmsem_t *c = seg.open_again();
    shmsem_lease_t l;
    return shmsem_acquire_n(c, 3, &l) == 0 ? 0 : 1;
  });
  ASSERT_TRUE(waiting_is(s, 1));
  Acquirer b;
  start(&b, s, 2, nullptr, nullptr, 'B');
  ASSERT_TRUE(waiting_is(s, 2));
  ASSERT_EQ(shmsem_release(s, &held[0]), 0);
  ASSERT_EQ(shmsem_release(s, &held[1]), 0);
  EXPECT_COUNTS(s, 0, 1, 2, 2);
  kill(head, SIGKILL);
  EXPECT_EQ(kids.wait(head), 128 + SIGKILL);
  // Its slot and its two reserved permits are reclaimed: B has its two.
  // By this recover, or already by B's own death watch, which sees the
  // pidfd of the dead head at a moment no test controls (the ASan suite
  // of make test once found it done: recover returned 0).
  EXPECT_GE(shmsem_recover(s), 0);
  b.t.join();
  ASSERT_EQ(b.result.load(), 0);
  EXPECT_COUNTS(s, 0, 3, 0, 0);
  EXPECT_INVARIANTS(s);
  ASSERT_EQ(shmsem_release(s, &b.lease), 0);
  ASSERT_EQ(shmsem_release(s, &held[2]), 0);
  EXPECT_COUNTS(s, 3, 0, 0, 0);
}

TEST(Weighted, LeaseOfAKilledHolderComesBackWhole) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  Children kids;
  Shared<std::atomic<int>> holding;
  pid_t holder = kids.spawn([&] {
    shmsem_t *c = seg.open_again();
    shmsem_lease_t l;
    if (shmsem_acquire_n(c, 3, &l) != 0) return 1;
    *holding = 1;
    pause();
    return 0;
  });
  ASSERT_TRUE(wait_until([&] { return holding->load() == 1; }));
  EXPECT_COUNTS(s, 1, 3, 0, 0);
  kill(holder, SIGKILL);
  EXPECT_EQ(kids.wait(holder), 128 + SIGKILL);
  EXPECT_EQ(shmsem_recover(s), 3);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Weighted, LeaseIsReleasedExactlyOnceFromAnotherProcess) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire_n(s, 2, &l), 0);
  Children kids;
  pid_t p = kids.spawn([&] {
    shmsem_t *c = seg.open_again();
    shmsem_lease_t copy = l;
    if (shmsem_release(c, &copy) != 0) return 1;
    return shmsem_release(c, &copy) == -EALREADY ? 0 : 2;
  });
  EXPECT_EQ(kids.wait(p), 0);
  EXPECT_EQ(shmsem_release(s, &l), -EALREADY);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Weighted, AsyncWaiterOfThreeIsGrantedThroughItsWord) {
  Segment seg(3);
  shmsem_t *s = seg.get();
  shmsem_lease_t held[3];
  for (auto &h : held) ASSERT_EQ(shmsem_acquire(s, &h), 0);
  shmsem_waiter_t w;
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_waiter_start_n(s, &w, 3, nullptr, &l), SHMSEM_QUEUED);
  uint32_t *word, value;
  ASSERT_EQ(shmsem_waiter_futex(&w, &word, &value), 0);
  ASSERT_EQ(shmsem_release(s, &held[0]), 0);
  ASSERT_EQ(shmsem_release(s, &held[1]), 0);
  EXPECT_EQ(__atomic_load_n(word, __ATOMIC_ACQUIRE), value);  // not yet
  EXPECT_EQ(shmsem_waiter_poll(&w, &l), -EINPROGRESS);
  EXPECT_COUNTS(s, 0, 1, 2, 1);
  ASSERT_EQ(shmsem_release(s, &held[2]), 0);
  EXPECT_NE(__atomic_load_n(word, __ATOMIC_ACQUIRE), value);
  ASSERT_EQ(shmsem_waiter_poll(&w, &l), 0);
  EXPECT_COUNTS(s, 0, 3, 0, 0);
  ASSERT_EQ(shmsem_release(s, &l), 0);
  EXPECT_COUNTS(s, 3, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Four processes take random weights; each adds its weight to a shared sum
// after its acquire returns and takes it off before releasing, and checks
// on every step that the sum never exceeds the capacity.
TEST(Weighted, RandomWeightsFromFourProcessesNeverOvercommit) {
  constexpr uint32_t kN = 5;
  Segment seg(kN, 64);
  struct Board {
    std::atomic<int> sum{0};
    std::atomic<int> over{0};
  };
  Shared<Board> board;
  Children kids;
  for (int p = 0; p < 4; p++)
    kids.spawn([&, p] {
      shmsem_t *c = seg.open_again();
      std::mt19937 rng(uint32_t(p) * 7919u + 1);
      for (int i = 0; i < 300; i++) {
        uint32_t k = 1 + rng() % 3;
        shmsem_lease_t l;
        int r = i % 3 == 0 ? shmsem_try_acquire_n(c, k, &l)
                           : shmsem_acquire_n(c, k, &l);
        if (r == -EAGAIN) continue;
        if (r != 0) return 1;
        if (board->sum.fetch_add(int(k)) + int(k) > int(kN)) board->over++;
        if (board->sum.load() > int(kN)) board->over++;
        board->sum.fetch_sub(int(k));
        if (shmsem_release(c, &l) != 0) return 2;
      }
      return 0;
    });
  EXPECT_TRUE(kids.wait_all_ok());
  EXPECT_EQ(board->over.load(), 0);
  EXPECT_COUNTS(seg.get(), kN, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// Found by an adversarial test: handing more permits than there are slots
// to one head in one pass was taken for a damaged queue, and repaired.
TEST(Weighted, ManyPermitsToOneHeadInOnePassNeedNoRepair) {
  Segment seg(16, 4);
  shmsem_t *s = seg.get();
  shmsem_lease_t all;
  ASSERT_EQ(shmsem_acquire_n(s, 16, &all), 0);
  Acquirer a;
  start(&a, s, 12, nullptr, nullptr, 'A');
  ASSERT_TRUE(waiting_is(s, 1));
  ASSERT_EQ(shmsem_release(s, &all), 0);
  a.t.join();
  ASSERT_EQ(a.result.load(), 0);
  ASSERT_EQ(shmsem_release(s, &a.lease), 0);
  // Queued with one held: 15 taken at once become its reservation.
  shmsem_lease_t one;
  ASSERT_EQ(shmsem_acquire(s, &one), 0);
  Acquirer b;
  start(&b, s, 16, nullptr, nullptr, 'B');
  ASSERT_TRUE(waiting_is(s, 1));
  EXPECT_COUNTS(s, 0, 1, 15, 1);
  ASSERT_EQ(shmsem_release(s, &one), 0);
  b.t.join();
  ASSERT_EQ(b.result.load(), 0);
  ASSERT_EQ(shmsem_release(s, &b.lease), 0);
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(s, &st), 0);
  EXPECT_EQ(st.repairs, 0u);
  EXPECT_COUNTS(s, 16, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Found by an adversarial test: a token made up for one of the records of
// a weighted lease other than the one its token names released it alone.
TEST(Weighted, MadeUpTokenForAnotherRecordOfTheLeaseIsInvalid) {
  Segment seg(4);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire_n(s, 4, &l), 0);
  int refused = 0;
  for (uint32_t i = 0; i < 4; i++) {
    if (i == l.index) continue;
    for (uint64_t gen = 1; gen < 4; gen++) {
      shmsem_lease_t forged = l;
      forged.index = i;
      forged.gen = gen;
      int r = shmsem_release(s, &forged);
      EXPECT_TRUE(r == -EINVAL || r == -EALREADY) << r;
      refused++;
    }
  }
  EXPECT_EQ(refused, 9);
  EXPECT_COUNTS(s, 0, 4, 0, 0);
  ASSERT_EQ(shmsem_release(s, &l), 0);
  EXPECT_COUNTS(s, 4, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

// Found by a review: a cancel handle already fired was seen before the
// count, so a bad n returned -ECANCELED.
TEST(Weighted, BadCountIsInvalidEvenWithAFiredCancel) {
  Segment seg(2);
  shmsem_cancel_t c;
  shmsem_cancel_init(&c);
  shmsem_cancel(&c);
  shmsem_lease_t l;
  EXPECT_EQ(shmsem_acquire_ex_n(seg.get(), 3, nullptr, &c, 0, &l), -EINVAL);
  EXPECT_EQ(shmsem_acquire_ex_n(seg.get(), 0, nullptr, &c, 0, &l), -EINVAL);
  EXPECT_EQ(shmsem_acquire_ex_n(seg.get(), 1, nullptr, &c, 0, &l), -ECANCELED);
}

}  // namespace
}  // namespace shmsem::test
