// shmsem:: — a small C++ wrapper over <shmsem/shmsem.h>: a move-only Lease
// that releases its permit when it goes out of scope, so a task that fails
// (returns early or throws) still returns its permit.
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

#endif  // SHMSEM_SHMSEM_HPP
