// The one data model behind `shmsem status` (and `create`'s report of an
// existing semaphore, `top`, the exporter): a plain copy of a semaphore's
// state, counters, holders and queue, taken through the public inspect API
// (<shmsem/inspect.h>) on a SHMSEM_SNAPSHOT handle: a private copy of the
// file, read once, needing only read permission. Renderers (text, JSON,
// Prometheus) read only this.
#ifndef SHMSEM_TOOLS_SNAPSHOT_H
#define SHMSEM_TOOLS_SNAPSHOT_H

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
  bool alive = false;      // not proven dead (see liveness)
  std::string liveness;    // "alive", "dead" (proven exited), "unknown" (counts as alive)
  std::string comm;        // /proc/<pid>/comm of an alive owner, else ""
  std::string cmdline;     // /proc/<pid>/cmdline, space-joined, truncated
};

// A lease: the permits someone holds under one token, or those granted to a
// waiter that has not yet returned from its acquire. A weighted lease of n
// permits shows once, with weight n (struct shmsem_holder).
struct Holder {
  uint32_t index = 0;  // the lease record the token names
  uint64_t gen = 0;  // the token's generation
  uint32_t weight = 1;    // permits under this token
  bool reserved = false;  // granted, the waiter has not returned yet
  ProcessInfo owner;
  uint64_t held_ns = 0;  // since the grant (CLOCK_MONOTONIC_COARSE)
  uint64_t since_ns = 0;     // CLOCK_MONOTONIC_COARSE time of the grant
  uint64_t declared_ns = 0;  // declared hold time (run --expect); 0 none
  bool overdue = false;      // held longer than declared (reporting only)
};

// A queued waiter, in FIFO order.
struct Waiter {
  uint32_t position = 0;  // 1 = next to be granted
  uint32_t slot = 0;
  uint64_t ticket = 0;
  uint32_t weight = 1;    // permits it asks for
  uint32_t reserved = 0;  // of those, reserved for it so far (the head's)
  ProcessInfo owner;      // the waiting process (liveness: of its thread)
  uint64_t waiting_ns = 0;  // since it queued (CLOCK_MONOTONIC)
  int32_t tid = 0;          // the waiting thread
  uint64_t since_ns = 0;    // CLOCK_MONOTONIC time it queued
};

struct Snapshot {
  std::string name;
  // Segment file (/dev/shm/<name>), as fstat saw the descriptor it was read from.
  uint32_t mode = 0;  // permission bits
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user, group;  // "" if the ids have no names
  uint64_t created_unix_ns = 0;  // CLOCK_REALTIME at creation
  // The --permits it was created with (0: no concurrency limit, rate only);
  // shmsem_create(3) compares it, while the capacity (st.permits) may have
  // changed since.
  uint32_t created_permits = 0;
  // State (shmsem_stat). st.rate_next_ns is on CLOCK_MONOTONIC; stat_mono_ns
  // is that clock at the snapshot (the same as now_ns).
  struct shmsem_stat st = {};
  uint64_t stat_mono_ns = 0;
  // Upper bounds of the quantiles of st.wait_hist (shmsem_hist_quantile,
  // within 12.5%) and of st.hold_hist (the bound of the fixed bucket,
  // shmsem_hold_bound_ns: 1ms, 5ms, ... 1h; UINT64_MAX above an hour);
  // 0 when nothing was recorded.
  uint64_t wait_p50_ns = 0, wait_p90_ns = 0, wait_p99_ns = 0;
  uint64_t hold_p50_ns = 0, hold_p90_ns = 0, hold_p99_ns = 0;
  std::vector<Holder> holders;  // by lease index, one per lease
  std::vector<Waiter> waiters;  // queue order
  // The copy is read without the lock, so a snapshot of a busy semaphore
  // can be torn. True when the queue links disagreed with the slot states
  // and the order was rebuilt from tickets (the order repair also uses).
  bool queue_rebuilt = false;
  // SHMSEM_INSPECT_TORN: counts may disagree with the lists (only through a
  // live read-only mapping; the copy take_snapshot reads never sets it).
  bool torn = false;
  // The counters contradict the geometry (shmsem_inspect said -EUCLEAN):
  // someone with write access wrote into the segment. Everything above is
  // what was read; take_snapshot returned -EUCLEAN.
  bool damaged = false;
  // Leases held past their declared time, and the permits under them.
  uint32_t overdue = 0;
  uint32_t overdue_permits = 0;
  uint64_t oldest_wait_since_ns = 0;   // the head's since (MONOTONIC); 0 none
  uint64_t oldest_lease_since_ns = 0;  // the oldest lease's (COARSE); 0 none
  uint64_t now_ns = 0;         // CLOCK_MONOTONIC at the snapshot
  uint64_t now_coarse_ns = 0;  // CLOCK_MONOTONIC_COARSE at the snapshot
};

// Open `name` with SHMSEM_SNAPSHOT (a private copy of the file: read
// permission is enough, nothing is written, a concurrent truncation cannot
// crash us) and fill `out` from shmsem_inspect(3), with the file's user and
// group names and, for alive owners, their command names from /proc.
// Returns 0; -EUCLEAN with `out` filled with what was read and
// out->damaged set (render it, with a warning); or a negative errno from
// shmsem_open(3) (-ENOENT, -EACCES, -EBADMSG, -EPROTO, -EXDEV, -EIO: the
// file shrank while it was copied) or -ENOMEM, with `out` holding only the
// name.
int take_snapshot(const std::string &name, Snapshot *out);

// The rate limit's next token, as seen at `now_ns` (CLOCK_MONOTONIC): how
// long until it comes; 0 if one is there now (or the semaphore has no rate).
uint64_t token_due_in(const struct shmsem_stat &st, uint64_t now_ns);

// True for the head of the queue (position 1) of a semaphore with a rate
// limit when it has every permit it asked for reserved: it waits only for
// a token (token_due_in), not for permits. Shown as such, not as a
// partial reservation, which reads as stuck.
bool waits_for_token(const struct shmsem_stat &st, uint32_t position,
                     uint32_t weight, uint32_t reserved);

// Fill `info` for an owner process `pid` whose liveness shmsem_inspect
// judged (SHMSEM_OWNER_*). The command name and line come from /proc only
// for an alive owner (not from a process that reused a dead owner's PID).
void describe_process(int32_t pid, uint32_t liveness, ProcessInfo *info);

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_SNAPSHOT_H
