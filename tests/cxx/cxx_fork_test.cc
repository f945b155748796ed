// A C++ lease in a fork child (issue 25, item 1): `auto l = sem.acquire();
// fork();` gives the child a copy of the lease object but, as shmsem.h
// says, no lease. The copy must release nothing: not when it goes out of
// scope, not when an exception unwinds it, not through release() (which
// reports EINVAL naming both processes), and the parent, still holding its
// permit, releases it afterwards without an error. The same for the C++17
// shmsem::Lease. Every child is a real fork()ed process.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include <shmsem/shmsem.hpp>

#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

using std::chrono::seconds;

// A child's exit status: 0, or what it saw go wrong (the parent's
// assertion prints the number).
enum ChildStatus : int {
  kChildOk = 0,
  kParentsPermitFreed = 10,  // the stat shows the parent's permit free
  kStatFailed,
  kReleaseDidNotThrow,
  kReleaseNotEinval,
  kReleaseTextWrong,
  kLeaseNotEmptied,
  kReleaseIntoCodeNotEinval,
  kCxx17ReleaseNotEinval,
  kUnwindingNotSeen,
  kOwnLeaseNotReleased,  // a lease the child acquired itself stayed held
};

// In the child, after its copy of the lease is gone: the one permit of the
// semaphore is still held (the parent's), read through the handle the
// child inherited (shmsem.h: a child may use its parent's handle at once).
int parents_permit_still_held(shmsem_t *s) {
  struct shmsem_stat st {};
  if (shmsem_stat(s, &st) != 0) return kStatFailed;
  return st.held == 1 && st.available == 0 ? kChildOk : kParentsPermitFreed;
}

// In the child: a lease it acquires itself is its own, and released there
// (the owner check reads the child's id, not the parent's it inherited).
int own_lease_is_released_here(semaphore &sem) {
  { lease mine = sem.acquire(); }
  struct shmsem_stat st {};
  if (shmsem_stat(sem.native_handle(), &st) != 0) return kStatFailed;
  return st.held == 0 && st.available == 1 ? kChildOk : kOwnLeaseNotReleased;
}

// In the parent, once the child has exited: the permit is still its own
// (a try on the 1-permit semaphore fails), and its own release succeeds.
void expect_parent_still_holds(const Segment &seg, semaphore &sem,
                               lease &kept) {
  EXPECT_TRUE(kept);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  EXPECT_FALSE(sem.try_acquire().has_value())
      << "the child's copy freed the parent's permit";
  EXPECT_NO_THROW(kept.release());
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_EQ(sem.stat().acquisitions, 1u) << "the parent's acquire only";
  EXPECT_INVARIANTS(seg.get());
}

// Acquires a lease in this scope and forks inside it. The parent moves the
// lease out to `kept`; in the child the function just returns, so its copy
// of `l` goes out of scope the ordinary way. Returns fork()'s result.
pid_t acquire_then_fork(semaphore &sem, lease &kept) {
  lease l = sem.acquire();
  const pid_t pid = fork();
  if (pid > 0) kept = std::move(l);
  return pid;  // in the child, `l` is destroyed here
}

struct ChildUnwinds {};

// The same, but the child leaves the scope by an exception, whose
// unwinding destroys its copy of `l`.
pid_t acquire_fork_and_throw_in_the_child(semaphore &sem, lease &kept) {
  lease l = sem.acquire();
  const pid_t pid = fork();
  if (pid == 0) throw ChildUnwinds{};
  if (pid > 0) kept = std::move(l);
  return pid;
}

TEST(ForkChild, LeaseGoingOutOfScopeInTheChildKeepsTheParentsPermit) {
  Segment seg(1);
  Segment other(1);  // for a lease of the child's own
  auto sem = semaphore::open(seg.name());
  auto child_sem = semaphore::open(other.name());
  lease kept;
  const pid_t pid = acquire_then_fork(sem, kept);
  if (pid == 0) {
    const int r = parents_permit_still_held(sem.native_handle());
    _exit(r != kChildOk ? r : own_lease_is_released_here(child_sem));
  }
  ASSERT_GT(pid, 0) << "fork failed";
  EXPECT_EQ(wait_exit(pid, seconds(60)), kChildOk);
  expect_parent_still_holds(seg, sem, kept);
}

TEST(ForkChild, LeaseUnwoundByAnExceptionInTheChildKeepsTheParentsPermit) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease kept;
  pid_t pid = -1;
  try {
    pid = acquire_fork_and_throw_in_the_child(sem, kept);
  } catch (const ChildUnwinds &) {
    _exit(parents_permit_still_held(sem.native_handle()));
  }
  if (pid == 0) _exit(kUnwindingNotSeen);
  ASSERT_GT(pid, 0) << "fork failed";
  EXPECT_EQ(wait_exit(pid, seconds(60)), kChildOk);
  expect_parent_still_holds(seg, sem, kept);
}

// An explicit release() in the child is a bug the caller should hear of:
// std::system_error(EINVAL) naming the owner and this process, nothing
// released, and the copy empty afterwards; release(ec) reports EINVAL.
TEST(ForkChild,
     ReleaseInTheChildThrowsEinvalNamingBothProcessesAndFreesNothing) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease l = sem.acquire();
  const pid_t parent = getpid();
  Children kids;
  const pid_t thrower = kids.spawn([&]() -> int {
    try {
      l.release();
      return kReleaseDidNotThrow;
    } catch (const std::system_error &e) {
      if (e.code() != std::errc::invalid_argument) return kReleaseNotEinval;
      const std::string what = e.what();
      if (what.find("belongs to process " + std::to_string(parent)) ==
              std::string::npos ||
          what.find("not to this process " + std::to_string(getpid())) ==
              std::string::npos)
        return kReleaseTextWrong;
    }
    if (l) return kLeaseNotEmptied;
    return parents_permit_still_held(sem.native_handle());
  });
  ASSERT_GT(thrower, 0) << "fork failed";
  EXPECT_EQ(kids.wait(thrower), kChildOk);
  const pid_t reporter = kids.spawn([&]() -> int {
    std::error_code ec;
    l.release(ec);
    if (ec != std::errc::invalid_argument) return kReleaseIntoCodeNotEinval;
    if (l) return kLeaseNotEmptied;
    return parents_permit_still_held(sem.native_handle());
  });
  ASSERT_GT(reporter, 0) << "fork failed";
  EXPECT_EQ(kids.wait(reporter), kChildOk);
  expect_parent_still_holds(seg, sem, l);
}

// The C++17 tier has the same rule: a Lease destroyed in the child leaves
// the permit to the parent, and its release() there returns -EINVAL.
TEST(ForkChild, Cxx17LeaseInTheChildReleasesNothing) {
  Segment seg(1);
  Lease l;
  ASSERT_EQ(shmsem::acquire(seg.get(), &l), 0);
  Children kids;
  const pid_t dropper = kids.spawn([&]() -> int {
    { Lease moved = std::move(l); }  // destroyed at the end of this scope
    return parents_permit_still_held(seg.get());
  });
  ASSERT_GT(dropper, 0) << "fork failed";
  EXPECT_EQ(kids.wait(dropper), kChildOk);
  const pid_t releaser = kids.spawn([&]() -> int {
    if (l.release() != -EINVAL) return kCxx17ReleaseNotEinval;
    if (l) return kLeaseNotEmptied;
    return parents_permit_still_held(seg.get());
  });
  ASSERT_GT(releaser, 0) << "fork failed";
  EXPECT_EQ(kids.wait(releaser), kChildOk);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  shmsem_lease_t probe;
  EXPECT_EQ(shmsem_try_acquire(seg.get(), &probe), -EAGAIN);
  EXPECT_EQ(l.release(), 0) << "the parent's own release";
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

}  // namespace
}  // namespace shmsem::test
