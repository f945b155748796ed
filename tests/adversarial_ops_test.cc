// Adversarial tests of the operators' interfaces (<shmsem/inspect.h>): what
// a reader without the lock may see on a busy, healthy semaphore, and how
// long a monitor waits for a lock held by a live process.
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include <gtest/gtest.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

#include "handle.h"
#include "layout.h"
#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

int inspect_rc(shmsem_t *s, struct shmsem_inspection *in) {
  std::vector<shmsem_holder> holders(64);
  std::vector<shmsem_waiter_info> waiters(64);
  return shmsem_inspect(s, in, holders.data(), uint32_t(holders.size()),
                        waiters.data(), uint32_t(waiters.size()));
}

// The stat's `available` and `held` add the core's counters (read first)
// and the lock-free path's LOOSE and HELD_FAST records (scanned after): a
// read without the lock of a busy semaphore can see a lease in both (a
// stress of weighted and single acquires saw held 10 of 8 permits). That
// is a torn read, not damage: -EUCLEAN (which `shmsem status` turns into
// "damaged: rm it and create it again", and the exporter into shmsem_up 0)
// only for a counter that is itself beyond the geometry. Here the records
// are made LOOSE, then HELD_FAST, behind counters that still count them
// as free: every way of reading gives 0.
TEST(AdversarialOps, TornLockFreeCountsAreNotReportedAsDamage) {
  Segment seg(2, 8);
  shmsem_t *s = seg.get();
  std::vector<uint64_t> saved;
  for (uint32_t l = 0; l < 2; l++) saved.push_back(s->leases[l].word.load());
  for (uint32_t state : {detail::kLeaseLoose, detail::kLeaseHeldFast}) {
    for (uint32_t l = 0; l < 2; l++)
      s->leases[l].word.store(
          detail::lease_word(state, 0, detail::word_gen(saved[l]) + 1));
    for (int flags : {0, int(SHMSEM_RDONLY), int(SHMSEM_SNAPSHOT)}) {
      shmsem_t *h = flags ? seg.open_again(flags) : s;
      ASSERT_NE(h, nullptr);
      struct shmsem_inspection in;
      EXPECT_EQ(inspect_rc(h, &in), 0)
          << "flags " << flags << " state " << state;
      EXPECT_EQ(in.stat.available + in.stat.held, 4u);  // what was read, shown
      if (flags) shmsem_detach(h);
    }
  }
  for (uint32_t l = 0; l < 2; l++) s->leases[l].word.store(saved[l]);
  // A core counter past the geometry still is damage to a reader without
  // the lock; one with it (a writable handle) repairs it first.
  const uint32_t available = s->core->available.load();
  s->core->available.store(3);
  shmsem_t *ro = seg.open_again(SHMSEM_RDONLY);
  ASSERT_NE(ro, nullptr);
  struct shmsem_inspection in;
  EXPECT_EQ(inspect_rc(ro, &in), -EUCLEAN);
  shmsem_detach(ro);
  EXPECT_EQ(inspect_rc(s, &in), 0);
  EXPECT_EQ(s->core->available.load(), available);
  EXPECT_INVARIANTS(s);
}

// shmsem_inspect through a writable handle waits for the lock 50 ms at
// most (<shmsem/inspect.h>), then reads without it. lock_within() itself
// gives up on a live holder only after a floor: 100 ms for one asleep or
// stopped, 1 s for one seen running, which every inspect paid in full.
// Here the lock word names a child that spins (runnable).
TEST(AdversarialOps, InspectWaitsForALiveLockHolderAboutFiftyMilliseconds) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Children kids;
  pid_t spinner = kids.spawn([] {
    for (;;) {
    }
    return 0;
  });
  s->core->lock_word.store(uint32_t(spinner));
  for (int i = 0; i < 3; i++) {
    struct shmsem_inspection in;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(inspect_rc(s, &in), 0);
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - t0);
    EXPECT_LT(took.count(), 500)
        << "ms; the lock's floor for a running holder is 1 s";
  }
  EXPECT_EQ(s->core->lock_word.load() & detail::kLockTidMask,
            uint32_t(spinner));  // a monitor changes nothing
  s->core->lock_word.store(0);
  kill(spinner, SIGKILL);
  kids.wait(spinner);
  EXPECT_INVARIANTS(s);
}

}  // namespace
}  // namespace shmsem::test
