// The backend seam: the one interface behind the C entry points (capi.cc).
// A backend is a table of functions that implements the semaphore for one
// kind of name: the shared-memory backend (shm_backend.cc) for "/pool", a
// network backend (issue 27: Redis) for "redis://host:port/pool". The name
// chooses the backend (backend_for_name); each handle names its own
// (segment/handle.h), each queued waiter is claimed by its backend
// (waiter_backend). docs/BACKENDS.md states the contract of every entry.
//
// Plain function pointers, not a class: the library is built without RTTI
// and exceptions, the table is a constant in read-only memory, and a call
// through it is one load and one indirect call. The uncontended acquire and
// release of a shm handle do not take it: capi.cc tests the handle's
// backend (nullptr: shm) and runs the lock-free path inline (shm_backend.h,
// fast/fastpath.h).
#ifndef SHMSEM_SRC_BACKEND_H
#define SHMSEM_SRC_BACKEND_H

#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>
#include <stddef.h>

#include <atomic>
#include <iterator>

#include "handle.h"

namespace shmsem::detail {

struct Backend {
  const char *name;  // "shm": for messages and tests
  // The URL schemes whose names this backend serves ("redis" for
  // "redis://..."; lower case, matched in any case), nullptr-terminated. Empty
  // for the shm backend, which serves the names without a scheme ("/pool").
  const char *const *schemes;

  // --- by name: `name` is one this backend serves (backend_for_name) ------
  // shmsem_create/shmsem_open: 0 and *out a handle of this backend (its
  // first member names this table; nullptr for the shm backend's), or a
  // negative errno and *out NULL (if `out` is not NULL).
  int (*create)(const char *name, const shmsem_config *cfg, int flags,
                shmsem_t **out);
  int (*open)(const char *name, int flags, shmsem_t **out);
  int (*unlink)(const char *name);

  // --- by handle: `s` is this backend's (or NULL for the shm backend) ----
  void (*detach)(shmsem_t *s);
  // Every acquire: `n` permits, an absolute CLOCK_MONOTONIC deadline or
  // nullptr (none), a cancel handle or nullptr, shmsem_acquire_ex's flags.
  int (*acquire)(shmsem_t *s, uint32_t n, const timespec *deadline,
                 shmsem_cancel_t *cancel, unsigned flags,
                 shmsem_lease_t *lease);
  int (*try_acquire)(shmsem_t *s, uint32_t n, shmsem_lease_t *lease);
  int (*release)(shmsem_t *s, shmsem_lease_t *lease);
  int (*set_permits)(shmsem_t *s, uint32_t permits);
  int (*shutdown)(shmsem_t *s);
  int (*recover)(shmsem_t *s);
  int (*check)(shmsem_t *s);
  int (*stat)(shmsem_t *s, struct shmsem_stat *st);
  int (*inspect)(shmsem_t *s, struct shmsem_inspection *out,
                 struct shmsem_holder *holders, uint32_t max_holders,
                 struct shmsem_waiter_info *waiters, uint32_t max_waiters);
  int (*declare_hold)(shmsem_t *s, const shmsem_lease_t *lease,
                      uint64_t hold_ns);

  // --- the non-blocking waiter --------------------------------------------
  int (*waiter_start)(shmsem_t *s, shmsem_waiter_t *w, uint32_t n,
                      const timespec *deadline, shmsem_lease_t *lease);
  // True if `w` (not NULL; any bytes at all) is a waiter this backend
  // queued, decided from `w`'s own bytes without following a pointer in
  // them. Every backend but the shm one has it; the shm backend is never
  // asked (nullptr): it takes every waiter no other backend claims, and
  // its calls give -EINVAL for one it did not queue.
  bool (*owns_waiter)(const shmsem_waiter_t *w);
  int (*waiter_futex)(const shmsem_waiter_t *w, uint32_t **word,
                      uint32_t *value);
  int (*waiter_wake_by)(const shmsem_waiter_t *w, timespec *at);
  int (*waiter_poll)(shmsem_waiter_t *w, shmsem_lease_t *lease);
  int (*waiter_cancel)(shmsem_waiter_t *w, shmsem_lease_t *lease);

  // --- leases that expire (remote backends; nullptr: -EOPNOTSUPP) --------
  // shmsem_lease_renew: keep `lease` alive now; 0, -EKEYEXPIRED, -EALREADY.
  int (*lease_renew)(shmsem_t *s, const shmsem_lease_t *lease);
  // shmsem_lease_sequence: the global grant sequence number of `lease`.
  int (*lease_sequence)(shmsem_t *s, const shmsem_lease_t *lease,
                        uint64_t *seq);

  // --- by place (optional; nullptr: -EOPNOTSUPP) -------------------------
  // shmsem_list_at: the semaphores kept at `where` (backend_for_name chose
  // this backend by its scheme; the shm backend gets NULL or "/dev/shm"),
  // sorted by name; the first `max` read into `out` (not NULL when `max`
  // is not 0), as shmsem_list does. How many there are, or a negative
  // errno for the place itself. Runs with cancellation disabled.
  int (*list)(const char *where, struct shmsem_list_entry *out, uint32_t max);
};

// The shared-memory backend (shm_backend.cc). Hidden, as everything here
// is (-fvisibility=hidden covers definitions, not this declaration).
extern const Backend kShmBackend __attribute__((visibility("hidden")));

#ifdef SHMSEM_HAVE_REDIS
// The Redis backend (redis/table.cc, the layer above this one).
extern const Backend kRedisBackend __attribute__((visibility("hidden")));
#endif

// Every backend of this build, the shm backend first. The Redis backend
// (issue 27) adds itself here, and nowhere else in this layer.
inline constexpr const Backend *kBackends[] = {&kShmBackend
#ifdef SHMSEM_HAVE_REDIS
                                               ,
                                               &kRedisBackend
#endif
};
static_assert(kBackends[0] == &kShmBackend);

#ifdef SHMSEM_TESTING
// The tests' build only: one more backend a test installs
// (tests/backend_test.cc), asked after those of kBackends, to show that a
// second backend plugs in by name, by handle and by waiter.
extern std::atomic<const Backend *> g_test_backend;
#endif

// The first backend other than the shm one for which `pred` is true, or
// nullptr. With the shm backend alone the loop is empty and compiles away.
template <class Pred>
const Backend *other_backend(Pred pred) {
  for (size_t i = 1; i < std::size(kBackends); i++)
    if (pred(kBackends[i])) return kBackends[i];
#ifdef SHMSEM_TESTING
  const Backend *t = g_test_backend.load(std::memory_order_acquire);
  if (t && pred(t)) return t;
#endif
  return nullptr;
}

// Every backend's handle is a standard-layout struct whose first member is
// its `const Backend *` (segment/handle.h for the shm backend's), so the
// handle's address is that member's. In a shm handle it is nullptr, which
// stands for kShmBackend: the layers below api/ build shm handles and
// cannot name this layer's table, and the hot path's test is then a compare
// with zero. A NULL handle is the shm backend's too: its entries answer it
// as they always have (-EINVAL, or nothing).
inline const Backend *named_backend(const shmsem_t *s) {
  return *reinterpret_cast<const Backend *const *>(s);
}
inline const Backend *backend_of(const shmsem_t *s) {
  const Backend *b = s ? named_backend(s) : nullptr;
  return b ? b : &kShmBackend;
}

// `s` is NULL or a handle of the shm backend: the shm backend answers, and
// the lock-free path applies to a non-NULL one. One compare with zero for
// a non-NULL `s`.
inline bool is_shm(const shmsem_t *s) { return !s || !named_backend(s); }

// The backend that queued waiter `w`: the other backend that claims it,
// else the shm backend (which also answers a NULL or unused `w`).
inline const Backend *waiter_backend(const shmsem_waiter_t *w) {
  if (!w) return &kShmBackend;
  const Backend *b =
      other_backend([w](const Backend *o) { return o->owns_waiter(w); });
  return b ? b : &kShmBackend;
}

// The backend that serves `name`: the one whose scheme opens it
// ("redis://..."), the shm backend for a name without a URL scheme (it
// checks the name itself: -EINVAL for a bad one), or nullptr for a scheme
// no backend of this build serves (-EPROTONOSUPPORT to the caller).
const Backend *backend_for_name(const char *name);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_BACKEND_H
