// Process-global state behind the test-only hooks and manual clock.
// Exists only in SHMSEM_TESTING builds.
#ifndef SHMSEM_SRC_TESTING_STATE_H
#define SHMSEM_SRC_TESTING_STATE_H

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
}  // namespace shmsem::detail
#endif

#endif  // SHMSEM_SRC_TESTING_STATE_H
