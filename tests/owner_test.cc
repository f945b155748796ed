// Owner identity and liveness: PID plus start time, zombies are dead, and
// processes of another PID namespace are refused.
#include <gtest/gtest.h>
#include <sched.h>
#include <shmsem/shmsem.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <stdio.h>
#include <chrono>
#include <vector>

#include "owner.h"
#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

TEST(Owner, ZombieHolderCountsAsDead) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Shared<std::atomic<int>> done;
  pid_t child = fork();
  if (child == 0) {
    shmsem_lease_t l;
    shmsem_acquire(seg.open_again(), &l);
    *done = 1;
    _exit(0);  // exits holding the lease; we do not reap it yet
  }
  ASSERT_TRUE(wait_until([&] { return done->load() == 1; }));
  // Wait until it is a zombie (exited, not reaped).
  ASSERT_TRUE(wait_until([&] {
    uint64_t st;
    char state = 0;
    return detail::proc_stat(child, &st, &state) && state == 'Z';
  }));
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_recover(s), 1) << "kill(pid, 0) would still say alive";
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  EXPECT_EQ(st.reclaimed_holders, 1u);
  waitpid(child, nullptr, 0);
  EXPECT_INVARIANTS(s);
}

// Same pid (alive), another identity: the process that took the lease is
// gone and its pid now belongs to someone else. Proven through the pidfs
// inode, and on kernels without pidfs through the start time.
void recycled_pid_case(unsigned limits, uint64_t start_delta,
                       uint64_t ino_delta) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(s, &l), 0);
  testing::limit_liveness(limits);
  EXPECT_EQ(shmsem_recover(s), 0) << "we are alive";
  detail::Owner me = detail::self_owner();
  ASSERT_EQ(testing::set_lease_owner(s, l, getpid(), me.start + start_delta,
                                     me.ino + ino_delta),
            0);
  EXPECT_EQ(shmsem_recover(s), 1);
  testing::limit_liveness(0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_EQ(shmsem_release(s, &l), -EALREADY) << "reclaimed: the lease is gone";
  EXPECT_INVARIANTS(s);
}

TEST(Owner, RecycledPidIsNotTakenForTheOldOwnerByPidfsInode) {
  if (detail::self_owner().ino == 0) GTEST_SKIP() << "no pidfs (Linux < 6.9)";
  recycled_pid_case(0, 0, 1);
}

TEST(Owner, RecycledPidIsNotTakenForTheOldOwnerByStartTime) {
  if (detail::self_owner().start == 0)
    GTEST_SKIP() << "/proc/self/stat unreadable";
  recycled_pid_case(detail::kLimitNoPidfs, 12345, 0);
}

TEST(Owner, DeadHolderPermitGoesToTheHeadWaiterWithoutAnyCall) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  Shared<std::atomic<int>> holding;
  Children kids;
  pid_t holder = kids.spawn([&] {
    shmsem_lease_t l;
    shmsem_acquire(seg.open_again(), &l);
    *holding = 1;
    pause();
    return 0;
  });
  ASSERT_TRUE(wait_until([&] { return holding->load() == 1; }));
  pid_t waiter = kids.spawn([&] {
    shmsem_t *c = seg.open_again();
    shmsem_lease_t l;
    if (shmsem_acquire(c, &l) != 0) return 1;
    return shmsem_release(c, &l) == 0 ? 0 : 2;
  });
  ASSERT_TRUE(wait_until([&] { return counts(s).waiting == 1; }));
  kill(holder, SIGKILL);
  // Nobody calls anything: the queued waiter (the watcher) reclaims.
  EXPECT_EQ(kids.wait(waiter, std::chrono::seconds(10)), 0);
  EXPECT_EQ(kids.wait(holder), 128 + SIGKILL);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Owner, OpeningFromAnotherPidNamespaceIsExdev) {
  Segment seg(1);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t outer = fork();
  if (outer == 0) {
    int result = 1000;
    if (unshare(CLONE_NEWPID) != 0) {
      result = 2000;  // not permitted here
    } else {
      pid_t inner = fork();  // the first child lives in the new namespace
      if (inner == 0) {
        shmsem_t *x = nullptr;
        _exit(-shmsem_open(seg.name().c_str(), 0, &x));
      }
      int status = 0;
      waitpid(inner, &status, 0);
      result = WIFEXITED(status) ? WEXITSTATUS(status) : 3000;
    }
    write(pipefd[1], &result, sizeof result);
    _exit(0);
  }
  int result = 0;
  ASSERT_EQ(read(pipefd[0], &result, sizeof result), ssize_t(sizeof result));
  waitpid(outer, nullptr, 0);
  close(pipefd[0]);
  close(pipefd[1]);
  if (result == 2000)
    GTEST_SKIP() << "unshare(CLONE_NEWPID) is not permitted here";
  EXPECT_EQ(result, EXDEV);
}

// A pass judges each distinct owner once (sorted, deduplicated), however
// many there are: 32768 leases, each recorded by a different process that
// no longer exists (pids above pid_max, which pidfd_open answers with
// ESRCH). The old verdict lists were searched linearly (32k owners: 0.64 s
// per pass, part of it under the lock). The bound is generous: it only
// catches a quadratic pass, never a slow machine.
TEST(Owner, OnePassOverThirtyTwoThousandDistinctDeadOwnersIsQuick) {
  constexpr uint32_t kOwners = 32768;
  Segment seg(kOwners, 16, "many");
  shmsem_t *s = seg.get();
  std::vector<shmsem_lease_t> l(kOwners);
  for (uint32_t i = 0; i < kOwners; i++)
    ASSERT_EQ(shmsem_try_acquire(s, &l[i]), 0);
  for (uint32_t i = 0; i < kOwners; i++)
    ASSERT_EQ(testing::set_lease_owner(s, l[i], int(4'000'000 + i), 1, 0), 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(shmsem_recover(s), int(kOwners));
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  RecordProperty("recover_ms", int(took * 1000));
  printf("one pass over %u distinct dead owners: %.0f ms\n", kOwners,
         took * 1000);
  EXPECT_LT(took, 20.0);
  EXPECT_COUNTS(s, kOwners, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

}  // namespace
}  // namespace shmsem::test
