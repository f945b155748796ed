// Test-only hook points: named steps of every operation at which a test can
// pause the calling thread, run something else, or kill the process.
// Release builds compile SHMSEM_HOOK to nothing.
#ifndef SHMSEM_SRC_HOOKS_H
#define SHMSEM_SRC_HOOKS_H

namespace shmsem::detail {

// <operation>_<step>. "Locked" points run with the internal lock held.
#define SHMSEM_HOOK_POINTS(X)                                               \
  X(ACQUIRE_LOCKED)         /* acquire holds the lock, nothing changed */   \
  X(ACQUIRE_LEASE_POPPED)   /* lease off the free list, not committed */    \
  X(ACQUIRE_COMMITTED)      /* lease HELD, lock still held */               \
  X(ACQUIRE_TAKEN)          /* fast acquire done, lock released */          \
  X(ENQUEUE_SLOT_POPPED)    /* slot off the free list, not committed */     \
  X(ENQUEUE_COMMITTED)      /* slot WAITING, not yet linked */              \
  X(ACQUIRE_ENQUEUED)       /* queued, lock released, not yet asleep */     \
  X(WAIT_SLEEPING)          /* about to sleep, `sleeping` announced */      \
  X(WAIT_WOKEN)             /* futex or event wait returned */              \
  X(WAIT_TIMEOUT_FIRED)     /* deadline passed, cancel not yet run */       \
  X(WAIT_CANCEL_SEEN)       /* cancellation seen, not yet run */            \
  X(WAIT_RETURN_LOCKED)     /* waiter completing, holds the lock */         \
  X(WAIT_LEAVING)           /* lock not had by the limit, word not CASed */ \
  X(WAIT_CHAIN_READ)        /* granted chain read, records not yet HELD */  \
  X(WAIT_CONSUME_COMMITTED) /* lease RESERVED->HELD, slot not yet freed */  \
  X(RELEASE_LOCKED)         /* release holds the lock, nothing changed */   \
  X(RELEASE_CHAIN_READ)     /* lease's chain read, permits not passed */    \
  X(RELEASE_CHOSEN)         /* head chosen, lease not yet RESERVED */       \
  X(RELEASE_RESERVED)       /* lease RESERVED for head, word not GRANTED*/  \
  X(RELEASE_FREED)          /* lease FREE, not yet on the free list */      \
  X(RELEASE_GRANTED)        /* grant done, lock released, not yet woken */  \
  X(FAST_ACQUIRE_READ)      /* lock-free: lease read LOOSE, not CASed */    \
  X(FAST_ACQUIRE_TAKEN)     /* lock-free: lease HELD_FAST, token not out*/  \
  X(FAST_RELEASE_NAMED)     /* lock-free: lane names it, still HELD_FAST*/  \
  X(FAST_RELEASE_FREED)     /* lock-free: lease LOOSE, gate not read */     \
  X(FAST_HANDOFF_LOCKED)    /* gate seen open: lock held, not passed */     \
  X(PROC_NAMED)             /* process record named, not yet USED */        \
  X(GATE_OPENED)            /* gate opened to the queue, lanes not swept*/  \
  X(CHECK_LEASE_READ)       /* check read a LOOSE word, lanes not read */   \
  X(CANCEL_LOCKED)          /* canceller holds the lock */                  \
  X(SHUTDOWN_CLOSED)        /* closed committed, waiters not yet failed */  \
  X(SHUTDOWN_FAILED_ONE)    /* one waiter failed, lock held */              \
  X(WATCH_EVENTS_ARMED)     /* watcher armed pidfds in its ring, awake */   \
  X(WATCH_DEATH_SEEN)       /* a pidfd in the ring reported an exit */      \
  X(RECLAIM_JUDGED)         /* one owner judged, lock not held */           \
  X(RECLAIM_SCANNED)        /* dead owners found, lock not yet taken */     \
  X(RECLAIM_LOCKED)         /* reclamation holds the lock */                \
  X(RECLAIM_ONE)            /* one record reclaimed, lock held */           \
  X(REPAIR_LOCKED)          /* repair after a takeover, lock held */        \
  X(REPAIR_CHAINS_READ)     /* reservations read from records, not acted*/  \
  X(LOCK_TAKEN)             /* lock word CASed, holder not yet named */     \
  X(LOCK_TAKEOVER)          /* dead holder proven, word not yet CASed */    \
  X(LOCK_HOLDER_ALIVE)      /* a lock waiter judged the holder not dead */  \
  X(CAPACITY_SET)           /* capacity stored, records not settled */      \
  X(CAPACITY_ONE)           /* one record retired or returned, locked */    \
  X(CREATE_OPENED)          /* create: unnamed file open, empty */          \
  X(CREATE_SIZED)           /* create: file sized, not initialised */       \
  X(CREATE_INITIALISED)     /* create: segment built, not yet named */      \
  X(CREATE_LINKED)          /* create: linked under its name */             \
  X(SNAPSHOT_COPY)          /* SHMSEM_SNAPSHOT: file open, not yet read */  \
  X(INSPECT_SCANNED)        /* inspect: one read without the lock done */   \
  X(POLICY_HAND_OFF)        /* bounded: hand-off set, pool not yet fed */   \
  X(HEAD_BARGE_TAKEN)       /* bounded: head took permits, still queued */

enum class HookPoint : int {
#define SHMSEM_X(name) name,
  SHMSEM_HOOK_POINTS(SHMSEM_X)
#undef SHMSEM_X
      kCount
};

#ifdef SHMSEM_TESTING
void run_hook(HookPoint p);
#define SHMSEM_HOOK(point) \
  ::shmsem::detail::run_hook(::shmsem::detail::HookPoint::point)
#else
#define SHMSEM_HOOK(point) ((void)0)
#endif

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_HOOKS_H
