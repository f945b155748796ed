// The lock-free path: an uncontended acquire and release that take no lock
// and make no system call, one CAS on the lease word each, and stay
// attributable to their process after a crash. docs/DESIGN.md section 11.
//
// A thread's lane (layout.h) names the lease it freed last (`loose`). A
// release stores that name, then CASes its lease HELD_FAST -> LOOSE; an
// acquire reads the lease its lane names and, if it is still LOOSE and the
// gate is shut (nobody queued, not closed), CASes it LOOSE -> HELD_FAST
// under its own process record. Everything else (no lane, no process
// record, a gate open, a CAS lost, a lease that is not the lane's) takes the
// locked path, which handles every state.
#ifndef SHMSEM_SRC_FASTPATH_H
#define SHMSEM_SRC_FASTPATH_H

#include <shmsem/shmsem.h>

#include "clock.h"
#include "handle.h"
#include "hist.h"
#include "hooks.h"
#include "owner.h"
#include "lanes.h"
#include "release.h"
#include "tables.h"

namespace shmsem::detail {

// --- the lock-free path, inline into the C API -----------------------------
// This thread's lane: the process it was taken in, and its index (-1: all
// kLanes were taken by live threads of the process; this one then always
// takes the locked path). C TLS (no constructor), initial-exec: one
// %fs-relative load.
struct LaneCache {
  int32_t pid;
  int32_t lane;
};
extern __thread LaneCache t_lane __attribute__((tls_model("initial-exec")));
int take_lane_slow(int32_t pid);
inline int self_lane(int32_t pid) {
  if (__builtin_expect(t_lane.pid == pid, 1)) return t_lane.lane;
  return take_lane_slow(pid);
}

struct Fast {
  uint32_t proc;
  int32_t pid;  // ours
  Lane *lane;
  LaneHold *hold;  // the lane's hold times
};

// The calling thread's process record and lane in `s`, if it has both.
inline bool fast_ctx(shmsem_t *s, Fast *f) {
  const int32_t pid = self_pid();
  // The handle is process memory: fast_proc was checked when it was set,
  // under the lock, for this pid (a child of fork() has another).
  if (s->fast_pid.load(std::memory_order_acquire) != pid) return false;
  uint32_t p = s->fast_proc.load(std::memory_order_relaxed);
  if (p >= s->max_procs) return false;
  int lane = self_lane(pid);
  if (lane < 0) return false;
  f->proc = p;
  f->pid = pid;
  f->lane = &s->procs[p].lanes[lane];
  f->hold = &s->holds[p * kLanes + uint32_t(lane)];
  return true;
}

// A LOOSE lease named by a lane of one of the first few process records,
// taken as fast_acquire() takes its own (fastpath.cc). 0 or 1.
__attribute__((cold, noinline)) int fast_take_other(shmsem_t *s, const Fast &f,
                                                    shmsem_lease_t *lease);

// 0 and *lease filled, or 1: take the locked path.
// The record is still ours (in use, naming our pid): reclamation may have
// freed it (a writer can make a live process look dead) and another process
// taken it; then the locked path registers us again (self_proc), so no
// lease of ours is ever taken under another's record. In full off the hot
// path, in fast_take_other(): a record reclaimed has every lane emptied
// (kNone), so our next lock-free acquire comes there first. On the hot
// path only the pid (one load of a line nobody writes while we live): a
// record another process took has its lanes, which ours alias, naming
// that process's free leases. (A release needs no check: its CAS fails on
// a lease that reclamation passed on.)
inline bool proc_still_ours(const shmsem_t *s, uint32_t p) {
  const ProcRecord &pr = s->procs[p];
  return pr.state.load(std::memory_order_relaxed) == kProcUsed &&
         __atomic_load_n(&pr.owner.pid, __ATOMIC_RELAXED) ==
             s->fast_pid.load(std::memory_order_relaxed);
}

inline int fast_acquire(shmsem_t *s, shmsem_lease_t *lease) {
  Fast f;
  if (!fast_ctx(s, &f)) return 1;
  if (__builtin_expect(__atomic_load_n(&s->procs[f.proc].owner.pid,
                                       __ATOMIC_RELAXED) != f.pid,
                       0))
    return 1;  // not our record any more (proc_still_ours)
  const uint32_t l = f.lane->loose.load(std::memory_order_relaxed);
  if (__builtin_expect(l >= s->permits, 0)) return fast_take_other(s, f, lease);
  LeaseRecord &rec = s->leases[l];
  uint64_t w = rec.word.load(std::memory_order_acquire);
  if (__builtin_expect(word_state(w) != kLeaseLoose, 0))
    return fast_take_other(s, f, lease);
  // FIFO: between the load above and the CAS below the lease stays LOOSE at
  // this generation (every grant changes it), so it was free when the gate
  // read shut: the acquire takes effect at this load, before any waiter
  // that opens the gate later.
  // (kGateBarge: the bounded policy lets newcomers past a queue.)
  if (s->core->gate.load(std::memory_order_acquire) & ~kGateBarge) return 1;
  SHMSEM_HOOK(FAST_ACQUIRE_READ);
  const uint64_t gen = next_gen(word_gen(w));
  // Commit. Acquire: pairs with the release CAS that freed it, so the
  // previous holder's critical section happens-before ours.
  if (!rec.word.compare_exchange_strong(
          w, lease_word(kLeaseHeldFast, f.proc, gen), std::memory_order_acquire,
          std::memory_order_relaxed))
    return 1;
  SHMSEM_HOOK(FAST_ACQUIRE_TAKEN);
  rec.since_ns.store(coarse_ns(), std::memory_order_relaxed);
  f.lane->acquisitions.store(
      f.lane->acquisitions.load(std::memory_order_relaxed) + 1,
      std::memory_order_relaxed);
  fill_token(s, l, gen, lease);
  return 0;
}

// The bounded policy, a lease freed LOOSE past a queue: the head races for
// it (section.h nudge_slot). The head read once, without the lock: a stale
// one is nudged for nothing, and the head then runs at its next nudge or at
// the end of its bound, when it turns the hand-off on.
__attribute__((cold, noinline)) void nudge_head(shmsem_t *s);

// Record the hold time of a lease granted at `since` (coarse_ns()) in the
// releasing thread's lane: plain adds, only that thread writes them.
inline void lane_hold(LaneHold *h, uint64_t since) {
  const uint64_t now = coarse_ns();
  const uint64_t ns = now > since ? now - since : 0;
  std::atomic<uint64_t> &n = h->hist[hold_bucket(ns)];
  n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  h->sum_ns.store(h->sum_ns.load(std::memory_order_relaxed) + ns,
                  std::memory_order_relaxed);
}

// 0 released, or 1: take the locked path (which gives every error). The
// caller has checked the token's semaphore, index and reserved field.
inline int fast_release(shmsem_t *s, const shmsem_lease_t *lease) {
  // Someone queued (or a shrink waits): the permit goes on under the lock.
  if (s->core->gate.load(std::memory_order_relaxed) & kGateHandOn) return 1;
  Fast f;
  if (!fast_ctx(s, &f)) return 1;
  const uint32_t l = lease->index;
  LeaseRecord &rec = s->leases[l];
  uint64_t w = rec.word.load(std::memory_order_relaxed);
  if (word_state(w) != kLeaseHeldFast || word_gen(w) != lease->gen) return 1;
  // The lane names one LOOSE lease at most, so that every LOOSE lease is
  // named by a lane of its process (what the sweeps find).
  const uint32_t old = f.lane->loose.load(std::memory_order_relaxed);
  if (old != l && old < s->permits &&
      lease_state(s->leases[old]) == kLeaseLoose)
    return 1;
  // Named before it is freed: a releaser killed after the CAS leaves a
  // LOOSE lease its lane names, never an unnamed free one.
  f.lane->loose.store(l, std::memory_order_relaxed);
  SHMSEM_HOOK(FAST_RELEASE_NAMED);
  const uint64_t since = rec.since_ns.load(std::memory_order_relaxed);
  // Commit, exactly once: the CAS checks the token's generation and the
  // state in one word. Release: the critical section happens-before the
  // next holder's acquire CAS.
  if (!rec.word.compare_exchange_strong(
          w, lease_word(kLeaseLoose, f.proc, word_gen(w)),
          std::memory_order_release, std::memory_order_relaxed))
    return 1;
  SHMSEM_HOOK(FAST_RELEASE_FREED);
  lane_hold(f.hold, since);
  // Dekker with whoever opens the gate (unlock(): gate store, fence, sweep
  // of the lanes): either that sweep sees this lease LOOSE, or this load
  // sees the gate open and the lease goes to the head from here.
  fence_after_rmw();
  const uint32_t gate = s->core->gate.load(std::memory_order_relaxed);
  if (gate & kGateHandOn)
    hand_loose(s, l);
  else if (gate & kGateBarge)
    nudge_head(s);
  return 0;
}

// The token's checks and the lock-free release: 0 released, a negative
// errno, or 1: the locked path must decide (release_locked(), core).
int release_lockfree(shmsem_t *s, const shmsem_lease_t *lease);
// Release a lease: the lock-free path if it can, else the locked one.
inline int release(shmsem_t *s, const shmsem_lease_t *lease) {
  const int r = release_lockfree(s, lease);
  return r <= 0 ? r : release_locked(s, lease);
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_FASTPATH_H
