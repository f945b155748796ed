// Death detection by events (Linux 6.7+): one watch per process, a helper
// thread asleep in an io_uring of its own on pidfds of the owner processes
// its watchers asked for (IORING_OP_POLL_ADD) and on a control word
// (IORING_OP_FUTEX_WAIT). A watcher arms at its first sleep: it names the
// owners of its semaphore, and sleeps with futex_waitv(2) on its own word
// and on its registration's word, which the helper bumps and wakes when an
// owner exits (an async watcher's slot word is woken too, so its loop polls
// it). Nothing is opened in the watcher's thread and no descriptor is kept:
// the helper's ring is reached through its registered index (its number is
// closed at once) and each pidfd is closed as soon as its poll is submitted.
// Where the kernel (or a seccomp filter, or kernel.io_uring_disabled)
// refuses, or the environment says SHMSEM_DEATH_WATCH=poll, or the helper
// cannot start, watchers poll on a timer instead (reclaim.h).
// docs/DESIGN.md section 7, "Watching by events".
#ifndef SHMSEM_SRC_DEATHWATCH_H
#define SHMSEM_SRC_DEATHWATCH_H

#include <stdint.h>

#include <atomic>
#include <vector>

#include "handle.h"

namespace shmsem::detail {

// Whether this process may watch by events: a real futex wait in a real
// ring and futex_waitv(2), probed once per process (a kernel that lists
// the opcode but fails it counts as without), and the environment's say.
bool events_available();
// Whether this kernel waits on a futex word in a ring at all (the probe
// above, without the environment's say): shmsem_uring_probe().
bool ring_futex_available();

// Owner processes the process's watch follows at once. More, and the
// watchers that need the others keep their polling timer.
inline constexpr size_t kMaxWatched = 256;

// One watcher's registration with the process's watch. A blocking call
// keeps it on its stack; an async waiter between polls as a handle in its
// own memory (detach(), adopt()).
class EventWatch {
 public:
  EventWatch() = default;
  ~EventWatch();
  EventWatch(const EventWatch &) = delete;
  EventWatch &operator=(const EventWatch &) = delete;

  enum Arm { kFailed, kPartial, kComplete };
  // Registers (the first time) and asks the watch to follow every owner
  // process of the records in use but this one: no system call unless an
  // owner is new to the process's watch (then one FUTEX_WAKE of the
  // helper, which opens its pidfd). kComplete: every other owner is
  // followed, or being armed (the helper reports an owner it cannot
  // follow); kPartial: some cannot be (too many, unknown identity);
  // kFailed: no watch in this process. `wake` (an async waiter's slot
  // word, or null) is woken with the registration's own word. Sets *dead
  // if the watch saw an exit since the last take_gone().
  Arm arm(shmsem_t *s, std::atomic<uint32_t> *wake, bool *dead);
  // Whether someone queued since arm(): their process may not be followed.
  bool stale(shmsem_t *s) const;
  // Sleeps until `word` no longer reads `expected` (or a spurious wake-up:
  // 0), the watch reports (1), `deadline_ns` (real monotonic, 0 none:
  // -ETIMEDOUT) or a signal (-EINTR); -EIO if futex_waitv fails.
  int wait(std::atomic<uint32_t> *word, uint32_t expected,
           uint64_t deadline_ns);
  // Whether the watch reported since the last take_gone(): one load.
  bool notified() const;
  // The owner processes proven gone since the last call (pid, start and
  // ino as the records hold them), and an acknowledgement: the watch stops
  // waking `wake` again for what it reported.
  std::vector<Owner> take_gone();
  // Gives the registration back (the call lost the watcher role, or ended).
  void reset();
  // An async waiter's registration between two polls: 0 for none.
  uint64_t detach();
  void adopt(uint64_t handle);

 private:
  uint64_t handle_ = 0;  // 0 none, else (generation << 32) | index
};

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_DEATHWATCH_H
