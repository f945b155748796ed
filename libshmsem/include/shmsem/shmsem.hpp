// shmsem:: — the C++ wrapper over <shmsem/shmsem.h>, header-only: every call
// goes to the C API, so the contract (FIFO order, what a lease is, crashes,
// fork, exec, who may call what) is the one stated in shmsem.h.
//
// Two tiers:
// - C++17 and later: shmsem::Lease, a move-only permit that releases itself,
//   and shmsem::acquire(shmsem_t *, Lease *, deadline, cancel, flags), which
//   return negative errno values like the C API.
// - C++20 (`__cplusplus >= 202002L`): shmsem::semaphore, which owns an open
//   handle, and shmsem::lease, which owns a permit; errors are
//   std::system_error / std::error_code in shmsem::category(), deadlines are
//   std::chrono::steady_clock, cancellation is std::stop_token.
//
// Migration: shmsem::lease and shmsem::semaphore replace shmsem::Lease and
// the free shmsem::acquire(), which stay (unchanged) for C++17 code.
//
//     shmsem::Lease l;                        auto sem = shmsem::semaphore::open("/pool");
//     if (int e = shmsem::acquire(s, &l))     shmsem::lease l = sem.acquire();  // throws
//       fail(e);                              // or: if (auto l = sem.acquire_for(2s)) ...
//     l.release();                            l.release();  // throws std::system_error
//
// Weighted leases, capacity and rate (C++20 tier): sem.acquire(4) takes 4
// permits as one lease (lease::weight() is 4, one release returns all 4),
// with the same try/for/until/stop_token forms as one permit, the count
// first as in Java's Semaphore; sem.set_permits(n) changes the capacity;
// shmsem::options creates a rate-limited semaphore:
//
//     using namespace std::chrono_literals;
//     auto api = shmsem::semaphore::create(
//         "/api", {.permits = 8, .rate = 100, .per = 1s, .burst = 20});
//     if (auto l = api.acquire_for(2, 50ms)) ...  // 2 of the 8, one token of the rate
//
// Errors (C++20 tier):
//
//   | C API result          | semaphore member                  | returns / throws        |
//   |-----------------------|-----------------------------------|-------------------------|
//   | -EAGAIN               | try_acquire(), try_acquire(n)     | std::nullopt            |
//   | -ETIMEDOUT            | acquire_for(), acquire_until()    | std::nullopt            |
//   | -ECANCELED            | any acquire taking a stop_token   | std::nullopt            |
//   | any other error       | every member                      | throws std::system_error|
//
// A count of permits (the `n` of a weighted acquire, set_permits' capacity)
// is any integer type but bool and the character types, checked here rather
// than converted: a value outside std::uint32_t (negative, or 2^32 + 1 from
// a size_t) throws std::system_error(EINVAL) as 0 and values above
// max_permits do, never wrapping to a valid smaller count.
//
// A std::error_code from this header holds the POSITIVE errno value in
// shmsem::category(). That category exists for its messages: message()
// speaks the semaphore's words through shmsem_strerror() ("semaphore is
// closed", "lease already released", "wait queue is full"), where
// std::generic_category() would say "Cannot send after transport endpoint
// shutdown" for ESHUTDOWN. Its default_error_condition() is the same value in
// std::generic_category(), so `ec == std::errc::timed_out` and the other
// std::errc comparisons hold as for any errno-based code. lease::release()
// throws too; lease::release(std::error_code &) is its noexcept twin, and a
// lease's destructor, having no channel, swallows the error.
//
// Time: a steady_clock time point is passed to the C API as the absolute
// CLOCK_MONOTONIC deadline it is (steady_clock reads CLOCK_MONOTONIC in
// libstdc++ and libc++ on Linux); a duration is added to steady_clock::now().
// Both round up to whole nanoseconds; a time before the clock's epoch or a
// non-positive duration means "try now"; one beyond 64-bit nanoseconds
// means "wait forever", never an overflow into the past.
//
// Threads: one semaphore object may be used by any number of threads at once
// (as the shmsem_t it owns), except for assignment to it and its destruction.
// A lease is a plain object: one thread at a time. A lease names the handle
// it came from (not the semaphore object): moving the semaphore keeps its
// leases valid; destroying it (shmsem_detach) while a lease of it is held
// is a bug (the lease's release would use a freed handle), so declare the
// semaphore before the leases it hands out.
#ifndef SHMSEM_SHMSEM_HPP
#define SHMSEM_SHMSEM_HPP

#include <shmsem/shmsem.h>

#include <utility>

namespace shmsem {

class Lease {
 public:
  Lease() = default;
  Lease(shmsem_t *s, shmsem_lease_t l) : s_(s), l_(l) {}
  Lease(Lease &&o) noexcept : s_(std::exchange(o.s_, nullptr)), l_(o.l_) {}
  Lease &operator=(Lease &&o) noexcept {
    if (this != &o) {
      release();
      s_ = std::exchange(o.s_, nullptr);
      l_ = o.l_;
    }
    return *this;
  }
  Lease(const Lease &) = delete;
  Lease &operator=(const Lease &) = delete;
  ~Lease() { release(); }

  // Returns the permit now (0 or a negative errno); later calls return 0.
  int release() {
    if (!s_) return 0;
    int r = shmsem_release(s_, &l_);
    s_ = nullptr;
    return r;
  }
  // Gives up ownership without releasing; returns the raw token.
  shmsem_lease_t detach() {
    s_ = nullptr;
    return l_;
  }
  explicit operator bool() const { return s_ != nullptr; }
  const shmsem_lease_t &token() const { return l_; }

 private:
  shmsem_t *s_ = nullptr;
  shmsem_lease_t l_{};
};

// shmsem_acquire_ex into a Lease. Returns 0 or a negative errno.
inline int acquire(shmsem_t *s, Lease *out, const timespec *deadline = nullptr,
                   shmsem_cancel_t *cancel = nullptr, unsigned flags = 0) {
  shmsem_lease_t l;
  int r = shmsem_acquire_ex(s, deadline, cancel, flags, &l);
  if (r == 0) *out = Lease(s, l);
  return r;
}

}  // namespace shmsem

#if __cplusplus >= 202002L

#include <cerrno>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <ctime>
#include <optional>
#include <ratio>
#include <stop_token>
#include <string>
#include <system_error>
#include <type_traits>

namespace shmsem {

// How semaphore::create() makes a semaphore: shmsem_config with the rate's
// period as a std::chrono duration. An aggregate, for designated
// initializers (in this order; any may be left out):
//
//     {.permits = 8}                                    // a plain semaphore of 8
//     {.permits = 4, .max_permits = 16}                 // 4 now, set_permits() up to 16
//     {.permits = 8, .rate = 100, .per = 1s, .burst = 20}
//     {.rate = 10, .per = 1min}                         // a rate only: no concurrency limit
//
// Every field means what its shmsem_config namesake means, zero included
// (0 is the C default). Opening an existing semaphore through create()
// compares as shmsem_create does: another `permits` (as created, not as
// set_permits() left it), `max_permits`, `rate`, `burst` or `per` (0s
// filled in with their defaults), or another nonzero `max_waiters`, is
// EEXIST; `mode` is not compared.
struct options {
  // The capacity N. 0 only with a rate: no concurrency limit then (up to
  // max_permits, by default SHMSEM_DEFAULT_RATE_ONLY_PERMITS leases out).
  std::uint32_t permits = 0;
  std::uint32_t max_waiters = 0;  // queue bound; 0: SHMSEM_DEFAULT_MAX_WAITERS
  std::uint32_t mode = 0;         // read/write bits within 0666; 0: 0600
  // The most set_permits() may raise the capacity to; 0: `permits`.
  std::uint32_t max_permits = 0;
  // Rate limit: at most `rate` acquisitions (whatever their weight) per
  // `per`, of which up to `burst` at once; `rate` 0: none, and then `per`
  // and `burst` must stay 0 (EINVAL). `per` 0 means one second and
  // `burst` 0 means 1, as in shmsem_config; a negative `per` is EINVAL, as
  // is a rate outside the bounds shmsem.h states beside SHMSEM_MAX_BURST
  // (an interval per / rate of 1 ns to one day, ...).
  std::uint32_t rate = 0;
  std::chrono::nanoseconds per{0};
  std::uint32_t burst = 0;
};

// The error category of this header: positive errno values, messages from
// shmsem_strerror(), conditions in std::generic_category() (see the banner).
// One object per program (an inline function's static); std::error_category
// compares by address, so codes made in two shared objects that each inline
// their own copy may differ as codes but still equal as std::errc conditions.
[[nodiscard]] inline const std::error_category &category() noexcept {
  class impl final : public std::error_category {
   public:
    const char *name() const noexcept override { return "shmsem"; }
    std::string message(int ev) const override {
      const char *m = shmsem_strerror(-ev);
      return m ? m : "unknown error";
    }
    std::error_condition default_error_condition(int ev) const noexcept override {
      return {ev, std::generic_category()};
    }
  };
  static const impl c;
  return c;
}

// The std::error_code for a C API result: `r` is a negative errno value (a
// positive one is taken as is); 0 gives the empty code.
[[nodiscard]] inline std::error_code to_error_code(int r) noexcept {
  return {r < 0 ? -r : r, category()};
}

// Not API: helpers of this header (the library's own internals are
// shmsem::detail, in libshmsem/src/).
namespace cxx_internal {

[[noreturn]] inline void throw_error(int r, const char *what) {
  throw std::system_error(to_error_code(r), what);
}

// The integer types a count of permits may have (see the banner): not bool
// (`acquire(done)` is a bug, not a weight of 1) and not the character types,
// which std::in_range refuses too.
template <class T>
concept permit_count =
    std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, char> &&
    !std::same_as<T, wchar_t> && !std::same_as<T, char8_t> && !std::same_as<T, char16_t> &&
    !std::same_as<T, char32_t>;

// A count as the C API takes it; std::nullopt outside std::uint32_t.
template <permit_count N>
[[nodiscard]] constexpr std::optional<std::uint32_t> to_u32(N n) noexcept {
  if (!std::in_range<std::uint32_t>(n)) return std::nullopt;
  return static_cast<std::uint32_t>(n);
}

// `o` as shmsem_config; -EINVAL for a negative period (no C form).
[[nodiscard]] inline int to_config(const options &o, shmsem_config *cfg) noexcept {
  *cfg = shmsem_config{};
  if (o.per.count() < 0) return -EINVAL;
  cfg->permits = o.permits;
  cfg->max_waiters = o.max_waiters;
  cfg->mode = o.mode;
  cfg->max_permits = o.max_permits;
  cfg->rate = o.rate;
  cfg->burst = o.burst;
  cfg->rate_period_ns = static_cast<std::uint64_t>(o.per.count());
  return 0;
}

// `d` in nanoseconds, rounded up (a wait is never shorter than asked), and
// saturated at nanoseconds::min()/max() where it does not fit: the range is
// tested in long double, whose 64-bit mantissa holds every int64_t, before
// any integer arithmetic that could overflow. NaN saturates to max().
template <class Rep, class Period>
[[nodiscard]] constexpr std::chrono::nanoseconds saturating_ceil_ns(
    const std::chrono::duration<Rep, Period> &d) noexcept {
  using ns = std::chrono::nanoseconds;
  using cf = std::ratio_divide<Period, std::nano>;  // ns per tick, num/den
  constexpr auto hi = static_cast<long double>(ns::max().count());
  constexpr auto lo = static_cast<long double>(ns::min().count());
  const long double x = static_cast<long double>(d.count()) * cf::num / cf::den;
  if (!(x < hi)) return ns::max();
  if (!(x > lo)) return ns::min();
  if constexpr (std::chrono::treat_as_floating_point_v<Rep> ||
                (cf::num != 1 && cf::den != 1)) {
    // Floating ticks, or an odd period such as ratio<1, 3>: x is exact to
    // within a nanosecond in the range that reaches here.
    return ns(static_cast<ns::rep>(std::ceil(x)));
  } else if constexpr (cf::den == 1) {
    // A whole number of ns per tick: exact, and |x| < 2^63 so it fits.
    return ns(static_cast<ns::rep>(d.count()) * static_cast<ns::rep>(cf::num));
  } else {
    // Finer than 1 ns (num == 1): divide, rounding towards +infinity.
    const auto c = static_cast<std::intmax_t>(d.count());
    std::intmax_t q = c / cf::den;
    if (c % cf::den > 0) q++;
    return ns(static_cast<ns::rep>(q));
  }
}

// A deadline as the C API takes it: an absolute CLOCK_MONOTONIC time, which
// is what steady_clock reads on Linux (libstdc++ and libc++ both call
// clock_gettime(CLOCK_MONOTONIC)). Times before the clock's epoch are "now,
// do not wait"; max() means no deadline at all (`forever` set).
struct deadline {
  timespec ts{};
  bool forever = false;
  [[nodiscard]] static deadline never() noexcept {
    deadline d;
    d.forever = true;
    return d;
  }
  [[nodiscard]] const timespec *get() const noexcept { return forever ? nullptr : &ts; }
};

[[nodiscard]] inline deadline at_monotonic_ns(std::chrono::nanoseconds t) noexcept {
  if (t == std::chrono::nanoseconds::max()) return deadline::never();
  deadline d;
  if (t.count() > 0) {
    d.ts.tv_sec = static_cast<time_t>(t.count() / 1000000000);
    d.ts.tv_nsec = static_cast<long>(t.count() % 1000000000);
  }
  return d;
}

template <class Duration>
[[nodiscard]] deadline at(
    const std::chrono::time_point<std::chrono::steady_clock, Duration> &tp) noexcept {
  return at_monotonic_ns(saturating_ceil_ns(tp.time_since_epoch()));
}

template <class Rep, class Period>
[[nodiscard]] deadline after(const std::chrono::duration<Rep, Period> &rel) noexcept {
  using ns = std::chrono::nanoseconds;
  const ns now = std::chrono::duration_cast<ns>(
      std::chrono::steady_clock::now().time_since_epoch());  // >= 0
  const ns d = saturating_ceil_ns(rel);
  return at_monotonic_ns(d > ns::max() - now ? ns::max() : now + d);
}

}  // namespace cxx_internal

class semaphore;

// One permit, or n of them taken as one (a weighted lease), owned: released
// when the lease is destroyed or assigned over, all n at once. Move-only; a
// moved-from lease is empty and its destructor does nothing, so a permit is
// released once. An empty lease (default-constructed, moved from, released
// or detached) converts to false and has weight() 0.
//
//   | member               | on the permit                | errors                  |
//   |----------------------|------------------------------|-------------------------|
//   | ~lease(), operator=  | released                     | swallowed (no channel)  |
//   | release()            | released                     | std::system_error       |
//   | release(ec)          | released                     | into ec, noexcept       |
//   | detach()             | left held; token returned    | none                    |
//
// release() empties the lease whether or not the C call succeeds: a token
// refused once (-EALREADY, -EINVAL) is refused forever.
class lease {
 public:
  lease() noexcept = default;
  // Adopts `token`, a lease of the semaphore open as `s` (a token from
  // detach(), or one passed between processes): this lease will release it.
  // `weight` is what weight() reports: the token does not carry it (pass it
  // along with the token), and the release returns whatever the token
  // holds, whatever `weight` says.
  explicit lease(shmsem_t *s, const shmsem_lease_t &token, std::uint32_t weight = 1) noexcept
      : s_(s), token_(token), weight_(weight) {}

  lease(lease &&o) noexcept
      : s_(std::exchange(o.s_, nullptr)),
        token_(std::exchange(o.token_, {})),
        weight_(std::exchange(o.weight_, 0)) {}
  lease &operator=(lease &&o) noexcept {
    if (this != &o) {
      reset();
      s_ = std::exchange(o.s_, nullptr);
      token_ = std::exchange(o.token_, {});
      weight_ = std::exchange(o.weight_, 0);
    }
    return *this;
  }
  lease(const lease &) = delete;
  lease &operator=(const lease &) = delete;
  ~lease() { reset(); }

  // Returns the permit now, all `weight()` of them (to the oldest waiter if
  // one is queued). Throws
  // std::system_error: EALREADY the permit was already released through
  // another copy of the token (or reclaimed), EINVAL a malformed token or an
  // empty lease, EBADF a read-only handle. Empty afterwards in every case.
  void release() {
    std::error_code ec;
    release(ec);
    if (ec) throw std::system_error(ec, "shmsem: release");
  }
  // As release(), the error (or a cleared code) into `ec` instead.
  void release(std::error_code &ec) noexcept {
    shmsem_t *s = std::exchange(s_, nullptr);
    const int r = s ? shmsem_release(s, &token_) : -EINVAL;
    token_ = {};
    weight_ = 0;
    ec = r < 0 ? to_error_code(r) : std::error_code();
  }

  // Gives up ownership without releasing: the permit stays held (until it
  // is released through the token, or this process exits) and the lease is
  // empty. Dropping the result leaks the permit for the process's lifetime.
  // The weight is not in the token: read weight() first to pass it on.
  [[nodiscard]] shmsem_lease_t detach() noexcept {
    s_ = nullptr;
    weight_ = 0;
    return std::exchange(token_, {});
  }

  // The token (all-zero when empty). Copying it does not copy ownership.
  [[nodiscard]] const shmsem_lease_t &token() const noexcept { return token_; }
  // The handle the permit will be released through (nullptr when empty).
  [[nodiscard]] shmsem_t *native_handle() const noexcept { return s_; }
  // The permits this lease holds: the n it was acquired with (1 for the
  // acquires without a count), what its adopter said, 0 when empty.
  [[nodiscard]] std::uint32_t weight() const noexcept { return weight_; }
  [[nodiscard]] explicit operator bool() const noexcept { return s_ != nullptr; }

 private:
  void reset() noexcept {
    std::error_code ignored;  // a destructor has nowhere to report it
    if (s_) release(ignored);
  }

  shmsem_t *s_ = nullptr;
  shmsem_lease_t token_{};
  std::uint32_t weight_ = 0;
};

// An open semaphore (one shmsem_t), detached by the destructor. Move-only;
// a moved-from or default-constructed semaphore is empty (false), and its
// members throw std::system_error(EINVAL) as the C API does for NULL.
//
// Acquires block in the FIFO queue as shmsem_acquire does (not interrupted
// by signals; a pthread cancellation point). Errors besides the nullopt
// cases in the banner's table: ESHUTDOWN closed, EBUSY the wait queue is
// full, EBADF read-only handle, EXDEV another PID namespace, EINVAL empty.
//
// Each acquire has a weighted twin taking the count `n` first: n permits
// as one lease (lease::weight() == n), granted all at once in FIFO order;
// a waiter needing n at the head is not overtaken by later ones needing
// fewer, and permits released meanwhile are kept for it (shmsem.h,
// "Weighted leases"). `n` of 0, above max_permits or outside std::uint32_t
// throws EINVAL (try_acquire(n) too: such an n never fits, it is not "no
// permits now"); an n above the current capacity (after a shrink) waits
// until set_permits() grows it back or the wait ends. Weighted acquires
// always take the internal lock; n == 1 is the unweighted acquire.
//
//   | one permit                | n permits                    |
//   |---------------------------|------------------------------|
//   | acquire()                 | acquire(n)                   |
//   | try_acquire()             | try_acquire(n)               |
//   | acquire_for(rel)          | acquire_for(n, rel)          |
//   | acquire_until(abs)        | acquire_until(n, abs)        |
//   | acquire(stop)             | acquire(n, stop)             |
//   | acquire_for(rel, stop)    | acquire_for(n, rel, stop)    |
//   | acquire_until(abs, stop)  | acquire_until(n, abs, stop)  |
class semaphore {
 public:
  semaphore() noexcept = default;
  // Adopts a handle from shmsem_create/shmsem_open; detached on destruction.
  explicit semaphore(shmsem_t *s) noexcept : s_(s) {}

  // shmsem_create: creates `name`, or opens it if it exists and `flags`
  // lacks SHMSEM_EXCL. Throws std::system_error (EEXIST, EPERM, EINVAL, ...).
  [[nodiscard]] static semaphore create(const char *name, const options &opt, int flags = 0) {
    shmsem_config cfg;
    if (int r = cxx_internal::to_config(opt, &cfg))
      cxx_internal::throw_error(r, "shmsem: create");
    return create(name, cfg, flags);
  }
  [[nodiscard]] static semaphore create(const std::string &name, const options &opt,
                                        int flags = 0) {
    return create(name.c_str(), opt, flags);
  }
  // The same from the C configuration. A template only so that a braced
  // list, `create(name, {.permits = 8})`, means options and is not
  // ambiguous (it cannot deduce `Config`); any shmsem_config object binds.
  template <std::same_as<shmsem_config> Config>
  [[nodiscard]] static semaphore create(const char *name, const Config &cfg, int flags = 0) {
    shmsem_t *s = nullptr;
    if (int r = shmsem_create(name, &cfg, flags, &s))
      cxx_internal::throw_error(r, "shmsem: create");
    return semaphore(s);
  }
  template <std::same_as<shmsem_config> Config>
  [[nodiscard]] static semaphore create(const std::string &name, const Config &cfg,
                                        int flags = 0) {
    return create(name.c_str(), cfg, flags);
  }
  // shmsem_open: flags 0 or SHMSEM_RDONLY. Throws std::system_error
  // (ENOENT, EACCES, EBADMSG, EPROTO, EXDEV, EINVAL).
  [[nodiscard]] static semaphore open(const char *name, int flags = 0) {
    shmsem_t *s = nullptr;
    if (int r = shmsem_open(name, flags, &s)) cxx_internal::throw_error(r, "shmsem: open");
    return semaphore(s);
  }
  [[nodiscard]] static semaphore open(const std::string &name, int flags = 0) {
    return open(name.c_str(), flags);
  }
  // shmsem_unlink: removes the name (open handles keep working). Throws
  // std::system_error (ENOENT, EACCES, EINVAL), or reports into `ec`.
  static void unlink(const char *name) {
    if (int r = shmsem_unlink(name)) cxx_internal::throw_error(r, "shmsem: unlink");
  }
  static void unlink(const char *name, std::error_code &ec) noexcept {
    ec = to_error_code(shmsem_unlink(name));
  }

  semaphore(semaphore &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  semaphore &operator=(semaphore &&o) noexcept {
    if (this != &o) {
      shmsem_detach(s_);
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  semaphore(const semaphore &) = delete;
  semaphore &operator=(const semaphore &) = delete;
  ~semaphore() { shmsem_detach(s_); }

  // Blocks until a permit is granted. Throws std::system_error on any error.
  [[nodiscard]] lease acquire() {
    shmsem_lease_t t;
    if (int r = shmsem_acquire(s_, &t)) cxx_internal::throw_error(r, "shmsem: acquire");
    return lease(s_, t);
  }
  // Blocks until n permits are granted, as one lease.
  template <cxx_internal::permit_count N>
  [[nodiscard]] lease acquire(N n) {
    const std::uint32_t w = weight(n, "shmsem: acquire");
    shmsem_lease_t t;
    if (int r = shmsem_acquire_n(s_, w, &t)) cxx_internal::throw_error(r, "shmsem: acquire");
    return lease(s_, t, w);
  }

  // A permit if one is free and nobody is queued, else std::nullopt. Never
  // sleeps for a permit (see shmsem_try_acquire on the internal lock).
  [[nodiscard]] std::optional<lease> try_acquire() { return try_acquire(1u); }
  // n permits if n are free (with a token, on a rate-limited semaphore) and
  // nobody is queued, else std::nullopt; an n that can never be granted
  // (0, above max_permits) throws EINVAL.
  template <cxx_internal::permit_count N>
  [[nodiscard]] std::optional<lease> try_acquire(N n) {
    const std::uint32_t w = weight(n, "shmsem: try_acquire");
    shmsem_lease_t t;
    const int r = shmsem_try_acquire_n(s_, w, &t);
    if (r == -EAGAIN) return std::nullopt;
    if (r) cxx_internal::throw_error(r, "shmsem: try_acquire");
    return lease(s_, t, w);
  }

  // Waits at most `rel` (rounded up to whole nanoseconds; a duration too
  // long to represent waits forever, zero or negative only tries); nullopt
  // on timeout. A grant racing the deadline wins.
  template <class Rep, class Period>
  [[nodiscard]] std::optional<lease> acquire_for(const std::chrono::duration<Rep, Period> &rel) {
    return acquire_ex(1, cxx_internal::after(rel), std::stop_token(), "shmsem: acquire_for");
  }
  template <cxx_internal::permit_count N, class Rep, class Period>
  [[nodiscard]] std::optional<lease> acquire_for(N n,
                                                 const std::chrono::duration<Rep, Period> &rel) {
    const std::uint32_t w = weight(n, "shmsem: acquire_for");
    return acquire_ex(w, cxx_internal::after(rel), std::stop_token(), "shmsem: acquire_for");
  }

  // Waits until `abs` on steady_clock, passed to the C API as the absolute
  // CLOCK_MONOTONIC deadline it is (no reading of the clock here); nullopt
  // on timeout. A time point beyond the range waits forever.
  template <class Duration>
  [[nodiscard]] std::optional<lease> acquire_until(
      const std::chrono::time_point<std::chrono::steady_clock, Duration> &abs) {
    return acquire_ex(1, cxx_internal::at(abs), std::stop_token(), "shmsem: acquire_until");
  }
  template <cxx_internal::permit_count N, class Duration>
  [[nodiscard]] std::optional<lease> acquire_until(
      N n, const std::chrono::time_point<std::chrono::steady_clock, Duration> &abs) {
    const std::uint32_t w = weight(n, "shmsem: acquire_until");
    return acquire_ex(w, cxx_internal::at(abs), std::stop_token(), "shmsem: acquire_until");
  }
  // Another clock (system_clock, ...): turned into a duration once, at the
  // call, as std::condition_variable does; a later jump of that clock does
  // not move the deadline.
  template <class Clock, class Duration>
    requires(std::chrono::is_clock_v<Clock> && !std::is_same_v<Clock, std::chrono::steady_clock>)
  [[nodiscard]] std::optional<lease> acquire_until(
      const std::chrono::time_point<Clock, Duration> &abs) {
    return acquire_for(abs - Clock::now());
  }
  template <cxx_internal::permit_count N, class Clock, class Duration>
    requires(std::chrono::is_clock_v<Clock> && !std::is_same_v<Clock, std::chrono::steady_clock>)
  [[nodiscard]] std::optional<lease> acquire_until(
      N n, const std::chrono::time_point<Clock, Duration> &abs) {
    return acquire_for(n, abs - Clock::now());
  }

  // Blocks until a permit is granted or a stop is requested through `stop`
  // (before the call, or during the wait): nullopt then. A grant that races
  // the stop wins.
  [[nodiscard]] std::optional<lease> acquire(const std::stop_token &stop) {
    return acquire_ex(1, cxx_internal::deadline::never(), stop, "shmsem: acquire");
  }
  // The same for n permits. A stop requested before the call is nullopt
  // before the C API sees `n` (only 0 and values beyond std::uint32_t are
  // refused first).
  template <cxx_internal::permit_count N>
  [[nodiscard]] std::optional<lease> acquire(N n, const std::stop_token &stop) {
    const std::uint32_t w = weight(n, "shmsem: acquire");
    return acquire_ex(w, cxx_internal::deadline::never(), stop, "shmsem: acquire");
  }
  // Both: nullopt on a stop request or on the deadline.
  template <class Duration>
  [[nodiscard]] std::optional<lease> acquire_until(
      const std::chrono::time_point<std::chrono::steady_clock, Duration> &abs,
      const std::stop_token &stop) {
    return acquire_ex(1, cxx_internal::at(abs), stop, "shmsem: acquire_until");
  }
  template <class Rep, class Period>
  [[nodiscard]] std::optional<lease> acquire_for(const std::chrono::duration<Rep, Period> &rel,
                                                 const std::stop_token &stop) {
    return acquire_ex(1, cxx_internal::after(rel), stop, "shmsem: acquire_for");
  }
  template <cxx_internal::permit_count N, class Duration>
  [[nodiscard]] std::optional<lease> acquire_until(
      N n, const std::chrono::time_point<std::chrono::steady_clock, Duration> &abs,
      const std::stop_token &stop) {
    const std::uint32_t w = weight(n, "shmsem: acquire_until");
    return acquire_ex(w, cxx_internal::at(abs), stop, "shmsem: acquire_until");
  }
  template <cxx_internal::permit_count N, class Rep, class Period>
  [[nodiscard]] std::optional<lease> acquire_for(N n,
                                                 const std::chrono::duration<Rep, Period> &rel,
                                                 const std::stop_token &stop) {
    const std::uint32_t w = weight(n, "shmsem: acquire_for");
    return acquire_ex(w, cxx_internal::after(rel), stop, "shmsem: acquire_for");
  }

  // shmsem_set_permits: the capacity becomes `permits` (0 to max_permits)
  // while the semaphore is in use. Growing hands the new permits to queued
  // waiters in FIFO order; shrinking takes free permits at once and retires
  // the rest as leases come back (stat().retiring), never revoking a held
  // lease; 0 drains the semaphore until it grows again. Allowed after
  // shutdown. Throws std::system_error: EINVAL above max_permits (or
  // outside std::uint32_t), EBADF read-only handle, EXDEV, EINVAL empty.
  template <cxx_internal::permit_count N>
  void set_permits(N permits) {
    std::error_code ec;
    set_permits(permits, ec);
    if (ec) throw std::system_error(ec, "shmsem: set_permits");
  }
  // As set_permits(), the error (or a cleared code) into `ec` instead.
  template <cxx_internal::permit_count N>
  void set_permits(N permits, std::error_code &ec) noexcept {
    const std::optional<std::uint32_t> p = cxx_internal::to_u32(permits);
    ec = to_error_code(p ? shmsem_set_permits(s_, *p) : -EINVAL);
  }

  // shmsem_shutdown: closes the semaphore for every process; returns the
  // number of queued waiters failed (they throw ESHUTDOWN). Idempotent.
  int shutdown() {
    const int r = shmsem_shutdown(s_);
    if (r < 0) cxx_internal::throw_error(r, "shmsem: shutdown");
    return r;
  }
  // shmsem_recover: reclaims what provably dead processes held; returns the
  // number of leases, slots and free leases reclaimed.
  int recover() {
    const int r = shmsem_recover(s_);
    if (r < 0) cxx_internal::throw_error(r, "shmsem: recover");
    return r;
  }
  // shmsem_stat: a snapshot of the state and counters: `permits` is the
  // capacity now (set_permits), `max_permits` its bound, `retiring` what a
  // shrink still waits for, `held` counts a lease of n as n; with a rate,
  // `rate` per `rate_period_ns` and `burst` as created (defaults filled in:
  // burst 1, one second), `rate_tokens` and `rate_next_ns` (CLOCK_MONOTONIC,
  // steady_clock's epoch) the bucket now.
  [[nodiscard]] struct shmsem_stat stat() const {
    struct shmsem_stat st{};
    if (int r = shmsem_stat(s_, &st)) cxx_internal::throw_error(r, "shmsem: stat");
    return st;
  }
  // shmsem_check: throws std::system_error(EUCLEAN) naming no invariant
  // (the C API returns only the code) if one is broken.
  void check() const {
    if (int r = shmsem_check(s_)) cxx_internal::throw_error(r, "shmsem: check");
  }

  [[nodiscard]] shmsem_t *native_handle() const noexcept { return s_; }
  [[nodiscard]] explicit operator bool() const noexcept { return s_ != nullptr; }

 private:
  // `n` as the C API's count, or EINVAL thrown: 0 here already (so that a
  // stop requested before the call does not hide it), and anything outside
  // std::uint32_t, which the C API would see truncated.
  template <cxx_internal::permit_count N>
  static std::uint32_t weight(N n, const char *what) {
    const std::optional<std::uint32_t> w = cxx_internal::to_u32(n);
    if (!w || *w == 0) cxx_internal::throw_error(-EINVAL, what);
    return *w;
  }

  // shmsem_acquire_ex_n (n == 1: shmsem_acquire_ex's path, lock-free when
  // uncontended) with an optional stop_token. The cancel handle is
  // declared before the stop_callback, so it outlives it: the callback's
  // destructor waits for a shmsem_cancel running on another thread, as
  // shmsem.h requires ("valid until ... any concurrent shmsem_cancel on it
  // [has] returned").
  std::optional<lease> acquire_ex(std::uint32_t n, const cxx_internal::deadline &d,
                                  const std::stop_token &stop, const char *what) {
    shmsem_lease_t t;
    int r;
    if (!stop.stop_possible()) {
      r = shmsem_acquire_ex_n(s_, n, d.get(), nullptr, 0, &t);
    } else {
      if (stop.stop_requested()) return std::nullopt;
      shmsem_cancel_t cancel;
      shmsem_cancel_init(&cancel);
      const std::stop_callback on_stop(stop, [&cancel]() noexcept { shmsem_cancel(&cancel); });
      r = shmsem_acquire_ex_n(s_, n, d.get(), &cancel, 0, &t);
    }
    if (r == -ETIMEDOUT || r == -ECANCELED) return std::nullopt;
    if (r) cxx_internal::throw_error(r, what);
    return lease(s_, t, n);
  }

  shmsem_t *s_ = nullptr;
};

}  // namespace shmsem

#endif  // __cplusplus >= 202002L

#endif  // SHMSEM_SHMSEM_HPP
