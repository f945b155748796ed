// The one data layer of the command's read-only views: `status`, `list`,
// `top`, the exporter (and `create`'s report of an existing semaphore) only
// render what this returns. It
// - finds the semaphores in /dev/shm (shmsem_list(3)), and says once which
//   of the files found a view shows;
// - reads one semaphore: shmsem_open(3) with SHMSEM_SNAPSHOT (a private copy
//   of the file, read once: read permission is enough, nothing is written,
//   a concurrent truncation cannot crash us), then shmsem_inspect(3) into
//   buffers it grows until they hold every holder and waiter;
// - names the owners of leases and queue places from /proc, and only owners
//   found alive: a dead owner's PID may name another process by now.
#ifndef SHMSEM_TOOLS_POOL_VIEW_H
#define SHMSEM_TOOLS_POOL_VIEW_H

#include <stdint.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

namespace shmsem::cli {

// Who a lease or waiter slot belongs to, as far as this process can tell.
struct ProcessInfo {
  int32_t pid = 0;
  uint32_t judged = SHMSEM_OWNER_UNKNOWN;  // SHMSEM_OWNER_*, as inspected
  bool alive = false;                      // not proven dead (see liveness)
  std::string
      liveness;  // "alive", "dead" (proven exited), "unknown" (counts as alive)
  std::string comm;     // /proc/<pid>/comm of an alive owner, else ""
  std::string cmdline;  // /proc/<pid>/cmdline, space-joined, truncated
};

// A lease: the permits someone holds under one token, or those granted to a
// waiter that has not yet returned from its acquire. A weighted lease of n
// permits shows once, with weight n (struct shmsem_holder). (pool_view.cc
// fills Holder and Waiter in the order of their fields.)
struct Holder {
  uint32_t index = 0;     // the lease record the token names
  uint64_t gen = 0;       // the token's generation
  uint32_t weight = 1;    // permits under this token
  bool reserved = false;  // granted, the waiter has not returned yet
  ProcessInfo owner;
  uint64_t held_ns = 0;      // since the grant (CLOCK_MONOTONIC_COARSE)
  uint64_t since_ns = 0;     // CLOCK_MONOTONIC_COARSE time of the grant
  uint64_t declared_ns = 0;  // declared hold time (run --expect); 0 none
  bool overdue = false;      // held longer than declared (reporting only)
};

// A queued waiter, in FIFO order.
struct Waiter {
  uint32_t position = 0;  // 1 = next to be granted
  uint32_t slot = 0;
  uint64_t ticket = 0;
  uint32_t weight = 1;      // permits it asks for
  uint32_t reserved = 0;    // of those, reserved for it so far (the head's)
  ProcessInfo owner;        // the waiting process (liveness: of its thread)
  uint64_t waiting_ns = 0;  // since it queued (CLOCK_MONOTONIC)
  int32_t tid = 0;          // the waiting thread
  uint64_t since_ns = 0;    // CLOCK_MONOTONIC time it queued
};

// The 50th, 90th and 99th percentiles of a histogram, in ns.
struct Quantiles {
  uint64_t p50 = 0, p90 = 0, p99 = 0;
};

// One semaphore at one moment, or why it could not be read.
struct Snapshot {
  std::string name;
  // 0, or the negative errno of reading it: -EUCLEAN (damaged, below) with
  // everything read filled in; any other with only the name.
  int error = 0;
  // Segment file (/dev/shm/<name>), as fstat saw the descriptor it was read
  // from.
  uint32_t mode = 0;  // permission bits
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user, group;       // "" if the ids have no names
  uint64_t created_unix_ns = 0;  // CLOCK_REALTIME at creation
  // The --permits it was created with (0: no concurrency limit, rate only);
  // shmsem_create(3) compares it, while the capacity (st.permits) may have
  // changed since.
  uint32_t created_permits = 0;
  // A remote semaphore's lease TTL in ms, as created (compared by
  // shmsem_create(3) too); 0 for a local one.
  uint32_t lease_ttl_ms = 0;
  // State (shmsem_stat). st.rate_next_ns is on CLOCK_MONOTONIC, as now_ns.
  struct shmsem_stat st = {};
  // Upper bounds of the quantiles of st.wait_hist (shmsem_hist_quantile,
  // within 12.5%) and of st.hold_hist (the bound of the fixed bucket,
  // shmsem_hold_bound_ns: 1ms, 5ms, ... 1h; UINT64_MAX above an hour);
  // 0 when nothing was recorded.
  Quantiles wait, hold;
  std::vector<Holder> holders;  // by lease index, one per lease
  std::vector<Waiter> waiters;  // queue order
  // The copy is read without the lock, so a snapshot of a busy semaphore
  // can be torn. True when the queue links disagreed with the slot states
  // and the order was rebuilt from tickets (the order repair also uses).
  // (SHMSEM_INSPECT_TORN, that counts may disagree with the lists, is only
  // set through a live read-only mapping, never for the copy read here.)
  bool queue_rebuilt = false;
  // The counters contradict the geometry (shmsem_inspect said -EUCLEAN):
  // someone with write access wrote into the segment. Everything above is
  // what was read; error is -EUCLEAN.
  bool damaged = false;
  // Leases held past their declared time, and the permits under them.
  uint32_t overdue = 0;
  uint32_t overdue_permits = 0;
  uint64_t oldest_wait_since_ns = 0;   // the head's since (MONOTONIC); 0 none
  uint64_t oldest_lease_since_ns = 0;  // the oldest lease's (COARSE); 0 none
  uint64_t now_ns = 0;                 // CLOCK_MONOTONIC at the snapshot
  uint64_t now_coarse_ns = 0;          // CLOCK_MONOTONIC_COARSE at the snapshot
  // CLOCK_REALTIME at now_ns (the realtime and monotonic clocks read
  // together just after the snapshot), to turn the monotonic *_since_ns
  // times into Unix times.
  uint64_t unix_at_snapshot_ns = 0;
};

// A file in /dev/shm that may be a semaphore, or a server's pool (a
// shmsem_list_at entry).
struct FoundPool {
  std::string name;            // "/pool", "redis://HOST:PORT/POOL"
  int error = 0;               // the entry's: 0, -EUCLEAN, -EBADMSG, ...
  struct shmsem_stat st = {};  // when readable(error)
  uid_t uid = 0;               // the file's owner, when readable(error)
  bool remote = false;         // a server's pool: no file, no owner
};

// Every semaphore at `where` ("" or /dev/shm: every file there that may be
// one; a server: its pools), sorted by name, each read (shmsem_list_at(3)).
// 0, or the negative errno of reading the place itself.
int find_pools(std::vector<FoundPool> *out, const std::string &where = "");

// The leftovers of interrupted creates (shmsem_leftovers(3)), sorted by
// name; none if /dev/shm cannot be read (the semaphores were found in it a
// moment ago, so that is a race).
std::vector<struct shmsem_leftover> find_leftovers();

// Which files found in /dev/shm the views show (not named by the user: a
// name the user gives is always shown, with its error). One rule for every
// view:
// - readable(): a semaphore that was read (0), or read damaged (-EUCLEAN).
//   `list`, which has no room for errors, shows these only.
// - shown_when_found(): those, and files that are semaphores but cannot be
//   read here (another layout version, another PID namespace, shrunk while
//   read, ...): `top` and the metrics show them with their error. Not files
//   that are no semaphore (-EBADMSG), that this user may not read (so it
//   cannot tell: -EACCES, -EPERM), or that went away (-ENOENT).
bool readable(int error);
bool shown_when_found(int error);

// Read `name` into *out (its error in out->error, also returned): 0;
// -EUCLEAN with `out` filled with what was read and out->damaged set
// (render it, with a warning); or a negative errno from shmsem_open(3)
// (-ENOENT, -EACCES, -EBADMSG, -EPROTO, -EXDEV, -EIO: the file shrank while
// it was copied) or -ENOMEM, with `out` holding only the name. Owners are
// judged alive or dead but not named: name_owners() does that.
int read_pool(const std::string &name, Snapshot *out);

// Fill in the command name and line of every owner in `snap` found alive,
// from /proc, once per process.
void name_owners(Snapshot *snap);

// Read the semaphores in `names` (each once, in the order given; a place
// among them, is_place(), stands for every one found there that
// shown_when_found() admits, sorted by name), or, if `names` is empty,
// every one so found in /dev/shm; with `named`, name their owners too.
// Returns 0, or the negative errno of reading the first place that could
// not be read (the others are read all the same).
int read_pools(const std::vector<std::string> &names, bool named,
               std::vector<Snapshot> *out);

// Leases of processes proven dead, not yet reclaimed, and the permits under
// them.
struct DeadHolders {
  uint64_t leases = 0, permits = 0;
};
DeadHolders dead_holders(const Snapshot &snap);

// The user name of `uid`, or "" if it has none.
std::string user_name(uid_t uid);

// The rate limit's next token, as seen at `now_ns` (CLOCK_MONOTONIC): how
// long until it comes; 0 if one is there now (or the semaphore has no rate).
uint64_t token_due_in(const struct shmsem_stat &st, uint64_t now_ns);

// True for the head of the queue (position 1) of a semaphore with a rate
// limit when it has every permit it asked for reserved: it waits only for
// a token (token_due_in), not for permits. Shown as such, not as a
// partial reservation, which reads as stuck.
bool waits_for_token(const struct shmsem_stat &st, uint32_t position,
                     uint32_t weight, uint32_t reserved);

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_POOL_VIEW_H
