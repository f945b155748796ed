// The C++20 tier of <shmsem/shmsem.hpp>: shmsem::lease releases exactly
// once (scope exit, exception, moves), release() reports errors, stop_token
// and chrono waits end in std::nullopt, and errors are std::system_error in
// shmsem::category(), equal to std::errc conditions, whose what() says
// which argument and why for an EINVAL. Weighted leases, the capacity at
// run time and shmsem::options (a rate limit) reach the C API unchanged: n
// permits as one lease, counts checked rather than truncated. A lease
// names a stable resource index (lease::resource()). Fork children:
// cxx_fork_test.cc.
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <shmsem/shmsem.hpp>

#include "support/manual_clock.h"
#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// Polls the stat until `n` waiters are queued (a state to observe, not an
// ordering forced by time: the bound only keeps a broken run finite).
bool waiting_is(shmsem_t *s, uint32_t n) {
  return wait_until([&] { return counts(s).waiting == n; });
}

// The error_code a std::system_error thrown by `f` carries; a test failure
// (and an empty code) if it throws nothing.
template <typename F>
std::error_code thrown_code(F &&f) {
  try {
    f();
  } catch (const std::system_error &e) {
    return e.code();
  }
  ADD_FAILURE() << "no std::system_error was thrown";
  return {};
}

// A name for a semaphore the test creates through the C++ API (with
// shmsem::options, which Segment does not take), unlinked on teardown.
// Declare it before the semaphore.
struct ScopedName {
  std::string name = unique_name("cxx");
  ScopedName() = default;
  ScopedName(const ScopedName &) = delete;
  ScopedName &operator=(const ScopedName &) = delete;
  ~ScopedName() {
    std::error_code ignored;  // a test that failed to create leaves none
    semaphore::unlink(name.c_str(), ignored);
  }
};

// A moved-from (or released, or detached) lease: empty, owning nothing.
// The moved-from state is what the callers check, so the use-after-move
// checks are off here and at the calls.
// NOLINTBEGIN(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
void expect_empty(const lease &l) {
  EXPECT_FALSE(l);
  EXPECT_EQ(l.native_handle(), nullptr);
  EXPECT_EQ(l.token().gen, 0u);
}
// NOLINTEND(bugprone-use-after-move,clang-analyzer-cplusplus.Move)

// ---- lease: RAII and moves ------------------------------------------------

TEST(Lease, ReleasesOnScopeExit) {
  Segment seg(2);
  auto sem = semaphore::open(seg.name());
  {
    lease l = sem.acquire();
    EXPECT_TRUE(l);
    EXPECT_EQ(l.native_handle(), sem.native_handle());
    EXPECT_COUNTS(seg.get(), 1, 1, 0, 0);
  }
  EXPECT_COUNTS(seg.get(), 2, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// A local lease has a generation (its token's) but no grant sequence.
TEST(Lease, LocalLeaseHasAGenerationButNoSequence) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease l = sem.acquire();
  EXPECT_EQ(l.generation(), l.token().gen);
  EXPECT_GT(l.generation(), 0u);
  auto sequence_error = [&l] {
    try {
      (void)l.sequence();
    } catch (const std::system_error &e) {
      return e.code().value();
    }
    return 0;
  };
  EXPECT_EQ(sequence_error(), EOPNOTSUPP) << "a local lease";
  l.release();
  EXPECT_EQ(l.generation(), 0u);
  EXPECT_EQ(sequence_error(), EINVAL) << "an empty lease";
}

TEST(Lease, ReleasesWhenTheTaskThrows) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  auto task = [&] {
    lease l = sem.acquire();
    EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
    throw std::runtime_error("task failed");
  };
  EXPECT_THROW(task(), std::runtime_error);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Lease, MoveConstructionLeavesTheSourceEmptyAndReleasesOnce) {
  Segment seg(2);
  auto sem = semaphore::open(seg.name());
  std::optional<lease> b;
  {
    lease a = sem.acquire();
    const shmsem_lease_t token = a.token();
    b.emplace(std::move(a));
    // The moved-from state is the point (see expect_empty).
    // cppcheck-suppress accessMoved
    expect_empty(a);  // NOLINT(bugprone-use-after-move)
    EXPECT_TRUE(*b);
    EXPECT_EQ(b->token().gen, token.gen);
    EXPECT_EQ(b->token().index, token.index);
    EXPECT_COUNTS(seg.get(), 1, 1, 0, 0);
  }  // a, moved from, is destroyed while b holds the permit: nothing happens
  EXPECT_COUNTS(seg.get(), 1, 1, 0, 0);
  {
    lease c(std::move(*b));
    b.reset();  // b, moved from, destroyed while c holds it
    EXPECT_COUNTS(seg.get(), 1, 1, 0, 0);
  }  // c releases
  EXPECT_COUNTS(seg.get(), 2, 0, 0, 0);
  EXPECT_EQ(sem.stat().acquisitions, 1u);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Lease, MoveAssignmentReleasesTheTargetsPermitAndTakesTheSources) {
  Segment seg(2);
  auto sem = semaphore::open(seg.name());
  lease a = sem.acquire();
  shmsem_lease_t bt{};
  {
    lease b = sem.acquire();
    EXPECT_COUNTS(seg.get(), 0, 2, 0, 0);
    bt = b.token();
    a = std::move(b);  // a's permit goes back, b's moves into a
    EXPECT_COUNTS(seg.get(), 1, 1, 0, 0);
    // The moved-from state is the point (see expect_empty).
    // cppcheck-suppress accessMoved
    expect_empty(b);  // NOLINT(bugprone-use-after-move)
  }  // b, moved from, is destroyed while a holds its permit: nothing happens
  EXPECT_COUNTS(seg.get(), 1, 1, 0, 0);
  EXPECT_EQ(a.token().gen, bt.gen);
  EXPECT_EQ(a.token().index, bt.index);
  a = lease();  // assigning an empty lease releases
  EXPECT_FALSE(a);
  EXPECT_COUNTS(seg.get(), 2, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Lease, OptionalLeaseMovesOutWithoutADoubleRelease) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  {
    std::optional<lease> o = sem.try_acquire();
    ASSERT_TRUE(o.has_value());
    lease l = std::move(*o);  // o still holds a lease object, now empty
    EXPECT_TRUE(o.has_value());
    EXPECT_FALSE(*o);
    EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  }
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_EQ(sem.stat().acquisitions, 1u);
}

// ---- lease: release() and its errors --------------------------------------

TEST(Lease, ExplicitReleaseReturnsThePermitAndEmptiesTheLease) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease l = sem.acquire();
  l.release();
  EXPECT_FALSE(l);
  EXPECT_EQ(l.token().gen, 0u);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
}

TEST(Lease, SecondReleaseThroughACopiedTokenThrowsEalready) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease first = sem.acquire();
  lease second(sem.native_handle(), first.token());  // a second owner: a bug
  first.release();
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  try {
    second.release();
    FAIL() << "second release did not throw";
  } catch (const std::system_error &e) {
    EXPECT_EQ(e.code(), std::errc::connection_already_in_progress);
    EXPECT_EQ(e.code().value(), EALREADY);
    EXPECT_EQ(&e.code().category(), &shmsem::category());
    EXPECT_EQ(e.code().message(), shmsem_strerror(-EALREADY));
    EXPECT_NE(std::string(e.what()).find(shmsem_strerror(-EALREADY)),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(second) << "a refused token is dropped";
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Lease, ReleaseIntoAnErrorCodeDoesNotThrow) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease l = sem.acquire();
  const shmsem_lease_t token = l.token();
  std::error_code ec = std::make_error_code(std::errc::io_error);
  l.release(ec);
  EXPECT_FALSE(ec) << "success clears the code";
  lease stale(sem.native_handle(), token);
  stale.release(ec);
  EXPECT_EQ(ec, std::errc::connection_already_in_progress);
  EXPECT_EQ(ec.message(), "lease already released");
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
}

TEST(Lease, ReleaseOfAnEmptyLeaseIsEinval) {
  lease l;
  EXPECT_FALSE(l);
  EXPECT_EQ(thrown_code([&] { l.release(); }), std::errc::invalid_argument);
}

TEST(Lease, DestructorSwallowsARefusedRelease) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease l = sem.acquire();
  {
    lease stale(sem.native_handle(), l.token());
    l.release();
  }  // stale's release fails with EALREADY: nothing to report, nothing thrown
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Lease, DetachKeepsThePermitHeldUntilTheTokenIsReleased) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  shmsem_lease_t token{};
  {
    lease l = sem.acquire();
    token = l.detach();
    EXPECT_FALSE(l);
  }
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  lease adopted(sem.native_handle(), token);
  adopted.release();
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
}

// ---- semaphore -------------------------------------------------------------

TEST(Semaphore, TryAcquireIsNulloptWhenNoPermitIsFree) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  std::optional<lease> a = sem.try_acquire();
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(*a);
  EXPECT_FALSE(sem.try_acquire().has_value());
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  a.reset();
  EXPECT_TRUE(sem.try_acquire().has_value());
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
}

TEST(Semaphore, CreateOpenAndUnlinkByName) {
  const std::string name = unique_name("cxx");
  shmsem_config cfg{};
  cfg.permits = 3;
  {
    auto sem = semaphore::create(name, cfg, SHMSEM_EXCL);
    EXPECT_EQ(
        thrown_code([&] { (void)semaphore::create(name, cfg, SHMSEM_EXCL); }),
        std::errc::file_exists);
    auto again = semaphore::open(name);
    lease l = again.acquire();
    EXPECT_EQ(sem.stat().held, 1u);
    EXPECT_EQ(sem.stat().permits, 3u);
    semaphore::unlink(name.c_str());
  }
  EXPECT_EQ(thrown_code([&] { (void)semaphore::open(name); }),
            std::errc::no_such_file_or_directory);
  std::error_code ec;
  semaphore::unlink(name.c_str(), ec);
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
}

TEST(Semaphore, MoveKeepsItsLeasesValidAndEmptiesTheSource) {
  Segment seg(2);
  auto a = semaphore::open(seg.name());
  shmsem_t *h = a.native_handle();
  lease l = a.acquire();
  semaphore b(std::move(a));
  // The moved-from state is the point:
  // NOLINTBEGIN(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
  EXPECT_FALSE(a);
  EXPECT_EQ(a.native_handle(), nullptr);
  // NOLINTEND(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
  EXPECT_EQ(b.native_handle(), h);
  l.release();  // through the same handle, now owned by b
  EXPECT_COUNTS(seg.get(), 2, 0, 0, 0);
  semaphore c;
  c = std::move(b);
  EXPECT_EQ(c.native_handle(), h);
  EXPECT_EQ(c.stat().permits, 2u);
}

TEST(Semaphore, EmptySemaphoreThrowsEinval) {
  semaphore s;
  EXPECT_FALSE(s);
  EXPECT_EQ(thrown_code([&] { (void)s.acquire(); }),
            std::errc::invalid_argument);
  EXPECT_EQ(thrown_code([&] { (void)s.try_acquire(); }),
            std::errc::invalid_argument);
  EXPECT_EQ(thrown_code([&] { (void)s.stat(); }), std::errc::invalid_argument);
}

TEST(Semaphore, ShutdownMakesAcquiresThrowEshutdown) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire();
  // A queued waiter is failed by the shutdown, and throws.
  std::error_code queued;
  std::jthread waiter(
      [&] { queued = thrown_code([&] { (void)sem.acquire(); }); });
  ASSERT_TRUE(waiting_is(seg.get(), 1));
  EXPECT_EQ(sem.shutdown(), 1);
  waiter.join();
  const std::error_condition shut(ESHUTDOWN, std::generic_category());
  EXPECT_EQ(queued, shut);
  EXPECT_EQ(queued.message(), "semaphore is closed");
  // New acquires of every kind throw too (no nullopt: closed is an error).
  EXPECT_EQ(thrown_code([&] { (void)sem.acquire(); }), shut);
  EXPECT_EQ(thrown_code([&] { (void)sem.try_acquire(); }), shut);
  EXPECT_EQ(thrown_code([&] { (void)sem.acquire_for(milliseconds(1)); }), shut);
  std::stop_source src;
  EXPECT_EQ(thrown_code([&] { (void)sem.acquire(src.get_token()); }), shut);
  EXPECT_EQ(sem.shutdown(), 0) << "idempotent";
  // A held lease still goes back.
  held.release();
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_EQ(sem.stat().closed, 1u);
  EXPECT_NO_THROW(sem.check());
}

TEST(Semaphore, ReadOnlyHandleThrowsEbadfButStats) {
  Segment seg(1);
  auto ro = semaphore::open(seg.name(), SHMSEM_RDONLY);
  EXPECT_EQ(thrown_code([&] { (void)ro.acquire(); }),
            std::errc::bad_file_descriptor);
  EXPECT_EQ(thrown_code([&] { (void)ro.recover(); }),
            std::errc::bad_file_descriptor);
  EXPECT_EQ(ro.stat().permits, 1u);
  EXPECT_NO_THROW(ro.check());
}

TEST(Semaphore, RecoverReclaimsNothingWhileEveryoneLives) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease l = sem.acquire();
  EXPECT_EQ(sem.recover(), 0);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
}

// ---- std::stop_token -------------------------------------------------------

TEST(StopToken, StopDuringAQueuedAcquireReturnsNullopt) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire();  // 0 free permits: the waiter must queue
  bool got = true;
  std::jthread waiter(
      [&](const std::stop_token &st) { got = sem.acquire(st).has_value(); });
  ASSERT_TRUE(waiting_is(seg.get(), 1));
  waiter.request_stop();
  waiter.join();
  EXPECT_FALSE(got);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  EXPECT_EQ(sem.stat().cancellations, 1u);
  held.release();
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);  // the cancelled waiter owns nothing
  EXPECT_INVARIANTS(seg.get());
}

TEST(StopToken, JthreadDestructorCancelsTheQueuedAcquire) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire();
  bool got = true;
  {
    std::jthread waiter(
        [&](const std::stop_token &st) { got = sem.acquire(st).has_value(); });
    ASSERT_TRUE(waiting_is(seg.get(), 1));
  }  // ~jthread: request_stop(), join()
  EXPECT_FALSE(got);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
}

TEST(StopToken, StopRequestedBeforeTheCallReturnsNulloptEvenWithAFreePermit) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  std::stop_source src;
  src.request_stop();
  EXPECT_FALSE(sem.acquire(src.get_token()).has_value());
  EXPECT_FALSE(sem.acquire_for(hours(1), src.get_token()).has_value());
  EXPECT_FALSE(
      sem.acquire_until(steady_clock::now() + hours(1), src.get_token())
          .has_value());
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_EQ(sem.stat().acquisitions, 0u);
}

TEST(StopToken, FreePermitIsGrantedWhenNoStopIsRequested) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  std::stop_source src;
  {
    std::optional<lease> l = sem.acquire(src.get_token());
    ASSERT_TRUE(l.has_value());
    EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
    src.request_stop();  // after the grant: the lease stays good
    EXPECT_TRUE(*l);
  }
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  // A token with no stop state cannot be stopped: the plain acquire path.
  EXPECT_TRUE(sem.acquire(std::stop_token{}).has_value());
}

TEST(StopToken, GrantWhileQueuedWinsOverALaterStop) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire();
  std::optional<lease> got;
  std::jthread waiter(
      [&](const std::stop_token &st) { got = sem.acquire(st); });
  ASSERT_TRUE(waiting_is(seg.get(), 1));
  held.release();               // handed to the waiter
  ASSERT_TRUE(wait_until([&] {  // the waiter has turned its grant into a lease
    const Counts c = counts(seg.get());
    return c.waiting == 0 && c.reserved == 0 && c.held == 1;
  }));
  waiter.request_stop();
  waiter.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(*got);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
  got.reset();
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
}

TEST(StopToken, AcquireUntilWithAStopTokenStillTimesOut) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire();
  std::stop_source src;
  const auto deadline = steady_clock::now() + milliseconds(20);
  EXPECT_FALSE(sem.acquire_until(deadline, src.get_token()).has_value());
  EXPECT_GE(steady_clock::now(), deadline);
  EXPECT_EQ(sem.stat().timeouts, 1u);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
}

// ---- std::chrono -----------------------------------------------------------

TEST(Chrono, AcquireForReturnsNulloptNotBeforeTheDuration) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire();
  const auto start = steady_clock::now();
  EXPECT_FALSE(sem.acquire_for(milliseconds(30)).has_value());
  EXPECT_GE(steady_clock::now() - start, milliseconds(30));
  EXPECT_EQ(sem.stat().timeouts, 1u);
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
}

TEST(Chrono, AcquireUntilReturnsNulloptNotBeforeTheDeadline) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire();
  // A coarse time point type converts exactly (a deadline never earlier).
  const auto deadline = std::chrono::time_point_cast<std::chrono::microseconds>(
                            steady_clock::now()) +
                        milliseconds(25);
  EXPECT_FALSE(sem.acquire_until(deadline).has_value());
  EXPECT_GE(steady_clock::now(), deadline);
}

TEST(Chrono, AcquireForGrantsAFreePermit) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  std::optional<lease> l = sem.acquire_for(seconds(1));
  ASSERT_TRUE(l.has_value());
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
}

TEST(Chrono, PastDeadlinesAndNonPositiveDurationsOnlyTry) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  // Free permit: taken. Before the clock's epoch is "now" too.
  EXPECT_TRUE(sem.acquire_until(steady_clock::time_point{}).has_value());
  EXPECT_TRUE(
      sem.acquire_until(steady_clock::time_point{} - hours(1)).has_value());
  EXPECT_TRUE(sem.acquire_for(seconds(0)).has_value());
  EXPECT_TRUE(sem.acquire_for(seconds(-1)).has_value());
  EXPECT_TRUE(sem.acquire_for(std::chrono::hours::min()).has_value());
  // None free: nullopt at once (-ETIMEDOUT, not -EINVAL for tv_sec < 0).
  lease held = sem.acquire();
  EXPECT_FALSE(
      sem.acquire_until(steady_clock::time_point{} - hours(1)).has_value());
  EXPECT_FALSE(sem.acquire_for(seconds(-1)).has_value());
  EXPECT_FALSE(
      sem.acquire_for(std::chrono::duration<double>(-INFINITY)).has_value());
  EXPECT_COUNTS(seg.get(), 0, 1, 0, 0);
}

// Durations and time points past 64-bit nanoseconds wait forever instead of
// overflowing into the past: the queued waiter gets the permit when it is
// released.
TEST(Chrono, OverflowingDurationsSaturateToWaitingForever) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire();
  std::optional<lease> a, b, c;
  std::jthread t1([&] { a = sem.acquire_for(std::chrono::hours::max()); });
  ASSERT_TRUE(waiting_is(seg.get(), 1));
  std::jthread t2(
      [&] { b = sem.acquire_for(std::chrono::duration<double>(1e300)); });
  ASSERT_TRUE(waiting_is(seg.get(), 2));
  std::jthread t3([&] {
    c = sem.acquire_until(
        steady_clock::time_point(steady_clock::duration::max()));
  });
  ASSERT_TRUE(waiting_is(seg.get(), 3));
  held.release();  // FIFO: t1, then t2, then t3
  t1.join();
  ASSERT_TRUE(a.has_value());
  a.reset();
  t2.join();
  ASSERT_TRUE(b.has_value());
  b.reset();
  t3.join();
  ASSERT_TRUE(c.has_value());
  c.reset();
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
  EXPECT_EQ(sem.stat().timeouts, 0u);
}

// acquire_for(rel) and acquire_for(n, rel) hand the duration to
// shmsem_acquire_for(_n), which reads the library's CLOCK_MONOTONIC once:
// with the tests' manual clock installed, the wait ends when that clock
// has moved by `rel`, whatever steady_clock says.
TEST(Chrono, AcquireForTimesOutOnTheLibrarysClock) {
  Segment seg(2);
  auto sem = semaphore::open(seg.name());
  std::optional<lease> held = sem.acquire(2);
  ManualClock clock;
  const auto times_out_after_advancing = [&](auto acquire_for) {
    std::atomic<bool> done{false};
    std::optional<lease> got;
    std::jthread waiter([&] {
      got = acquire_for();
      done = true;
    });
    if (!waiting_is(seg.get(), 1)) return false;
    clock.advance(10'000'000'000ull);  // the 10 s the waiter asked for
    const bool ended = wait_until([&] { return done.load(); }, seconds(10));
    if (!ended) held.reset();  // a deadline on another clock: let the waiter go
    waiter.join();
    return ended && !got.has_value();
  };
  EXPECT_TRUE(
      times_out_after_advancing([&] { return sem.acquire_for(seconds(10)); }));
  ASSERT_TRUE(held.has_value() && *held);
  EXPECT_TRUE(times_out_after_advancing(
      [&] { return sem.acquire_for(2, seconds(10)); }));
  EXPECT_EQ(sem.stat().timeouts, 2u);
}

TEST(Chrono, OtherClocksConvertOnceToADuration) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire();
  const auto start = steady_clock::now();
  EXPECT_FALSE(
      sem.acquire_until(std::chrono::system_clock::now() + milliseconds(20))
          .has_value());
  EXPECT_GE(steady_clock::now() - start, milliseconds(20));
}

TEST(Chrono, ConversionRoundsUpAndSaturates) {
  using cxx_internal::saturating_ceil_ns;
  using std::chrono::duration;
  using std::chrono::nanoseconds;
  EXPECT_EQ(saturating_ceil_ns(std::chrono::microseconds(7)),
            nanoseconds(7000));
  EXPECT_EQ(saturating_ceil_ns(std::chrono::seconds(-3)),
            nanoseconds(-3'000'000'000));
  EXPECT_EQ(saturating_ceil_ns(duration<long long, std::pico>(1001)),
            nanoseconds(2));
  EXPECT_EQ(saturating_ceil_ns(duration<long long, std::pico>(-1001)),
            nanoseconds(-1));
  EXPECT_EQ(saturating_ceil_ns(duration<long long, std::ratio<1, 3>>(1)),
            nanoseconds(333'333'334));
  EXPECT_EQ(saturating_ceil_ns(duration<double, std::milli>(1.0000005)),
            nanoseconds(1'000'001));
  EXPECT_EQ(saturating_ceil_ns(std::chrono::hours::max()), nanoseconds::max());
  EXPECT_EQ(saturating_ceil_ns(std::chrono::hours::min()), nanoseconds::min());
  EXPECT_EQ(saturating_ceil_ns(duration<unsigned long long>(~0ull)),
            nanoseconds::max());
  EXPECT_EQ(saturating_ceil_ns(duration<double>(std::nan(""))),
            nanoseconds::max());
  EXPECT_EQ(saturating_ceil_ns(duration<double>(-INFINITY)),
            nanoseconds::min());
  EXPECT_EQ(saturating_ceil_ns(nanoseconds::max()), nanoseconds::max());
}

// ---- weighted leases -------------------------------------------------------

TEST(Weighted, AcquireTakesNPermitsAsOneLeaseAndOneReleaseReturnsAllN) {
  Segment seg(4);
  auto sem = semaphore::open(seg.name());
  {
    lease l = sem.acquire(3);
    EXPECT_TRUE(l);
    EXPECT_EQ(l.weight(), 3u);
    EXPECT_COUNTS(seg.get(), 1, 3, 0, 0);
    EXPECT_INVARIANTS(seg.get());
  }
  EXPECT_COUNTS(seg.get(), 4, 0, 0, 0);
  lease all = sem.acquire(4u);
  EXPECT_COUNTS(seg.get(), 0, 4, 0, 0);
  all.release();
  EXPECT_FALSE(all);
  EXPECT_EQ(all.weight(), 0u);
  EXPECT_COUNTS(seg.get(), 4, 0, 0, 0);
  EXPECT_EQ(sem.stat().acquisitions, 2u) << "a lease of n is one acquisition";
  EXPECT_INVARIANTS(seg.get());
}

TEST(Weighted, WeightFollowsTheLeaseAndIsZeroWhenEmpty) {
  Segment seg(4);
  auto sem = semaphore::open(seg.name());
  EXPECT_EQ(lease().weight(), 0u);
  lease one = sem.acquire();
  EXPECT_EQ(one.weight(), 1u) << "the acquires without a count";
  lease two = sem.acquire(2);
  lease moved(std::move(two));
  EXPECT_EQ(moved.weight(), 2u);
  // The moved-from state is the point (see expect_empty).
  // cppcheck-suppress accessMoved
  EXPECT_EQ(
      two.weight(),
      0u);  // NOLINT(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
  one = std::move(moved);  // one's permit goes back, the 2 move in
  EXPECT_EQ(one.weight(), 2u);
  EXPECT_COUNTS(seg.get(), 2, 2, 0, 0);
  // The token does not carry the weight: an adopter states it, and the
  // release returns what the token holds.
  const std::uint32_t w = one.weight();
  const shmsem_lease_t token = one.detach();
  EXPECT_EQ(one.weight(), 0u);
  EXPECT_COUNTS(seg.get(), 2, 2, 0, 0);
  lease adopted(sem.native_handle(), token, w);
  EXPECT_EQ(adopted.weight(), 2u);
  adopted.release();
  EXPECT_COUNTS(seg.get(), 4, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Weighted, TryAcquireTakesNOnlyWhenNAreFree) {
  Segment seg(4);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire(2);
  EXPECT_FALSE(sem.try_acquire(3).has_value()) << "2 free, 3 asked";
  EXPECT_COUNTS(seg.get(), 2, 2, 0, 0);
  std::optional<lease> two = sem.try_acquire(2);
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(two->weight(), 2u);
  EXPECT_COUNTS(seg.get(), 0, 4, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Weighted, TryAcquireAboveMaxPermitsThrowsEinvalAndTakesNothing) {
  Segment seg(4);
  auto sem = semaphore::open(seg.name());
  // Never grantable: an error, not "no permits now" (nullopt).
  EXPECT_EQ(thrown_code([&] { (void)sem.try_acquire(5); }),
            std::errc::invalid_argument);
  EXPECT_EQ(thrown_code([&] { (void)sem.try_acquire(0); }),
            std::errc::invalid_argument);
  EXPECT_EQ(thrown_code([&] { (void)sem.acquire(5); }),
            std::errc::invalid_argument);
  EXPECT_EQ(thrown_code([&] { (void)sem.acquire_for(5, hours(1)); }),
            std::errc::invalid_argument);
  EXPECT_COUNTS(seg.get(), 4, 0, 0, 0);
  EXPECT_EQ(sem.stat().acquisitions, 0u);
}

// 2^32 + 1 as uint32_t would be 1, and -1 would be 2^32 - 1: both must be
// refused, not truncated into a count the C API accepts.
TEST(Weighted, CountsOutsideUint32AreEinvalNotTruncated) {
  Segment seg(4);
  auto sem = semaphore::open(seg.name());
  const std::uint64_t wraps_to_one = (std::uint64_t{1} << 32) + 1;
  EXPECT_EQ(thrown_code([&] { (void)sem.acquire(wraps_to_one); }),
            std::errc::invalid_argument);
  EXPECT_EQ(thrown_code([&] { (void)sem.try_acquire(wraps_to_one); }),
            std::errc::invalid_argument);
  EXPECT_EQ(thrown_code([&] { (void)sem.acquire(-1); }),
            std::errc::invalid_argument);
  EXPECT_EQ(
      thrown_code([&] { (void)sem.acquire_until(-1, steady_clock::now()); }),
      std::errc::invalid_argument);
  // 0 is refused before a stop requested earlier could hide it.
  std::stop_source src;
  src.request_stop();
  EXPECT_EQ(thrown_code([&] { (void)sem.acquire(0, src.get_token()); }),
            std::errc::invalid_argument);
  EXPECT_COUNTS(seg.get(), 4, 0, 0, 0);
}

TEST(Weighted, AcquireForTimesOutWhileThePermitsAreHeld) {
  Segment seg(4);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire(3);  // 1 free: a wait for 2 cannot be granted
  const auto start = steady_clock::now();
  EXPECT_FALSE(sem.acquire_for(2, milliseconds(20)).has_value());
  EXPECT_GE(steady_clock::now() - start, milliseconds(20));
  EXPECT_FALSE(
      sem.acquire_until(2, steady_clock::now() + milliseconds(5)).has_value());
  EXPECT_FALSE(
      sem.acquire_until(2, std::chrono::system_clock::now() + milliseconds(5))
          .has_value());
  EXPECT_EQ(sem.stat().timeouts, 3u);
  // What the head had gathered meanwhile went back: nothing reserved.
  EXPECT_COUNTS(seg.get(), 1, 3, 0, 0);
  EXPECT_INVARIANTS(seg.get());
  // With the permits back, the same wait is granted at once.
  held.release();
  std::optional<lease> l = sem.acquire_for(2, milliseconds(20));
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->weight(), 2u);
}

TEST(Weighted, StopCancelsAQueuedWeightedAcquireAndItsReservationGoesBack) {
  Segment seg(4);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire(3);
  bool got = true;
  std::jthread waiter(
      [&](const std::stop_token &st) { got = sem.acquire(2, st).has_value(); });
  ASSERT_TRUE(waiting_is(seg.get(), 1));
  // The head gathers its own: the free permit is reserved for it.
  EXPECT_COUNTS(seg.get(), 0, 3, 1, 1);
  waiter.request_stop();
  waiter.join();
  EXPECT_FALSE(got);
  EXPECT_EQ(sem.stat().cancellations, 1u);
  EXPECT_COUNTS(seg.get(), 1, 3, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Weighted, OneReleaseGrantsAQueuedWeightedWaiterAllItNeeds) {
  Segment seg(4);
  auto sem = semaphore::open(seg.name());
  lease held = sem.acquire(4);
  std::optional<lease> got;
  std::jthread waiter([&](const std::stop_token &st) {
    got = sem.acquire_for(3, hours(1), st);
  });
  ASSERT_TRUE(waiting_is(seg.get(), 1));
  held.release();  // 4 back at once: 3 to the waiter, 1 to the pool
  waiter.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->weight(), 3u);
  EXPECT_COUNTS(seg.get(), 1, 3, 0, 0);
  got.reset();
  EXPECT_COUNTS(seg.get(), 4, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

// ---- capacity at run time --------------------------------------------------

TEST(Capacity, SetPermitsGrowAndShrinkShowInStats) {
  const ScopedName n;
  auto sem =
      semaphore::create(n.name, {.permits = 2, .max_permits = 8}, SHMSEM_EXCL);
  struct shmsem_stat st = sem.stat();
  EXPECT_EQ(st.permits, 2u);
  EXPECT_EQ(st.max_permits, 8u);
  EXPECT_EQ(st.available, 2u);
  sem.set_permits(6);
  st = sem.stat();
  EXPECT_EQ(st.permits, 6u);
  EXPECT_EQ(st.available, 6u);
  lease five = sem.acquire(5);
  // Shrink below what is held: the free permit goes at once, two more
  // retire when the lease comes back; nothing held is revoked.
  sem.set_permits(3);
  st = sem.stat();
  EXPECT_EQ(st.permits, 3u);
  EXPECT_EQ(st.held, 5u);
  EXPECT_EQ(st.available, 0u);
  EXPECT_EQ(st.retiring, 2u);
  EXPECT_NO_THROW(sem.check());
  five.release();
  st = sem.stat();
  EXPECT_EQ(st.permits, 3u);
  EXPECT_EQ(st.held, 0u);
  EXPECT_EQ(st.available, 3u);
  EXPECT_EQ(st.retiring, 0u);
  sem.set_permits(0);  // drains
  EXPECT_FALSE(sem.try_acquire().has_value());
  EXPECT_EQ(sem.stat().permits, 0u);
  sem.set_permits(8);
  EXPECT_EQ(sem.stat().available, 8u);
  EXPECT_NO_THROW(sem.check());
}

TEST(Capacity, SetPermitsAboveMaxOrOutsideUint32IsEinvalAndChangesNothing) {
  const ScopedName n;
  auto sem =
      semaphore::create(n.name, {.permits = 2, .max_permits = 4}, SHMSEM_EXCL);
  EXPECT_EQ(thrown_code([&] { sem.set_permits(5); }),
            std::errc::invalid_argument);
  EXPECT_EQ(thrown_code([&] { sem.set_permits(-1); }),
            std::errc::invalid_argument);
  // 2^32 as uint32_t would be 0: a drain nobody asked for.
  EXPECT_EQ(thrown_code([&] { sem.set_permits(std::uint64_t{1} << 32); }),
            std::errc::invalid_argument);
  EXPECT_EQ(sem.stat().permits, 2u);
  std::error_code ec = std::make_error_code(std::errc::io_error);
  sem.set_permits(4, ec);
  EXPECT_FALSE(ec) << "success clears the code";
  EXPECT_EQ(sem.stat().permits, 4u);
  sem.set_permits(5u, ec);
  EXPECT_EQ(ec, std::errc::invalid_argument);
  EXPECT_EQ(&ec.category(), &shmsem::category());
  EXPECT_EQ(sem.stat().permits, 4u);
  auto ro = semaphore::open(n.name, SHMSEM_RDONLY);
  EXPECT_EQ(thrown_code([&] { ro.set_permits(1); }),
            std::errc::bad_file_descriptor);
  semaphore empty;
  EXPECT_EQ(thrown_code([&] { empty.set_permits(1); }),
            std::errc::invalid_argument);
}

TEST(Capacity, GrowHandsTheNewPermitsToAQueuedWeightedWaiter) {
  const ScopedName n;
  auto sem =
      semaphore::create(n.name, {.permits = 1, .max_permits = 4}, SHMSEM_EXCL);
  std::optional<lease> got;
  // 3 is above the capacity now but within max_permits: it waits.
  std::jthread waiter(
      [&](const std::stop_token &st) { got = sem.acquire(3, st); });
  ASSERT_TRUE(waiting_is(sem.native_handle(), 1));
  sem.set_permits(3);
  waiter.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->weight(), 3u);
  const struct shmsem_stat st = sem.stat();
  EXPECT_EQ(st.held, 3u);
  EXPECT_EQ(st.available, 0u);
}

// ---- shmsem::options -------------------------------------------------------

TEST(Options, RateLimitedSemaphoreReportsItsRateAndBurstInStats) {
  using namespace std::chrono_literals;
  const ScopedName n;
  auto sem = semaphore::create(
      n.name, {.permits = 8, .rate = 100, .per = 1s, .burst = 20}, SHMSEM_EXCL);
  const struct shmsem_stat st = sem.stat();
  EXPECT_EQ(st.permits, 8u);
  EXPECT_EQ(st.max_permits, 8u);
  EXPECT_EQ(st.rate, 100u);
  EXPECT_EQ(st.burst, 20u);
  EXPECT_EQ(st.rate_period_ns, 1'000'000'000u);
  EXPECT_NO_THROW(sem.check());
}

// A slow rate (2 an hour) so that no token comes back during the test: the
// bucket's count is exact. Each acquire takes one token, whatever its
// weight; with the bucket empty, try_acquire is nullopt though permits are
// free.
TEST(Options, EachAcquireTakesOneTokenWhateverItsWeight) {
  const ScopedName n;
  auto sem = semaphore::create(
      n.name, {.permits = 8, .rate = 2, .per = hours(1), .burst = 3},
      SHMSEM_EXCL);
  EXPECT_EQ(sem.stat().rate_tokens, 3u) << "a new bucket is full";
  std::optional<lease> a = sem.try_acquire(4);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(sem.stat().rate_tokens, 2u);
  lease b = sem.acquire();
  std::optional<lease> c = sem.acquire_for(2, milliseconds(1));
  ASSERT_TRUE(c.has_value());
  const struct shmsem_stat st = sem.stat();
  EXPECT_EQ(st.rate_tokens, 0u);
  EXPECT_EQ(st.held, 7u);
  EXPECT_EQ(st.rate_period_ns, 3'600'000'000'000u);
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
      steady_clock::now().time_since_epoch());
  EXPECT_GT(st.rate_next_ns, static_cast<std::uint64_t>(now_ns.count()))
      << "the next token is half an hour away";
  EXPECT_FALSE(sem.try_acquire().has_value())
      << "a permit is free, a token is not";
  EXPECT_FALSE(sem.acquire_for(milliseconds(5)).has_value());
  EXPECT_NO_THROW(sem.check());
}

TEST(Options, ZeroFieldsMeanTheCDefaults) {
  const ScopedName a, b;
  // A rate alone: no concurrency limit (SHMSEM_DEFAULT_RATE_ONLY_PERMITS
  // leases), burst 1, one second.
  auto rate_only = semaphore::create(a.name, {.rate = 5}, SHMSEM_EXCL);
  struct shmsem_stat st = rate_only.stat();
  EXPECT_EQ(st.permits, SHMSEM_DEFAULT_RATE_ONLY_PERMITS);
  EXPECT_EQ(st.max_permits, SHMSEM_DEFAULT_RATE_ONLY_PERMITS);
  EXPECT_EQ(st.rate, 5u);
  EXPECT_EQ(st.burst, 1u);
  EXPECT_EQ(st.rate_period_ns, 1'000'000'000u);
  // No rate: a plain semaphore, its rate fields all 0.
  auto plain = semaphore::create(b.name, {.permits = 3}, SHMSEM_EXCL);
  st = plain.stat();
  EXPECT_EQ(st.permits, 3u);
  EXPECT_EQ(st.max_permits, 3u);
  EXPECT_EQ(st.max_waiters, SHMSEM_DEFAULT_MAX_WAITERS);
  EXPECT_EQ(st.rate, 0u);
  EXPECT_EQ(st.burst, 0u);
  EXPECT_EQ(st.rate_period_ns, 0u);
}

TEST(Options, InvalidCombinationsThrowEinval) {
  using std::chrono::microseconds;
  using std::chrono::nanoseconds;
  const ScopedName n;
  const auto code_of = [&](const options &o) {
    return thrown_code(
        [&] { (void)semaphore::create(n.name, o, SHMSEM_EXCL); });
  };
  EXPECT_EQ(code_of({.permits = 1, .rate = 1, .per = nanoseconds(-1)}),
            std::errc::invalid_argument);
  EXPECT_EQ(code_of({.permits = 1, .per = seconds(1)}),
            std::errc::invalid_argument)
      << "a period without a rate";
  EXPECT_EQ(code_of({.permits = 1, .burst = 2}), std::errc::invalid_argument)
      << "a burst without a rate";
  EXPECT_EQ(code_of({}), std::errc::invalid_argument)
      << "neither permits nor a rate";
  EXPECT_EQ(code_of({.permits = 4, .max_permits = 2}),
            std::errc::invalid_argument);
  EXPECT_EQ(code_of({.permits = 1, .rate = 2000, .per = microseconds(1)}),
            std::errc::invalid_argument)
      << "an interval below 1 ns";
  std::error_code ec;
  semaphore::unlink(n.name.c_str(), ec);
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory) << "nothing was created";
}

// create(name, {.permits = 3}) is options (a braced list cannot bind the
// shmsem_config template), and a shmsem_config object still binds as before;
// both describe the same semaphore, so creating without SHMSEM_EXCL opens it.
TEST(Options, BracedListsAreOptionsAndConfigObjectsStillBind) {
  const ScopedName n;
  auto first = semaphore::create(
      n.name, {.permits = 3, .rate = 10, .per = seconds(1)}, SHMSEM_EXCL);
  shmsem_config cfg{};
  cfg.permits = 3;
  cfg.rate = 10;
  cfg.rate_period_ns = 1'000'000'000;
  auto second = semaphore::create(n.name, cfg);
  lease l = second.acquire();
  EXPECT_EQ(first.stat().held, 1u);
  // A different rate is another semaphore under the same name: EEXIST.
  EXPECT_EQ(thrown_code([&] {
              (void)semaphore::create(n.name, {.permits = 3, .rate = 11});
            }),
            std::errc::file_exists);
  EXPECT_EQ(
      thrown_code([&] { (void)semaphore::create(n.name, {.permits = 3}); }),
      std::errc::file_exists);
}

// The configuration compared is the one created: a capacity changed since
// by set_permits() does not make the same options "another semaphore".
TEST(Options, CreateStillOpensItAfterSetPermits) {
  const ScopedName n;
  auto first =
      semaphore::create(n.name, {.permits = 2, .max_permits = 6}, SHMSEM_EXCL);
  first.set_permits(5);
  auto second = semaphore::create(n.name, {.permits = 2, .max_permits = 6});
  EXPECT_EQ(second.stat().permits, 5u);
  EXPECT_EQ(thrown_code([&] {
              (void)semaphore::create(n.name, {.permits = 5, .max_permits = 6});
            }),
            std::errc::file_exists);
}

// ---- lease::resource() ----------------------------------------------------

// The index a lease names (shmsem_lease_resource) is a promise: N leases
// held at once name N distinct indices below max_permits, whichever acquire
// made them, and a weighted lease names one no other live lease has.
TEST(Resource, LeasesHeldAtOnceNameDistinctIndicesBelowMaxPermits) {
  const ScopedName n;
  auto sem =
      semaphore::create(n.name, {.permits = 4, .max_permits = 8}, SHMSEM_EXCL);
  std::vector<lease> held;
  held.push_back(sem.acquire());
  held.push_back(*sem.try_acquire());
  held.push_back(*sem.acquire_for(seconds(1)));
  Lease cxx17;  // the C++17 tier names it too
  ASSERT_EQ(shmsem::acquire(sem.native_handle(), &cxx17), 0);
  sem.set_permits(8);
  for (int i = 0; i < 4; i++) held.push_back(sem.acquire());
  std::set<std::uint32_t> names{cxx17.resource()};
  EXPECT_LT(cxx17.resource(), 8u);
  for (const lease &l : held) {
    EXPECT_LT(l.resource(), 8u);
    EXPECT_EQ(l.resource(), shmsem_lease_resource(&l.token()));
    names.insert(l.resource());
  }
  EXPECT_EQ(names.size(), 8u) << "8 leases held at once name 8 indices";

  held.erase(held.begin(), held.begin() + 3);  // three come back
  lease weighted = sem.acquire(3);
  EXPECT_LT(weighted.resource(), 8u);
  EXPECT_NE(weighted.resource(), cxx17.resource());
  for (const lease &l : held) EXPECT_NE(weighted.resource(), l.resource());
  // Stable for the life of the lease: a move keeps it.
  const std::uint32_t r = weighted.resource();
  lease moved = std::move(weighted);
  EXPECT_EQ(moved.resource(), r);
}

// ---- what() of an EINVAL: which argument and why --------------------------

// The what() of the std::system_error `f` throws, its code checked to be
// EINVAL ("" and a test failure if nothing is thrown).
template <typename F>
std::string einval_what(F &&f) {
  try {
    f();
  } catch (const std::system_error &e) {
    EXPECT_EQ(e.code(), std::errc::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no std::system_error was thrown";
  return {};
}

#define EXPECT_SAYS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST(EinvalMessage, WeightOutsideOneToMaxPermitsNamesTheWeightAndTheBound) {
  const ScopedName n;
  auto sem =
      semaphore::create(n.name, {.permits = 2, .max_permits = 4}, SHMSEM_EXCL);
  EXPECT_SAYS(einval_what([&] { (void)sem.acquire(9); }),
              "shmsem: acquire: weight 9 is outside 1..4 (1 to max_permits)");
  EXPECT_SAYS(einval_what([&] { (void)sem.acquire(0); }),
              "weight 0 is outside 1..4");
  EXPECT_SAYS(einval_what([&] { (void)sem.acquire(-1); }),
              "weight -1 is outside 1..4");
  EXPECT_SAYS(einval_what([&] { (void)sem.acquire(std::uint64_t{1} << 32); }),
              "weight 4294967296 is outside 1..4");
  EXPECT_SAYS(einval_what([&] { (void)sem.try_acquire(5); }),
              "shmsem: try_acquire: weight 5 is outside 1..4");
  EXPECT_SAYS(einval_what([&] { (void)sem.acquire_for(5, hours(1)); }),
              "shmsem: acquire_for: weight 5 is outside 1..4");
  EXPECT_SAYS(
      einval_what([&] { (void)sem.acquire_until(5, steady_clock::now()); }),
      "shmsem: acquire_until: weight 5 is outside 1..4");
  std::stop_source src;
  EXPECT_SAYS(einval_what([&] { (void)sem.acquire(5, src.get_token()); }),
              "weight 5 is outside 1..4");
  EXPECT_COUNTS(sem.native_handle(), 2, 0, 0, 0);
}

TEST(EinvalMessage, SecondReleaseOfOneLeaseSaysAlreadyReleased) {
  Segment seg(1);
  auto sem = semaphore::open(seg.name());
  lease l = sem.acquire();
  l.release();
  // EALREADY, as a second shmsem_release of one token (the README's
  // promise), with what() saying so.
  try {
    l.release();
    ADD_FAILURE() << "a second release did not throw";
  } catch (const std::system_error &e) {
    EXPECT_EQ(e.code().value(), EALREADY);
    EXPECT_NE(
        std::string(e.what()).find("shmsem: release: lease already released"),
        std::string::npos)
        << e.what();
  }
  std::error_code ec;
  l.release(ec);
  EXPECT_EQ(ec.value(), EALREADY);
  EXPECT_COUNTS(seg.get(), 1, 0, 0, 0);
}

TEST(EinvalMessage, ReleaseOfAnEmptyLeaseSaysWhyItIsEmpty) {
  Segment seg(2);
  auto sem = semaphore::open(seg.name());
  lease never;
  EXPECT_SAYS(einval_what([&] { never.release(); }), "never held a permit");
  lease a = sem.acquire();
  lease b = std::move(a);
  // The moved-from state is the point. NOLINTNEXTLINE(bugprone-use-after-move)
  EXPECT_SAYS(einval_what([&] { a.release(); }), "lease was moved from");
  const shmsem_lease_t token = b.detach();
  EXPECT_SAYS(einval_what([&] { b.release(); }), "lease was detached");
  lease adopted(sem.native_handle(), token);
  adopted.release();
  EXPECT_COUNTS(seg.get(), 2, 0, 0, 0);
}

TEST(EinvalMessage, SetPermitsAboveMaxNamesTheCapacityAndTheBound) {
  const ScopedName n;
  auto sem =
      semaphore::create(n.name, {.permits = 2, .max_permits = 4}, SHMSEM_EXCL);
  EXPECT_SAYS(
      einval_what([&] { sem.set_permits(9); }),
      "shmsem: set_permits: capacity 9 is outside 0..4 (0 to max_permits)");
  EXPECT_SAYS(einval_what([&] { sem.set_permits(-1); }),
              "capacity -1 is outside 0..4");
  EXPECT_EQ(sem.stat().permits, 2u);
}

TEST(EinvalMessage, EmptySemaphoreSaysItIsEmpty) {
  semaphore empty;
  const char *const why =
      "semaphore is empty (default-constructed or moved from)";
  EXPECT_SAYS(einval_what([&] { (void)empty.acquire(); }),
              std::string("shmsem: acquire: ") + why);
  EXPECT_SAYS(einval_what([&] { (void)empty.acquire(2); }), why);
  EXPECT_SAYS(einval_what([&] { (void)empty.try_acquire(); }), why);
  EXPECT_SAYS(einval_what([&] { (void)empty.acquire_for(seconds(1)); }), why);
  EXPECT_SAYS(
      einval_what([&] { (void)empty.acquire_until(steady_clock::now()); }),
      why);
  EXPECT_SAYS(einval_what([&] { empty.set_permits(1); }), why);
  EXPECT_SAYS(einval_what([&] { (void)empty.stat(); }),
              std::string("shmsem: stat: ") + why);
}

TEST(EinvalMessage, NegativePeriodIsNamed) {
  const ScopedName n;
  EXPECT_SAYS(
      einval_what([&] {
        (void)semaphore::create(
            n.name,
            {.permits = 1, .rate = 1, .per = std::chrono::nanoseconds(-1)});
      }),
      "shmsem: create: options.per is negative");
}

// policy, max_bypass and lease_ttl reach shmsem_config as the C API has
// them: the policy shows in the stats, and a lease TTL on a local name is
// the C API's EINVAL (a local lease has none), so it was passed on.
TEST(Options, PolicyBypassAndLeaseTtlReachTheConfig) {
  using std::chrono::milliseconds;
  using std::chrono::nanoseconds;
  const ScopedName n;
  {
    auto sem = semaphore::create(n.name,
                                 {.permits = 2,
                                  .policy = SHMSEM_POLICY_BOUNDED,
                                  .max_bypass = nanoseconds(2'000'000)},
                                 SHMSEM_EXCL);
    const struct shmsem_stat st = sem.stat();
    EXPECT_EQ(st.policy, SHMSEM_POLICY_BOUNDED);
    EXPECT_EQ(st.max_bypass_ns, 2'000'000u);
  }
  semaphore::unlink(n.name.c_str());
  const auto code_of = [&](const options &o) {
    return thrown_code(
        [&] { (void)semaphore::create(n.name, o, SHMSEM_EXCL); });
  };
  EXPECT_EQ(code_of({.permits = 1, .lease_ttl = milliseconds(500)}),
            std::errc::invalid_argument)
      << "a lease TTL on a local name";
  EXPECT_EQ(code_of({.permits = 1, .max_bypass = nanoseconds(1)}),
            std::errc::invalid_argument)
      << "a bypass bound under FIFO";
  EXPECT_SAYS(einval_what([&] {
                (void)semaphore::create(n.name,
                                        {.permits = 1,
                                         .policy = SHMSEM_POLICY_BOUNDED,
                                         .max_bypass = nanoseconds(-1)});
              }),
              "shmsem: create: options.max_bypass is negative");
  EXPECT_SAYS(einval_what([&] {
                (void)semaphore::create(
                    n.name, {.permits = 1, .lease_ttl = milliseconds(-1)});
              }),
              "shmsem: create: options.lease_ttl is outside");
}

// ---- shmsem::category() ----------------------------------------------------

TEST(ErrorCategory, MessagesAreTheSemaphoresOwnWords) {
  EXPECT_STREQ(shmsem::category().name(), "shmsem");
  for (int e : {ESHUTDOWN, EALREADY, EBUSY, ETIMEDOUT, ECANCELED, EINVAL}) {
    const std::error_code ec = to_error_code(-e);
    EXPECT_EQ(ec.value(), e);
    EXPECT_EQ(ec.message(), shmsem_strerror(-e)) << e;
  }
  EXPECT_EQ(to_error_code(-ESHUTDOWN).message(), "semaphore is closed");
  EXPECT_NE(to_error_code(-ESHUTDOWN).message(),
            std::error_code(ESHUTDOWN, std::generic_category()).message());
  EXPECT_FALSE(to_error_code(0));
}

TEST(ErrorCategory, CodesCompareEqualToTheirErrcConditions) {
  EXPECT_EQ(to_error_code(-ETIMEDOUT), std::errc::timed_out);
  EXPECT_EQ(to_error_code(-EALREADY),
            std::errc::connection_already_in_progress);
  EXPECT_EQ(to_error_code(-EBUSY), std::errc::device_or_resource_busy);
  EXPECT_EQ(to_error_code(-ECANCELED), std::errc::operation_canceled);
  EXPECT_EQ(to_error_code(-ESHUTDOWN),
            std::error_condition(ESHUTDOWN, std::generic_category()));
  EXPECT_NE(to_error_code(-ETIMEDOUT), std::errc::operation_canceled);
  EXPECT_EQ(shmsem::category().default_error_condition(EBUSY),
            std::error_condition(EBUSY, std::generic_category()));
  // As codes (value and category), ours differ from the generic ones.
  EXPECT_NE(to_error_code(-EBUSY),
            std::error_code(EBUSY, std::generic_category()));
}

}  // namespace
}  // namespace shmsem::test
