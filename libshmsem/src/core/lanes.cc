// The lanes under the lock. See lanes.h and docs/DESIGN.md section 11.
#include "lanes.h"

#include <algorithm>

#include "clock.h"
#include "futex.h"
#include "hooks.h"
#include "grant.h"
#include "section.h"
#include "transitions.h"

namespace shmsem::detail {
namespace {

bool same_process(const Owner &a, const Owner &b) {
  return a.pid == b.pid && a.start == b.start && a.ino == b.ino;
}

}  // namespace

// The releaser saw the gate open after freeing lease `l`: the head waiter
// (or a shrink) gets it, unless someone took it meanwhile (the sweep of
// whoever opened the gate, or an acquire that read the gate before it
// opened).
void hand_loose(shmsem_t *s, uint32_t l) {
  Section sec(s);
  SHMSEM_HOOK(FAST_HANDOFF_LOCKED);
  if (!wants_permit(s)) return;
  uint64_t w = s->leases[l].word.load(std::memory_order_relaxed);
  if (word_state(w) == kLeaseLoose)
    (void)pass_loose(sec.locked(), l, w, sec.wakes());
}

uint32_t self_proc(Locked s) {
  const Owner me = self_owner();
  if (s->fast_pid.load(std::memory_order_relaxed) == me.pid) {
    // Still ours? Reclamation frees a record whose process it proved dead,
    // and a writer can make a live one look dead: then the record may be
    // free, or another process's now, and ours must be found again
    // (leases taken under another's record would be reclaimed when that
    // one dies). No record at all (kNoProc) stays so for this process.
    const uint32_t p = s->fast_proc.load(std::memory_order_relaxed);
    if (p >= s->max_procs ||
        (s->procs[p].state.load(std::memory_order_relaxed) == kProcUsed &&
         same_process(s->procs[p].owner, me)))
      return p;
  }
  Core *c = s->core;
  uint32_t found = kNoProc, free_rec = kNoProc;
  for (uint32_t p = 0; p < s->max_procs; p++) {
    uint32_t st = s->procs[p].state.load(std::memory_order_relaxed);
    if (st == kProcUsed && same_process(s->procs[p].owner, me)) {
      found = p;  // ours already: exec'ed, or opened again
      break;
    }
    if (st != kProcUsed && free_rec == kNoProc) free_rec = p;
    if (p >= c->procs_hwm.load(std::memory_order_relaxed) &&
        free_rec != kNoProc)
      break;  // none in use beyond the mark
  }
  if (found == kNoProc && free_rec != kNoProc) {
    ProcRecord &pr = s->procs[free_rec];
    pr.owner = me;
    for (Lane &ln : pr.lanes) {
      ln.loose.store(kNone, std::memory_order_relaxed);
      ln.acquisitions.store(0, std::memory_order_relaxed);
    }
    fold_holds(s, free_rec);  // nothing, unless a writer left counts there
    SHMSEM_HOOK(PROC_NAMED);
    proc_claim(s, pr);  // commit
    if (c->procs_hwm.load(std::memory_order_relaxed) <= free_rec)
      c->procs_hwm.store(free_rec + 1, std::memory_order_relaxed);
    found = free_rec;
  }
  s->fast_proc.store(found, std::memory_order_relaxed);
  s->fast_pid.store(me.pid, std::memory_order_release);
  return found;
}

bool pass_loose(Locked s, uint32_t l, uint64_t w, Wakes *wk) {
  LeaseRecord &rec = s->leases[l];
  // Ours for the instant: a crash before pass_permit's commit leaves a HELD
  // lease of this (dead) process, which reclamation passes on. A grant, so
  // a new generation: kept, the token of the holder that freed it would
  // match that HELD lease again, and a second release of it after such a
  // crash returned 0 (the SPIN model's F1, verify/MODEL.md).
  rec.owner = self_owner();
  if (!lease_take_loose(s, rec, &w, kLeaseHeld, kNoProc, next_gen(word_gen(w))))
    return false;
  used_add_lease(s, l);
  pass_permit(s, l, wk);
  return true;
}

uint32_t take_any_loose(Locked s, uint32_t proc, const Owner &me,
                        uint64_t *gen) {
  uint32_t hwm = std::min(s->core->procs_hwm.load(std::memory_order_relaxed),
                          s->max_procs);
  for (uint32_t p = 0; p < hwm; p++) {
    if (s->procs[p].state.load(std::memory_order_relaxed) != kProcUsed)
      continue;
    for (Lane &ln : s->procs[p].lanes) {
      uint32_t l = ln.loose.load(std::memory_order_relaxed);
      if (l >= s->permits) continue;
      LeaseRecord &rec = s->leases[l];
      uint64_t w = rec.word.load(std::memory_order_relaxed);
      if (word_state(w) != kLeaseLoose) continue;
      uint64_t g = next_gen(word_gen(w));
      if (proc == kNoProc) rec.owner = process_of(me);
      if (!lease_take_loose(s, rec, &w,
                            proc == kNoProc ? kLeaseHeld : kLeaseHeldFast, proc,
                            g))
        continue;
      if (proc == kNoProc) {
        used_add_lease(s, l);
        counter_add(s->core->held, 1);
      }
      rec.since_ns.store(coarse_ns(), std::memory_order_relaxed);
      *gen = g;
      return l;
    }
  }
  return kNone;
}

bool loose_named(const shmsem_t *s, uint32_t l, uint64_t w) {
  uint32_t p = word_proc(w);
  if (p >= s->max_procs ||
      s->procs[p].state.load(std::memory_order_relaxed) != kProcUsed)
    return false;
  for (const Lane &ln : s->procs[p].lanes)
    if (ln.loose.load(std::memory_order_relaxed) == l) return true;
  return false;
}

int recover_unnamed_loose(shmsem_t *s) {
  Section sec(s);
  int n = 0;
  for (uint32_t l = 0; l < s->permits; l++) {
    uint64_t w = s->leases[l].word.load(std::memory_order_acquire);
    if (word_state(w) != kLeaseLoose || loose_named(s, l, w)) continue;
    // Taken and freed again since the read: the CAS fails (a new
    // generation), and the lease is someone's, named or held.
    n += pass_loose(sec.locked(), l, w, sec.wakes());
  }
  return n;
}

int sweep_loose(Locked s) {
  Core *c = s->core;
  int n = 0;
  uint32_t hwm =
      std::min(c->procs_hwm.load(std::memory_order_relaxed), s->max_procs);
  Wakes wk;
  for (uint32_t p = 0; p < hwm && wants_permit(s); p++) {
    if (s->procs[p].state.load(std::memory_order_relaxed) != kProcUsed)
      continue;
    for (Lane &ln : s->procs[p].lanes) {
      if (!wants_permit(s)) break;
      uint32_t l = ln.loose.load(std::memory_order_relaxed);
      if (l >= s->permits) continue;
      uint64_t w = s->leases[l].word.load(std::memory_order_relaxed);
      if (word_state(w) != kLeaseLoose) continue;
      n += pass_loose(s, l, w, &wk);
    }
  }
  // Under the lock: rare (a release crossed the opening of the gate), and
  // the grant is woken even if this process dies the moment it unlocks.
  wk.wake_all(s);
  return n;
}

void fold_holds(Locked s, uint32_t p) {
  Core *c = s->core;
  for (uint32_t ln = 0; ln < kLanes; ln++) {
    LaneHold &h = s->holds[p * kLanes + ln];
    stat_bump(c->hold_sum_ns, h.sum_ns.load(std::memory_order_relaxed));
    h.sum_ns.store(0, std::memory_order_relaxed);
    for (int b = 0; b < SHMSEM_HOLD_BUCKETS; b++) {
      stat_bump(c->hold_hist[b], h.hist[b].load(std::memory_order_relaxed));
      h.hist[b].store(0, std::memory_order_relaxed);
    }
  }
}

}  // namespace shmsem::detail
