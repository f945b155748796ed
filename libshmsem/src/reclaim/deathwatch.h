// Death detection by events (Linux 6.7+): the watcher sleeps in one
// io_uring on its own slot word (IORING_OP_FUTEX_WAIT) and on pidfds of the
// processes that own records (IORING_OP_POLL_ADD), so a death wakes it at
// once and no short timer runs while everyone lives. Where the kernel (or a
// seccomp filter, or kernel.io_uring_disabled) refuses, or the environment
// says SHMSEM_DEATH_WATCH=poll, the watcher polls on a timer instead
// (reclaim.h). docs/DESIGN.md section 7, "Watching by events".
#ifndef SHMSEM_SRC_DEATHWATCH_H
#define SHMSEM_SRC_DEATHWATCH_H

#include <stdint.h>

#include <atomic>
#include <vector>

#include "handle.h"

struct io_uring;

namespace shmsem::detail {

// Whether this process may watch by events: probed once per process with a
// real futex wait in a real ring (a kernel that lists the opcode but fails
// it counts as without).
bool events_available();
// Whether this kernel waits on a futex word in a ring at all (the probe
// above, without the environment's say): shmsem_uring_probe().
bool ring_futex_available();

// Pidfds watched by one call's watcher: at most this many. More distinct
// owner processes than that, and the watcher keeps its polling timer.
inline constexpr size_t kMaxWatched = 64;

// One queued call's watch by events. Owned by the call: its ring (one
// descriptor, close-on-exec) is closed when the call returns or loses the
// role, so fork, exec and a closefrom() between calls cannot meet it. Each
// pidfd is closed as soon as its poll is submitted (the poll holds the
// file). If another thread closes the ring's descriptor during the call,
// the ring is unmapped without closing the number, which may name another
// file by then (reset() closes it only while fstat() still shows the
// ring's own inode).
class EventWatch {
 public:
  EventWatch() = default;
  ~EventWatch();
  EventWatch(const EventWatch &) = delete;
  EventWatch &operator=(const EventWatch &) = delete;

  enum Arm { kFailed, kPartial, kComplete };
  // Adds a pidfd for every owner process of the records in use that is not
  // watched yet (never removes one: a superfluous wake-up only costs a
  // pass). kComplete: every other owner process is watched; kPartial: some
  // could not be (too many, unknown identity); kFailed: no ring. Sets *dead
  // if an owner proved gone while arming: the caller runs a pass.
  Arm arm(shmsem_t *s, bool *dead);
  // Whether someone queued since arm(): their process may not be watched.
  bool stale(shmsem_t *s) const;
  // Sleeps until `word` no longer reads `expected` (or a spurious wake-up),
  // a watched process exits (returns 1), `deadline_ns` (real monotonic, 0
  // none: -ETIMEDOUT) or a signal (-EINTR). 0 for a wake on the word. The
  // futex wait never outlives the call: a FUTEX_WAKE meant for a later
  // plain sleep on the word cannot be eaten by the ring.
  int wait(std::atomic<uint32_t> *word, uint32_t expected,
           uint64_t deadline_ns);
  // The owner processes proven gone since the last call (an exited pidfd,
  // or found gone while arming): pid, start and ino as the records hold them.
  std::vector<Owner> take_gone();
  // Closes the ring and every pidfd (the call lost the watcher role).
  void reset();

 private:
  struct Watched {
    int32_t pid;
    uint64_t start, ino;
    bool watched;  // a poll was armed (else counted against completeness)
  };
  void forget();
  bool cancel_futex(bool *death);
  void exited(uint64_t tag, int res);
  io_uring *ring_ = nullptr;
  uint64_t ring_ino_ = 0, ring_dev_ = 0;  // what fstat() said at setup
  std::vector<Watched> watched_;
  std::vector<Owner> gone_;
  uint64_t ticket_ = 0;  // core.next_ticket at arm()
  unsigned pending_polls_ = 0;
  bool complete_ = false;
};

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_DEATHWATCH_H
