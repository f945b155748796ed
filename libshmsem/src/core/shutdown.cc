// Shutdown: close the semaphore and fail every queued waiter.
#include "shutdown.h"

#include <errno.h>

#include "futex.h"
#include "hooks.h"
#include "grant.h"
#include "section.h"
#include "transitions.h"
#include "tables.h"

namespace shmsem::detail {

int fail_queued(Locked s) {
  int n = 0;
  // Bounded: a damaged queue may loop or point anywhere.
  for (uint32_t i = 0; i <= s->max_waiters; i++) {
    uint32_t w = s->core->head;
    if (w == kNone) break;
    uint32_t word =
        slot_ok(s, w) ? s->slots[w].word.load(std::memory_order_relaxed) : 0;
    if (word == kSlotLeftQueued) {
      Wakes none;               // closed: nobody is granted
      sweep_left(s, w, &none);  // its owner left without the lock: free it
      continue;
    }
    if (word != kSlotWaiting) {
      mark_corrupt(s);  // repair turns every WAITING slot CLOSED
      break;
    }
    queue_unlink(s, w);
    // What was reserved for it goes to the pool (closed: no head takes it).
    Wakes none;
    drop_reservation(s, w, &none);
    // A CAS: the owner may leave without the lock at any moment.
    if (!slot_close(s, s->slots[w])) {  // commit
      free_left(s, w);  // it left after we looked; unlinked above
      continue;
    }
    stat_bump(s->core->shutdown_failures);
    // Woken under the lock: shutdown is rare, and the slot cannot be freed
    // before its owner takes the lock to see CLOSED.
    wake_slot(s, w);
    SHMSEM_HOOK(SHUTDOWN_FAILED_ONE);
    n++;
  }
  return n;
}

int shutdown(shmsem_t *s) {
  if (!s) return -EINVAL;
  if (s->rdonly) return -EBADF;
  Section sec(s);
  s->core->closed.store(1, std::memory_order_relaxed);  // commit
  SHMSEM_HOOK(SHUTDOWN_CLOSED);
  return fail_queued(sec.locked());
}

}  // namespace shmsem::detail
