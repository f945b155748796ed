// Granting: where a permit goes when it leaves its holder's hands (the
// head waiter's reservation, the head's grant, the pool, retirement), and a
// waiter taking what it was granted. Every step here runs inside a Section
// (section.h). docs/DESIGN.md sections 4 and 13.
#ifndef SHMSEM_SRC_GRANT_H
#define SHMSEM_SRC_GRANT_H

#include <shmsem/shmsem.h>

#include "handle.h"
#include "section.h"

namespace shmsem::detail {

// Lease `l` is leaving the owner's hands (release, reclamation of a dead
// owner, a grow); the caller has already taken it out of its counter
// (`held`, `reserved`, `available`) and it is listed in used_leases. It
// goes, in this order: to retirement while a shrink waits for permits; to
// the head waiter's reservation (RESERVED) while the head needs more, and
// once the head has all it asked for and the rate allows, the head is
// granted (word GRANTED; added to `wk`); else to the pool. This is the
// only place a permit is granted to a waiter. Heads whose owner left
// without the lock are freed on the way, their reservations passed on.
// `l`'s own link is ignored (cleared).
void pass_permit(Locked s, uint32_t l, Wakes *wk);
// The same for each record of `c` (a weighted lease being released, read
// once by walk_lease: chain.h), in order.
class Chain;
void pass_chain(Locked s, const Chain &c, Wakes *wk);

// Slot `w` is the head, WAITING, holds all it asked for, and the rate now
// allows it: grant it (GRANTED, a token taken), and pass the pool's free
// permits to the next head. False if any of that is not so. The head's own
// step: nobody else wakes for a start time.
bool grant_due_head(Locked s, uint32_t w, Wakes *wk);

// Slot `w` (checked) leaves the queue or is freed: the records RESERVED for
// it go on (pass_permit), and the pool's free permits to a head that now
// wants them (feed_head). `reserved` is adjusted.
void drop_reservation(Locked s, uint32_t w, Wakes *wk);

// While the head waiter wants permits (or a shrink does): free ones from
// the pool go to it. Bounded. Used when a head changes with permits free
// (a rate-limited head that was full leaves or is granted).
void feed_head(Locked s, Wakes *wk);

// Whether a released permit is wanted before the pool: a shrink waits, or
// the head waiter still gathers its reservation.
bool wants_permit(const shmsem_t *s);

// The bounded policy (section 15), at the start and the end of every section:
// the hand-off is on while the head has waited max_bypass_ns or more (then the
// permits free in the pool go to it, as under FIFO), off otherwise;
// always off under FIFO (a writer's 1 put right).
// True if it turned the hand-off on.
bool policy_sync(Locked s, Wakes *wk);

// Frees slot `w` (checked by the caller), whose owner left without the lock
// (LEFT_QUEUED: unlinked first; LEFT: its reservation is passed on). No
// effect on any other state.
void sweep_left(Locked s, uint32_t w, Wakes *wk);
// The same for a slot the caller has already unlinked and whose
// reservation it has dropped.
void free_left(Locked s, uint32_t w);

// The waiter owning slot `w` completes: its word is no longer WAITING.
// Frees the slot; GRANTED fills `lease` and returns 0.
// A GRANTED lease of one permit becomes HELD_FAST under `proc` (the
// waiter's process record) if it has one, else HELD; one of n permits is n
// HELD records linked from the one the token names. A reservation a writer
// broke is not handed over: -EUCLEAN, the slot freed, its records passed
// on (slots to wake go to `wk`), the caller owning nothing.
int finish_slot(Locked s, uint32_t w, uint32_t proc, shmsem_lease_t *lease,
                Wakes *wk);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_GRANT_H
