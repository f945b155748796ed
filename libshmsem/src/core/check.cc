// The invariant checker: a full scan comparing the record states with the
// derived structures. Names match docs/DESIGN.md §8.
#include "check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "census.h"
#include "chain.h"
#include "clock.h"
#include "hooks.h"
#include "section.h"
#include "rate.h"
#include "recovery.h"
#include "tables.h"

namespace shmsem::detail {
namespace {

int fail(char *msg, size_t len, const char *what) {
  if (msg && len) (void)snprintf(msg, len, "%s", what);  // may truncate
  return -EUCLEAN;
}

// INV-WEIGHT: the others of a weighted lease are HELD by its owner, marked
// as no token's, each on one chain, reached once (chain.h). A chain ends at
// a record that left, or that another owner holds now: reclamation passes
// a dead owner's records one by one, and a release cuts the chain there.
// Returns what is wrong, or nullptr.
const char *check_weighted(const shmsem_t *s) {
  const uint32_t n = s->permits;
  std::vector<char> reached(n, 0);
  for (uint32_t l = 0; l < n; l++) {
    const LeaseRecord &rec = s->leases[l];
    if (lease_state(rec) != kLeaseHeld) continue;
    const uint32_t x = __atomic_load_n(&rec.link, __ATOMIC_RELAXED);
    if (!(x == kNone || lease_ok(s, x)))
      return "INV-WEIGHT: a weighted lease's link is out of range";
    if (rec.slot == kMember) continue;
    Chain ch;
    if (walk_lease(s, l, &ch) == ChainEnd::kRevisit)
      return "INV-WEIGHT: a weighted lease's chain is broken";
    for (uint32_t i = 1; i < ch.size(); i++) {
      if (reached[ch[i]])
        return "INV-WEIGHT: a weighted lease's chain is broken";
      reached[ch[i]] = 1;
    }
  }
  return nullptr;
}

}  // namespace

int check_locked(shmsem_t *s, char *msg, size_t len) {
  Core *c = s->core;
  const uint32_t n = s->permits, m = s->max_waiters;
  // The counts, from one scan (census.h); the states one by one below.
  const Census cs = census(s);
  const uint32_t nfree = cs.free, nheld = cs.held, nres = cs.reserved,
                 nloose = cs.loose, nfast = cs.fast, nretired = cs.retired;
  for (uint32_t l = 0; l < n; l++) {
    uint64_t word = s->leases[l].word.load(std::memory_order_relaxed);
    switch (word_state(word)) {
      case kLeaseFree:
      case kLeaseHeld:
      case kLeaseRetired: break;
      case kLeaseLoose: {
        // INV-LOOSE: named by a lane of its process record, which is in
        // use (the sweeps find it there).
        SHMSEM_HOOK(CHECK_LEASE_READ);
        uint32_t p = word_proc(word);
        bool named = false;
        if (p < s->max_procs &&
            s->procs[p].state.load(std::memory_order_relaxed) == kProcUsed)
          for (const Lane &ln : s->procs[p].lanes)
            named |= ln.loose.load(std::memory_order_relaxed) == l;
        // Lock-free acquires and releases go on while we hold the lock: the
        // lane may have moved on because the lease was taken (and another
        // freed) since we read the word. Only a word still unchanged after
        // the scan is a LOOSE lease nobody names (found by an adversarial
        // test: a false -EUCLEAN under lock-free traffic).
        if (!named &&
            s->leases[l].word.load(std::memory_order_acquire) == word)
          return fail(msg, len, "INV-LOOSE: free lease no lane names");
        break;
      }
      case kLeaseHeldFast: {
        // INV-ATTRIB: held under a process record in use.
        uint32_t p = word_proc(word);
        if (p >= s->max_procs ||
            s->procs[p].state.load(std::memory_order_relaxed) != kProcUsed)
          return fail(msg, len, "INV-ATTRIB: lease held by no process record");
        break;
      }
      case kLeaseReserved: {
        // INV-GRANT: reserved for a slot that holds a reservation (its
        // chain is checked below, INV-RESERVE).
        uint32_t w = s->leases[l].slot;
        uint32_t sw =
            w < m ? s->slots[w].word.load(std::memory_order_relaxed) : 0;
        if (sw != kSlotGranted && sw != kSlotLeft && sw != kSlotWaiting &&
            sw != kSlotLeftQueued)
          return fail(msg, len, "INV-GRANT: reserved lease without its slot");
        break;
      }
      default: return fail(msg, len, "INV-PERMITS: invalid lease state");
    }
  }
  for (uint32_t p = 0; p < s->max_procs; p++) {
    uint32_t st = s->procs[p].state.load(std::memory_order_relaxed);
    if (st != kProcFree && st != kProcUsed)
      return fail(msg, len, "INV-PROCS: invalid process record state");
    if (st == kProcUsed &&
        p >= c->procs_hwm.load(std::memory_order_relaxed))
      return fail(msg, len, "INV-PROCS: record in use above the mark");
  }
  uint32_t gate = c->gate.load(std::memory_order_relaxed);
  if (gate != gate_of(c))  // tables.h: the one formula
    return fail(msg, len, "INV-GATE: the gate does not follow the queue");
  if (nfree + nheld + nres + nloose + nfast + nretired != n)
    return fail(msg, len, "INV-PERMITS: records do not add up to N");
  // INV-CAPACITY: the retired records and those still to retire make up
  // what is above the capacity; nothing is free while a shrink waits.
  const uint32_t cap = c->capacity.load(std::memory_order_relaxed);
  const uint32_t retiring = c->retiring.load(std::memory_order_relaxed);
  if (nretired != c->retired.load(std::memory_order_relaxed) || cap > n ||
      uint64_t{cap} + nretired + retiring != n)
    return fail(msg, len, "INV-CAPACITY: capacity, retired and retiring "
                          "do not add up to N");
  // (A LOOSE lease may exist for as long as its lock-free releaser is
  // between its CAS and the hand-off, as under INV-NOBYPASS.)
  if (retiring && nfree)
    return fail(msg, len, "INV-CAPACITY: a permit is free while a shrink "
                          "waits");
  if (const char *why = check_weighted(s)) return fail(msg, len, why);
  // INV-RATE: the bucket is never further ahead than a burst.
  if (uint64_t t = c->rate_interval_ns.load(std::memory_order_relaxed)) {
    Rate r = rate_read(s, mono_ns());
    if (t > kMaxRateIntervalNs ||
        c->rate_tat_ns.load(std::memory_order_relaxed) > r.tat)
      return fail(msg, len, "INV-RATE: the rate state is out of range");
  }
  if (nfree != c->available.load(std::memory_order_relaxed) ||
      nheld != c->held.load(std::memory_order_relaxed) ||
      nres != c->reserved.load(std::memory_order_relaxed))
    return fail(msg, len, "INV-PERMITS: counters differ from the records");

  // INV-FREE: the lease free list holds exactly the FREE records.
  std::vector<char> seen(n > m ? n : m, 0);
  uint32_t count = 0;
  for (uint32_t l = c->free_lease; l != kNone; l = s->leases[l].next_free) {
    if (l >= n || seen[l] || ++count > n)
      return fail(msg, len, "INV-FREE: lease free list is corrupt");
    seen[l] = 1;
    if (lease_state(s->leases[l]) != kLeaseFree)
      return fail(msg, len, "INV-FREE: non-free lease on the free list");
  }
  if (count != nfree) return fail(msg, len, "INV-FREE: free lease missing");

  // INV-RESERVE: each slot's chain is exactly the records RESERVED for it,
  // as many as `got`: all it asked for if GRANTED (or LEFT after a
  // grant), none if CANCELLED or CLOSED, fewer while queued (all of them
  // only at the head, waiting for its start time).
  uint32_t nfree_slots = 0, nwaiting = 0, nchained = 0;
  for (uint32_t w = 0; w < m; w++) {
    const WaiterSlot &ws = s->slots[w];
    uint32_t word = ws.word.load(std::memory_order_relaxed);
    if (word == kSlotFree) {
      nfree_slots++;
      continue;
    }
    if (word == kSlotWaiting || word == kSlotLeftQueued) nwaiting++;
    else if (word != kSlotGranted && word != kSlotCancelled &&
             word != kSlotClosed && word != kSlotLeft)
      return fail(msg, len, "INV-QUEUE: invalid slot state");
    Chain ch;
    if (walk_reservation(s, w, &ch) != ChainEnd::kEnd)
      return fail(msg, len, "INV-RESERVE: a reservation's chain is broken");
    const uint32_t chain = ch.size();
    nchained += chain;
    const uint32_t k = ws.weight;
    if (k < 1 || k > n || chain != ws.got)
      return fail(msg, len, "INV-RESERVE: weight or count out of range");
    bool ok;
    switch (word) {
      case kSlotGranted: ok = chain == k; break;
      case kSlotLeft: ok = chain == k || chain == 0; break;
      case kSlotCancelled:
      case kSlotClosed: ok = chain == 0; break;
      default:
        ok = chain == 0 ||
             (w == c->head &&
              (chain < k ||
               (word == kSlotWaiting &&
                c->rate_interval_ns.load(std::memory_order_relaxed))));
    }
    if (!ok)
      return fail(msg, len, word == kSlotGranted
                                ? "INV-GRANT: granted slot without its leases"
                                : "INV-RESERVE: reservation does not fit "
                                  "the slot");
  }
  if (nchained != nres)
    return fail(msg, len, "INV-RESERVE: a reserved lease is on no chain");
  std::fill(seen.begin(), seen.end(), 0);
  count = 0;
  for (uint32_t w = c->free_slot; w != kNone; w = s->slots[w].next_free) {
    if (w >= m || seen[w] || ++count > m)
      return fail(msg, len, "INV-FREE: slot free list is corrupt");
    seen[w] = 1;
    if (s->slots[w].word.load(std::memory_order_relaxed) != kSlotFree)
      return fail(msg, len, "INV-FREE: used slot on the free list");
  }
  if (count != nfree_slots) return fail(msg, len, "INV-FREE: free slot missing");

  // INV-QUEUE: exactly the WAITING slots (and LEFT_QUEUED ones, whose owner
  // left without the lock), in increasing ticket order.
  count = 0;
  uint64_t last = 0;
  uint32_t prev = kNone;
  for (uint32_t w = c->head; w != kNone; w = s->slots[w].next) {
    if (w >= m || ++count > m)
      return fail(msg, len, "INV-QUEUE: queue links are corrupt");
    uint32_t word = s->slots[w].word.load(std::memory_order_relaxed);
    if (word != kSlotWaiting && word != kSlotLeftQueued)
      return fail(msg, len, "INV-QUEUE: non-waiting slot in the queue");
    if (s->slots[w].prev != prev)
      return fail(msg, len, "INV-QUEUE: back link is wrong");
    if (s->slots[w].ticket <= last)
      return fail(msg, len, "INV-QUEUE: tickets out of FIFO order");
    last = s->slots[w].ticket;
    prev = w;
  }
  if (prev != c->tail) return fail(msg, len, "INV-QUEUE: tail is wrong");
  if (count != nwaiting || count != c->waiting.load(std::memory_order_relaxed))
    return fail(msg, len, "INV-QUEUE: waiting count differs from the queue");
  if (nwaiting && c->next_ticket <= last)
    return fail(msg, len, "INV-QUEUE: next ticket not above the tail");
  // (A LOOSE lease may exist while waiters queue, for as long as its
  // releaser is between its CAS and the hand-off: the gate, open, keeps
  // newcomers off it. INV-GATE above.)
  // Free while waiters queue only behind a head that has all it asked for
  // and waits for its start time (the rate).
  const uint32_t head = c->head;  // once: a writer may change it
  if (nwaiting && nfree &&
      !(head < m && s->slots[head].got >= s->slots[head].weight &&
        c->rate_interval_ns.load(std::memory_order_relaxed)))
    return fail(msg, len, "INV-NOBYPASS: a permit is free while waiters queue");
  if (nwaiting && c->closed.load(std::memory_order_relaxed))
    return fail(msg, len, "INV-CLOSED: waiters queued on a closed semaphore");
  // The arrays of records in use hold exactly the HELD/RESERVED leases and
  // the slots in use, each at the position its record names.
  if (c->n_used_leases.load(std::memory_order_relaxed) != nheld + nres)
    return fail(msg, len, "INV-USED: lease in-use count is wrong");
  for (uint32_t i = 0; i < nheld + nres; i++) {
    uint32_t l = s->used_leases[i].load(std::memory_order_relaxed);
    if (l >= n || s->leases[l].used_pos != i ||
        (lease_state(s->leases[l]) != kLeaseHeld &&
         lease_state(s->leases[l]) != kLeaseReserved))
      return fail(msg, len, "INV-USED: lease in-use array is corrupt");
  }
  uint32_t nused_slots = m - nfree_slots;
  if (c->n_used_slots.load(std::memory_order_relaxed) != nused_slots)
    return fail(msg, len, "INV-USED: slot in-use count is wrong");
  for (uint32_t i = 0; i < nused_slots; i++) {
    uint32_t w = s->used_slots[i].load(std::memory_order_relaxed);
    if (w >= m || s->slots[w].used_pos != i ||
        s->slots[w].word.load(std::memory_order_relaxed) == kSlotFree)
      return fail(msg, len, "INV-USED: slot in-use array is corrupt");
  }
  uint32_t wt = c->watcher.load(std::memory_order_relaxed);
  if (nwaiting && (wt >= m || s->slots[wt].word.load(std::memory_order_relaxed) ==
                                  kSlotFree))
    return fail(msg, len, "INV-WATCH: waiters queued but nobody watches");
  if (msg && len) msg[0] = '\0';
  return 0;
}

int check_and_repair(shmsem_t *s) {
  Section sec(s);
  if (check_locked(s, nullptr, 0) == 0) return 0;
  repair(sec.locked());
  return 1;
}

int check(shmsem_t *s, char *msg, size_t len) {
  if (!s) return -EINVAL;
  if (s->rdonly) return check_locked(s, msg, len);  // best effort, racy
  Section sec(s);
  return check_locked(s, msg, len);
}

}  // namespace shmsem::detail
