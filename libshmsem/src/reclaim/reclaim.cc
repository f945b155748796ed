// Reclaiming the records of dead processes and gone waiting threads.
//
// A pass reads the arrays of records in use without the lock, copies each
// owner, and judges each distinct owner once (owner.h: "dead" only with
// proof). Then, under the lock and in bounded chunks, it reclaims only the
// records whose owner is still byte-for-byte a dead one: a record reused by
// a live process meanwhile is left alone, and a dead process never comes
// back, so a stale "dead" verdict is still true. The pass costs what the
// records in use cost, never N + W.
#include "reclaim.h"

#include <errno.h>
#include <string.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "thread_cancel.h"
#include "clock.h"
#include "lanes.h"
#include "futex.h"
#include "hooks.h"
#include "inuse.h"
#include "grant.h"
#include "section.h"
#include "transitions.h"
#include "owner.h"
#include "tables.h"

namespace shmsem::detail {
namespace {

// Records reclaimed per lock hold: bounds the time others wait for the lock.
constexpr size_t kChunk = 64;
// Verdicts between two looks at the caller's limit.
constexpr size_t kJudgedPerCheck = 16;

bool same(const Owner &a, const Owner &b) {
  return a.pid == b.pid && a.tid == b.tid && a.start == b.start &&
         a.ino == b.ino && a.tino == b.tino;
}

enum class Kind : uint8_t {
  kLease,      // a HELD lease (`slot` false)
  kFastLease,  // a HELD_FAST lease of a dead process record, read as `word`
  kProc,       // a process record, after its HELD_FAST leases
};

struct Candidate {
  uint32_t idx;
  bool slot;
  Owner owner;
  // Collected because its owner left it (no verdict): reclaimed only if it
  // is still that left slot, ticket and all. The owner is alive and may have
  // queued again in the same slot since, under the same name.
  bool left = false;
  uint64_t ticket = 0;
  Kind kind = Kind::kLease;
  uint64_t word = 0;
};

// Slots come first in for_each_in_use (inuse.h): dead waiters leave before
// dead holders' permits are passed on, so a permit never goes to a dead
// waiter in the same pass.

// Each distinct process and thread judged once per pass: collect the keys
// (a run of records of one owner adds one key), sort, dedupe, judge, then
// look up by binary search. A pass over k distinct owners is O(k log k)
// plus one liveness check per distinct owner.
class Verdicts {
 public:
  void add(bool slot, const Owner &o) {
    PKey p = pkey(o);
    if (procs_.empty() || procs_.back().first != p)
      procs_.push_back({p, Verdict::kUnknown});
    if (!slot) return;
    TKey t = tkey(o);
    if (threads_.empty() || threads_.back().first != t)
      threads_.push_back({t, Verdict::kUnknown});
  }
  // Judges every key, or the first ones until `step` is reached (the rest
  // stay unknown: alive); returns true if anyone is dead.
  bool settle(const StepLimit &step) {
    bool any = settle(step, procs_, [](const PKey &k) {
      Owner o{};
      std::tie(o.pid, o.start, o.ino) = k;
      return process_verdict(o);
    });
    any |= settle(step, threads_, [](const TKey &k) {
      Owner o{};
      std::tie(o.tid, o.tino) = k;
      return thread_verdict(o);
    });
    return any;
  }
  bool dead(bool slot, const Owner &o) const {
    if (find(procs_, pkey(o)) == Verdict::kDead) return true;
    return slot && find(threads_, tkey(o)) == Verdict::kDead;
  }

 private:
  using PKey = std::tuple<int32_t, uint64_t, uint64_t>;
  using TKey = std::tuple<int32_t, uint64_t>;
  static PKey pkey(const Owner &o) { return {o.pid, o.start, o.ino}; }
  static TKey tkey(const Owner &o) { return {o.tid, o.tino}; }
  template <typename K, typename F>
  static bool settle(const StepLimit &step,
                     std::vector<std::pair<K, Verdict>> &v, F judge) {
    std::sort(v.begin(), v.end(),
              [](const auto &a, const auto &b) { return a.first < b.first; });
    v.erase(std::unique(v.begin(), v.end(),
                        [](const auto &a, const auto &b) {
                          return a.first == b.first;
                        }),
            v.end());
    bool any = false;
    size_t i = 0;
    for (auto &e : v) {
      e.second = judge(e.first);
      SHMSEM_HOOK(RECLAIM_JUDGED);
      any |= e.second == Verdict::kDead;
      // A verdict costs a system call or two; the clock is cheaper. The
      // first ones are judged whatever the limit.
      if (++i % kJudgedPerCheck == 0 && step.reached()) break;
    }
    return any;
  }
  template <typename K>
  static Verdict find(const std::vector<std::pair<K, Verdict>> &v, const K &k) {
    auto it = std::lower_bound(
        v.begin(), v.end(), k,
        [](const auto &e, const K &key) { return e.first < key; });
    return it != v.end() && it->first == k ? it->second : Verdict::kUnknown;
  }
  std::vector<std::pair<PKey, Verdict>> procs_;
  std::vector<std::pair<TKey, Verdict>> threads_;
};

// The reclaimers of one record of each kind, under the lock: the records
// reclaimed, or kNotOurs if the record no longer belongs to `cand.owner`.
constexpr int kNotOurs = -1;

// A waiter slot: left (free it), or granted to / reserved for a waiter that
// died (its permits go on).
int reclaim_slot(Locked s, const Candidate &cand, Wakes *wake) {
  Core *c = s->core;
  WaiterSlot &ws = s->slots[cand.idx];
  uint32_t word = ws.word.load(std::memory_order_relaxed);
  if (word == kSlotFree || !same(ws.owner, cand.owner)) return kNotOurs;
  if (cand.left && (!slot_left(word) || ws.ticket != cand.ticket))
    return kNotOurs;  // queued again since: a live waiter, not ours to touch
  if (slot_left(word)) {
    // Left by its owner without the lock (alive or not): free it.
    sweep_left(s, cand.idx, wake);
    return 1;
  }
  if (word == kSlotWaiting) queue_unlink(s, cand.idx);
  // Granted to a waiter that died before returning, or reserved for a
  // head that died gathering: the permits go on.
  const bool granted = word == kSlotGranted && ws.lease != kNone;
  // A grant of n permits (a weighted wait) counts n, as a lease of n.
  const uint32_t got = std::min(std::max(ws.got, 1u), s->permits);
  drop_reservation(s, cand.idx, wake);
  slot_free(s, cand.idx);  // commit
  uint32_t nw = watcher_leave(s, cand.idx);
  if (nw != kNone) wake->add(s, nw);
  stat_bump(c->reclaimed_waiters);
  if (!granted) return 1;
  stat_bump(c->reclaimed_holders, got);
  return 1 + int(got);
}

// Held under the record of a dead process: lock it in as that process's
// HELD lease, then pass it on. A CAS: a holder of the token in another
// process may release it at the same moment.
int reclaim_fast_lease(Locked s, const Candidate &cand, Wakes *wake) {
  uint32_t p = word_proc(cand.word);
  if (p >= s->max_procs ||
      s->procs[p].state.load(std::memory_order_relaxed) != kProcUsed ||
      !same(s->procs[p].owner, cand.owner))
    return kNotOurs;
  uint64_t w = cand.word;
  if (!lease_lock_in(s, cand.idx, &w, cand.owner)) return kNotOurs;
  pass_permit(s, cand.idx, wake);  // commit inside
  stat_bump(s->core->reclaimed_holders);
  return 1;
}

// A dead process's record. Its HELD_FAST leases went first (candidates
// before this one). The leases its lanes left free go on; its counts join
// the core's. (Not counted: a record of the process, not a permit or a
// wait.)
int reclaim_proc(Locked s, const Candidate &cand, Wakes *wake) {
  Core *c = s->core;
  ProcRecord &pr = s->procs[cand.idx];
  if (pr.state.load(std::memory_order_relaxed) != kProcUsed ||
      !same(pr.owner, cand.owner))
    return kNotOurs;
  uint64_t acquired = 0;
  for (Lane &ln : pr.lanes) {
    uint32_t l = ln.loose.load(std::memory_order_relaxed);
    uint64_t w =
        l < s->permits ? s->leases[l].word.load(std::memory_order_relaxed) : 0;
    if (word_state(w) == kLeaseLoose && word_proc(w) == cand.idx)
      (void)pass_loose(s, l, w, wake);
    acquired += ln.acquisitions.load(std::memory_order_relaxed);
    ln.loose.store(kNone, std::memory_order_relaxed);
    ln.acquisitions.store(0, std::memory_order_relaxed);
  }
  stat_bump(c->acquisitions, acquired);
  stat_bump(c->wait_hist[0], acquired);
  fold_holds(s, cand.idx);
  proc_free(s, pr);  // commit
  return 0;
}

// A HELD lease of a dead owner: alone, even if it is one record of a
// weighted lease (the others are candidates of their own; release cuts
// the chain where it breaks).
int reclaim_lease(Locked s, const Candidate &cand, Wakes *wake) {
  const LeaseRecord &rec = s->leases[cand.idx];
  if (lease_state(rec) != kLeaseHeld || !same(rec.owner, cand.owner))
    return kNotOurs;
  counter_add(s->core->held, -1);
  pass_permit(s, cand.idx, wake);  // commit inside
  stat_bump(s->core->reclaimed_holders);
  return 1;
}

// Under the lock: reclaim one record if it still belongs to `c.owner`.
// Appends slots to wake; returns the records reclaimed.
int reclaim_one(Locked s, const Candidate &cand, Wakes *wake) {
  const int n = cand.slot ? reclaim_slot(s, cand, wake)
                : cand.kind == Kind::kFastLease
                    ? reclaim_fast_lease(s, cand, wake)
                : cand.kind == Kind::kProc ? reclaim_proc(s, cand, wake)
                                           : reclaim_lease(s, cand, wake);
  if (n == kNotOurs) return 0;
  SHMSEM_HOOK(RECLAIM_ONE);
  return n;
}

// Under the lock, a bounded chunk at a time: reclaims each candidate that
// still belongs to the owner it was found with.
// `mark_low`: a process record in use was seen above core.procs_hwm (a
// writer lowered it): the first lock hold repairs, which recomputes it.
int reclaim_candidates(shmsem_t *s, const Limit *limit,
                       const std::vector<Candidate> &dead, bool mark_low) {
  if (dead.empty()) {
    // Still take the lock once: if its owner died inside a critical
    // section, this is what runs repair() when nobody else is locking
    // (e.g. a releaser died between RESERVED and GRANTED while every other
    // process sleeps on its slot word). Within the limit: a lock that
    // stays held is someone else's to repair.
    Section sec(s, limit);
    if (sec.error()) return 0;
    if (mark_low) mark_corrupt(s);
    // Leases a lock-free release left free while someone waits (it was
    // stopped or killed before it could hand them on): to the head.
    return sweep_loose(sec.locked());
  }
  SHMSEM_HOOK(RECLAIM_SCANNED);
  int n = 0;
  for (size_t i = 0; i < dead.size(); i += kChunk) {
    Section sec(s, limit);
    if (sec.error()) break;  // the rest is left for the next pass
    SHMSEM_HOOK(RECLAIM_LOCKED);
    if (mark_low) mark_corrupt(s);
    for (size_t j = i; j < dead.size() && j < i + kChunk; j++)
      n += reclaim_one(sec.locked(), dead[j], sec.wakes());
    n += sweep_loose(sec.locked());
  }
  return n;
}

// The process records whose process `dead_fn` says is dead, each after its
// HELD_FAST leases: one scan of the lease words, without the lock, and only
// when some process record is dead (a death costs O(N) once; a pass in
// which everyone lives costs what the records in use cost).
template <typename F>
void add_dead_procs(shmsem_t *s, F dead_fn, std::vector<Candidate> *out) {
  std::vector<Candidate> procs;
  for_each_proc(s, [&](uint32_t p, const Owner &o) {
    if (!dead_fn(o)) return;
    Candidate c{p, false, o};
    c.kind = Kind::kProc;
    procs.push_back(c);
  });
  if (procs.empty()) return;
  std::vector<const Candidate *> by_proc(s->max_procs, nullptr);
  for (const Candidate &c : procs) by_proc[c.idx] = &c;
  for (uint32_t l = 0; l < s->permits; l++) {
    uint64_t w = s->leases[l].word.load(std::memory_order_acquire);
    if (word_state(w) != kLeaseHeldFast || word_proc(w) >= s->max_procs)
      continue;
    const Candidate *pc = by_proc[word_proc(w)];
    if (!pc) continue;
    Candidate c{l, false, pc->owner};
    c.kind = Kind::kFastLease;
    c.word = w;
    out->push_back(c);
  }
  out->insert(out->end(), procs.begin(), procs.end());
}

}  // namespace

namespace {

// Every pass publishes its start as the heartbeat (core.last_reclaim_ns:
// the rate limit, and what the backups watch) and sets the period from its
// cost, so that whoever runs the next one spends at most about
// 1/kPassBudget of a CPU on passes, however many records are in use. The
// cost is the calling thread's CPU time, not wall time: a pass that waited
// for the lock or was preempted on a busy machine did not cost more, and
// must not stretch the period (a wall-clock cost once made backups sleep
// for seconds under a sanitizer while a dead watcher's slot held a permit).
uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts_to_ns(ts);
}

class PassClock {
 public:
  explicit PassClock(shmsem_t *s) : s_(s), cpu0_(thread_cpu_ns()) {
    s_->core->last_reclaim_ns.store(real_mono_ns(), std::memory_order_relaxed);
  }
  ~PassClock() {
    uint64_t cost = thread_cpu_ns() - cpu0_;
    s_->core->watch_period_ns.store(
        std::clamp(cost * kPassBudget, kWatchPeriodNs, kMaxWatchPeriodNs),
        std::memory_order_relaxed);
  }

 private:
  shmsem_t *s_;
  uint64_t cpu0_;
};

}  // namespace

int reclaim(shmsem_t *s, const Limit *limit) {
  if (!s) return -EINVAL;
  if (s->rdonly) return -EBADF;
  NoCancel no_cancel;  // the pass reads /proc and polls: cancellation points
  PassClock clock(s);
  const StepLimit step(limit, kPassFloorNs);
  // 1. Without the lock: the records in use, and is each owner alive? A
  // process that cannot prove it shares the segment's PID namespace judges
  // nobody (every pid it would look up may name another process), but it
  // frees slots whose owner left.
  // Slots whose owner left without the lock need no verdict.
  std::vector<Candidate> dead;
  const bool judge = may_judge(s->pidns);
  Verdicts v;
  for_each_in_use(s, [&](uint32_t idx, bool slot, const Owner &o) {
    if (slot && slot_left(s->slots[idx].word.load(std::memory_order_acquire)))
      dead.push_back(
          {idx, true, o, true,
           __atomic_load_n(&s->slots[idx].ticket, __ATOMIC_RELAXED)});
    else if (judge)
      v.add(slot, o);
  });
  // Only if someone is dead: the records that name them (read again; a
  // record that changed meanwhile is simply judged on its new bytes).
  bool mark_low = false;
  if (judge)
    mark_low =
        for_each_proc(s, [&](uint32_t, const Owner &o) { v.add(false, o); });
  if (judge && v.settle(step)) {
    for_each_in_use(s, [&](uint32_t idx, bool slot, const Owner &o) {
      if (v.dead(slot, o)) dead.push_back({idx, slot, o});
    });
    add_dead_procs(
        s, [&](const Owner &o) { return v.dead(false, o); }, &dead);
  }
  return reclaim_candidates(s, limit, dead, mark_low);
}

int reclaim_exited(shmsem_t *s, const Limit *limit,
                   const std::vector<Owner> &gone) {
  if (s->rdonly || gone.empty()) return 0;
  NoCancel no_cancel;
  std::vector<Candidate> dead;
  auto is_gone = [&](const Owner &o) {
    for (const Owner &g : gone)
      if (g.pid == o.pid && g.start == o.start && g.ino == o.ino) return true;
    return false;
  };
  for_each_in_use(s, [&](uint32_t idx, bool slot, const Owner &o) {
    if (is_gone(o)) dead.push_back({idx, slot, o});
  });
  add_dead_procs(s, is_gone, &dead);
  return reclaim_candidates(s, limit, dead, false);
}

uint64_t watch_period(shmsem_t *s) {
  uint64_t p = s->core->watch_period_ns.load(std::memory_order_relaxed);
  return std::clamp(p, kWatchPeriodNs, kMaxWatchPeriodNs);
}

int maybe_reclaim(shmsem_t *s, const Limit *limit) {
  if (s->rdonly) return 0;
  uint64_t now = real_mono_ns();
  uint64_t last = s->core->last_reclaim_ns.load(std::memory_order_relaxed);
  if (now - last < watch_period(s)) return 0;
  // One process per period wins the right to scan.
  if (!s->core->last_reclaim_ns.compare_exchange_strong(
          last, now, std::memory_order_relaxed))
    return 0;
  return reclaim(s, limit);
}

namespace {

// Under the lock: become the watcher if nobody (alive in our books) is.
void adopt_if_orphaned(shmsem_t *s, uint32_t slot, const Limit *limit) {
  Section sec(s, limit);
  if (sec.error()) return;
  uint32_t wt = s->core->watcher.load(std::memory_order_relaxed);
  uint32_t word = wt < s->max_waiters
                      ? s->slots[wt].word.load(std::memory_order_relaxed)
                      : kSlotFree;
  if (word == kSlotFree || slot_left(word)) s->core->watcher = slot;
}

}  // namespace

namespace {

// Arms events (names the owners to the process's watch); false if the
// watcher must poll instead.
bool arm_events(shmsem_t *s, WatchState *st, uint64_t now, uint64_t period) {
  st->complete = false;
  if (st->broken || !may_judge(s->pidns) || !events_available()) return false;
  bool dead = false;
  EventWatch::Arm a = st->events.arm(s, st->wake, &dead);
  if (a == EventWatch::kFailed) {
    st->broken = true;
    st->events.reset();
    return false;
  }
  SHMSEM_HOOK(WATCH_EVENTS_ARMED);
  st->complete = a == EventWatch::kComplete;
  if (dead) st->death = true;  // an exit seen since the last report: take it
  if (st->complete) st->pass_at = now + std::max(kEventSafetyNs, period);
  return true;
}

// The watch reported: reclaim the owners it proved gone, at once, without
// judging anyone else, and name the owners again (a report may also say
// that an owner cannot be followed: then the watcher polls).
void take_reports(shmsem_t *s, const Limit *limit, WatchState *st, uint64_t now,
                  uint64_t period) {
  for (int round = 0; round < 2 && st->death; round++) {
    st->death = false;
    const std::vector<Owner> gone = st->events.take_gone();
    if (!gone.empty()) reclaim_exited(s, limit, gone);
    const uint64_t at = st->pass_at;
    st->use_events = arm_events(s, st, now, period);
    st->pass_at = st->complete ? at : std::min(at, now + period);
  }
}

// A waiter that is not the watcher: when to look again, or 0 if the
// watcher is late and this one took the role.
uint64_t backup_step(shmsem_t *s, uint32_t slot, const Limit *limit,
                     WatchState *st, uint64_t now, uint64_t period) {
  Core *c = s->core;
  if (st->watching) {
    // A death the watch reported before the role moved on: run a full
    // pass rather than leave it to the new watcher's. Not only the
    // reported process's records: the waiters that queued after the
    // watch was armed may not be followed, and one of them may be dead at
    // the head, where the reclaimed permit would go.
    if (st->death || (st->use_events && st->events.notified()))
      reclaim(s, limit);
    st->death = false;
    st->watching = st->use_events = false;
    st->events.reset();
  }
  // A due time further ahead than any watcher sets is a writer's: stale.
  uint64_t due = c->watch_due_ns.load(std::memory_order_relaxed);
  if (now < due + kStaleNs &&
      due < now + std::max(kEventSafetyNs, kMaxWatchPeriodNs)) {
    uint64_t n = std::clamp<uint64_t>(
        c->waiting.load(std::memory_order_relaxed), 1, s->max_waiters);
    uint64_t per = c->watch_events.load(std::memory_order_relaxed)
                       ? kBackupEventNs
                       : kBackupPeriodNs;
    return now + std::max(period, std::min(per * n, kMaxBackupNapNs));
  }
  // The watcher is late: reclaim (which frees a dead watcher's slot and
  // passes the role on), and take the role if it is still orphaned.
  maybe_reclaim(s, limit);
  adopt_if_orphaned(s, slot, limit);
  if (!is_watcher(s, slot)) return now + std::max(period, kBackupPeriodNs);
  return 0;
}

}  // namespace

WatchPlan watch_step(shmsem_t *s, uint32_t slot, const Limit *limit,
                     WatchState *st) {
  Core *c = s->core;
  uint64_t now = real_mono_ns();
  uint64_t period = watch_period(s);
  if (!is_watcher(s, slot)) {
    if (uint64_t at = backup_step(s, slot, limit, st, now, period))
      return {at, false};
  }
  if (st->use_events && st->events.notified()) st->death = true;
  if (!st->watching) {
    // New in the role: arm the death watch at once, before the first
    // sleep, whatever the last pass cost; no pass. Without events, the
    // first period passes without looking at anyone.
    st->watching = true;
    st->pass_at = now + period;
    st->use_events = arm_events(s, st, now, period);
    take_reports(s, limit, st, now, period);
  } else if (st->death && now < st->pass_at) {
    take_reports(s, limit, st, now, period);
  } else if (st->death || now >= st->pass_at) {
    // The safety pass (or a period without a grant, polling). The watcher
    // is alone in its role, so it passes without the rate limit's CAS
    // (whose jitter against the timer would skip every other pass); the
    // pass publishes last_reclaim_ns.
    st->death = false;
    (void)st->events.take_gone();
    reclaim(s, limit);
    now = real_mono_ns();
    period = watch_period(s);
    st->pass_at = now + period;
    st->use_events = arm_events(s, st, now, period);
    take_reports(s, limit, st, now, period);
  } else if (st->use_events && st->events.stale(s)) {
    // Someone queued since: follow their process too.
    uint64_t at = st->pass_at;
    st->use_events = arm_events(s, st, now, period);
    st->pass_at = std::min(at, st->pass_at);
    take_reports(s, limit, st, now, period);
  }
  if (st->death) st->pass_at = now;
  c->watch_events.store(st->use_events && st->complete,
                        std::memory_order_relaxed);
  c->watch_due_ns.store(st->pass_at, std::memory_order_relaxed);
  return {st->pass_at, st->use_events};
}

}  // namespace shmsem::detail
