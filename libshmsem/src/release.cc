// Release: return a lease's permit to the head waiter or the pool.
#include "release.h"

#include <errno.h>

#include "futex.h"
#include "hooks.h"
#include "lock.h"
#include "tables.h"

namespace shmsem::detail {

int release(shmsem_t *s, shmsem_lease_t *lease) {
  if (!s || !lease) return -EINVAL;
  if (s->rdonly) return -EBADF;
  // A token names its semaphore (a nonce drawn at creation): one of another
  // semaphore, or of an earlier one under the same name, is not ours.
  const uint32_t l = lease->index;
  const uint64_t gen = lease->gen;
  if (lease->sem != s->nonce || l >= s->permits || gen == 0 ||
      lease->__reserved)
    return -EINVAL;
  uint32_t wake;
  {
    LockGuard guard(s);
    SHMSEM_HOOK(RELEASE_LOCKED);
    LeaseRecord &rec = s->leases[l];
    // A lease is valid only while its record is HELD at the same generation:
    // a second release, or a release after reclamation, changes nothing.
    if (rec.state.load(std::memory_order_relaxed) != kLeaseHeld ||
        rec.gen.load(std::memory_order_relaxed) != gen)
      return -EALREADY;
    counter_add(s->core->held, -1);
    wake = pass_permit(s, l);
  }
  if (wake != kNone) {
    SHMSEM_HOOK(RELEASE_GRANTED);
    // Dekker with the waiter (acquire.cc): our GRANTED store, then this
    // load; its `sleeping` store, then its load of the word. One of the two
    // loads sees the other's store, so a sleeper is never missed; a waiter
    // still spinning costs no system call.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (s->slots[wake].sleeping.load(std::memory_order_relaxed))
      futex_wake(&s->slots[wake].word, 1);
  }
  return 0;
}

}  // namespace shmsem::detail
