// The test-only interface (testing.h); built only into the testing library.
#include "testing.h"

#include <errno.h>

#include "census.h"
#include "handle.h"
#include "section.h"
#include "transitions.h"
#include "tables.h"
#include "testing_state.h"

namespace shmsem::detail {

std::atomic<ClockFn> g_clock{nullptr};
std::atomic<HookFn> g_hook{nullptr};
std::atomic<void *> g_hook_ctx{nullptr};
std::atomic<bool> g_force_named_tmp{false};
std::atomic<bool> g_force_proc_fd{false};
std::atomic<int> g_create_route{0};
std::atomic<unsigned> g_liveness_limits{0};

void run_hook(HookPoint p) {
  HookFn fn = g_hook.load(std::memory_order_acquire);
  if (fn) fn(p, g_hook_ctx.load(std::memory_order_acquire));
}

}  // namespace shmsem::detail

namespace shmsem::testing {

using namespace detail;

void set_hook(HookFn fn, void *ctx) {
  g_hook_ctx.store(ctx, std::memory_order_release);
  g_hook.store(fn, std::memory_order_release);
}

void set_clock(uint64_t (*now_ns)()) {
  g_clock.store(now_ns, std::memory_order_release);
}

void force_named_tmp_create(bool on) {
  g_force_named_tmp.store(on, std::memory_order_relaxed);
}

void force_proc_fd_link(bool on) {
  g_force_proc_fd.store(on, std::memory_order_relaxed);
}

PublishRoute last_create_route() {
  return PublishRoute(g_create_route.load(std::memory_order_relaxed));
}

const char *hook_name(HookPoint p) {
  static const char *const names[] = {
#define SHMSEM_X(name) #name,
      SHMSEM_HOOK_POINTS(SHMSEM_X)
#undef SHMSEM_X
  };
  int i = int(p);
  return i >= 0 && i < int(HookPoint::kCount) ? names[i] : "?";
}

Census census(shmsem_t *s) {
  Section sec(s);
  const detail::Census d = detail::census(s);
  Census c{};
  c.free_leases = d.free + d.loose;
  c.held = d.held + d.fast;
  c.reserved = d.reserved;
  for (uint32_t w = 0; w < s->max_waiters; w++) {
    switch (s->slots[w].word.load(std::memory_order_relaxed)) {
      case kSlotFree:
        c.free_slots++;
        break;
      case kSlotWaiting:
        c.waiting_slots++;
        break;
      case kSlotGranted:
        c.granted_slots++;
        break;
      default:
        c.other_slots++;
    }
  }
  return c;
}

void limit_liveness(unsigned limits) {
  g_liveness_limits.store(limits, std::memory_order_relaxed);
}

int lease_owner_pid(shmsem_t *s, shmsem_lease_t lease) {
  if (lease.index >= s->permits) return -1;
  Section sec(s);
  const LeaseRecord &r = s->leases[lease.index];
  uint64_t w = r.word.load(std::memory_order_relaxed);
  if (word_gen(w) != lease.gen) return -1;
  if (word_state(w) == kLeaseHeldFast && word_proc(w) < s->max_procs)
    return s->procs[word_proc(w)].owner.pid;
  if (word_state(w) != kLeaseHeld) return -1;
  return r.owner.pid;
}

int set_lease_owner(shmsem_t *s, shmsem_lease_t lease, int pid, uint64_t start,
                    uint64_t ino) {
  if (lease.index >= s->permits) return -EINVAL;
  Section sec(s);
  LeaseRecord &r = s->leases[lease.index];
  uint64_t w = r.word.load(std::memory_order_relaxed);
  if (word_gen(w) != lease.gen) return -EINVAL;
  if (word_state(w) == kLeaseHeldFast) {
    // Lock it in as HELD under its process, so the owner can be rewritten.
    if (!lease_lock_in(sec.locked(), lease.index, &w,
                       word_proc(w) < s->max_procs
                           ? s->procs[word_proc(w)].owner
                           : Owner{}))
      return -EINVAL;
    counter_add(s->core->held, 1);
  } else if (word_state(w) != kLeaseHeld) {
    return -EINVAL;
  }
  r.owner.pid = pid;
  r.owner.start = start;
  r.owner.ino = ino;
  return 0;
}

int queue_tickets(shmsem_t *s, uint64_t *out, int max) {
  Section sec(s);
  int n = 0;
  for (uint32_t w = s->core->head; w != kNone && n < max; w = s->slots[w].next)
    out[n++] = s->slots[w].ticket;
  return n;
}

}  // namespace shmsem::testing
