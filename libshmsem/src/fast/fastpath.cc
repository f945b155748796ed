// The lock-free path. See fastpath.h and docs/DESIGN.md section 11.
#include "fastpath.h"

#include <errno.h>

#include <algorithm>

#include "clock.h"
#include "futex.h"
#include "hooks.h"
#include "lock.h"
#include "owner.h"
#include "section.h"
#include "tables.h"

namespace shmsem::detail {
namespace {

// --- lanes: a small index per thread, process-local
// ---------------------------- Bits 0..kLanes-1: lanes taken by live threads of
// the process whose pid is in the upper half. A child of fork() finds another
// pid there and starts afresh (its threads other than the forking one do not
// exist).
std::atomic<uint64_t> g_lanes{0};

// Gives the lane back when its thread exits (a thread_local destructor
// runs at any thread exit, pthread_exit and cancellation included).
struct LaneRelease {
  int32_t pid = 0;
  int32_t lane = -1;
  ~LaneRelease() {
    if (lane < 0) return;
    // This thread may still call the library after this destructor (from a
    // pthread key's destructor, or a thread_local constructed before this
    // one): from here it has no lane, and takes the locked path. Another
    // thread may take the lane as soon as it is given back, and two threads
    // writing one lane can leave a free lease that no lane names (found by
    // an adversarial test: permits lost, keys released in key destructors).
    if (t_lane.pid == pid) t_lane.lane = -1;
    uint64_t v = g_lanes.load(std::memory_order_relaxed);
    for (;;) {
      if (int32_t(v >> 32) != pid) return;  // a child's: not ours to free
      uint64_t nv = v & ~(uint64_t{1} << lane);
      if (g_lanes.compare_exchange_weak(v, nv, std::memory_order_relaxed))
        return;
    }
  }
};
thread_local LaneRelease t_lane_release;

int take_lane(int32_t pid) {
  uint64_t v = g_lanes.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t bits = int32_t(v >> 32) == pid ? v & 0xffff'ffffu : 0;
    int lane = -1;
    for (uint32_t i = 0; i < kLanes; i++)
      if (!(bits & (uint64_t{1} << i))) {
        lane = int(i);
        break;
      }
    if (lane < 0) return -1;
    uint64_t nv = uint64_t(uint32_t(pid)) << 32 | bits | uint64_t{1} << lane;
    if (g_lanes.compare_exchange_weak(v, nv, std::memory_order_relaxed))
      return lane;
  }
}

}  // namespace

__thread LaneCache t_lane;

// Records looked at without the lock: a few processes alternating on a
// permit hand it to each other lock-free; beyond them the locked path's
// scan (take_any_loose) finds the rest.
constexpr uint32_t kStealProcs = 8;

int fast_take_other(shmsem_t *s, const Fast &f, shmsem_lease_t *lease) {
  if (s->core->gate.load(std::memory_order_relaxed) & ~kGateBarge) return 1;
  if (!proc_still_ours(s, f.proc)) return 1;  // fastpath.h
  uint32_t hwm = std::min({s->core->procs_hwm.load(std::memory_order_relaxed),
                           s->max_procs, kStealProcs});
  for (uint32_t p = 0; p < hwm; p++) {
    if (s->procs[p].state.load(std::memory_order_relaxed) != kProcUsed)
      continue;
    for (const Lane &ln : s->procs[p].lanes) {
      uint32_t l = ln.loose.load(std::memory_order_relaxed);
      if (l >= s->permits) continue;
      LeaseRecord &rec = s->leases[l];
      uint64_t w = rec.word.load(std::memory_order_acquire);
      if (word_state(w) != kLeaseLoose) continue;
      // As fast_acquire(): LOOSE at this generation from the load to the
      // CAS, and the gate read shut in between. (The same steps as its
      // tail, written twice on purpose: shared through one helper, even
      // always_inline, the uncontended pair measured 25.7 ns, not 21.4.)
      if (s->core->gate.load(std::memory_order_acquire) & ~kGateBarge) return 1;
      const uint64_t gen = next_gen(word_gen(w));
      if (!rec.word.compare_exchange_strong(
              w, lease_word(kLeaseHeldFast, f.proc, gen),
              std::memory_order_acquire, std::memory_order_relaxed))
        continue;
      SHMSEM_HOOK(FAST_ACQUIRE_TAKEN);
      rec.since_ns.store(coarse_ns(), std::memory_order_relaxed);
      f.lane->acquisitions.store(
          f.lane->acquisitions.load(std::memory_order_relaxed) + 1,
          std::memory_order_relaxed);
      fill_token(s, l, gen, lease);
      return 0;
    }
  }
  return 1;
}

void nudge_head(shmsem_t *s) {
  const uint32_t h = __atomic_load_n(&s->core->head, __ATOMIC_RELAXED);
  if (h < s->max_waiters) nudge_slot(s, h);
}

int take_lane_slow(int32_t pid) {
  int lane = take_lane(pid);
  t_lane.pid = pid;
  t_lane.lane = lane;
  t_lane_release.pid = pid;
  t_lane_release.lane = lane;
  return lane;
}

int release_lockfree(shmsem_t *s, const shmsem_lease_t *lease) {
  if (!s || !lease) return -EINVAL;
  if (s->rdonly) return -EBADF;
  // A token names its semaphore (a nonce drawn at creation): one of another
  // semaphore, or of an earlier one under the same name, is not ours.
  if (lease->sem != s->nonce || lease->index >= s->permits || lease->gen == 0 ||
      lease->gen > kGenMask || lease->__reserved)
    return -EINVAL;
  // A HELD_FAST lease, nobody queued (fastpath.h); else 1.
  return fast_release(s, lease) == 0 ? 0 : 1;
}

}  // namespace shmsem::detail
