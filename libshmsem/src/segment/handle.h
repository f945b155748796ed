// The process-local handle behind shmsem_t: one mapping of one segment.
#ifndef SHMSEM_SRC_HANDLE_H
#define SHMSEM_SRC_HANDLE_H

#include <stddef.h>

#include "layout.h"

namespace shmsem::detail {
struct Backend;
}  // namespace shmsem::detail

struct shmsem_handle {
  // The backend this handle belongs to (api/backend.h), first: every
  // backend's handle starts with it, and the C entry points read it there.
  // nullptr, as here, stands for the shared-memory backend, whose handles
  // this layer builds without naming the table of a layer above it; only
  // api/ reads it.
  const shmsem::detail::Backend *backend = nullptr;
  void *base;
  size_t size;
  bool rdonly;
  shmsem::detail::Header *hdr;
  shmsem::detail::Core *core;
  shmsem::detail::LeaseRecord *leases;
  shmsem::detail::WaiterSlot *slots;
  std::atomic<uint32_t> *used_leases;  // core.n_used_leases of them in use
  std::atomic<uint32_t> *used_slots;
  shmsem::detail::ProcRecord *procs;
  std::atomic<uint64_t> *declared;  // declared[permits] (layout.h decl_word)
  shmsem::detail::LaneHold *holds;  // holds[max_procs * kLanes]
  uint32_t max_procs;
  uint32_t permits;
  uint32_t max_waiters;
  uint64_t nonce;  // header.nonce, copied once at open
  // The rate limit as created (header: rate, rate_period_ns, burst), copied
  // once at open: the core's rate words are restored to it (rate.h), so a
  // writer cannot leave a semaphore at one acquisition a day. 0: no rate.
  uint64_t rate_interval;
  uint32_t rate_burst;
  // The bounded policy's max_bypass_ns (header), checked at open; 0 under
  // SHMSEM_POLICY_FIFO. Copied once, as the rate: a writer cannot turn a
  // process's FIFO semaphore into a bounded one or back.
  uint64_t bound_ns;
  // A value read from the segment was out of range during this critical
  // section: unlock() repairs before releasing (tables.h). Lock holder only.
  bool corrupt;
  // A private copy of the file (SHMSEM_SNAPSHOT): base is ours, unmapped
  // at detach like a mapping; nothing changes it.
  bool snapshot;
  // The file as fstat(2) saw it at open (0 for a creator's handle).
  uint32_t file_mode, file_uid, file_gid;
  uint64_t pidns;  // header.pidns: the creator's PID namespace (0 unknown)
  // This process's record (fastpath.h), valid while fast_pid is our pid: a
  // child of fork() that inherits the handle registers its own.
  std::atomic<int32_t> fast_pid;
  std::atomic<uint32_t> fast_proc;
};

#endif  // SHMSEM_SRC_HANDLE_H
