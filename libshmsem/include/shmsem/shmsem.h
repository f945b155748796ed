/*
 * shmsem — a FIFO-fair, cancellable, crash-aware counting semaphore that
 * lives in a POSIX shared-memory segment (/dev/shm/<name>) and coordinates
 * many processes on one Linux host.
 *
 * Return convention: every function that returns int returns 0 (or a
 * non-negative count) on success and a negative errno value on failure, as
 * liburing does. errno is never the only carrier of an error. A NULL
 * handle, name or output pointer is -EINVAL for every function.
 *
 * Safety: a shmsem_t handle may be used by any number of threads of its
 * process at once. Any number of processes may open the same semaphore.
 * All processes using one semaphore must share one PID namespace.
 *
 * Ordering: everything a process did before shmsem_release() is visible to
 * the process whose acquire receives that permit, once the acquire returns.
 *
 * Fairness: strictly FIFO. While any waiter is queued, a new caller queues
 * behind it even if a permit is momentarily free; a release hands its permit
 * directly to the oldest waiter and wakes only that waiter.
 *
 * Time: deadlines are absolute CLOCK_MONOTONIC times. A deadline in the past
 * means "try now, do not wait".
 *
 * Leases: a successful acquire fills a shmsem_lease_t, a small token naming
 * the permit. It can be released exactly once, by any process. A cancelled or
 * timed-out acquire owns nothing.
 *
 * Crashes: leases and waiter slots record their owner (PID plus what names
 * that very process for the boot: its pidfs inode and start time; a waiter
 * slot also names its thread). Permits of processes that provably exited
 * are reclaimed (see shmsem_recover); an owner whose death cannot be proven
 * (hidden /proc, unknown PID namespace) counts as alive. While anyone waits,
 * one waiter watches the owners: on Linux 6.7+ asleep in an io_uring on
 * their pidfds (one descriptor, close-on-exec, held only during that
 * acquire), else on a timer; SHMSEM_DEATH_WATCH=poll in the environment
 * forces the timer (shmsem(7), ENVIRONMENT). A process that
 * detaches without releasing keeps its leases until it exits.
 *
 * Processes: a lease belongs to its process, like a System V SEM_UNDO
 * adjustment. It survives exec (the new program may release it if it has the
 * token) and comes back when the process exits. A queued wait belongs to
 * its thread: exec (which ends the other threads) or cancellation leaves no
 * ghost in the queue, except a wait by the thread-group leader while another
 * thread execs (the kernel gives that thread the leader's tid, pidfs inode
 * and start time: the place stays until the process exits; shmsem(7)).
 * A fork child, whether made by fork(), _Fork() or
 * clone() without CLONE_VM, is a new owner: it inherits no leases and no
 * waits, and may use its parent's handle at once (a child sharing its
 * parent's memory, clone(CLONE_VM) without CLONE_THREAD, must not call the
 * library). A writable handle used from another PID namespace than the
 * semaphore's (a child that unshare()d one) is refused by every call that
 * acquires, releases or takes the internal lock: -EXDEV (read-only handles
 * still read). The library keeps
 * no descriptors, no threads and no signal handlers in the caller's
 * process (except the eventfd and thread of a notifier the caller
 * creates, below), installs no atfork handler, and maps one private page
 * (MADV_WIPEONFORK) per process.
 *
 * Thread cancellation: shmsem_acquire, shmsem_acquire_until and
 * shmsem_acquire_ex are deferred cancellation points while the caller sleeps
 * in the queue: a pthread_cancel() takes effect when the sleep ends, at the
 * latest at the waiter's next periodic wake-up (one watch period: a few ms
 * with a few owners, more for long queues or huge holder sets; see
 * shmsem(7)). A cancelled waiter leaves the queue owning nothing (a permit
 * granted at that instant is passed on). On a remote semaphore they are
 * not cancellation points: a pthread_cancel() takes effect at the caller's
 * next cancellation point after the call returns (use a cancel handle to
 * end a remote wait). No other function is a cancellation point, and
 * nothing is async-cancel-safe.
 *
 * Lease states (one record per permit the semaphore may ever have,
 * max_permits):
 *
 *   | state    | meaning                                        |
 *   |----------|------------------------------------------------|
 *   | free     | counted in `available`                         |
 *   | held     | returned to a caller as a lease                |
 *   | reserved | handed to a queued waiter not yet returned     |
 *   | retired  | above the capacity after a shrink: not counted |
 *
 * Invariant (INV-PERMITS; docs/DESIGN.md section 8 states every invariant,
 * and shmsem_check verifies those of the segment): available + held +
 * reserved = capacity + retiring, in shmsem_stat's terms (its `permits` is
 * the capacity, and `retiring` is not 0 only while a shrink waits for
 * permits to retire, shmsem_set_permits).
 *
 * Weighted leases: shmsem_acquire_n and its siblings take n permits as one
 * lease, released at once by its one token. The queue stays strictly FIFO
 * with head-of-line blocking: a waiter that needs 4 at the head is not
 * overtaken by later waiters that need 1; permits released meanwhile are
 * reserved for it, and if it gives up (timeout, cancellation, death) they
 * pass on to the next waiters in order. (Go's semaphore.Weighted makes the
 * same choice: no starvation of large requests, at the cost of idle
 * permits while the head gathers its own.)
 *
 * Across hosts: a name "redis://HOST[:PORT]/POOL" or
 * "redis+unix:///PATH/TO/SOCKET?pool=POOL" is a semaphore kept by a Redis 7
 * server instead (shmsem(7), "Across hosts"; docs/REDIS.md): the same calls,
 * the same FIFO order and weighted leases, but a lease there has a TTL
 * (shmsem_config.lease_ttl_ms) that a thread of the holding process renews
 * while the handle is attached; a lease not renewed in time (its process
 * killed, stopped, or cut off from the server) is taken back, and its
 * release then fails with -EKEYEXPIRED. Every call on such a semaphore may
 * also fail with -ECOMM (the server could not be reached, or did not answer
 * in time: at most the TTL, within 1 to 5 s, or the caller's deadline) and
 * -EIDRM (the pool was unlinked, or created anew, since the handle opened).
 *
 * Rate limit: a semaphore created with a rate (shmsem_config.rate) grants
 * an acquire only when a permit and a token of its token bucket (GCRA on
 * CLOCK_MONOTONIC) are both there, in the same FIFO order; each acquire
 * takes one token whatever its weight. The head of the queue sleeps until
 * its start time; nobody else wakes for it.
 */
#ifndef SHMSEM_SHMSEM_H
#define SHMSEM_SHMSEM_H

#include <stdint.h>
#include <time.h>

#include <shmsem/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Declared here so the header stands alone under strict -std=c99, where
 * <time.h> does not define it without _POSIX_C_SOURCE. */
struct timespec;

/* An open semaphore; opaque. One per shmsem_create/shmsem_open call. */
typedef struct shmsem_handle shmsem_t;

/* A lease: proof that its holder owns one permit (or n, shmsem_acquire_n).
 * Plain value type; copy it
 * freely, release it once. An all-zero lease is never valid. The token
 * names its semaphore (`sem`, drawn at random when the semaphore was
 * created): releasing it through another semaphore, or through a later
 * semaphore created under the same name, fails with -EINVAL. `gen` is 48
 * bits (higher bits set: -EINVAL) and wraps only after 2.8e14 grants of one
 * record, so a stale token is -EALREADY in practice. */
typedef struct shmsem_lease {
  uint64_t gen;   /* generation of the record when granted; 0 never valid */
  uint64_t sem;   /* identity of the semaphore that granted it */
  uint32_t index; /* lease record */
  uint32_t __reserved; /* 0 */
} shmsem_lease_t;

/* The resource a lease names: an index in [0, max_permits) that no other
 * lease of the same semaphore has while this one is held (a lease of n
 * permits holds n such indices; this is the first of them). Stable for the
 * life of the lease: map it to "connection i", "GPU i", "licence slot i".
 * Another lease granted after this one is released may get the same index.
 * A plain read of the token: no system call, no lock, valid on any copy. */
static inline uint32_t shmsem_lease_resource(const shmsem_lease_t *lease) {
  return lease->index;
}

/* Defaults used when a config field is 0. */
#define SHMSEM_DEFAULT_MAX_WAITERS 1024u
#define SHMSEM_DEFAULT_MODE 0600u
/* Upper bounds, to keep a segment a reasonable size. */
#define SHMSEM_MAX_PERMITS (1u << 20)
#define SHMSEM_MAX_WAITERS (1u << 20)

struct shmsem_config {
  uint32_t permits;     /* the capacity N; 0 is -EINVAL, unless `rate` is set:
                           then no concurrency limit (below max_permits) */
  uint32_t max_waiters; /* queue bound; 0 means SHMSEM_DEFAULT_MAX_WAITERS */
  uint32_t mode; /* read/write bits within 0666; 0 means SHMSEM_DEFAULT_MODE */
  uint32_t max_permits;    /* the capacity may grow up to this at run time
                              (shmsem_set_permits); 0 means `permits`, or
                              SHMSEM_DEFAULT_RATE_ONLY_PERMITS without a
                              concurrency limit */
  uint32_t rate;           /* rate limit: at most `rate` acquisitions per
                              rate_period_ns (one every rate_period_ns / rate
                              ns, rounded down); 0 none */
  uint32_t burst;          /* ... of which up to `burst` at once; 0 means 1 */
  uint64_t rate_period_ns; /* 0 means one second */
  uint32_t policy;         /* SHMSEM_POLICY_FIFO (0) or SHMSEM_POLICY_BOUNDED */
  uint32_t lease_ttl_ms;   /* remote backends only (shmsem(7), "Across
                              hosts"): a lease not kept alive this long is
                              lost; 0 means SHMSEM_DEFAULT_LEASE_TTL_MS. A
                              local semaphore takes back a lease only on proof
                              of its holder's death: nonzero is -EINVAL */
  uint64_t max_bypass_ns;  /* SHMSEM_POLICY_BOUNDED: how long the head may
                              wait while newcomers take permits past it; 0
                              means SHMSEM_DEFAULT_MAX_BYPASS_NS. Nonzero under
                              SHMSEM_POLICY_FIFO is -EINVAL */
};

/* Policies (shmsem(7), "Policies"). FIFO: a permit never goes past a queued
 * waiter. BOUNDED: a newcomer may take a free permit while others queue, for
 * as long as the head has waited less than max_bypass_ns; after that every
 * permit goes to the queue, in order, until it is empty. */
#define SHMSEM_POLICY_FIFO 0u
#define SHMSEM_POLICY_BOUNDED 1u
#define SHMSEM_DEFAULT_MAX_BYPASS_NS 1000000ull /* 1 ms */
#define SHMSEM_MAX_BYPASS_NS 86400000000000ull  /* one day */
#define SHMSEM_DEFAULT_LEASE_TTL_MS 10000u      /* 10 s */

/* Leases one semaphore without a concurrency limit can have out at once. */
#define SHMSEM_DEFAULT_RATE_ONLY_PERMITS 1024u
/* Bounds of a rate limit: burst at most this, an interval between two
 * acquisitions (rate_period_ns / rate) of 1 ns to one day, and burst times
 * that interval (a full refill) at most 2^62 ns. */
#define SHMSEM_MAX_BURST (1u << 20)

/* Flags for shmsem_create and shmsem_open. */
#define SHMSEM_EXCL (1u << 0)   /* create: fail with -EEXIST if it exists */
#define SHMSEM_RDONLY (1u << 1) /* open: map read-only (stat/check only) */
/* create without SHMSEM_EXCL: also use an existing semaphore owned by another
 * user (by default only one the caller's effective uid owns is used). */
#define SHMSEM_ANY_OWNER (1u << 2)
/* open: read the file once into private memory and show that moment (for
 * shmsem_stat, shmsem_inspect, shmsem_check; implies SHMSEM_RDONLY). Needs
 * only read permission, and a process that truncates or rewrites the file
 * cannot crash the reader. The copy is made without the lock, so a busy
 * semaphore's copy may be torn. */
#define SHMSEM_SNAPSHOT (1u << 3)

/*
 * Create the semaphore `name` ("/pool": one leading slash, no other, at most
 * NAME_MAX characters after it) with cfg->permits permits, or open it if it
 * already exists and SHMSEM_EXCL is not given (and, unless SHMSEM_ANY_OWNER
 * is given, the caller's effective uid owns it: another user could have
 * created the name first to have our processes use its segment). The
 * segment is built in an unnamed file (O_TMPFILE) and linked into place
 * fully initialised, so a creator killed at any point leaves nothing behind.
 * Errors: -EINVAL bad name, config or flags (mode bits outside 0666: no
 * execute, setuid, setgid or sticky bits; an unknown policy, max_bypass_ns
 * above SHMSEM_MAX_BYPASS_NS or nonzero under SHMSEM_POLICY_FIFO); -EEXIST
 * it exists and SHMSEM_EXCL was given, or it was created with another
 * configuration: permits, max_permits, rate, burst, rate_period_ns, policy,
 * max_bypass_ns or (remote) lease_ttl_ms as given (after their defaults;
 * 6 per 2 s is not 3 per 1 s), or max_waiters when cfg->max_waiters is not
 * 0 (a capacity changed since by shmsem_set_permits does not count; the mode
 * is not compared);
 * -EPERM it exists and belongs to another user (see SHMSEM_ANY_OWNER);
 * -EPROTONOSUPPORT
 * `name` has a URL scheme that no backend of this build serves (redis:// and
 * redis+unix:// are served unless built with SHMSEM_REDIS=OFF); -EACCES,
 * -ENOMEM, -ENOSPC from the system; -EOPNOTSUPP SHMSEM_POLICY_BOUNDED for a
 * remote semaphore (see "Across hosts"); the errors of shmsem_open.
 */
int shmsem_create(const char *name, const struct shmsem_config *cfg, int flags,
                  shmsem_t **out);

/*
 * Attach to an existing semaphore. flags: 0, SHMSEM_RDONLY or SHMSEM_SNAPSHOT.
 * Errors: -ENOENT no such semaphore; -EINVAL bad name or flags; -EACCES no
 * permission; -EBADMSG not a shmsem segment (or not a regular file: a FIFO
 * under the name is refused without blocking), truncated, or not initialised;
 * -EPROTO another layout version; -EXDEV created in another PID namespace;
 * -EPROTONOSUPPORT a name with a URL scheme (see shmsem_create); -ECOMM a
 * remote semaphore's server could not be reached (see "Across hosts"; its
 * -EPROTO: the server has a newer functions library than this client).
 */
int shmsem_open(const char *name, int flags, shmsem_t **out);

/* Unmap this handle and free it. Leases it took stay held (see above).
 * Must not race with calls on the same handle. NULL is ignored. */
void shmsem_detach(shmsem_t *s);

/* Remove the name. Processes that have it open keep using it.
 * Errors: -EINVAL bad name; -ENOENT; -EACCES; -EPROTONOSUPPORT a name with
 * a URL scheme (see shmsem_create); -ECOMM (a remote semaphore). */
int shmsem_unlink(const char *name);

/*
 * Take a permit, blocking (in FUTEX_WAIT, on this waiter's own word) until
 * one is granted. No system call when a permit is free and nobody waits,
 * and no lock either when the calling thread released that permit last
 * (shmsem(7), "Without the lock").
 * Not interrupted by signals. A cancellation point while asleep (see above).
 * Errors: -ESHUTDOWN closed (before or while waiting); -EBUSY the wait
 * queue is full; -EBADF read-only handle; -EXDEV called from another PID
 * namespace than the semaphore's; -ECOMM, -EIDRM (a remote semaphore: see
 * "Across hosts").
 */
int shmsem_acquire(shmsem_t *s, shmsem_lease_t *lease);

/* Take a permit only if one is free and nobody is queued. Never sleeps for a
 * permit; waits at most about 100 ms for the internal lock if another
 * process holds it (stopped, or a writer named a live thread in it), 1 s
 * while that holder is seen running (preempted on a busy machine).
 * Errors: -EAGAIN no permit now; -ESHUTDOWN; -EBADF; -EXDEV; -ECOMM,
 * -EIDRM (remote). */
int shmsem_try_acquire(shmsem_t *s, shmsem_lease_t *lease);

/* As shmsem_acquire, giving up at the absolute CLOCK_MONOTONIC `deadline`
 * (not CLOCK_REALTIME: a time of day read by mistake is about 56 years from
 * now on the monotonic clock, so such a wait never ends; for a relative
 * timeout use shmsem_acquire_for).
 * If a grant and the deadline race, the grant wins and 0 is returned.
 * A wait for the internal lock held by another process (stopped, or never
 * letting go) ends at the deadline too, but lasts at least 100 ms (1 s
 * while that holder is seen running); a grant
 * that cannot be turned into a lease for that reason is given up and the
 * permit goes on (shmsem(7), Races).
 * A deadline too far in the future to represent in 64-bit nanoseconds means
 * "never". Errors: -ETIMEDOUT; -EINVAL bad timespec (tv_nsec outside
 * [0, 999999999] or tv_sec < 0); and those of shmsem_acquire. */
int shmsem_acquire_until(shmsem_t *s, const struct timespec *deadline,
                         shmsem_lease_t *lease);

/* As shmsem_acquire_until, with a relative timeout: gives up `timeout_ns`
 * nanoseconds from now (CLOCK_MONOTONIC, read once at the call). 0 means
 * "try now" (as shmsem_try_acquire, but a timeout is -ETIMEDOUT); a timeout
 * past what 64-bit nanoseconds can represent from now means "never".
 * Errors: those of shmsem_acquire_until. */
int shmsem_acquire_for(shmsem_t *s, uint64_t timeout_ns, shmsem_lease_t *lease);

/*
 * Cancellation handle: lets another thread of the same process cancel a
 * blocking acquire. Caller-allocated, zero-initialise it or call
 * shmsem_cancel_init. A handle serves one acquire at a time, and must stay
 * valid until both that acquire and any concurrent shmsem_cancel on it have
 * returned. Once fired it stays fired (every acquire using it returns
 * -ECANCELED at once) until shmsem_cancel_reset.
 */
typedef struct shmsem_cancel {
  uint64_t __opaque[6];
} shmsem_cancel_t;

void shmsem_cancel_init(shmsem_cancel_t *c);
/* Fire: the acquire using `c` (now or later) returns -ECANCELED unless its
 * grant already won. Safe from any thread; not async-signal-safe. */
void shmsem_cancel(shmsem_cancel_t *c);
/* Re-arm a fired handle. Must not race with an acquire using it. */
void shmsem_cancel_reset(shmsem_cancel_t *c);

/* Flags for shmsem_acquire_ex. */
/* A signal handler that runs while the caller sleeps ends the wait with
 * -EINTR. One that runs while the waiter is briefly awake (a queued waiter
 * may wake every few milliseconds to look for dead holders) does not: to
 * end a wait reliably on a signal, receive it in a thread (sigwait(2),
 * signalfd(2)) and call shmsem_cancel. On a remote semaphore the same
 * holds: a handler that runs while the waiter blocks on the server ends
 * the wait (-EINTR, or 0 if the grant won); one that runs between two of
 * its calls to the server does not. */
#define SHMSEM_WAIT_INTERRUPTIBLE (1u << 0)

/*
 * The general acquire: optional deadline (NULL waits forever), optional
 * cancellation handle, flags. Errors: those of shmsem_acquire_until, and
 * -ECANCELED cancelled through `cancel`, -EINTR a signal arrived during an
 * interruptible wait, -EBADF a read-only handle (even with `cancel` already
 * fired). In every error case the caller owns nothing.
 */
int shmsem_acquire_ex(shmsem_t *s, const struct timespec *deadline,
                      shmsem_cancel_t *cancel, unsigned flags,
                      shmsem_lease_t *lease);

/*
 * Weighted acquires: `n` permits as one lease (1 <= n <= max_permits),
 * granted all at once in FIFO order (see "Weighted leases" above). The
 * token releases all n, exactly once. `n` of 0 or above max_permits is
 * -EINVAL at once (Java's Semaphore and Go's Weighted would block for
 * ever); above the current capacity (after a shrink) the acquire waits,
 * with everyone behind it, until the capacity grows back or it gives up.
 * shmsem_acquire_n(s, 1, l) is shmsem_acquire(s, l). Weighted leases
 * always take the internal lock (no lock-free path). On a semaphore with no
 * concurrency limit (a rate only), shmsem_set_permits sets one.
 * Errors: those of the call without _n, and -EINVAL for `n`.
 */
int shmsem_acquire_n(shmsem_t *s, uint32_t n, shmsem_lease_t *lease);
int shmsem_try_acquire_n(shmsem_t *s, uint32_t n, shmsem_lease_t *lease);
int shmsem_acquire_until_n(shmsem_t *s, uint32_t n,
                           const struct timespec *deadline,
                           shmsem_lease_t *lease);
int shmsem_acquire_for_n(shmsem_t *s, uint32_t n, uint64_t timeout_ns,
                         shmsem_lease_t *lease);
int shmsem_acquire_ex_n(shmsem_t *s, uint32_t n,
                        const struct timespec *deadline,
                        shmsem_cancel_t *cancel, unsigned flags,
                        shmsem_lease_t *lease);

/*
 * Change the capacity to `permits` (0 <= permits <= max_permits) while the
 * semaphore is in use. Growing hands the new permits to the queued waiters
 * in FIFO order. Shrinking takes free permits at once and retires the rest
 * as they are released (shmsem_stat's `retiring`); it never revokes a held
 * lease. Shrinking to 0 drains the semaphore: acquires wait until it grows
 * again. Allowed after shutdown. Returns 0.
 * Errors: -EINVAL above max_permits; -EBADF read-only handle; -EXDEV;
 * -ECOMM, -EIDRM (remote).
 */
int shmsem_set_permits(shmsem_t *s, uint32_t permits);

/*
 * Acquiring without blocking a thread (event loops): a waiter is one
 * acquire taken apart into steps, driven by the caller's loop. It is the
 * same state machine the blocking calls run (start, sleep on the slot's
 * futex word while it holds `value`, poll after any wake-up, cancel), so
 * FIFO order, the one-shot race of a cancel or a timeout with the grant,
 * shutdown and crash recovery are the same. <shmsem/uring.h> drives it from
 * an io_uring; shmsem_notifier_* (below) from any loop that polls a file
 * descriptor. shmsem(7), "Async use".
 *
 * A waiter is caller memory: nothing is allocated per acquire. Its calls
 * must not run concurrently with each other on the same waiter (one
 * thread at a time, as an event loop does); different waiters are
 * independent. A queued wait belongs to the thread that started it, as a
 * blocking wait does: if that thread ends, the wait is withdrawn (its place
 * reclaimed, a permit granted to it passed on) and the next poll returns
 * -ENOTRECOVERABLE. Keep the starting thread alive while it waits. In a
 * fork child a queued waiter copied from its parent is not queued (every
 * call on it is -EINVAL). Complete or cancel every queued waiter before
 * shmsem_detach: a wait left queued keeps its place until its thread ends,
 * and a grant it never takes holds back everyone behind it (and a call on
 * a waiter of a detached handle uses freed memory).
 *
 * A waiter of a remote semaphore ("Across hosts") is one thread of the
 * calling process while queued, which runs the blocking wait and changes
 * the waiter's word (in process memory) when it ends: the same calls,
 * io_uring and the notifier drive it. Its wait belongs to the process, not
 * to the starting thread; the start makes one call to the server, the poll
 * none; a cancel blocks for a few round trips (up to two call timeouts,
 * then -ECOMM, if the server does not answer); shmsem_detach cancels the
 * handle's remote waiters still queued. shmsem_waiter_start(3), "Remote
 * semaphores".
 */
typedef struct shmsem_waiter {
  uint64_t __opaque[10];
  int64_t __ring_ts[2]; /* <shmsem/uring.h>: its linked timeout's time */
} shmsem_waiter_t;

/* shmsem_waiter_start: the acquire is queued. */
#define SHMSEM_QUEUED 1

/*
 * Start an acquire that does not wait. `w` must not be queued already.
 * Returns 0 with `lease` filled if a
 * permit was taken at once (`w` stays unused), SHMSEM_QUEUED if the caller
 * now waits in the queue (drive `w` with the calls below until one
 * completes it). `deadline` (absolute CLOCK_MONOTONIC, NULL none) bounds
 * the wait: a deadline already past and no permit free is -ETIMEDOUT at
 * once. The first call in a thread, and a deadline that is reached while
 * another process holds the internal lock, may block as shmsem_acquire_until
 * does. On an error `w` is unused. Errors: -ESHUTDOWN closed; -EBUSY the
 * queue is full; -ETIMEDOUT; -EINVAL bad timespec, or `w` is queued;
 * -EBADF read-only handle; -EXDEV another PID namespace (poll and cancel
 * only work on a wait that start admitted); -ECOMM, -EIDRM (remote: see
 * "Across hosts"), and -EAGAIN, -ENOMEM no thread for a remote wait (it
 * was withdrawn; a grant that had won is returned as 0).
 */
int shmsem_waiter_start(shmsem_t *s, shmsem_waiter_t *w,
                        const struct timespec *deadline, shmsem_lease_t *lease);
/* The same for `n` permits as one lease (see shmsem_acquire_n).
 * Errors: those of shmsem_waiter_start, and -EINVAL for `n`. */
int shmsem_waiter_start_n(shmsem_t *s, shmsem_waiter_t *w, uint32_t n,
                          const struct timespec *deadline,
                          shmsem_lease_t *lease);

/*
 * The futex word of a queued waiter and the value it holds while the wait
 * goes on: wait on it with FUTEX_WAIT (shared, not FUTEX_PRIVATE_FLAG;
 * 32-bit), futex_waitv(2) or IORING_OP_FUTEX_WAIT. Anything that changes the
 * outcome (a grant, a cancel, shutdown) changes the word and wakes every
 * waiter on it. Returns 0, or -EINVAL if `w` is not queued.
 */
int shmsem_waiter_futex(const shmsem_waiter_t *w, uint32_t **word,
                        uint32_t *value);

/*
 * When the caller must poll `w` at the latest even if the word does not
 * change (absolute CLOCK_MONOTONIC): its deadline, or the time of its next
 * share of the watch for dead processes (below). Valid after a start that
 * queued and after each poll that returns -EINPROGRESS.
 * Returns 0, or -EINVAL if `w` is not queued.
 */
int shmsem_waiter_wake_by(const shmsem_waiter_t *w, struct timespec *at);

/*
 * After any wake-up (the word changed, the wake-by time came, or none at
 * all): -EINPROGRESS while still queued, with a new wake-by time; else the
 * wait completes and `w` is unused again: 0 with `lease` (granted),
 * -ETIMEDOUT (the deadline passed; a grant that raced with it wins),
 * -ESHUTDOWN (closed while queued), -ENOTRECOVERABLE (the starting thread
 * ended and the wait was withdrawn). While queued, a poll also does this
 * waiter's share of watching for dead holders and waiters, which is why it
 * must come by the wake-by time: a queue whose waiters all wait
 * asynchronously is kept moving by their polls (shmsem(7)). Completing a
 * wait takes the internal lock, and a poll that runs a watch pass reads
 * /proc and pidfds: usually microseconds, but the lock held by a stopped
 * process is waited for as a blocking acquire waits for it (up to the
 * deadline: shmsem(7), Races). -EINVAL if `w` is not queued; -ECOMM,
 * -EIDRM a remote wait that ended so (see "Across hosts").
 */
int shmsem_waiter_poll(shmsem_waiter_t *w, shmsem_lease_t *lease);

/*
 * Withdraw a queued waiter. One-shot against the grant: returns -ECANCELED
 * if the wait was withdrawn owning nothing, 0 with `lease` if the grant
 * had already won (the caller owns the lease and must release it),
 * -ESHUTDOWN if shutdown won, -ENOTRECOVERABLE as for poll. Either way `w`
 * is unused again and no place is left in the queue. A futex wait on the
 * word that is still pending (a ring's) may be woken later, spuriously.
 * Bounded as shmsem_try_acquire: if another process holds the internal
 * lock for longer (stopped), the waiter leaves without it, giving up a
 * grant that had already won (its permit goes on to the next waiter), and
 * the call returns -ECANCELED. -EINVAL if `w` is not queued; -ECOMM,
 * -EIDRM a remote wait (see "Across hosts": the server did not answer,
 * and the place lapses there within the waiter TTL).
 */
int shmsem_waiter_cancel(shmsem_waiter_t *w, shmsem_lease_t *lease);

/*
 * A readable file descriptor for loops that cannot wait on a futex word
 * (epoll, poll(2), libuv, asio): a notifier is one eventfd and one helper
 * thread of the caller's process, which waits (futex_waitv(2)) on the words
 * of up to SHMSEM_NOTIFIER_MAX added waiters and makes each ready when its
 * word changes or its wake-by time comes. When the descriptor is readable,
 * take the ready waiters with shmsem_notifier_next and poll each; add again
 * those still queued. The notifier never completes a wait: cancel and
 * timeout are the waiter's own calls. Its calls may come from any threads
 * of the process that created it (a fork child does not inherit the
 * thread, and must not use or destroy its parent's notifier).
 */
typedef struct shmsem_notifier shmsem_notifier_t;
#define SHMSEM_NOTIFIER_MAX 127

/* Errors: -EINVAL NULL `out`; -ENOMEM, -EMFILE, -ENFILE, -EAGAIN (no
 * thread), -EPERM from the system. */
int shmsem_notifier_create(shmsem_notifier_t **out);
/* The eventfd (close-on-exec, non-blocking): readable exactly while
 * shmsem_notifier_next has a waiter to return (with edge-triggered epoll,
 * call it until -EAGAIN). Owned by the notifier: do not read or close it.
 * Returns the descriptor, or -EINVAL for a NULL `n`. */
int shmsem_notifier_fd(const shmsem_notifier_t *n);
/* Watch queued waiter `w`, reported as `user_data`. `w` must not be polled,
 * cancelled or reused, nor its semaphore detached, until
 * shmsem_notifier_next returned it or shmsem_notifier_remove removed it
 * (the thread waits on the word in the segment). Errors: -EINVAL `w` not queued
 * or already added; -ENOSPC SHMSEM_NOTIFIER_MAX waiters added. */
int shmsem_notifier_add(shmsem_notifier_t *n, shmsem_waiter_t *w,
                        uint64_t user_data);
/* Stop watching `w` (before cancelling it). When it returns, the helper
 * thread no longer reads `w`. Errors: -ENOENT not added (or already
 * returned by shmsem_notifier_next). */
int shmsem_notifier_remove(shmsem_notifier_t *n, shmsem_waiter_t *w);
/* One ready waiter: 0 with its `user_data` (it is no longer added), or
 * -EAGAIN none ready now. */
int shmsem_notifier_next(shmsem_notifier_t *n, uint64_t *user_data);
/* Stop the thread, close the descriptor, free. Waiters still added are
 * simply no longer watched. NULL is ignored. */
void shmsem_notifier_destroy(shmsem_notifier_t *n);

/*
 * Whether this kernel waits on futex words inside an io_uring
 * (IORING_OP_FUTEX_WAIT, Linux 6.7+), tested once per process with a real
 * wait in a real ring: 0 yes, -EOPNOTSUPP no (an older kernel, a seccomp
 * filter, kernel.io_uring_disabled). <shmsem/uring.h> needs it.
 */
int shmsem_uring_probe(void);

/*
 * Return the permit of `lease` (all n of a weighted lease): to the oldest
 * waiter if one is queued (one FUTEX_WAKE), else to the pool; to retirement
 * first while a shrink waits for permits. Accepted after shutdown, from any
 * process that has the token. Errors: -EALREADY the lease was already released
 * or reclaimed (nothing changes); -EINVAL malformed lease, or a lease of
 * another semaphore (or of an earlier semaphore created under the same name);
 * -EBADF read-only handle; -EXDEV a release that takes the internal lock, from
 * another PID namespace; -EKEYEXPIRED the lease expired and was taken back
 * (a remote semaphore's lease not renewed within its TTL: see "Across
 * hosts"; nothing changes, and its permits already went on); -ECOMM;
 * -EIDRM (remote semaphores, above).
 */
int shmsem_release(shmsem_t *s, shmsem_lease_t *lease);

/*
 * Renew a remote semaphore's lease now (the handle's keep-alive thread does
 * it every TTL/3 on its own) and learn whether it is still held: 0 held,
 * its TTL starting again. One round trip to the server. Errors:
 * -EKEYEXPIRED the lease expired and was taken back; -EALREADY it was
 * released; -EINVAL a lease of another semaphore; -EBADF read-only handle;
 * -ECOMM; -EIDRM; -EOPNOTSUPP a local semaphore (its leases never expire).
 */
int shmsem_lease_renew(shmsem_t *s, const shmsem_lease_t *lease);

/*
 * Fencing (shmsem(7), "Across hosts"): a remote semaphore numbers its grants
 * with one sequence that only grows, across every index and every restart
 * of its server; `*seq` is the number of the grant that made `lease`
 * (held). The lease's `gen` is the generation of its index, which also only
 * grows: a resource that keeps the highest `gen` it has seen for each index
 * (shmsem_lease_resource) rejects a holder whose lease was taken back and
 * granted again. No round trip for a lease this process holds through `s`.
 * Errors: -EKEYEXPIRED; -EALREADY; -EINVAL; -ECOMM; -EIDRM; -EOPNOTSUPP a
 * local semaphore.
 */
int shmsem_lease_sequence(shmsem_t *s, const shmsem_lease_t *lease,
                          uint64_t *seq);

/*
 * Close the semaphore for everyone: acquires fail with -ESHUTDOWN, every
 * queued waiter wakes with -ESHUTDOWN. Held leases stay valid and may be
 * released. Returns the number of waiters failed. Idempotent.
 * Errors: -EBADF read-only handle; -EXDEV a writable handle from another
 * PID namespace; -ECOMM, -EIDRM (remote).
 */
int shmsem_shutdown(shmsem_t *s);

/*
 * Run a reclamation pass now: leases whose owner process provably exited
 * (a zombie counts as exited), and waiter slots whose process or waiting
 * thread provably ended, are reclaimed; their permits go to the head
 * waiter first. Owners that cannot be judged count as alive, and a handle
 * whose PID namespace could not be compared with the semaphore's reclaims
 * nothing. Costs one pidfd check per distinct owner plus a read of the
 * records in use, and one scan of the lease records per dead process that
 * took leases without the lock; then one more scan gives back free leases
 * that no thread names (only a writer into the segment makes one). Returns
 * the number of permits (a weighted lease of n counts n) plus slots
 * reclaimed, plus free permits given back. Remote: the leases and waiters
 * whose TTL passed. Errors: -EBADF read-only handle; -EXDEV a writable
 * handle from another PID namespace; -ECOMM, -EIDRM (remote).
 */
int shmsem_recover(shmsem_t *s);

/*
 * The wait histogram (in ns) is log-linear, as HdrHistogram's: 8 buckets
 * per power of two. Bucket b < 8 counts values of exactly b ns; above, the
 * octave [2^e, 2^(e+1)) (e = 3..43) is cut into 8 equal buckets, so a
 * bucket's width is at most 1/8 of its lower bound and its largest value is
 * within 12.5% of any value in it. The last bucket, from 15 * 2^40 ns
 * (about 4.6 hours) on, has no upper bound.
 */
#define SHMSEM_HIST_BUCKETS 336

/*
 * Hold times (grant to release) are measured on CLOCK_MONOTONIC_COARSE, one
 * clock tick (1-4 ms) at a time, into SHMSEM_HOLD_BUCKETS fixed buckets:
 * bucket b counts holds h with shmsem_hold_bound_ns(b - 1) < h <=
 * shmsem_hold_bound_ns(b): 1 ms, 5 ms, 10 ms, 25 ms, 50 ms, 100 ms, 250 ms,
 * 500 ms, 1 s, 2.5 s, 10 s, 1 min, 5 min, 1 h, and UINT64_MAX (the rest).
 * The lock-free release records into its thread's own counters (no shared
 * write), which shmsem_stat adds up.
 */
#define SHMSEM_HOLD_BUCKETS 15
uint64_t shmsem_hold_bound_ns(unsigned b); /* UINT64_MAX from the last on */

/* The bounds of bucket b: it counts values v with lower <= v < upper (the
 * last one: v >= lower). Both UINT64_MAX if b >= SHMSEM_HIST_BUCKETS. */
uint64_t shmsem_hist_lower_ns(unsigned b);
uint64_t shmsem_hist_upper_ns(unsigned b);
/* The bucket that counts `ns`. */
unsigned shmsem_hist_bucket(uint64_t ns);
/* Upper bound in ns of the q-quantile (0 < q <= 1) of the log-linear
 * histogram `hist` (SHMSEM_HIST_BUCKETS counts, e.g. wait_hist; not
 * hold_hist): the largest value of the bucket it falls in, at most 12.5%
 * above the true value; UINT64_MAX in the last bucket. 0 if it is empty (or
 * every value was 0) or q is out of range. */
uint64_t shmsem_hist_quantile(const uint64_t *hist, double q);

struct shmsem_stat {
  uint32_t permits; /* the capacity now */
  uint32_t max_waiters;
  uint32_t available;
  uint32_t held; /* permits held (a lease of n counts n) */
  uint32_t reserved;
  uint32_t waiting;
  uint32_t closed;
  uint32_t max_permits; /* the most the capacity may grow to */
  /* Each outcome is counted once, under the internal lock (DESIGN.md
   * §14). A call that gives up waiting for that lock itself (held by a
   * stopped process past its deadline, cancel or signal) before it
   * queued is not counted; a failed try (-EAGAIN) is counted nowhere. */
  uint64_t acquisitions;      /* acquires that returned a lease, one per
                                 lease whatever its weight (also a grant
                                 that won over a timeout or cancel) */
  uint64_t timeouts;          /* acquires that ended in -ETIMEDOUT, a
                                 past deadline with no permit included */
  uint64_t cancellations;     /* -ECANCELED (a handle fired before or
                                 during the wait, shmsem_waiter_cancel),
                                 -EINTR, pthread_cancel while queued */
  uint64_t queue_full;        /* -EBUSY rejections */
  uint64_t shutdown_failures; /* queued waiters failed by shutdown
                                 (refused later acquires are not) */
  uint64_t reclaimed_holders; /* permits reclaimed from dead owners (a
                                 lease or grant of n counts n) */
  uint64_t reclaimed_waiters; /* slots reclaimed from dead owners */
  uint64_t repairs;           /* lock owner died; state was rebuilt */
  /* Enqueue-to-grant times of acquires (an acquire that did not wait
   * counts 0 ns; CLOCK_MONOTONIC). */
  uint64_t wait_hist[SHMSEM_HIST_BUCKETS];
  /* Grant-to-release times of released leases, one per lease (a lease
   * of n counts once), in the fixed buckets of shmsem_hold_bound_ns;
   * reclaimed leases are not counted. */
  uint64_t hold_hist[SHMSEM_HOLD_BUCKETS];
  uint64_t wait_sum_ns; /* the sum of the waits wait_hist counts */
  uint64_t hold_sum_ns; /* the sum of the holds hold_hist counts */
  uint32_t retiring;    /* held or reserved permits above the capacity,
                           retired as they come back (a shrink) */
  uint32_t rate;        /* rate limit as created: rate per rate_period_ns, */
  uint32_t burst;       /* burst; rate 0: none */
  uint32_t rate_tokens; /* tokens in the bucket now (0..burst) */
  uint64_t rate_period_ns;
  uint64_t rate_next_ns;  /* CLOCK_MONOTONIC time the next token is there
                             (the time of the snapshot if rate_tokens > 0) */
  uint32_t policy;        /* SHMSEM_POLICY_FIFO or SHMSEM_POLICY_BOUNDED */
  uint32_t hand_off;      /* bounded: 1 while the head has waited past
                             max_bypass_ns and permits go to the queue in
                             order; 0 while newcomers may take them */
  uint64_t max_bypass_ns; /* bounded: the bound; 0 under FIFO */
  uint64_t __reserved[2];
};

/* Snapshot the state and counters (takes the internal lock briefly unless
 * the handle is read-only, in which case the snapshot may be torn).
 * Errors: -EXDEV a writable handle from another PID namespace; -ECOMM,
 * -EIDRM (remote). */
int shmsem_stat(shmsem_t *s, struct shmsem_stat *st);

/* shmsem_hist_quantile(st->wait_hist, q). */
uint64_t shmsem_stat_wait_quantile(const struct shmsem_stat *st, double q);
/* Upper bound in ns of the q-quantile (0 < q <= 1) of the hold times in
 * st->hold_hist: the bound (shmsem_hold_bound_ns) of the bucket it falls
 * in; UINT64_MAX in the last (above an hour). 0 if no hold was recorded,
 * q is out of range or st is NULL. */
uint64_t shmsem_stat_hold_quantile(const struct shmsem_stat *st, double q);

/*
 * Declare how long the holder of `lease` expects to hold it (hold_ns from
 * the grant; 0 withdraws a declaration). shmsem_inspect, `shmsem status`,
 * `top` and the exporter then show the lease as overdue once it is held
 * longer. Reporting only: a permit is never taken from a live holder, and
 * nothing else changes. Kept in microseconds (rounded up). Any process with
 * the token may declare; the last declaration counts. Errors: -EINVAL bad
 * token, or hold_ns above SHMSEM_MAX_DECLARED_NS (about 12.7 days);
 * -EALREADY the lease was released; -EBADF read-only handle; -EXDEV a
 * handle from another PID namespace; -EKEYEXPIRED, -ECOMM, -EIDRM (remote:
 * see shmsem_release).
 */
#define SHMSEM_MAX_DECLARED_NS (((uint64_t)1 << 40) * 1000 - 1000)
int shmsem_declare_hold(shmsem_t *s, const shmsem_lease_t *lease,
                        uint64_t hold_ns);

/*
 * Verify every invariant of the segment by a full scan under the lock
 * (without it through a read-only handle: best effort). The invariants it
 * checks, as docs/DESIGN.md section 8 states them (shmsem_check(3) in short):
 * INV-PERMITS, INV-CAPACITY, INV-RESERVE, INV-WEIGHT, INV-RATE, INV-LOOSE,
 * INV-ATTRIB, INV-GATE, INV-PROCS, INV-QUEUE, INV-FREE, INV-NOBYPASS,
 * INV-GRANT, INV-CLOSED, INV-WATCH, INV-USED.
 * O(permits + max_waiters). Errors: -EUCLEAN an invariant is broken;
 * -EXDEV a writable handle from another PID namespace; -ECOMM, -EIDRM
 * (remote).
 */
int shmsem_check(shmsem_t *s);

/* A message for a negative (or positive) errno, in the semaphore's words:
 * "semaphore is closed", "lease already released", "wait queue is full". */
const char *shmsem_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* SHMSEM_SHMSEM_H */
