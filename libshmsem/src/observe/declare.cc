// Declared hold times (shmsem_declare_hold): what a holder says about how
// long it will keep its lease, for monitors to flag overdue leases. Nothing
// in the protocol reads it: one store, no lock, tagged with the lease's
// generation (layout.h decl_word), so a declaration of a lease that was
// released since, or that lands after the release, names a generation no
// later holder has and is never shown. docs/DESIGN.md §14.
#include "declare.h"

#include <errno.h>

#include "handle.h"

namespace shmsem::detail {

int declare_hold(shmsem_t *s, const shmsem_lease_t *lease, uint64_t hold_ns) {
  if (!s || !lease) return -EINVAL;
  if (s->rdonly) return -EBADF;
  if (lease->sem != s->nonce || lease->index >= s->permits || lease->gen == 0 ||
      lease->gen > kGenMask || lease->__reserved || hold_ns > kMaxDeclaredNs)
    return -EINVAL;
  const LeaseRecord &rec = s->leases[lease->index];
  const uint64_t w = rec.word.load(std::memory_order_acquire);
  const uint32_t state = word_state(w);
  if (word_gen(w) != lease->gen ||
      (state != kLeaseHeld && state != kLeaseHeldFast))
    return -EALREADY;
  // The other records of a weighted lease: no token names them.
  if (state == kLeaseHeld &&
      __atomic_load_n(&rec.slot, __ATOMIC_RELAXED) == kMember)
    return -EINVAL;
  s->declared[lease->index].store(decl_word(lease->gen, hold_ns),
                                  std::memory_order_relaxed);
  return 0;
}

}  // namespace shmsem::detail
