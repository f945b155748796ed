#include "futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"

namespace shmsem::detail {
namespace {

long sys_futex(void *addr, int op, uint32_t val, const timespec *ts,
               uint32_t val3) {
  return syscall(SYS_futex, addr, op, val, ts, nullptr, val3);
}

int wait_result(long r) {
  if (r == 0) return 0;
  switch (errno) {
    case EAGAIN:
      return -EAGAIN;
    case ETIMEDOUT:
      return -ETIMEDOUT;
    case EINTR:
      return -EINTR;
    default:
      return 0;  // treat anything else as spurious: callers recheck
  }
}

}  // namespace

int futex_wait(std::atomic<uint32_t> *word, uint32_t expected,
               uint64_t deadline_ns) {
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC timeout.
  timespec ts, *tsp = nullptr;
  if (deadline_ns) {
    ts = ns_to_ts(deadline_ns);
    tsp = &ts;
  }
  return wait_result(sys_futex(word, FUTEX_WAIT_BITSET, expected, tsp,
                               FUTEX_BITSET_MATCH_ANY));
}

int futex_wake(std::atomic<uint32_t> *word, int n) {
  long r = sys_futex(word, FUTEX_WAKE, uint32_t(n), nullptr, 0);
  return r < 0 ? 0 : int(r);
}

int futex_wait_private(std::atomic<uint32_t> *word, uint32_t expected) {
  return wait_result(
      sys_futex(word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, expected, nullptr, 0));
}

int futex_wake_private(std::atomic<uint32_t> *word, int n) {
  long r =
      sys_futex(word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, uint32_t(n), nullptr, 0);
  return r < 0 ? 0 : int(r);
}

int futex_waitv(struct futex_waitv *v, uint32_t count,
                const timespec *timeout) {
#ifdef SYS_futex_waitv
  long r = syscall(SYS_futex_waitv, v, count, 0u, timeout, CLOCK_MONOTONIC);
  return r < 0 ? -errno : int(r);
#else
  (void)v;
  (void)count;
  (void)timeout;
  return -ENOSYS;
#endif
}

}  // namespace shmsem::detail
