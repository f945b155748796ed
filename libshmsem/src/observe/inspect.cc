// shmsem_inspect: a snapshot of the counters, every lease and every queued
// waiter, for monitors (<shmsem/inspect.h>). The segment is untrusted input
// here as everywhere (docs/DESIGN.md §7a): every index, link and count read
// from it is checked against the geometry the handle trusts, each record
// joins at most one lease and each walk ends, whatever a writer put there.
// docs/DESIGN.md §14.
#include "inspect.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "chain.h"
#include "clock.h"
#include "declare.h"
#include "handle.h"
#include "hooks.h"
#include "lock.h"
#include "section.h"
#include "owner.h"
#include "stat.h"

namespace shmsem::detail {
namespace {

// Fields changed under the lock are plain integers; a read-only reader
// reads each once, atomically.
template <typename T>
T peek(const T &field) {
  return __atomic_load_n(&field, __ATOMIC_RELAXED);
}

Owner read_owner(const Owner &o) {
  Owner copy{};
  copy.pid = peek(o.pid);
  copy.tid = peek(o.tid);
  copy.start = peek(o.start);
  copy.ino = peek(o.ino);
  copy.tino = peek(o.tino);
  return copy;
}

bool same_owner(const Owner &a, const Owner &b) {
  return a.pid == b.pid && a.tid == b.tid && a.start == b.start &&
         a.ino == b.ino && a.tino == b.tino;
}

struct RawHolder {
  uint32_t lease, weight;
  bool reserved;
  Owner owner;
  uint64_t since, declared, gen;
  bool operator==(const RawHolder &o) const {
    return lease == o.lease && weight == o.weight && reserved == o.reserved &&
           gen == o.gen && same_owner(owner, o.owner) && since == o.since &&
           declared == o.declared;
  }
};

struct RawWaiter {
  uint32_t slot, weight, reserved;
  uint64_t ticket, since;
  Owner owner;
  bool operator==(const RawWaiter &o) const {
    return slot == o.slot && weight == o.weight && reserved == o.reserved &&
           ticket == o.ticket && since == o.since && same_owner(owner, o.owner);
  }
};

struct Scan {
  std::vector<RawHolder> holders;  // by lease record
  std::vector<RawWaiter> waiters;  // queue order
  bool rebuilt = false;
  bool operator==(const Scan &o) const {
    return holders == o.holders && waiters == o.waiters && rebuilt == o.rebuilt;
  }
};

// A holder for record `l` (the one its token names) and `weight` permits.
// A HELD_FAST record names its holder's process record.
void add_holder(const shmsem_t *s, uint32_t l, uint64_t word, uint32_t weight,
                Scan *out) {
  const LeaseRecord &rec = s->leases[l];
  const uint32_t state = word_state(word), p = word_proc(word);
  RawHolder h{};
  h.lease = l;
  h.weight = weight;
  h.reserved = state == kLeaseReserved;
  // A HELD_FAST word naming no process record (a writer's) is held by
  // nobody we can name: shown, as stat counts it, with no owner (pid 0,
  // judged UNKNOWN), not hidden.
  if (state != kLeaseHeldFast)
    h.owner = read_owner(rec.owner);
  else if (p < s->max_procs)
    h.owner = read_owner(s->procs[p].owner);
  h.since = rec.since_ns.load(std::memory_order_relaxed);
  h.gen = word_gen(word);
  h.declared = h.reserved
                   ? 0
                   : decl_for(s->declared[l].load(std::memory_order_relaxed),
                              word_gen(word));
  out->holders.push_back(h);
}

// What scan_holders reads once and what it tracks: each lease word (whether
// a record is shown depends on it) and the records that joined a holder.
struct LeaseWords {
  std::vector<uint64_t> word;
  std::vector<char> taken;
  uint32_t state(uint32_t l) const { return word_state(word[l]); }
  void take(const Chain &ch) {
    for (uint32_t i = 0; i < ch.size(); i++) taken[ch[i]] = 1;
  }
};

// The HELD records: each weighted lease from the record its token names,
// then each HELD record no walk reached alone; and the HELD_FAST ones,
// never weighted, alone.
void held_holders(const shmsem_t *s, LeaseWords *lw, Scan *out) {
  const uint32_t n = s->permits;
  for (uint32_t l = 0; l < n; l++) {
    if (lw->state(l) != kLeaseHeld || lw->taken[l] ||
        peek(s->leases[l].slot) == kMember)
      continue;
    Chain ch;
    (void)walk_lease(s, l, &ch, &lw->taken);
    lw->take(ch);
    add_holder(s, l, lw->word[l], ch.size(), out);
  }
  for (uint32_t l = 0; l < n; l++) {
    if ((lw->state(l) == kLeaseHeld && !lw->taken[l]) ||
        lw->state(l) == kLeaseHeldFast) {  // never weighted
      lw->taken[l] = 1;
      add_holder(s, l, lw->word[l], 1, out);
    }
  }
}

// The RESERVED records: each slot's chain, a holder if granted, else
// counted in (*reserved_for)[slot]; then each RESERVED record on no chain
// alone.
void reserved_holders(const shmsem_t *s, LeaseWords *lw, Scan *out,
                      std::vector<uint32_t> *reserved_for) {
  const uint32_t n = s->permits, m = s->max_waiters;
  reserved_for->assign(m, 0);
  for (uint32_t w = 0; w < m; w++) {
    const uint32_t sw = s->slots[w].word.load(std::memory_order_acquire);
    if (sw == kSlotFree) continue;
    Chain ch;
    (void)walk_reservation(s, w, &ch, &lw->taken);
    if (ch.empty()) continue;
    lw->take(ch);
    if (sw == kSlotWaiting)
      (*reserved_for)[w] = ch.size();
    else
      add_holder(s, ch[0], lw->word[ch[0]], ch.size(), out);
  }
  for (uint32_t l = 0; l < n; l++)
    if (lw->state(l) == kLeaseReserved && !lw->taken[l])
      add_holder(s, l, lw->word[l], 1, out);
}

// The records that are not free, one holder per lease. A weighted lease is
// HELD records of one owner linked (LeaseRecord::link) from the one its
// token names (not kMember); a reservation is the RESERVED records linked
// from its slot's `lease`; both walked by the library's one walker
// (chain.h). What was granted to a waiter that has not returned yet is a
// holder (reserved); what a queued head has gathered so far is not a lease
// yet: it is counted in (*reserved_for)[slot] and shown with the waiter.
// Each record joins at most one holder (`taken`). A HELD record no walk
// reached is shown alone; so is a RESERVED record on no slot's chain.
// RETIRED records are nobody's.
void scan_holders(const shmsem_t *s, Scan *out,
                  std::vector<uint32_t> *reserved_for) {
  const uint32_t n = s->permits;
  LeaseWords lw{std::vector<uint64_t>(n), std::vector<char>(n, 0)};
  for (uint32_t l = 0; l < n; l++)
    lw.word[l] = s->leases[l].word.load(std::memory_order_acquire);
  held_holders(s, &lw, out);
  reserved_holders(s, &lw, out, reserved_for);
  std::sort(
      out->holders.begin(), out->holders.end(),
      [](const RawHolder &a, const RawHolder &b) { return a.lease < b.lease; });
}

RawWaiter make_waiter(const shmsem_t *s, uint32_t idx,
                      const std::vector<uint32_t> &reserved_for) {
  const WaiterSlot &ws = s->slots[idx];
  RawWaiter w{};
  w.slot = idx;
  w.ticket = peek(ws.ticket);
  w.weight = peek(ws.weight);
  w.reserved = reserved_for[idx];
  w.owner = read_owner(ws.owner);
  w.since = ws.enq_ns.load(std::memory_order_relaxed);
  return w;
}

// Follow core->head and slot.next. A walk that leaves the WAITING slots
// (LEFT_QUEUED ones are still linked but nobody's waiter: not shown),
// loops, or disagrees with core->waiting was torn by a concurrent change or
// a writer: then the order is rebuilt from the tickets of all WAITING
// slots, the order repair uses.
void scan_waiters(const shmsem_t *s, const std::vector<uint32_t> &reserved_for,
                  Scan *out) {
  const uint32_t m = s->max_waiters;
  const uint32_t waiting = s->core->waiting.load(std::memory_order_relaxed);
  std::vector<char> seen(m, 0);
  bool torn = false;
  size_t left = 0;
  uint32_t idx = peek(s->core->head);
  while (idx != kNone) {
    const uint32_t word =
        idx < m ? s->slots[idx].word.load(std::memory_order_acquire) : 0;
    if (idx >= m || seen[idx] ||
        (word != kSlotWaiting && word != kSlotLeftQueued)) {
      torn = true;
      break;
    }
    seen[idx] = 1;
    if (word == kSlotWaiting)
      out->waiters.push_back(make_waiter(s, idx, reserved_for));
    else
      left++;
    idx = peek(s->slots[idx].next);
  }
  if (torn || out->waiters.size() + left != waiting) {
    out->waiters.clear();
    for (uint32_t i = 0; i < m; i++)
      if (s->slots[i].word.load(std::memory_order_acquire) == kSlotWaiting)
        out->waiters.push_back(make_waiter(s, i, reserved_for));
    std::sort(out->waiters.begin(), out->waiters.end(),
              [](const RawWaiter &a, const RawWaiter &b) {
                return a.ticket < b.ticket;
              });
    out->rebuilt = true;
  }
}

void scan(shmsem_t *s, Scan *out, struct shmsem_stat *st) {
  *out = Scan{};
  stat_fill(s, st);
  std::vector<uint32_t> reserved_for;  // by slot: what a queued head gathered
  scan_holders(s, out, &reserved_for);
  scan_waiters(s, reserved_for, out);
}

// How long a monitor waits for the lock before it reads without it: a
// holder stopped by SIGSTOP or a debugger must not hang a scrape.
constexpr uint64_t kInspectLockNs = 50'000'000;

// Wait until the lock word names no holder, up to `deadline` (real clock):
// lock_within() itself gives up on a live holder only after a floor
// (lock.h kLockFloorNs, 100 ms; 1 s while the holder is seen running),
// longer than a monitor may hang. A word with no tid (flags only) counts
// as free: lock_within() takes it at once.
bool lock_word_free_by(const shmsem_t *s, uint64_t deadline) {
  uint64_t nap = 20'000;
  for (;;) {
    if ((s->core->lock_word.load(std::memory_order_relaxed) & kLockTidMask) ==
        0)
      return true;
    const uint64_t now = real_mono_ns();
    if (now >= deadline) return false;
    const struct timespec ts = ns_to_ts(std::min(nap, deadline - now));
    nanosleep(&ts, nullptr);
    nap = std::min<uint64_t>(nap * 2, 1'000'000);
  }
}
// A read-only reader repeats its read until two agree, this often at most.
constexpr int kReadTries = 4;

uint32_t liveness(Verdict v) {
  return v == Verdict::kAlive  ? SHMSEM_OWNER_ALIVE
         : v == Verdict::kDead ? SHMSEM_OWNER_DEAD
                               : SHMSEM_OWNER_UNKNOWN;
}

// The owners' verdicts, judged after the snapshot (outside the lock: it
// costs system calls) and once per distinct owner: a semaphore with many
// holders usually has few processes.
//
// In a torn read (the reads never agreed) an owner may have been read
// half-written, the pid of one process with the start time of another,
// and such an owner looks dead: there, "dead" is reported UNKNOWN. Dead
// is said only of an owner read whole.
class Judge {
 public:
  Judge(const shmsem_t *s, bool torn)
      : can_(may_judge(s->pidns)), torn_(torn) {}
  uint32_t operator()(const Owner &o, bool is_slot) {
    Key key{o.pid, o.tid, o.start, o.ino, o.tino, is_slot};
    auto it = seen_.find(key);
    if (it != seen_.end()) return it->second;
    Verdict v = can_ ? record_verdict(o, is_slot) : Verdict::kUnknown;
    if (torn_ && v == Verdict::kDead) v = Verdict::kUnknown;
    seen_.emplace(key, liveness(v));
    return liveness(v);
  }

 private:
  using Key = std::tuple<int32_t, int32_t, uint64_t, uint64_t, uint64_t, bool>;
  bool can_, torn_;
  std::map<Key, uint32_t> seen_;
};

// Under the lock, if it comes within kInspectLockNs: false, with nothing
// read, if it does not.
bool scan_locked(shmsem_t *s, Scan *sc, struct shmsem_stat *st) {
  const Limit limit{mono_ns() + kInspectLockNs, nullptr, false};
  if (!lock_word_free_by(s, real_mono_ns() + kInspectLockNs)) return false;
  Section sec(s, &limit);
  if (sec.error()) return false;
  scan(s, sc, st);
  return true;
}

// Without the lock: reads again until two reads agree, kReadTries reads at
// most. Returns whether they never did (torn).
bool scan_until_agreed(shmsem_t *s, Scan *sc, struct shmsem_stat *st) {
  bool torn = true;
  Scan again;
  struct shmsem_stat st2;
  scan(s, sc, st);
  SHMSEM_HOOK(INSPECT_SCANNED);
  for (int i = 1; i < kReadTries && torn; i++) {
    scan(s, &again, &st2);
    SHMSEM_HOOK(INSPECT_SCANNED);
    torn = !(again == *sc);
    *sc = std::move(again);
    *st = st2;
  }
  return torn;
}

// The snapshot: a snapshot handle's private copy as it is (nothing changes
// it), else under the lock, else (a read-only handle, or the lock not had
// in time) read without it until two reads agree. Returns whether the read
// is torn.
bool read_state(shmsem_t *s, Scan *sc, struct shmsem_stat *st) {
  bool torn = false;
  if (s->snapshot)
    scan(s, sc, st);
  else if (!s->rdonly)
    torn = !scan_locked(s, sc, st);  // if not, read below, without the lock
  if (s->rdonly && !s->snapshot) torn = true;
  if (torn) torn = scan_until_agreed(s, sc, st);
  return torn;
}

// The inspection's own fields: when, what the semaphore was created with,
// its file, how it was read and how much was found.
void fill_summary(const shmsem_t *s, const Scan &sc, bool torn,
                  struct shmsem_inspection *out) {
  out->now_ns = mono_ns();
  out->now_coarse_ns = coarse_ns();
  out->created_realtime_ns = peek(s->hdr->created_ns);
  out->created_permits = peek(s->hdr->created_permits);
  out->flags = (torn ? SHMSEM_INSPECT_TORN : 0) |
               (sc.rebuilt ? SHMSEM_INSPECT_REBUILT : 0);
  out->file_mode = s->file_mode;
  out->file_uid = s->file_uid;
  out->file_gid = s->file_gid;
  out->nholders = uint32_t(sc.holders.size());
  out->nwaiters = uint32_t(sc.waiters.size());
}

void fill_holder(struct shmsem_holder *h, const RawHolder &r, uint64_t held,
                 bool overdue, uint32_t judged) {
  memset(h, 0, sizeof *h);
  h->lease = r.lease;
  h->weight = r.weight;
  h->pid = r.owner.pid;
  h->liveness = judged;
  h->flags = (r.reserved ? SHMSEM_HOLDER_RESERVED : 0) |
             (overdue ? SHMSEM_HOLDER_OVERDUE : 0);
  h->since_ns = r.since;
  h->held_ns = held;
  h->declared_ns = r.declared;
  h->gen = r.gen;
}

// The overdue and oldest-lease summary over every holder, and the first
// `max` holders, their owners judged.
void fill_holders(const Scan &sc, Judge *judge, struct shmsem_inspection *out,
                  struct shmsem_holder *holders, uint32_t max) {
  const uint64_t now_c = out->now_coarse_ns;
  for (size_t i = 0; i < sc.holders.size(); i++) {
    const RawHolder &r = sc.holders[i];
    const uint64_t held = now_c > r.since ? now_c - r.since : 0;
    const bool overdue = r.declared && held > r.declared;
    if (overdue) {
      out->overdue++;
      out->overdue_permits += r.weight;
    }
    if (r.since &&
        (!out->oldest_lease_since_ns || r.since < out->oldest_lease_since_ns))
      out->oldest_lease_since_ns = r.since;
    if (i < max)
      fill_holder(&holders[i], r, held, overdue, (*judge)(r.owner, false));
  }
}

// The oldest wait, and the first `max` waiters in queue order, their
// owners judged.
void fill_waiters(const Scan &sc, Judge *judge, struct shmsem_inspection *out,
                  struct shmsem_waiter_info *waiters, uint32_t max) {
  if (!sc.waiters.empty()) out->oldest_wait_since_ns = sc.waiters[0].since;
  const uint64_t now = out->now_ns;
  for (size_t i = 0; i < sc.waiters.size() && i < max; i++) {
    const RawWaiter &r = sc.waiters[i];
    struct shmsem_waiter_info &w = waiters[i];
    memset(&w, 0, sizeof w);
    w.position = uint32_t(i + 1);
    w.slot = r.slot;
    w.ticket = r.ticket;
    w.weight = r.weight;
    w.reserved = r.reserved;
    w.pid = r.owner.pid;
    w.tid = r.owner.tid;
    w.liveness = (*judge)(r.owner, true);
    w.since_ns = r.since;
    w.waited_ns = now > r.since ? now - r.since : 0;
  }
}

// Each counter alone is bounded by the geometry, however torn the read:
// past its bound, the segment was written by someone else. Not the stat's
// `held` and `available`: they add the lock-free path's leases, counted by
// a scan of the records after the core's counters were read, and a lease
// that moved between the two (released under the lock, then taken or freed
// without it) is in both, in a read without the lock; the core's own
// counters are bounded.
bool counters_bounded(const shmsem_t *s, const struct shmsem_stat &st) {
  return s->core->held.load(std::memory_order_relaxed) <= s->permits &&
         s->core->available.load(std::memory_order_relaxed) <= s->permits &&
         st.reserved <= s->permits && st.retiring <= s->permits &&
         st.waiting <= s->max_waiters && st.closed <= 1;
}

}  // namespace

int inspect(shmsem_t *s, struct shmsem_inspection *out,
            struct shmsem_holder *holders, uint32_t max_holders,
            struct shmsem_waiter_info *waiters, uint32_t max_waiters) {
  if (!s || !out || (!holders && max_holders) || (!waiters && max_waiters))
    return -EINVAL;
  memset(out, 0, sizeof *out);
  Scan sc;
  const bool torn = read_state(s, &sc, &out->stat);
  fill_summary(s, sc, torn, out);
  Judge judge(s, torn);
  fill_holders(sc, &judge, out, holders, max_holders);
  fill_waiters(sc, &judge, out, waiters, max_waiters);
  if (!counters_bounded(s, out->stat)) return -EUCLEAN;
  // Only a kind the caller asked for (a non-zero maximum) can be short:
  // asking for the waiters alone is not an error while anyone holds.
  if ((max_holders && sc.holders.size() > max_holders) ||
      (max_waiters && sc.waiters.size() > max_waiters))
    return -ENOBUFS;
  return 0;
}

}  // namespace shmsem::detail
