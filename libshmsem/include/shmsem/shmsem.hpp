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
// clang-format off
// (the examples and the table below are laid out by hand)
//
// Migration: shmsem::lease and shmsem::semaphore replace shmsem::Lease and
// the free shmsem::acquire(), which stay for C++17 code (with the owner
// rule of "Processes" below, and Lease::resource()).
//
//     // C++17: an error code to check      // C++20: exceptions, optionals
//     shmsem::Lease l;                      auto sem =
//     if (int e = shmsem::acquire(s, &l))       shmsem::semaphore::open("/p");
//       fail(e);                            shmsem::lease l = sem.acquire();
//     ...                                   // or: if (auto l =
//     l.release();                          //   sem.acquire_for(2s)) ...
//                                           l.release();  // may throw
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
//     if (auto l = api.acquire_for(2, 50ms)) ...  // 2 of the 8, one token
//
// Errors (C++20 tier):
//
//   | C API result | semaphore member                | returns / throws  |
//   |--------------|---------------------------------|-------------------|
//   | -EAGAIN      | try_acquire(), try_acquire(n)   | std::nullopt      |
//   | -ETIMEDOUT   | acquire_for(), acquire_until()  | std::nullopt      |
//   | -ECANCELED   | any acquire taking a stop_token | std::nullopt      |
//   | any other    | every member                    | std::system_error |
// clang-format on
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
// EINVAL has many causes and one message in the C API. A std::system_error
// thrown here keeps the code (compare codes, not text) and says in what()
// which argument and why wherever this header can tell:
// - a weight outside 1..max_permits (0, negative, too big):
//   "shmsem: acquire: weight 9 is outside 1..4 (1 to max_permits)";
// - a capacity above max_permits: "shmsem: set_permits: capacity 9 is
//   outside 0..4 (0 to max_permits)";
// - any member of an empty semaphore: "shmsem: acquire: semaphore is empty
//   (default-constructed or moved from)";
// - release() of an empty lease, saying why it is empty: "was moved from",
//   "was detached", "never held a permit"; in a fork child, "lease belongs
//   to process 1234, not to this process 1240" (Processes, below). A second
//   release() of one lease is EALREADY, as a second shmsem_release of one
//   token is: "shmsem: release: lease already released";
// - a negative options.per: "shmsem: create: options.per is negative".
// Finding a bound reads shmsem_stat, on the error path only. A deadline
// cannot be on the wrong clock here: a steady_clock time point is the
// CLOCK_MONOTONIC deadline the C API takes, and other clocks are converted
// at the call (Time, below). Other EINVALs (a configuration shmsem_create
// refuses, a malformed or foreign token) carry the C API's one message.
//
// Time: a steady_clock time point is passed to the C API as the absolute
// CLOCK_MONOTONIC deadline it is (steady_clock reads CLOCK_MONOTONIC in
// libstdc++ and libc++ on Linux). A duration goes to shmsem_acquire_for
// (shmsem_acquire_for_n), which reads CLOCK_MONOTONIC once at the call;
// with a stop_token it is added to steady_clock::now() here instead (no C
// call takes a timeout and a cancellation handle), the same clock. Both
// round up to whole nanoseconds; a time before the clock's epoch or a
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
//
// Processes (fork): a lease (and a Lease) releases its permit only in the
// process that owns it: the one that acquired it, or that adopted its token
// through the constructor. shmsem.h's rule is that a fork child inherits no
// leases; it does inherit a copy of every lease object, and a copy that
// released would free the parent's permit while the parent still holds it.
// So in any other process a lease releases nothing: its destructor and its
// assignment leave the permit to its owner (a lease going out of scope in
// the child, or unwound by an exception there, is harmless); release()
// throws std::system_error(EINVAL) naming both processes, release(ec)
// reports EINVAL and Lease::release() returns -EINVAL; the lease is empty
// afterwards. Until then it still shows the parent's token (operator bool,
// token(), resource()), and detach() hands that token over without
// releasing: a child meant to return its parent's permit passes the token
// to shmsem_release() (any process may release a token it has).
//
// The owner is a process id. To know this process's id without a system
// call per acquire and release, the header keeps it in one private page of
// its own, mapped at the first lease for the life of the process and marked
// MADV_WIPEONFORK, so that a child sees it zeroed and reads its own id.
#ifndef SHMSEM_SHMSEM_HPP
#define SHMSEM_SHMSEM_HPP

#include <shmsem/shmsem.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace shmsem {

// Not API: helpers of this header (the library's own internals are
// shmsem::detail, in libshmsem/src/).
namespace cxx_internal {

// The page that holds this process's id (below); nullptr until mapped.
inline std::atomic<std::atomic<pid_t> *> pid_page{nullptr};
// Set once MADV_WIPEONFORK is refused (Linux < 4.14): no page, ever.
inline std::atomic<bool> no_pid_page{false};

// Maps the page, or returns the one another thread mapped first; nullptr
// if it cannot be had (a later call tries again unless the kernel refused).
inline std::atomic<pid_t> *map_pid_page() noexcept {
#ifdef MADV_WIPEONFORK
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t len = page > 0 ? static_cast<std::size_t>(page) : 4096;
  void *m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  if (::madvise(m, len, MADV_WIPEONFORK) != 0) {
    ::munmap(m, len);
    no_pid_page.store(true,
                      std::memory_order_relaxed);  // a flag; it guards no data
    return nullptr;
  }
  std::atomic<pid_t> *fresh = new (m) std::atomic<pid_t>(0);
  std::atomic<pid_t> *first = nullptr;
  // acq_rel: publishes the page to this_process()'s acquire load; on a lost
  // race, acquires the winner's.
  if (!pid_page.compare_exchange_strong(first, fresh, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
    ::munmap(m, len);
    return first;
  }
  return fresh;
#else
  no_pid_page.store(true, std::memory_order_relaxed);
  return nullptr;
#endif
}

// This process's id, the owner a lease records, without a system call
// after the first: getpid() is a real system call (glibc caches nothing
// since 2.25), dearer than the lock-free acquire and release it guards.
// The id is kept in one private page marked MADV_WIPEONFORK, as the
// library keeps its own identity: a child of fork(), _Fork() or clone()
// without CLONE_VM sees the page zeroed and reads its own id, whether or
// not atfork handlers ran; exec starts afresh; no lock is held that a fork
// could interrupt. Without the page every call asks getpid().
inline pid_t this_process() noexcept {
  // acquire: pairs with map_pid_page()'s publication of the page.
  std::atomic<pid_t> *p = pid_page.load(std::memory_order_acquire);
  if (!p && !no_pid_page.load(std::memory_order_relaxed)) p = map_pid_page();
  if (!p) return ::getpid();
  // relaxed: every thread of the process stores the same value, and no
  // other data is published through it.
  pid_t id = p->load(std::memory_order_relaxed);
  if (id == 0) {
    id = ::getpid();
    p->store(id, std::memory_order_relaxed);
  }
  return id;
}

}  // namespace cxx_internal

// A permit owned by this process (C++17 tier; shmsem::lease is the C++20
// one). Releases itself on destruction and assignment, in its owner
// process only (the banner's "Processes"): a copy in a fork child does
// nothing there.
class Lease {
 public:
  Lease() = default;
  // Adopts `l`, a lease of the semaphore open as `s`: this process owns it.
  Lease(shmsem_t *s, shmsem_lease_t l)
      : s_(s), l_(l), owner_(cxx_internal::this_process()) {}
  Lease(Lease &&o) noexcept
      : s_(std::exchange(o.s_, nullptr)), l_(o.l_), owner_(o.owner_) {}
  Lease &operator=(Lease &&o) noexcept {
    if (this != &o) {
      release();
      s_ = std::exchange(o.s_, nullptr);
      l_ = o.l_;
      owner_ = o.owner_;
    }
    return *this;
  }
  Lease(const Lease &) = delete;
  Lease &operator=(const Lease &) = delete;
  ~Lease() { release(); }

  // Returns the permit now (0 or a negative errno); later calls return 0.
  // In another process than its owner (a fork child) it releases nothing
  // and returns -EINVAL: the permit stays with the owner. Empty afterwards.
  int release() {
    if (!s_) return 0;
    shmsem_t *s = std::exchange(s_, nullptr);
    if (owner_ != cxx_internal::this_process()) return -EINVAL;
    return shmsem_release(s, &l_);
  }
  // Gives up ownership without releasing; returns the raw token.
  shmsem_lease_t detach() {
    s_ = nullptr;
    return l_;
  }
  explicit operator bool() const { return s_ != nullptr; }
  const shmsem_lease_t &token() const { return l_; }
  // shmsem_lease_resource(): the index in [0, max_permits) no other live
  // lease of the semaphore has (a weighted lease: the first of its n).
  // Meaningful while the lease holds its permit.
  [[nodiscard]] std::uint32_t resource() const noexcept {
    return shmsem_lease_resource(&l_);
  }

 private:
  shmsem_t *s_ = nullptr;
  shmsem_lease_t l_{};
  pid_t owner_ =
      0;  // the process that may release it (this_process() when made)
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

#include <chrono>
#include <cmath>
#include <concepts>
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
//     {.permits = 8}                                    // a plain semaphore of
//     8
//     {.permits = 4, .max_permits = 16}                 // 4 now, set_permits()
//     up to 16
//     {.permits = 8, .rate = 100, .per = 1s, .burst = 20}
//     {.rate = 10, .per = 1min}                         // a rate only: no
//     concurrency limit
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
  // shmsem_config's policy and max_bypass_ns: SHMSEM_POLICY_FIFO (0) or
  // SHMSEM_POLICY_BOUNDED, and under BOUNDED how long the head may wait
  // while newcomers pass it (0: SHMSEM_DEFAULT_MAX_BYPASS_NS; nonzero under
  // FIFO, or negative, is EINVAL).
  std::uint32_t policy = SHMSEM_POLICY_FIFO;
  std::chrono::nanoseconds max_bypass{0};
  // shmsem_config's lease_ttl_ms, a remote semaphore's alone (0:
  // SHMSEM_DEFAULT_LEASE_TTL_MS; nonzero on a local name, negative or
  // beyond 2^32 - 1 ms is EINVAL).
  std::chrono::milliseconds lease_ttl{0};
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
    std::error_condition default_error_condition(
        int ev) const noexcept override {
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
    !std::same_as<T, wchar_t> && !std::same_as<T, char8_t> &&
    !std::same_as<T, char16_t> && !std::same_as<T, char32_t>;

// A count as the C API takes it; std::nullopt outside std::uint32_t.
template <permit_count N>
[[nodiscard]] constexpr std::optional<std::uint32_t> to_u32(N n) noexcept {
  if (!std::in_range<std::uint32_t>(n)) return std::nullopt;
  return static_cast<std::uint32_t>(n);
}

// `n` in decimal, for a message; a value beyond 64 bits (an extended
// integer type) only as which side it is on.
template <permit_count N>
[[nodiscard]] std::string count_text(N n) {
  if (std::in_range<long long>(n))
    return std::to_string(static_cast<long long>(n));
  if (std::in_range<unsigned long long>(n))
    return std::to_string(static_cast<unsigned long long>(n));
  return std::cmp_less(n, 0) ? "below -2^63" : "above 2^64 - 1";
}

// max_permits of the semaphore open as `s` (read with shmsem_stat), or
// nullopt if it cannot be read (an empty semaphore). For error messages.
[[nodiscard]] inline std::optional<std::uint32_t> max_permits_of(
    shmsem_t *s) noexcept {
  struct shmsem_stat st {};
  if (!s || shmsem_stat(s, &st) != 0) return std::nullopt;
  return st.max_permits;
}

// "<what>: <name> <n> is outside <lo>..<max> (<lo> to max_permits)", or
// "... outside <lo>..max_permits" when the bound is not known.
[[nodiscard]] inline std::string outside_text(
    const char *what, const char *name, const std::string &n, const char *lo,
    std::optional<std::uint32_t> max) {
  std::string m =
      std::string(what) + ": " + name + ' ' + n + " is outside " + lo + "..";
  if (max) return m + std::to_string(*max) + " (" + lo + " to max_permits)";
  return m + "max_permits";
}

[[nodiscard]] inline std::string empty_semaphore_text(const char *what) {
  return std::string(what) +
         ": semaphore is empty (default-constructed or moved from)";
}

// `o` as shmsem_config: nullptr, or which field has no C form (EINVAL).
[[nodiscard]] inline const char *to_config(const options &o,
                                           shmsem_config *cfg) noexcept {
  *cfg = shmsem_config{};
  if (o.per.count() < 0) return "shmsem: create: options.per is negative";
  if (o.max_bypass.count() < 0)
    return "shmsem: create: options.max_bypass is negative";
  if (o.lease_ttl.count() < 0 || o.lease_ttl.count() > UINT32_MAX)
    return "shmsem: create: options.lease_ttl is outside 0..2^32-1 ms";
  cfg->permits = o.permits;
  cfg->max_waiters = o.max_waiters;
  cfg->mode = o.mode;
  cfg->max_permits = o.max_permits;
  cfg->rate = o.rate;
  cfg->burst = o.burst;
  cfg->rate_period_ns = static_cast<std::uint64_t>(o.per.count());
  cfg->policy = o.policy;
  cfg->max_bypass_ns = static_cast<std::uint64_t>(o.max_bypass.count());
  cfg->lease_ttl_ms = static_cast<std::uint32_t>(o.lease_ttl.count());
  return nullptr;
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
  [[nodiscard]] const timespec *get() const noexcept {
    return forever ? nullptr : &ts;
  }
};

[[nodiscard]] inline deadline at_monotonic_ns(
    std::chrono::nanoseconds t) noexcept {
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
    const std::chrono::time_point<std::chrono::steady_clock, Duration>
        &tp) noexcept {
  return at_monotonic_ns(saturating_ceil_ns(tp.time_since_epoch()));
}

template <class Rep, class Period>
[[nodiscard]] deadline after(
    const std::chrono::duration<Rep, Period> &rel) noexcept {
  using ns = std::chrono::nanoseconds;
  const ns now = std::chrono::duration_cast<ns>(
      std::chrono::steady_clock::now().time_since_epoch());  // >= 0
  const ns d = saturating_ceil_ns(rel);
  return at_monotonic_ns(d > ns::max() - now ? ns::max() : now + d);
}

// `rel` as the relative timeout shmsem_acquire_for takes: rounded up to
// whole nanoseconds; zero or negative is 0 ("try now"); a duration that
// does not fit in 64-bit nanoseconds is UINT64_MAX, which the C API reads
// as "never" (it is beyond what it can add to the clock).
template <class Rep, class Period>
[[nodiscard]] constexpr std::uint64_t timeout_ns(
    const std::chrono::duration<Rep, Period> &rel) noexcept {
  const std::chrono::nanoseconds d = saturating_ceil_ns(rel);
  if (d.count() <= 0) return 0;
  if (d == std::chrono::nanoseconds::max()) return UINT64_MAX;
  return static_cast<std::uint64_t>(d.count());
}

}  // namespace cxx_internal

class semaphore;

// One permit, or n of them taken as one (a weighted lease), owned: released
// when the lease is destroyed or assigned over, all n at once. Move-only; a
// moved-from lease is empty and its destructor does nothing, so a permit is
// released once. An empty lease (default-constructed, moved from, released
// or detached) converts to false and has weight() 0.
//
// Owned by a process: the one that acquired it (or adopted its token). In
// another process (a fork child's copy) it releases nothing, ever: the
// banner's "Processes".
//
//   | member              | owner process             | other process    |
//   errors                 |
//   |---------------------|---------------------------|------------------|------------------------|
//   | ~lease(), operator= | released                  | left to owner    |
//   swallowed (no channel) | | release()           | released | left; EINVAL |
//   std::system_error      | | release(ec)         | released | left; EINVAL |
//   into ec, noexcept      | | detach()            | left held; token returned
//   | the same         | none                   |
//
// release() empties the lease whether or not the C call succeeds: a token
// refused once (-EALREADY, -EINVAL) is refused forever.
//
// resource() is the stable index the permit names (shmsem_lease_resource):
// in [0, max_permits), held by no other live lease of the semaphore, the
// same for the life of the lease; a weighted lease holds n such indices
// and names the first. Map it to "connection i" of a pool:
//
//     shmsem::lease l = sem.acquire();
//     connection &c = pool[l.resource()];  // nobody else's while l is held
class lease {
 public:
  lease() noexcept = default;
  // Adopts `token`, a lease of the semaphore open as `s` (a token from
  // detach(), or one passed between processes): this lease, in this
  // process, will release it. `weight` is what weight() reports: the token
  // does not carry it (pass it along with the token), and the release
  // returns whatever the token holds, whatever `weight` says.
  explicit lease(shmsem_t *s, const shmsem_lease_t &token,
                 std::uint32_t weight = 1) noexcept
      : s_(s),
        token_(token),
        weight_(weight),
        owner_(cxx_internal::this_process()) {}

  lease(lease &&o) noexcept
      : s_(std::exchange(o.s_, nullptr)),
        token_(std::exchange(o.token_, {})),
        weight_(std::exchange(o.weight_, 0)),
        owner_(o.owner_),
        empty_(std::exchange(o.empty_, emptied::moved_from)) {}
  lease &operator=(lease &&o) noexcept {
    if (this != &o) {
      reset();
      s_ = std::exchange(o.s_, nullptr);
      token_ = std::exchange(o.token_, {});
      weight_ = std::exchange(o.weight_, 0);
      owner_ = o.owner_;
      empty_ = std::exchange(o.empty_, emptied::moved_from);
    }
    return *this;
  }
  lease(const lease &) = delete;
  lease &operator=(const lease &) = delete;
  ~lease() { reset(); }

  // Returns the permit now, all `weight()` of them (to the oldest waiter if
  // one is queued). Throws
  // std::system_error: EALREADY the permit was already released, by an
  // earlier release() of this lease or through another copy of the token
  // (or reclaimed); EINVAL an empty lease (what() says why it is empty:
  // moved from, detached, never held), a lease of another process (a fork
  // child's copy: nothing is released; what() names both processes), or a
  // malformed token; EBADF a read-only handle. Empty afterwards in every case.
  void release() {
    const bool held = s_ != nullptr;
    const emptied before = empty_;
    const int r = give_back();
    if (r < 0)
      throw std::system_error(to_error_code(r), failure_text(r, held, before));
  }
  // As release(), the error (or a cleared code) into `ec` instead.
  void release(std::error_code &ec) noexcept {
    const int r = give_back();
    ec = r < 0 ? to_error_code(r) : std::error_code();
  }

  // Gives up ownership without releasing: the permit stays held (until it
  // is released through the token, or its owner process exits) and the
  // lease is empty. Dropping the result leaks the permit for the process's
  // lifetime. The weight is not in the token: read weight() first to pass
  // it on.
  [[nodiscard]] shmsem_lease_t detach() noexcept {
    s_ = nullptr;
    weight_ = 0;
    empty_ = emptied::detached;
    return std::exchange(token_, {});
  }

  // The token (all-zero when empty). Copying it does not copy ownership.
  [[nodiscard]] const shmsem_lease_t &token() const noexcept { return token_; }
  // The resource the permit names (see above): shmsem_lease_resource() of
  // the token, a plain read. An empty lease names none (its all-zero token
  // reads 0, which may well be another lease's: check the lease first).
  [[nodiscard]] std::uint32_t resource() const noexcept {
    return shmsem_lease_resource(&token_);
  }
  // Fencing (shmsem(7), "Across hosts"): the generation of the lease's
  // index, token().gen (0 when empty), and the number of the grant that
  // made it, shmsem_lease_sequence(): a remote semaphore's only. sequence()
  // throws std::system_error: EOPNOTSUPP a local semaphore, EINVAL an
  // empty lease, EKEYEXPIRED / EALREADY a lease taken back or released,
  // ECOMM, EIDRM; no round trip for a lease this process holds.
  [[nodiscard]] std::uint64_t generation() const noexcept { return token_.gen; }
  [[nodiscard]] std::uint64_t sequence() const {
    if (!s_)
      cxx_internal::throw_error(-EINVAL, "shmsem: sequence: empty lease");
    std::uint64_t seq = 0;
    const int r = shmsem_lease_sequence(s_, &token_, &seq);
    if (r < 0) cxx_internal::throw_error(r, "shmsem: sequence");
    return seq;
  }
  // The handle the permit will be released through (nullptr when empty).
  [[nodiscard]] shmsem_t *native_handle() const noexcept { return s_; }
  // The permits this lease holds: the n it was acquired with (1 for the
  // acquires without a count), what its adopter said, 0 when empty.
  [[nodiscard]] std::uint32_t weight() const noexcept { return weight_; }
  [[nodiscard]] explicit operator bool() const noexcept {
    return s_ != nullptr;
  }

 private:
  // Why an empty lease is empty, for release()'s message (meaningless
  // while it holds a permit).
  enum class emptied : unsigned char {
    never_held,
    released,
    moved_from,
    detached,
    not_owner
  };

  // Empties the lease, releasing its permit if this process owns it: 0, or
  // a negative errno (-EINVAL: empty already, or another process's lease).
  int give_back() noexcept {
    shmsem_t *s = std::exchange(s_, nullptr);
    if (!s) return empty_ == emptied::released ? -EALREADY : -EINVAL;
    const bool ours = owner_ == cxx_internal::this_process();
    const int r = ours ? shmsem_release(s, &token_) : -EINVAL;
    token_ = {};
    weight_ = 0;
    empty_ = ours ? emptied::released : emptied::not_owner;
    return r;
  }
  void reset() noexcept {
    if (s_) (void)give_back();  // a destructor has nowhere to report it
  }

  // release()'s what() for the error `r`, the lease having been held or
  // empty (for the reason `before`) when it was called.
  [[nodiscard]] std::string failure_text(int r, bool held,
                                         emptied before) const {
    std::string m = "shmsem: release";
    if (held && empty_ == emptied::not_owner) {
      m += ": lease belongs to process ";
      m += std::to_string(owner_);
      m += ", not to this process ";
      m += std::to_string(cxx_internal::this_process());
      m += " (a fork child inherits no leases); its permit stays held by its "
           "owner";
    } else if (held && r == -EINVAL) {
      m += ": the token is malformed or names another semaphore";
    } else if (!held) {
      switch (before) {
        case emptied::released:
          m += ": lease already released";
          break;
        case emptied::moved_from:
          m += ": lease was moved from (its permit went with it)";
          break;
        case emptied::detached:
          m += ": lease was detached (its token is released elsewhere)";
          break;
        case emptied::not_owner:
          m += ": lease already given up in this process (another process's, "
               "copied by fork)";
          break;
        case emptied::never_held:
          m += ": lease is empty: it never held a permit";
          break;
      }
    }
    return m;
  }

  shmsem_t *s_ = nullptr;
  shmsem_lease_t token_{};
  std::uint32_t weight_ = 0;
  pid_t owner_ =
      0;  // the process that may release it (this_process() when made)
  emptied empty_ = emptied::never_held;
};

// An open semaphore (one shmsem_t), detached by the destructor. Move-only;
// a moved-from or default-constructed semaphore is empty (false), and its
// members throw std::system_error(EINVAL) as the C API does for NULL.
//
// Acquires block in the FIFO queue as shmsem_acquire does (not interrupted
// by signals; a pthread cancellation point). Errors besides the nullopt
// cases in the banner's table: ESHUTDOWN closed, EBUSY the wait queue is
// full, EBADF read-only handle, EXDEV another PID namespace, EINVAL empty
// (what() says so, and names a bad weight and its bound: the banner).
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
  // lacks SHMSEM_EXCL. Throws std::system_error (EEXIST, EPERM, EINVAL, ...;
  // a negative opt.per or opt.max_bypass, or an opt.lease_ttl shmsem_config
  // cannot hold, is EINVAL before the C API is called).
  [[nodiscard]] static semaphore create(const char *name, const options &opt,
                                        int flags = 0) {
    shmsem_config cfg;
    if (const char *why = cxx_internal::to_config(opt, &cfg))
      cxx_internal::throw_error(-EINVAL, why);
    return create(name, cfg, flags);
  }
  [[nodiscard]] static semaphore create(const std::string &name,
                                        const options &opt, int flags = 0) {
    return create(name.c_str(), opt, flags);
  }
  // The same from the C configuration. A template only so that a braced
  // list, `create(name, {.permits = 8})`, means options and is not
  // ambiguous (it cannot deduce `Config`); any shmsem_config object binds.
  template <std::same_as<shmsem_config> Config>
  [[nodiscard]] static semaphore create(const char *name, const Config &cfg,
                                        int flags = 0) {
    shmsem_t *s = nullptr;
    if (int r = shmsem_create(name, &cfg, flags, &s))
      cxx_internal::throw_error(r, "shmsem: create");
    return semaphore(s);
  }
  template <std::same_as<shmsem_config> Config>
  [[nodiscard]] static semaphore create(const std::string &name,
                                        const Config &cfg, int flags = 0) {
    return create(name.c_str(), cfg, flags);
  }
  // shmsem_open: flags 0 or SHMSEM_RDONLY. Throws std::system_error
  // (ENOENT, EACCES, EBADMSG, EPROTO, EXDEV, EINVAL).
  [[nodiscard]] static semaphore open(const char *name, int flags = 0) {
    shmsem_t *s = nullptr;
    if (int r = shmsem_open(name, flags, &s))
      cxx_internal::throw_error(r, "shmsem: open");
    return semaphore(s);
  }
  [[nodiscard]] static semaphore open(const std::string &name, int flags = 0) {
    return open(name.c_str(), flags);
  }
  // shmsem_unlink: removes the name (open handles keep working). Throws
  // std::system_error (ENOENT, EACCES, EINVAL), or reports into `ec`.
  static void unlink(const char *name) {
    if (int r = shmsem_unlink(name))
      cxx_internal::throw_error(r, "shmsem: unlink");
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
    if (int r = shmsem_acquire(s_, &t)) fail(r, "shmsem: acquire");
    return lease(s_, t);
  }
  // Blocks until n permits are granted, as one lease.
  template <cxx_internal::permit_count N>
  [[nodiscard]] lease acquire(N n) {
    const std::uint32_t w = weight(n, "shmsem: acquire");
    shmsem_lease_t t;
    if (int r = shmsem_acquire_n(s_, w, &t)) fail(r, "shmsem: acquire", w);
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
    if (r) fail(r, "shmsem: try_acquire", w);
    return lease(s_, t, w);
  }

  // Waits at most `rel` (rounded up to whole nanoseconds; a duration too
  // long to represent waits forever, zero or negative only tries); nullopt
  // on timeout. A grant racing the deadline wins. shmsem_acquire_for
  // (shmsem_acquire_for_n): the C API reads the clock once, at the call.
  template <class Rep, class Period>
  [[nodiscard]] std::optional<lease> acquire_for(
      const std::chrono::duration<Rep, Period> &rel) {
    shmsem_lease_t t;
    const int r = shmsem_acquire_for(s_, cxx_internal::timeout_ns(rel), &t);
    return timed(r, t, 1, "shmsem: acquire_for");
  }
  template <cxx_internal::permit_count N, class Rep, class Period>
  [[nodiscard]] std::optional<lease> acquire_for(
      N n, const std::chrono::duration<Rep, Period> &rel) {
    const std::uint32_t w = weight(n, "shmsem: acquire_for");
    shmsem_lease_t t;
    const int r =
        shmsem_acquire_for_n(s_, w, cxx_internal::timeout_ns(rel), &t);
    return timed(r, t, w, "shmsem: acquire_for");
  }

  // Waits until `abs` on steady_clock, passed to the C API as the absolute
  // CLOCK_MONOTONIC deadline it is (no reading of the clock here); nullopt
  // on timeout. A time point beyond the range waits forever.
  template <class Duration>
  [[nodiscard]] std::optional<lease> acquire_until(
      const std::chrono::time_point<std::chrono::steady_clock, Duration> &abs) {
    return acquire_ex(1, cxx_internal::at(abs), std::stop_token(),
                      "shmsem: acquire_until");
  }
  template <cxx_internal::permit_count N, class Duration>
  [[nodiscard]] std::optional<lease> acquire_until(
      N n,
      const std::chrono::time_point<std::chrono::steady_clock, Duration> &abs) {
    const std::uint32_t w = weight(n, "shmsem: acquire_until");
    return acquire_ex(w, cxx_internal::at(abs), std::stop_token(),
                      "shmsem: acquire_until");
  }
  // Another clock (system_clock, ...): turned into a duration once, at the
  // call, as std::condition_variable does; a later jump of that clock does
  // not move the deadline.
  template <class Clock, class Duration>
  requires(std::chrono::is_clock_v<Clock> &&
           !std::is_same_v<Clock, std::chrono::steady_clock>)
      [[nodiscard]] std::optional<lease> acquire_until(
          const std::chrono::time_point<Clock, Duration> &abs) {
    return acquire_for(abs - Clock::now());
  }
  template <cxx_internal::permit_count N, class Clock, class Duration>
  requires(std::chrono::is_clock_v<Clock> &&
           !std::is_same_v<Clock, std::chrono::steady_clock>)
      [[nodiscard]] std::optional<lease> acquire_until(
          N n, const std::chrono::time_point<Clock, Duration> &abs) {
    return acquire_for(n, abs - Clock::now());
  }

  // Blocks until a permit is granted or a stop is requested through `stop`
  // (before the call, or during the wait): nullopt then. A grant that races
  // the stop wins.
  [[nodiscard]] std::optional<lease> acquire(const std::stop_token &stop) {
    return acquire_ex(1, cxx_internal::deadline::never(), stop,
                      "shmsem: acquire");
  }
  // The same for n permits. A stop requested before the call is nullopt
  // before the C API sees `n` (only 0 and values beyond std::uint32_t are
  // refused first).
  template <cxx_internal::permit_count N>
  [[nodiscard]] std::optional<lease> acquire(N n, const std::stop_token &stop) {
    const std::uint32_t w = weight(n, "shmsem: acquire");
    return acquire_ex(w, cxx_internal::deadline::never(), stop,
                      "shmsem: acquire");
  }
  // Both: nullopt on a stop request or on the deadline.
  template <class Duration>
  [[nodiscard]] std::optional<lease> acquire_until(
      const std::chrono::time_point<std::chrono::steady_clock, Duration> &abs,
      const std::stop_token &stop) {
    return acquire_ex(1, cxx_internal::at(abs), stop, "shmsem: acquire_until");
  }
  template <class Rep, class Period>
  [[nodiscard]] std::optional<lease> acquire_for(
      const std::chrono::duration<Rep, Period> &rel,
      const std::stop_token &stop) {
    return acquire_ex(1, cxx_internal::after(rel), stop, "shmsem: acquire_for");
  }
  template <cxx_internal::permit_count N, class Duration>
  [[nodiscard]] std::optional<lease> acquire_until(
      N n,
      const std::chrono::time_point<std::chrono::steady_clock, Duration> &abs,
      const std::stop_token &stop) {
    const std::uint32_t w = weight(n, "shmsem: acquire_until");
    return acquire_ex(w, cxx_internal::at(abs), stop, "shmsem: acquire_until");
  }
  template <cxx_internal::permit_count N, class Rep, class Period>
  [[nodiscard]] std::optional<lease> acquire_for(
      N n, const std::chrono::duration<Rep, Period> &rel,
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
  // outside std::uint32_t; what() names the capacity and the bound), EBADF
  // read-only handle, EXDEV, EINVAL empty.
  template <cxx_internal::permit_count N>
  void set_permits(N permits) {
    std::error_code ec;
    set_permits(permits, ec);
    if (!ec) return;
    if (ec.value() == EINVAL && s_) {
      // The C API's one EINVAL with a valid handle: above max_permits.
      const std::optional<std::uint32_t> p = cxx_internal::to_u32(permits);
      const std::optional<std::uint32_t> max = cxx_internal::max_permits_of(s_);
      if (!p || !max || *p > *max) {
        throw std::system_error(
            ec, cxx_internal::outside_text("shmsem: set_permits", "capacity",
                                           cxx_internal::count_text(permits),
                                           "0", max));
      }
    }
    fail(-ec.value(), "shmsem: set_permits");
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
    if (r < 0) fail(r, "shmsem: shutdown");
    return r;
  }
  // shmsem_recover: reclaims what provably dead processes held; returns the
  // number of leases, slots and free leases reclaimed.
  int recover() {
    const int r = shmsem_recover(s_);
    if (r < 0) fail(r, "shmsem: recover");
    return r;
  }
  // shmsem_stat: a snapshot of the state and counters: `permits` is the
  // capacity now (set_permits), `max_permits` its bound, `retiring` what a
  // shrink still waits for, `held` counts a lease of n as n; with a rate,
  // `rate` per `rate_period_ns` and `burst` as created (defaults filled in:
  // burst 1, one second), `rate_tokens` and `rate_next_ns` (CLOCK_MONOTONIC,
  // steady_clock's epoch) the bucket now.
  [[nodiscard]] struct shmsem_stat stat() const {
    struct shmsem_stat st {};
    if (int r = shmsem_stat(s_, &st)) fail(r, "shmsem: stat");
    return st;
  }
  // shmsem_check: throws std::system_error(EUCLEAN) naming no invariant
  // (the C API returns only the code) if one is broken.
  void check() const {
    if (int r = shmsem_check(s_)) fail(r, "shmsem: check");
  }

  [[nodiscard]] shmsem_t *native_handle() const noexcept { return s_; }
  [[nodiscard]] explicit operator bool() const noexcept {
    return s_ != nullptr;
  }

 private:
  // `n` as the C API's count, or EINVAL thrown: 0 here already (so that a
  // stop requested before the call does not hide it), and anything outside
  // std::uint32_t, which the C API would see truncated.
  template <cxx_internal::permit_count N>
  std::uint32_t weight(N n, const char *what) const {
    const std::optional<std::uint32_t> w = cxx_internal::to_u32(n);
    if (!w || *w == 0) {
      throw std::system_error(to_error_code(-EINVAL),
                              cxx_internal::outside_text(
                                  what, "weight", cxx_internal::count_text(n),
                                  "1", cxx_internal::max_permits_of(s_)));
    }
    return *w;
  }

  // Throws the error `r` of the call `what`, and for an EINVAL says why
  // where this header can tell: an empty semaphore, or a weight `n` above
  // max_permits (the C API's only EINVAL for an acquire with a valid handle
  // and deadline; the bound is read with shmsem_stat, on this error path).
  [[noreturn]] void fail(int r, const char *what, std::uint32_t n = 1) const {
    if (r == -EINVAL && !s_)
      throw std::system_error(to_error_code(r),
                              cxx_internal::empty_semaphore_text(what));
    if (r == -EINVAL && n > 1) {
      const std::optional<std::uint32_t> max = cxx_internal::max_permits_of(s_);
      if (max && n > *max) {
        throw std::system_error(
            to_error_code(r), cxx_internal::outside_text(
                                  what, "weight", std::to_string(n), "1", max));
      }
    }
    cxx_internal::throw_error(r, what);
  }

  // The result `r` of shmsem_acquire_for(_n) into `t`: nullopt on a
  // timeout, else the lease of weight `n` or the error thrown.
  std::optional<lease> timed(int r, const shmsem_lease_t &t, std::uint32_t n,
                             const char *what) {
    if (r == -ETIMEDOUT) return std::nullopt;
    if (r) fail(r, what, n);
    return lease(s_, t, n);
  }

  // shmsem_acquire_ex_n (n == 1: shmsem_acquire_ex's path, lock-free when
  // uncontended) with an optional stop_token. The cancel handle is
  // declared before the stop_callback, so it outlives it: the callback's
  // destructor waits for a shmsem_cancel running on another thread, as
  // shmsem.h requires ("valid until ... any concurrent shmsem_cancel on it
  // [has] returned").
  std::optional<lease> acquire_ex(std::uint32_t n,
                                  const cxx_internal::deadline &d,
                                  const std::stop_token &stop,
                                  const char *what) {
    shmsem_lease_t t;
    int r;
    if (!stop.stop_possible()) {
      r = shmsem_acquire_ex_n(s_, n, d.get(), nullptr, 0, &t);
    } else {
      if (stop.stop_requested()) return std::nullopt;
      shmsem_cancel_t cancel;
      shmsem_cancel_init(&cancel);
      const std::stop_callback on_stop(
          stop, [&cancel]() noexcept { shmsem_cancel(&cancel); });
      r = shmsem_acquire_ex_n(s_, n, d.get(), &cancel, 0, &t);
    }
    if (r == -ETIMEDOUT || r == -ECANCELED) return std::nullopt;
    if (r) fail(r, what, n);
    return lease(s_, t, n);
  }

  shmsem_t *s_ = nullptr;
};

}  // namespace shmsem

#endif  // __cplusplus >= 202002L

#endif  // SHMSEM_SHMSEM_HPP
