// The one data model behind `shmsem status` (and the facts `shmsem list`
// shows): a plain copy of a semaphore's state, counters, holders and queue,
// taken through a read-only mapping. Renderers (text, JSON) read only this.
#ifndef SHMSEM_TOOLS_SNAPSHOT_H
#define SHMSEM_TOOLS_SNAPSHOT_H

#include <stdint.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include <shmsem/shmsem.h>

#include "layout.h"

namespace shmsem::cli {

// Who a lease or waiter slot belongs to, as far as /proc can tell.
struct ProcessInfo {
  int32_t pid = 0;
  bool alive = false;      // not proven dead (see liveness)
  std::string liveness;    // "alive", "dead" (proven exited), "unknown" (counts as alive)
  std::string comm;        // /proc/<pid>/comm, "" if gone or PID reused
  std::string cmdline;     // /proc/<pid>/cmdline, space-joined, truncated
};

// A lease: the permits someone holds under one token, or those granted to a
// waiter that has not yet returned from its acquire. A weighted lease of n
// permits is n lease records (the one its token names, and the others
// linked from it: LeaseRecord::link) and shows once, with weight n.
struct Holder {
  uint32_t index = 0;  // the record the token names
  uint64_t gen = 0;
  uint32_t weight = 1;    // permits under this token
  bool reserved = false;  // RESERVED (granted, waiter not yet returned)
  ProcessInfo owner;
  uint64_t held_ns = 0;  // since the grant (CLOCK_MONOTONIC_COARSE)
};

// A queued waiter, in FIFO order.
struct Waiter {
  uint32_t position = 0;  // 1 = next to be granted
  uint32_t slot = 0;
  uint64_t ticket = 0;
  uint32_t weight = 1;    // permits it asks for (WaiterSlot::weight)
  uint32_t reserved = 0;  // of those, reserved for it so far (the head's)
  ProcessInfo owner;
  uint64_t waiting_ns = 0;  // since it queued (CLOCK_MONOTONIC)
};

struct Snapshot {
  std::string name;
  // Segment file (/dev/shm/<name>).
  uint32_t mode = 0;  // permission bits
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user, group;  // "" if the ids have no names
  uint64_t created_unix_ns = 0;  // CLOCK_REALTIME at creation
  // The --permits it was created with (Header::created_permits; 0: no
  // concurrency limit, rate only); shmsem_create(3) compares it, while the
  // capacity (st.permits) may have changed since.
  uint32_t created_permits = 0;
  // State (shmsem_stat). st.rate_next_ns is on CLOCK_MONOTONIC; stat_mono_ns
  // is that clock when st was taken.
  struct shmsem_stat st = {};
  uint64_t stat_mono_ns = 0;
  uint64_t wait_p50_ns = 0, wait_p90_ns = 0, wait_p99_ns = 0;
  std::vector<Holder> holders;  // by lease index, one per lease
  std::vector<Waiter> waiters;  // queue order
  // The mapping is read without the lock, so a snapshot of a busy semaphore
  // can be torn. True when the queue links disagreed with the slot states
  // and the order was rebuilt from tickets (the order repair also uses).
  bool queue_rebuilt = false;
};

// Copy the file of `name` once into private memory (segment_copy.h: needs
// only read permission, never writes, survives truncation) and read
// everything from that copy. Returns 0 or a negative errno from
// copy_segment() (-ENOENT, -EACCES, -EBADMSG, -EPROTO, -EXDEV, -EIO).
int take_snapshot(const std::string &name, Snapshot *out);

// Fill `info` for the recorded owner of a lease or (is_slot) a waiter slot.
// can_judge: this process shares the semaphore's PID namespace.
void describe_process(const detail::Owner &o, bool is_slot, bool can_judge,
                      ProcessInfo *info);

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_SNAPSHOT_H
