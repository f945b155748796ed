// Release: return a lease's permit to the head waiter or the pool.
#include "release.h"

#include "chain.h"
#include "lanes.h"
#include "futex.h"
#include "hooks.h"
#include "grant.h"
#include "section.h"
#include "tables.h"
#include "transitions.h"

namespace shmsem::detail {

namespace {

// Lease `l`, HELD, is a weighted lease's first record: the records linked
// from it are the others (section 13), read once into `ch` (chain.h), each
// HELD by the same owner and marked as no token's, each once. The chain is
// cut at the first that is not one (reclamation passed it on alone after
// its owner died, or a writer): only the copy's records are released.
void lease_chain(Locked s, uint32_t l, Chain *ch) {
  (void)walk_lease(s, l, ch);
  s->leases[ch->back()].link = kNone;
}

}  // namespace

int release_locked(shmsem_t *s, const shmsem_lease_t *lease) {
  const uint32_t l = lease->index;
  const uint64_t gen = lease->gen;
  Section sec(s);
  {
    const Locked k = sec.locked();
    Wakes *wk = sec.wakes();
    SHMSEM_HOOK(RELEASE_LOCKED);
    LeaseRecord &rec = s->leases[l];
    // A lease is valid only while its record is held at the same
    // generation: a second release, or a release after reclamation,
    // changes nothing.
    uint64_t w = rec.word.load(std::memory_order_relaxed);
    if (word_gen(w) != gen) return -EALREADY;
    if (word_state(w) == kLeaseHeldFast) {
      // Held under a process record: lock it in as HELD first (a CAS: a
      // lock-free release of the same token may race with this one).
      uint32_t p = word_proc(w);
      if (!lease_lock_in(k, l, &w,
                         p < s->max_procs ? s->procs[p].owner : rec.owner))
        return -EALREADY;
      record_hold(s, rec.since_ns.load(std::memory_order_relaxed));
      pass_permit(k, l, wk);  // one permit: never weighted
    } else if (word_state(w) == kLeaseHeld && rec.slot == kMember) {
      // One of a weighted lease's others: no token names it (a forged
      // one does, at a guessable generation).
      return -EINVAL;
    } else if (word_state(w) == kLeaseHeld) {
      // This record first (the commit that spends the token), then the
      // others of a weighted lease: a releaser killed in between leaves
      // them HELD by their (dead) owner, which reclamation passes on.
      Chain ch;
      lease_chain(k, l, &ch);
      SHMSEM_HOOK(RELEASE_CHAIN_READ);
      counter_add(s->core->held, -int32_t(ch.size()));
      record_hold(s, rec.since_ns.load(std::memory_order_relaxed));
      pass_chain(k, ch, wk);
    } else {
      return -EALREADY;
    }
  }
  sec.unlock();
  if (sec.wakes()->n) SHMSEM_HOOK(RELEASE_GRANTED);
  // Dekker with the waiter (waiter.cc): our GRANTED store, then the fence
  // and load of `sleeping` in Wakes::run() at the end of the section; its
  // `sleeping` store, then its load of the word. One of the two loads sees
  // the other's store, so a sleeper is never missed; a waiter still
  // spinning costs no system call.
  return 0;
}

}  // namespace shmsem::detail
