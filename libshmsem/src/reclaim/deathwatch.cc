// Death detection by events: one io_uring per watching call. See
// deathwatch.h and docs/DESIGN.md section 7, "Watching by events".
#include "deathwatch.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>

#include "clock.h"
#include "inuse.h"
#include "owner.h"
#include "testing_state.h"

namespace shmsem::detail {
namespace {

// Debian 12's liburing 2.3 predates the futex opcodes (Linux 6.7): the
// values are the kernel's ABI, numbered after IORING_OP_URING_CMD (46).
constexpr int kOpFutexWait = 51;
static_assert(IORING_OP_URING_CMD == 46, "io_uring opcode numbering");
constexpr uint32_t kFutex2SizeU32 = 0x02;  // FUTEX2_SIZE_U32; shared: no
                                           // FUTEX2_PRIVATE
constexpr uint64_t kFutexMatchAny = 0xffff'ffffu;  // FUTEX_BITSET_MATCH_ANY

// user_data of the requests: polls are 1 + their index in watched_.
constexpr uint64_t kFutexTag = ~uint64_t{0};
constexpr uint64_t kCancelTag = ~uint64_t{0} - 1;
constexpr unsigned kRingEntries = 2 * kMaxWatched;

// IORING_OP_FUTEX_WAIT on a 32-bit shared futex word, filled by hand (the
// kernel reads: addr = the word, addr2 = the expected value, addr3 = the
// bitset, fd = FUTEX2_* flags; len, futex_flags, buf_index and file_index
// must be 0, which io_uring_prep_rw leaves them in any liburing version).
void prep_futex_wait(io_uring_sqe *sqe, std::atomic<uint32_t> *word,
                     uint32_t expected) {
  io_uring_prep_rw(kOpFutexWait, sqe, int(kFutex2SizeU32), word, 0,
                   expected);  // off is addr2
  sqe->addr3 = kFutexMatchAny;
  sqe->user_data = kFutexTag;
}

bool disabled() {
#ifdef SHMSEM_TESTING
  if (g_liveness_limits.load(std::memory_order_relaxed) & kLimitNoUring)
    return true;
#endif
  return false;
}

io_uring_sqe *next_sqe(io_uring *ring) {
  io_uring_sqe *sqe = io_uring_get_sqe(ring);
  if (!sqe) {
    io_uring_submit(ring);
    sqe = io_uring_get_sqe(ring);
  }
  return sqe;
}

// A real wait on a word that does not hold the expected value must fail at
// once with EAGAIN: anything else, and this kernel does not wait on futexes
// in a ring the way we need.
bool probe_ring() {
  io_uring ring;
  if (io_uring_queue_init(4, &ring, 0) < 0) return false;
  bool ok = false;
  io_uring_probe *p = io_uring_get_probe_ring(&ring);
  if (p && io_uring_opcode_supported(p, kOpFutexWait)) {
    std::atomic<uint32_t> word{1};
    prep_futex_wait(io_uring_get_sqe(&ring), &word, 0);
    io_uring_cqe *cqe = nullptr;
    int r = io_uring_submit_and_wait(&ring, 1);
    while (r >= 0 && (r = io_uring_wait_cqe(&ring, &cqe)) == -EINTR) {
    }
    ok = r == 0 && cqe && cqe->res == -EAGAIN;
  }
  if (p) io_uring_free_probe(p);
  io_uring_queue_exit(&ring);
  return ok;
}

std::atomic<int> g_ring_futex{0};  // 0 not probed yet, 1 yes, -1 no

}  // namespace

bool ring_futex_available() {
  if (disabled()) return false;
  int v = g_ring_futex.load(std::memory_order_relaxed);
  if (v == 0) {
    v = probe_ring() ? 1 : -1;
    g_ring_futex.store(v, std::memory_order_relaxed);
  }
  return v > 0;
}

bool events_available() {
  const char *env = secure_getenv("SHMSEM_DEATH_WATCH");
  if (env && strcmp(env, "poll") == 0) return false;
  return ring_futex_available();
}

EventWatch::~EventWatch() { reset(); }

void EventWatch::reset() {
  if (ring_) {
    // Close the descriptor only if it is still this ring (each ring has an
    // inode of its own): another thread may have closed the number during
    // the call and opened something else under it.
    struct stat st;
    if (fstat(ring_->ring_fd, &st) != 0 || st.st_ino != ring_ino_ ||
        st.st_dev != ring_dev_) {
      ring_->ring_fd = -1;
      ring_->enter_ring_fd = -1;
    }
    io_uring_queue_exit(ring_);  // cancels the polls
    delete ring_;
    ring_ = nullptr;
  }
  // Free the storage, not only the elements: after a pthread_cancel no
  // destructor runs, so reset() from the cleanup is the last call.
  std::vector<Watched>().swap(watched_);
  std::vector<Owner>().swap(gone_);
  pending_polls_ = 0;
  complete_ = false;
}

void EventWatch::forget() {
  if (ring_) {
    // The descriptor failed: another thread closed it (closefrom(),
    // close_range()) and the number may name someone else's file now.
    // Unmap the ring, close nothing.
    ring_->ring_fd = -1;
    ring_->enter_ring_fd = -1;
  }
  reset();
}

bool EventWatch::stale(shmsem_t *s) const {
  return __atomic_load_n(&s->core->next_ticket, __ATOMIC_RELAXED) != ticket_;
}

EventWatch::Arm EventWatch::arm(shmsem_t *s, bool *dead) {
  if (!ring_) {
    ring_ = new (std::nothrow) io_uring;
    if (!ring_) return kFailed;
    struct stat st;
    if (io_uring_queue_init(kRingEntries, ring_, 0) < 0) {
      delete ring_;
      ring_ = nullptr;
      return kFailed;
    }
    if (fstat(ring_->ring_fd, &st) != 0) {
      reset();
      return kFailed;
    }
    ring_ino_ = st.st_ino;
    ring_dev_ = st.st_dev;
  }
  ticket_ = __atomic_load_n(&s->core->next_ticket, __ATOMIC_RELAXED);
  const Owner &me = self_owner();
  bool partial = false;
  std::vector<int> opened;
  auto watch = [&](const Owner &o) {
    if (o.pid == me.pid && o.start == me.start && o.ino == me.ino) return;
    for (const Watched &w : watched_)
      if (w.pid == o.pid && w.start == o.start && w.ino == o.ino) return;
    if (watched_.size() >= kMaxWatched) {
      partial = true;
      return;
    }
    int fd = owner_pidfd(o);
    if (fd == -ESRCH) {
      *dead = true;
      Owner g{};
      g.pid = o.pid, g.start = o.start, g.ino = o.ino;
      gone_.push_back(g);
    }
    watched_.push_back({o.pid, o.start, o.ino, fd >= 0});
    if (fd < 0) return;
    io_uring_sqe *sqe = next_sqe(ring_);
    io_uring_prep_poll_add(sqe, fd, POLLIN);
    sqe->user_data = watched_.size();  // 1 + index
    opened.push_back(fd);
  };
  for_each_in_use(s, [&](uint32_t, bool, const Owner &o) { watch(o); });
  // Processes that may hold leases taken without the lock.
  for_each_proc(s, [&](uint32_t, const Owner &o) { watch(o); });
  bool ok = true;
  if (!opened.empty()) ok = io_uring_submit(ring_) == int(opened.size());
  // A submitted poll holds its own reference to the pidfd's file: the
  // descriptors are closed at once, so between two arms this call keeps
  // no pidfd in the caller's descriptor table.
  for (int fd : opened) close(fd);
  if (!ok) {
    reset();
    return kFailed;
  }
  pending_polls_ += unsigned(opened.size());
  for (const Watched &w : watched_) partial |= !w.watched;
  complete_ = !partial;
  return partial ? kPartial : kComplete;
}

// A poll completed: the process exited (POLLIN on a pidfd it pins is the
// proof), or the poll failed (then the pass that follows judges everyone).
void EventWatch::exited(uint64_t tag, int res) {
  if (pending_polls_) pending_polls_--;
  if (res <= 0 || !(res & POLLIN) || tag == 0 || tag > watched_.size()) return;
  const Watched &w = watched_[tag - 1];
  Owner g{};
  g.pid = w.pid, g.start = w.start, g.ino = w.ino;
  gone_.push_back(g);
}

std::vector<Owner> EventWatch::take_gone() {
  std::vector<Owner> g;
  g.swap(gone_);
  return g;
}

bool EventWatch::cancel_futex(bool *death) {
  io_uring_sqe *sqe = next_sqe(ring_);
  if (!sqe) return false;
  io_uring_prep_cancel64(sqe, kFutexTag, 0);
  sqe->user_data = kCancelTag;
  io_uring_submit(ring_);
  for (;;) {
    io_uring_cqe *cqe;
    int r = io_uring_wait_cqe(ring_, &cqe);
    if (r == -EINTR) continue;
    if (r < 0) return false;
    uint64_t tag = cqe->user_data;
    int res = cqe->res;
    io_uring_cqe_seen(ring_, cqe);
    if (tag == kFutexTag) return true;
    if (tag != kCancelTag) {
      exited(tag, res);
      *death = true;
    }
  }
}

int EventWatch::wait(std::atomic<uint32_t> *word, uint32_t expected,
                     uint64_t deadline_ns) {
  io_uring_sqe *sqe = next_sqe(ring_);
  if (!sqe) return -EIO;
  prep_futex_wait(sqe, word, expected);
  __kernel_timespec ts{};
  if (deadline_ns) {
    uint64_t now = real_mono_ns();
    uint64_t rel = deadline_ns > now ? deadline_ns - now : 0;
    ts.tv_sec = int64_t(rel / 1'000'000'000u);
    ts.tv_nsec = int64_t(rel % 1'000'000'000u);
  }
  // Submit, then wait, in two calls: io_uring_enter returns how many it
  // submitted even when a signal ended its wait, so a combined call would
  // hide the -EINTR that SHMSEM_WAIT_INTERRUPTIBLE needs (found by
  // Signal.InterruptibleWaitOnEventsEndsWithEintr).
  int r = io_uring_submit(ring_);
  io_uring_cqe *cqe = nullptr;
  if (r >= 0)
    r = io_uring_wait_cqe_timeout(ring_, &cqe, deadline_ns ? &ts : nullptr);
  int result = r == -ETIME ? -ETIMEDOUT : r == -EINTR ? -EINTR : 0;
  if (r < 0 && r != -ETIME && r != -EINTR) {
    // The ring's descriptor failed (closed by another thread): the futex
    // wait may never have been submitted, so there is nothing to await.
    forget();
    return -EIO;
  }
  bool futex_done = false;
  while (io_uring_peek_cqe(ring_, &cqe) == 0) {
    uint64_t tag = cqe->user_data;
    int res = cqe->res;
    io_uring_cqe_seen(ring_, cqe);
    if (tag == kFutexTag) {
      futex_done = true;
      if (result != 1) result = 0;
    } else if (tag != kCancelTag) {
      exited(tag, res);
      result = 1;
    }
  }
  // Never leave the futex wait behind: it would take a FUTEX_WAKE meant
  // for this thread's next sleep on the word.
  bool death = false;
  if (!futex_done && !cancel_futex(&death)) {
    forget();
    return -EIO;
  }
  return death ? 1 : result;
}

}  // namespace shmsem::detail
