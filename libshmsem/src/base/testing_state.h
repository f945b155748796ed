// Process-global state behind the test-only hooks, manual clock and create
// route. Exists only in SHMSEM_TESTING builds.
#ifndef SHMSEM_SRC_TESTING_STATE_H
#define SHMSEM_SRC_TESTING_STATE_H

namespace shmsem::detail {
// Features a test can take away from the liveness checks (owner.cc) and the
// death watch (deathwatch.cc).
enum : unsigned {
  kLimitNoPidfs = 1u << 0,  // pidfds carry no pidfs inode (Linux < 6.9)
  kLimitNoPidfd = 1u << 1,  // no pidfd_open (Linux < 5.3, or seccomp)
  kLimitNoProc = 1u << 2,   // /proc unreadable
  kLimitNoUring = 1u << 3,  // no IORING_OP_FUTEX_WAIT (Linux < 6.7, seccomp)
  kLimitNoWaitv = 1u << 4,  // no futex_waitv (Linux < 5.16, seccomp)
};
}  // namespace shmsem::detail

#ifdef SHMSEM_TESTING
#include <stdint.h>

#include <atomic>

#include "hooks.h"

namespace shmsem::detail {
using ClockFn = uint64_t (*)();
using HookFn = void (*)(HookPoint, void *);
extern std::atomic<ClockFn> g_clock;
extern std::atomic<HookFn> g_hook;
extern std::atomic<void *> g_hook_ctx;
// publish.cc: build under a temporary name, or link an unnamed file through
// /proc/self/fd without trying AT_EMPTY_PATH; the route the last create took.
extern std::atomic<bool> g_force_named_tmp;
extern std::atomic<bool> g_force_proc_fd;
extern std::atomic<int> g_create_route;
extern std::atomic<unsigned> g_liveness_limits;
}  // namespace shmsem::detail
#endif

#endif  // SHMSEM_SRC_TESTING_STATE_H
