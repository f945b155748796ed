// Owner identity and liveness. A verdict of "dead" needs positive proof that
// exactly the recorded process (or waiting thread) has exited; anything the
// checker cannot establish is "unknown", which every caller treats as
// alive. docs/DESIGN.md §7, "What counts as dead", gives the rules.
#ifndef SHMSEM_SRC_OWNER_H
#define SHMSEM_SRC_OWNER_H

#include <stdint.h>
#include <sys/types.h>

#include <atomic>

#include "layout.h"

namespace shmsem::detail {

enum class Verdict { kAlive, kDead, kUnknown };

// This process (tid = tino = 0). Computed once per process without a lock
// and kept in a MADV_WIPEONFORK page, so a child of fork(), vfork-free
// _Fork() or clone() sees a wiped page and recomputes: no atfork handler,
// and no system call after the first.
const Owner &self_owner();
// Points at the pid in that page once it is learnt (0 there in a child).
extern std::atomic<const int32_t *> g_self_pid;
// This process's pid, as self_owner().pid, in two loads when learnt.
inline int32_t self_pid() {
  const int32_t *p = g_self_pid.load(std::memory_order_acquire);
  int32_t v = p ? __atomic_load_n(p, __ATOMIC_RELAXED) : 0;
  return v ? v : self_owner().pid;
}
// This process and the calling thread (for a waiter slot, and the lock).
const Owner &self_thread_owner();

// Has the process named by `o` (pid, start, ino) provably exited? A zombie
// has exited. A thread-group leader that exited while other threads run
// has not.
Verdict process_verdict(const Owner &o);
// A pidfd (close-on-exec) that names exactly the process `o` records, to
// watch for its exit (POLLIN). -ESRCH if that process has provably exited;
// another negative errno if it cannot be shown to be that process (unknown:
// the caller keeps polling it).
int owner_pidfd(const Owner &o);
// Has the thread named by `o` (tid, tino) provably exited?
Verdict thread_verdict(const Owner &o);
// Whether any thread has `tid` in our namespace right now: kDead (none, or
// only a zombie leader), kAlive (one exists, which need not be the thread
// an old record names), kUnknown (the kernel cannot say: no PIDFD_THREAD).
Verdict tid_verdict(int32_t tid);
// The verdict on a record's owner: a lease belongs to its process, a waiter
// slot to its thread (dead if either is provably gone).
Verdict record_verdict(const Owner &o, bool is_slot);

// Start time (field 22) and state letter (field 3) of `pid` from
// /proc/<pid>/stat, only when /proc shows this process's PID namespace.
// Returns false when it cannot be read: that proves nothing.
bool proc_stat(pid_t pid, uint64_t *start, char *state);

// Inode of this process's PID namespace, from /proc/self/ns/pid or, without
// /proc, from its pidfd (PIDFD_GET_PID_NAMESPACE, Linux 6.11+); 0 unknown.
uint64_t pidns_inode();

// PID namespaces, per process (learnt once, like self_owner(), so a child
// that unshare()d a new one and forked is judged on its own): a process may
// record itself as an owner unless both inodes are known and differ
// (-EXDEV), and may judge other owners dead only if both are known and
// equal. A handle inherited into another namespace is thereby refused.
bool pidns_compatible(uint64_t segment_pidns);
bool may_judge(uint64_t segment_pidns);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_OWNER_H
