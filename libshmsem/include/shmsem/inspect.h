/*
 * <shmsem/inspect.h> — what monitors need: who holds the permits, who waits
 * and for how long, which leases are overdue, and the leftovers of
 * interrupted creates. Everything here only reads (except
 * shmsem_remove_leftover); the semaphore's segment is treated as untrusted
 * input: every index, count and link read from it is checked before use, and
 * a damaged segment gives -EUCLEAN or a partial answer, never a crash.
 *
 * Return convention as in <shmsem/shmsem.h>: 0 or a count on success, a
 * negative errno on failure.
 */
#ifndef SHMSEM_INSPECT_H
#define SHMSEM_INSPECT_H

#include <stdint.h>

#include <shmsem/shmsem.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a process that owns a lease or a waiter slot looks like from here.
 * DEAD only with proof (it exited, or its PID now names another process);
 * UNKNOWN when this process cannot tell (hidden /proc, another PID
 * namespace, or an owner that looked dead in a SHMSEM_INSPECT_TORN read,
 * where it may have been read half-written): the library counts UNKNOWN
 * as alive and never reclaims it. */
#define SHMSEM_OWNER_ALIVE 0u
#define SHMSEM_OWNER_DEAD 1u
#define SHMSEM_OWNER_UNKNOWN 2u

/* shmsem_holder.flags */
/* Granted to a waiter that has not returned from its acquire yet. */
#define SHMSEM_HOLDER_RESERVED (1u << 0)
/* Held longer than the holder declared (shmsem_declare_hold). Reporting
 * only: the permit is never taken from a live holder. */
#define SHMSEM_HOLDER_OVERDUE (1u << 1)

/* One lease: the permits held under one token (a lease of n shows once,
 * with weight n), or granted to a waiter still on its way out. */
struct shmsem_holder {
  uint32_t lease;    /* the lease record its token names */
  uint32_t weight;   /* permits under the token */
  int32_t pid;       /* the owner process */
  uint32_t liveness; /* SHMSEM_OWNER_* */
  uint32_t flags;    /* SHMSEM_HOLDER_* */
  uint32_t __pad;
  uint64_t since_ns;    /* CLOCK_MONOTONIC_COARSE time of the grant */
  uint64_t held_ns;     /* how long it has been held, at the snapshot */
  uint64_t declared_ns; /* declared hold time (shmsem_declare_hold); 0 none */
  uint64_t gen;         /* the lease record's generation (its token's) */
  uint64_t __reserved[1];
};

/* One queued waiter, in FIFO order. */
struct shmsem_waiter_info {
  uint32_t position; /* 1: the next to be granted */
  uint32_t slot;     /* its waiter slot */
  uint64_t ticket;   /* its place in FIFO order, never reused */
  uint32_t weight;   /* permits it asks for */
  uint32_t reserved; /* of those, set aside for it so far (the head's) */
  int32_t pid;       /* the waiting process */
  int32_t tid;       /* ... and thread */
  uint32_t liveness; /* SHMSEM_OWNER_* (of the waiting thread) */
  uint32_t __pad;
  uint64_t since_ns;  /* CLOCK_MONOTONIC time it queued */
  uint64_t waited_ns; /* how long it has waited, at the snapshot */
  uint64_t __reserved[2];
};

/* shmsem_inspection.flags */
/* The handle reads a live mapping without the lock (a read-only handle),
 * and the snapshot kept changing under the reader: counts may disagree
 * (held with the holders listed, say). */
#define SHMSEM_INSPECT_TORN (1u << 0)
/* The queue links disagreed with the slots; the order shown was rebuilt
 * from the tickets (the order repair would use). Implies a torn read or a
 * damaged segment. */
#define SHMSEM_INSPECT_REBUILT (1u << 1)

struct shmsem_inspection {
  struct shmsem_stat stat;       /* as shmsem_stat() */
  uint64_t now_ns;               /* CLOCK_MONOTONIC at the snapshot */
  uint64_t now_coarse_ns;        /* CLOCK_MONOTONIC_COARSE at the snapshot */
  uint64_t created_realtime_ns;  /* CLOCK_REALTIME of creation */
  uint32_t created_permits;      /* the permits it was created with */
  uint32_t flags;                /* SHMSEM_INSPECT_* */
  uint32_t nholders;             /* leases there are (may exceed the buffer) */
  uint32_t nwaiters;             /* waiters there are (may exceed the buffer) */
  uint32_t overdue;              /* leases held past their declared time */
  uint32_t overdue_permits;      /* ... and the permits they hold */
  uint64_t oldest_wait_since_ns; /* the head's since_ns; 0 none waits */
  uint64_t oldest_lease_since_ns; /* the oldest holder's since_ns; 0 none */
  /* The segment file, as fstat(2) saw it when the handle was opened. */
  uint32_t file_mode; /* permission bits */
  uint32_t file_uid;
  uint32_t file_gid;
  uint32_t lease_ttl_ms; /* remote: the lease TTL it was created with
                            (shmsem_config.lease_ttl_ms after its default,
                            which shmsem_create compares); 0 local */
  uint64_t __reserved[8];
};

/*
 * Take a snapshot of `s`: its counters (as shmsem_stat), every lease and
 * every queued waiter. Holders are filled into `holders` (by lease record),
 * waiters into `waiters` (in queue order), at most max_holders and
 * max_waiters of them; NULL with a maximum of 0 asks for none. Sizing both
 * from shmsem_stat (max_permits, max_waiters) always suffices.
 *
 * Through a writable handle the snapshot is taken under the internal lock:
 * consistent, except that lock-free acquires and releases (shmsem(7),
 * "Without the lock") may happen during it; if the lock cannot be had
 * within 50 ms (its holder is stopped, say), it is read as through a
 * read-only handle. Through a read-only handle
 * (SHMSEM_RDONLY) it reads the live mapping without the lock, repeats the
 * read until two agree (a few times at most), and sets SHMSEM_INSPECT_TORN
 * if they never did. Through a SHMSEM_SNAPSHOT handle it reads the copy
 * made at open: consistent with itself, but it may have been torn while
 * it was copied (SHMSEM_INSPECT_REBUILT says the queue was;
 * SHMSEM_INSPECT_TORN is never set). The owners'
 * liveness is judged now, by this process, as shmsem_recover would.
 *
 * Returns 0; -ENOBUFS if more holders or waiters exist than fit in
 * buffers that were given (the buffers hold the first ones, out->nholders
 * and out->nwaiters the numbers needed, and everything else is filled in).
 * A kind asked for with a maximum of 0 is only counted, never short: the
 * waiters alone (holders NULL, 0) come back with 0 however many hold, and
 * with both maxima 0 the call only counts; -EINVAL a NULL
 * `s` or `out`, or a NULL buffer with a non-zero maximum; -EUCLEAN a
 * counter read is beyond what the geometry allows (a damaged segment;
 * everything is still filled in; shmsem_check tells more); -EXDEV a
 * writable handle from another PID namespace; -ECOMM, -EIDRM (a remote
 * semaphore: shmsem(7), "Across hosts"). Allocates memory proportional to
 * the geometry.
 */
int shmsem_inspect(shmsem_t *s, struct shmsem_inspection *out,
                   struct shmsem_holder *holders, uint32_t max_holders,
                   struct shmsem_waiter_info *waiters, uint32_t max_waiters);

/*
 * The semaphores in /dev/shm (shmsem_list): one entry per regular file there
 * that may be one, each read on its own, so that a file that is not a
 * semaphore, or that cannot be read, is an entry with its own error and
 * never hides the others.
 */
struct shmsem_list_entry {
  char name[257]; /* "/" and the file's name: what shmsem_open takes */
  uint8_t __pad[3];
  int32_t error;      /* 0, or why it could not be read (shmsem_list) */
  uint32_t file_mode; /* the file read, as fstat(2) saw it: permission */
  uint32_t file_uid;  /* bits, owner and group; all 0 unless error is */
  uint32_t file_gid;  /* 0 or -EUCLEAN */
  uint32_t __reserved0;
  struct shmsem_stat stat; /* as shmsem_stat(); all 0 unless error is 0
                              or -EUCLEAN */
  uint64_t __reserved[4];
};

/*
 * List the semaphores in /dev/shm: every regular file there (symbolic links
 * not followed) but the leftovers of interrupted creates (shmsem_leftovers),
 * sorted by name. Fills the first `max` into `out`, each read as
 * shmsem_open with SHMSEM_SNAPSHOT and shmsem_inspect read it (a private
 * copy: read permission is enough, and nothing is written), and returns how
 * many there are (more than `max`: only the first `max` are read; NULL and
 * 0 count them and read none). Per entry, `error` says what it is:
 *   0        a semaphore; stat and file_* are filled in;
 *   -EUCLEAN a semaphore whose counters contradict its geometry (someone
 *            with write access wrote into it): what was read is filled in;
 *   -EBADMSG not a shmsem semaphore (another program's file, or one
 *            truncated, not yet initialised, or replaced by a FIFO or a
 *            link since the directory was read);
 *   -EPROTO  a semaphore of another layout version;
 *   -EACCES  this process may not read it (so cannot tell what it is);
 *   -EXDEV   a semaphore created in another PID namespace;
 *   -ENOENT  removed since the directory was read; -EIO it shrank while it
 *            was copied; any other: the system's error reading it (no
 *            memory or no descriptor free, say).
 * Files created or removed between two calls change the count: a caller
 * that sized `out` from a count calls again if the count grew. Reads the
 * directory and each file filled in; takes no lock, writes nothing, may be
 * called from any thread. Allocates memory for the names and for one copy
 * at a time.
 * Errors: -EINVAL NULL `out` with max > 0; -EACCES, -EMFILE, -ENFILE,
 * -ENOENT, -ENOMEM reading /dev/shm itself.
 */
int shmsem_list(struct shmsem_list_entry *out, uint32_t max);

/*
 * The semaphores kept at a place, as shmsem_list lists /dev/shm: `where`
 * NULL or "/dev/shm" is exactly shmsem_list; "redis://HOST[:PORT]" or
 * "redis+unix:///PATH" (a server, without a pool) lists that server's
 * pools (shmsem(7), "Across hosts"). Entries are sorted by name; `name` is
 * what shmsem_open takes ("redis://HOST:PORT/POOL", as `where` was
 * written); each is read as shmsem_stat reads it, over one connection.
 * For a remote pool file_mode, file_uid and file_gid are 0 and `error`
 * is 0, -ENOENT or -EIDRM (removed or created anew since it was listed),
 * or -ENAMETOOLONG (the name does not fit: truncated, not read). Returns
 * how many there are (the first `max` filled in). Talks to the server
 * (blocks up to a few seconds per call if it does not answer).
 * Errors: those of shmsem_list, and -EINVAL another place, or a malformed
 * server; -EPROTONOSUPPORT a scheme this build has no backend for;
 * -EOPNOTSUPP a backend that cannot list; -ECOMM the server did not answer
 * (or answered what this library cannot read); -EPROTO it runs a newer
 * shmsem library.
 */
int shmsem_list_at(const char *where, struct shmsem_list_entry *out,
                   uint32_t max);

/*
 * Leftovers: files an interrupted create left in /dev/shm under a temporary
 * name (".shmsem-tmp-<pid>-..."): every create of older versions, and this
 * one's only where O_TMPFILE cannot be used (shmsem_create(3)).
 */
struct shmsem_leftover {
  char file[256];        /* its name in /dev/shm, without a '/' */
  int32_t pid;           /* its creator, from the name; -1 none */
  uint32_t creator_gone; /* 1: kill(pid, 0) failed with ESRCH */
  uint64_t size;         /* bytes */
  uint32_t uid;          /* the file's owner */
  uint32_t __pad;
};

/* Fill up to `max` leftovers into `out` (sorted by name); returns how many
 * there are (more than `max`: the first `max` are filled). Errors: -EINVAL
 * NULL `out` with max > 0; -EACCES, -ENOENT, -ENOMEM reading /dev/shm. */
int shmsem_leftovers(struct shmsem_leftover *out, uint32_t max);

/* Unlink /dev/shm/<file> if it is a leftover whose creator provably does
 * not exist (this PID namespace). Errors: -EINVAL not a leftover's name or
 * not a regular file; -EBUSY its creator may be alive, or the name has no
 * PID; -ENOENT; -EACCES, -EPERM (another user's file in the sticky
 * /dev/shm). */
int shmsem_remove_leftover(const char *file);

#ifdef __cplusplus
}
#endif

#endif /* SHMSEM_INSPECT_H */
