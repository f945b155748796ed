// The invariant checker: a full scan comparing the record states with the
// derived structures, as a table of checks (kInvariants), one per invariant
// block, run in order. Names match docs/DESIGN.md §8.
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

// shmsem_check's message: the invariant's name, a colon, what is wrong.
int fail(char *msg, size_t len, const char *inv, const char *what) {
  if (msg && len)
    (void)snprintf(msg, len, "%s: %s", inv, what);  // may truncate
  return -EUCLEAN;
}

// What the checks read: the handle, the census (census.h, one scan of the
// state words, taken before any check), and what the pass over the slots
// counts for the checks after it.
struct Scan {
  shmsem_t *s;
  Core *c;
  uint32_t n, m;  // lease records, waiter slots
  Census cs;
  // Counted by slot_states(): FREE slots, queued ones (WAITING or
  // LEFT_QUEUED), and the records on the slots' chains.
  uint32_t free_slots = 0, queued = 0, chained = 0;
  // Set only by a pass over the records, when a record breaks the
  // invariant of its state (report()); else the row's name is reported.
  const char *broken = nullptr;
  const char *report(const char *inv, const char *why) {
    broken = inv;
    return why;
  }
};

// --- The lease records, one by one ----------------------------------------

// INV-LOOSE: a LOOSE lease is named by a lane of its process record, which
// is in use (the sweeps find it there).
const char *loose_named(const Scan &sc, uint32_t l, uint64_t word) {
  const shmsem_t *s = sc.s;
  SHMSEM_HOOK(CHECK_LEASE_READ);
  const uint32_t p = word_proc(word);
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
  if (!named && s->leases[l].word.load(std::memory_order_acquire) == word)
    return "free lease no lane names";
  return nullptr;
}

// INV-ATTRIB: a HELD_FAST lease is held under a process record in use.
const char *fast_attributed(const Scan &sc, uint64_t word) {
  const uint32_t p = word_proc(word);
  if (p >= sc.s->max_procs ||
      sc.s->procs[p].state.load(std::memory_order_relaxed) != kProcUsed)
    return "lease held by no process record";
  return nullptr;
}

// INV-GRANT: a RESERVED lease is reserved for a slot that holds a
// reservation (its chain is checked by slot_states(), INV-RESERVE).
const char *reserved_for_a_slot(const Scan &sc, uint32_t l) {
  const uint32_t w = sc.s->leases[l].slot;
  const uint32_t sw =
      w < sc.m ? sc.s->slots[w].word.load(std::memory_order_relaxed) : 0;
  if (sw != kSlotGranted && sw != kSlotLeft && sw != kSlotWaiting &&
      sw != kSlotLeftQueued)
    return "reserved lease without its slot";
  return nullptr;
}

// INV-PERMITS (every record in one valid state), and each record as its
// state asks (INV-LOOSE, INV-ATTRIB, INV-GRANT): record by record, so the
// first record found wrong is the one reported.
const char *lease_states(Scan *sc) {
  for (uint32_t l = 0; l < sc->n; l++) {
    const uint64_t word = sc->s->leases[l].word.load(std::memory_order_relaxed);
    switch (word_state(word)) {
      case kLeaseFree:
      case kLeaseHeld:
      case kLeaseRetired:
        break;
      case kLeaseLoose:
        if (const char *why = loose_named(*sc, l, word))
          return sc->report("INV-LOOSE", why);
        break;
      case kLeaseHeldFast:
        if (const char *why = fast_attributed(*sc, word))
          return sc->report("INV-ATTRIB", why);
        break;
      case kLeaseReserved:
        if (const char *why = reserved_for_a_slot(*sc, l))
          return sc->report("INV-GRANT", why);
        break;
      default:
        return "invalid lease state";
    }
  }
  return nullptr;
}

// --- The counters and the core's words ------------------------------------

// INV-PROCS: every process record is FREE or USED, and none in use lies at
// or above the high-water mark.
const char *procs_in_range(Scan *sc) {
  const shmsem_t *s = sc->s;
  for (uint32_t p = 0; p < s->max_procs; p++) {
    const uint32_t st = s->procs[p].state.load(std::memory_order_relaxed);
    if (st != kProcFree && st != kProcUsed)
      return "invalid process record state";
    if (st == kProcUsed &&
        p >= sc->c->procs_hwm.load(std::memory_order_relaxed))
      return "record in use above the mark";
  }
  return nullptr;
}

// INV-GATE: the gate the lock-free path reads follows the queue, shutdown,
// a pending shrink and the rate limit.
const char *gate_follows(Scan *sc) {
  const Core *c = sc->c;
  const uint32_t gate = c->gate.load(std::memory_order_relaxed);
  if (gate != gate_of(c, sc->s->bound_ns != 0))  // tables.h: the one formula
    return "the gate does not follow the queue";
  return nullptr;
}

// INV-PERMITS: every record is in exactly one state (by the census).
const char *records_add_up(Scan *sc) {
  const Census &cs = sc->cs;
  if (cs.free + cs.held + cs.reserved + cs.loose + cs.fast + cs.retired !=
      sc->n)
    return "records do not add up to N";
  return nullptr;
}

// INV-CAPACITY: the retired records and those still to retire make up
// what is above the capacity; nothing is free while a shrink waits.
const char *capacity_adds_up(Scan *sc) {
  const Core *c = sc->c;
  const uint32_t n = sc->n, nretired = sc->cs.retired;
  const uint32_t cap = c->capacity.load(std::memory_order_relaxed);
  const uint32_t retiring = c->retiring.load(std::memory_order_relaxed);
  if (nretired != c->retired.load(std::memory_order_relaxed) || cap > n ||
      uint64_t{cap} + nretired + retiring != n)
    return "capacity, retired and retiring do not add up to N";
  // (A LOOSE lease may exist for as long as its lock-free releaser is
  // between its CAS and the hand-off, as under INV-NOBYPASS.)
  if (retiring && sc->cs.free) return "a permit is free while a shrink waits";
  return nullptr;
}

// INV-WEIGHT: the others of a weighted lease are HELD by its owner, marked
// as no token's, each on one chain, reached once (chain.h). A chain ends at
// a record that left, or that another owner holds now: reclamation passes
// a dead owner's records one by one, and a release cuts the chain there.
const char *weighted_chains(Scan *sc) {
  const shmsem_t *s = sc->s;
  std::vector<char> reached(sc->n, 0);
  for (uint32_t l = 0; l < sc->n; l++) {
    const LeaseRecord &rec = s->leases[l];
    if (lease_state(rec) != kLeaseHeld) continue;
    const uint32_t x = __atomic_load_n(&rec.link, __ATOMIC_RELAXED);
    if (!(x == kNone || lease_ok(s, x)))
      return "a weighted lease's link is out of range";
    if (rec.slot == kMember) continue;
    Chain ch;
    if (walk_lease(s, l, &ch) == ChainEnd::kRevisit)
      return "a weighted lease's chain is broken";
    for (uint32_t i = 1; i < ch.size(); i++) {
      if (reached[ch[i]]) return "a weighted lease's chain is broken";
      reached[ch[i]] = 1;
    }
  }
  return nullptr;
}

// INV-RATE: the bucket is never further ahead than a burst.
const char *rate_in_range(Scan *sc) {
  const Core *c = sc->c;
  if (uint64_t t = c->rate_interval_ns.load(std::memory_order_relaxed)) {
    Rate r = rate_read(sc->s, mono_ns());
    if (t > kMaxRateIntervalNs ||
        c->rate_tat_ns.load(std::memory_order_relaxed) > r.tat)
      return "the rate state is out of range";
  }
  return nullptr;
}

// INV-PERMITS: the counters are those of the records (the census).
const char *counters_match(Scan *sc) {
  const Core *c = sc->c;
  if (sc->cs.free != c->available.load(std::memory_order_relaxed) ||
      sc->cs.held != c->held.load(std::memory_order_relaxed) ||
      sc->cs.reserved != c->reserved.load(std::memory_order_relaxed))
    return "counters differ from the records";
  return nullptr;
}

// --- The free lists, the reservations, the queue --------------------------

// INV-FREE: the lease free list holds exactly the FREE records.
const char *lease_free_list(Scan *sc) {
  const shmsem_t *s = sc->s;
  const uint32_t n = sc->n;
  std::vector<char> seen(n, 0);
  uint32_t count = 0;
  for (uint32_t l = sc->c->free_lease; l != kNone; l = s->leases[l].next_free) {
    if (l >= n || seen[l] || ++count > n) return "lease free list is corrupt";
    seen[l] = 1;
    if (lease_state(s->leases[l]) != kLeaseFree)
      return "non-free lease on the free list";
  }
  if (count != sc->cs.free) return "free lease missing";
  return nullptr;
}

// Whether a chain of `chain` records fits slot `w`, in state `word`, that
// asked for `k`: all of them if GRANTED (or LEFT after a grant), none if
// CANCELLED or CLOSED, fewer while queued (all of them only at the head,
// waiting for its start time).
bool chain_fits(const Scan &sc, uint32_t w, uint32_t word, uint32_t chain,
                uint32_t k) {
  switch (word) {
    case kSlotGranted:
      return chain == k;
    case kSlotLeft:
      return chain == k || chain == 0;
    case kSlotCancelled:
    case kSlotClosed:
      return chain == 0;
    default:
      return chain == 0 ||
             (w == sc.c->head &&
              (chain < k ||
               (word == kSlotWaiting &&
                sc.c->rate_interval_ns.load(std::memory_order_relaxed))));
  }
}

// INV-RESERVE for slot `w`, in use in a valid state `word`: its chain is
// exactly the records RESERVED for it, as many as `got`, as many as the
// state allows (chain_fits; a GRANTED slot short of them breaks INV-GRANT).
const char *reservation_fits(Scan *sc, uint32_t w, uint32_t word) {
  const WaiterSlot &ws = sc->s->slots[w];
  Chain ch;
  if (walk_reservation(sc->s, w, &ch) != ChainEnd::kEnd)
    return "a reservation's chain is broken";
  const uint32_t chain = ch.size();
  sc->chained += chain;
  const uint32_t k = ws.weight;
  if (k < 1 || k > sc->n || chain != ws.got)
    return "weight or count out of range";
  if (chain_fits(*sc, w, word, chain, k)) return nullptr;
  if (word == kSlotGranted)
    return sc->report("INV-GRANT", "granted slot without its leases");
  return "reservation does not fit the slot";
}

// Every slot in a valid state (INV-QUEUE) and each reservation as its slot
// asks (INV-RESERVE), slot by slot; counts the slots for the checks after.
const char *slot_states(Scan *sc) {
  for (uint32_t w = 0; w < sc->m; w++) {
    const uint32_t word = sc->s->slots[w].word.load(std::memory_order_relaxed);
    if (word == kSlotFree) {
      sc->free_slots++;
      continue;
    }
    if (word == kSlotWaiting || word == kSlotLeftQueued)
      sc->queued++;
    else if (word != kSlotGranted && word != kSlotCancelled &&
             word != kSlotClosed && word != kSlotLeft)
      return sc->report("INV-QUEUE", "invalid slot state");
    if (const char *why = reservation_fits(sc, w, word)) return why;
  }
  return nullptr;
}

// INV-RESERVE: every RESERVED record is on a slot's chain.
const char *reserved_all_chained(Scan *sc) {
  if (sc->chained != sc->cs.reserved) return "a reserved lease is on no chain";
  return nullptr;
}

// INV-FREE: the slot free list holds exactly the FREE slots.
const char *slot_free_list(Scan *sc) {
  const shmsem_t *s = sc->s;
  const uint32_t m = sc->m;
  std::vector<char> seen(m, 0);
  uint32_t count = 0;
  for (uint32_t w = sc->c->free_slot; w != kNone; w = s->slots[w].next_free) {
    if (w >= m || seen[w] || ++count > m) return "slot free list is corrupt";
    seen[w] = 1;
    if (s->slots[w].word.load(std::memory_order_relaxed) != kSlotFree)
      return "used slot on the free list";
  }
  if (count != sc->free_slots) return "free slot missing";
  return nullptr;
}

// INV-QUEUE: exactly the WAITING slots (and LEFT_QUEUED ones, whose owner
// left without the lock), in increasing ticket order, `waiting` of them.
const char *queue_in_order(Scan *sc) {
  const shmsem_t *s = sc->s;
  const Core *c = sc->c;
  const uint32_t m = sc->m;
  uint32_t count = 0, prev = kNone;
  uint64_t last = 0;
  for (uint32_t w = c->head; w != kNone; w = s->slots[w].next) {
    if (w >= m || ++count > m) return "queue links are corrupt";
    const uint32_t word = s->slots[w].word.load(std::memory_order_relaxed);
    if (word != kSlotWaiting && word != kSlotLeftQueued)
      return "non-waiting slot in the queue";
    if (s->slots[w].prev != prev) return "back link is wrong";
    if (s->slots[w].ticket <= last) return "tickets out of FIFO order";
    last = s->slots[w].ticket;
    prev = w;
  }
  if (prev != c->tail) return "tail is wrong";
  if (count != sc->queued ||
      count != c->waiting.load(std::memory_order_relaxed))
    return "waiting count differs from the queue";
  if (sc->queued && c->next_ticket <= last)
    return "next ticket not above the tail";
  return nullptr;
}

// INV-NOBYPASS: free while waiters queue only behind a head that has all it
// asked for and waits for its start time (the rate), or under the bounded
// policy while the head is within its bound (section 15). (A LOOSE lease may
// exist while waiters queue, for as long as its releaser is between its CAS
// and the hand-off: the gate, open, keeps newcomers off it. INV-GATE.)
const char *no_bypass(Scan *sc) {
  const shmsem_t *s = sc->s;
  const uint32_t head = sc->c->head;  // once: a writer may change it
  if (sc->queued && sc->cs.free && !barging(s) &&
      !(head < sc->m && s->slots[head].got >= s->slots[head].weight &&
        sc->c->rate_interval_ns.load(std::memory_order_relaxed)))
    return "a permit is free while waiters queue";
  // The hand-off flag is the bounded policy's, and only while someone
  // queues.
  if (sc->c->hand_off.load(std::memory_order_relaxed) &&
      (!s->bound_ns || !sc->queued))
    return "hand-off set with no bounded queue";
  return nullptr;
}

// INV-CLOSED: a closed semaphore has an empty queue.
const char *closed_empty(Scan *sc) {
  if (sc->queued && sc->c->closed.load(std::memory_order_relaxed))
    return "waiters queued on a closed semaphore";
  return nullptr;
}

// --- The arrays of records in use, the watcher ----------------------------

// INV-USED: the leases' in-use array holds exactly the HELD and RESERVED
// records, each at the position its record names.
const char *used_leases(Scan *sc) {
  const shmsem_t *s = sc->s;
  const uint32_t nused = sc->cs.held + sc->cs.reserved;
  if (sc->c->n_used_leases.load(std::memory_order_relaxed) != nused)
    return "lease in-use count is wrong";
  for (uint32_t i = 0; i < nused; i++) {
    const uint32_t l = s->used_leases[i].load(std::memory_order_relaxed);
    if (l >= sc->n || s->leases[l].used_pos != i ||
        (lease_state(s->leases[l]) != kLeaseHeld &&
         lease_state(s->leases[l]) != kLeaseReserved))
      return "lease in-use array is corrupt";
  }
  return nullptr;
}

// INV-USED: the slots' in-use array holds exactly the slots not FREE, each
// at the position its slot names.
const char *used_slots(Scan *sc) {
  const shmsem_t *s = sc->s;
  const uint32_t m = sc->m, nused = m - sc->free_slots;
  if (sc->c->n_used_slots.load(std::memory_order_relaxed) != nused)
    return "slot in-use count is wrong";
  for (uint32_t i = 0; i < nused; i++) {
    const uint32_t w = s->used_slots[i].load(std::memory_order_relaxed);
    if (w >= m || s->slots[w].used_pos != i ||
        s->slots[w].word.load(std::memory_order_relaxed) == kSlotFree)
      return "slot in-use array is corrupt";
  }
  return nullptr;
}

// INV-WATCH: while anyone is queued, `watcher` names a slot in use.
const char *watched(Scan *sc) {
  const uint32_t wt = sc->c->watcher.load(std::memory_order_relaxed);
  if (sc->queued &&
      (wt >= sc->m ||
       sc->s->slots[wt].word.load(std::memory_order_relaxed) == kSlotFree))
    return "waiters queued but nobody watches";
  return nullptr;
}

// --- The table ------------------------------------------------------------

// A row: an invariant (docs/DESIGN.md §8) and its check, which returns
// nullptr if it holds, else what is wrong (shmsem_check's message is
// "name: what").
struct Invariant {
  const char *name;
  const char *(*check)(Scan *sc);
};

// Every invariant shmsem_check reports, in the order checked: when several
// are broken, the first row that finds one names it. A pass over the
// records (lease_states, slot_states) checks each record, in index order,
// against its row's invariant and the one of its state, and names the one
// the first wrong record breaks (Scan::report). slot_states counts the
// slots for the rows after it.
constexpr Invariant kInvariants[] = {
    {"INV-PERMITS", lease_states},  // and INV-LOOSE, INV-ATTRIB, INV-GRANT
    {"INV-PROCS", procs_in_range},
    {"INV-GATE", gate_follows},
    {"INV-PERMITS", records_add_up},
    {"INV-CAPACITY", capacity_adds_up},
    {"INV-WEIGHT", weighted_chains},
    {"INV-RATE", rate_in_range},
    {"INV-PERMITS", counters_match},
    {"INV-FREE", lease_free_list},
    {"INV-RESERVE", slot_states},  // and INV-QUEUE, INV-GRANT
    {"INV-RESERVE", reserved_all_chained},
    {"INV-FREE", slot_free_list},
    {"INV-QUEUE", queue_in_order},
    {"INV-NOBYPASS", no_bypass},
    {"INV-CLOSED", closed_empty},
    {"INV-USED", used_leases},
    {"INV-USED", used_slots},
    {"INV-WATCH", watched},
};

}  // namespace

int check_locked(shmsem_t *s, char *msg, size_t len) {
  // The counts from one scan (census.h), first; the states one by one in
  // the rows.
  Scan sc{s, s->core, s->permits, s->max_waiters, census(s)};
  for (const Invariant &row : kInvariants)
    if (const char *why = row.check(&sc))
      return fail(msg, len, sc.broken ? sc.broken : row.name, why);
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
