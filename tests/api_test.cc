// Creating, opening and validating segments; leases and their errors.
#include <fcntl.h>
#include <limits.h>
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>
#include <shmsem/shmsem.hpp>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "layout.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

shmsem_config config(uint32_t permits, uint32_t max_waiters = 0) {
  shmsem_config c{};
  c.permits = permits;
  c.max_waiters = max_waiters;
  return c;
}

// Unlinks a name at scope exit.
struct Unlinker {
  std::string name;
  ~Unlinker() { shm_unlink(name.c_str()); }
};

TEST(Create, ZeroPermitsIsInvalid) {
  std::string name = unique_name();
  Unlinker u{name};
  shmsem_config cfg = config(0);
  shmsem_t *s = nullptr;
  EXPECT_EQ(shmsem_create(name.c_str(), &cfg, 0, &s), -EINVAL);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(shmsem_open(name.c_str(), 0, &s), -ENOENT) << "nothing was created";
}

TEST(Create, BadNamesAreInvalid) {
  shmsem_config cfg = config(1);
  shmsem_t *s = nullptr;
  std::string too_long = "/" + std::string(256, 'a');
  for (const char *n : {"", "pool", "/", "/a/b", "//a", too_long.c_str()})
    EXPECT_EQ(shmsem_create(n, &cfg, 0, &s), -EINVAL) << n;
  EXPECT_EQ(shmsem_create(nullptr, &cfg, 0, &s), -EINVAL);
  EXPECT_EQ(shmsem_open("/a/b", 0, &s), -EINVAL);
  EXPECT_EQ(shmsem_unlink("nope"), -EINVAL);
}

TEST(Create, BadConfigAndFlagsAreInvalid) {
  std::string name = unique_name();
  Unlinker u{name};
  shmsem_t *s = nullptr;
  shmsem_config cfg = config(1);
  EXPECT_EQ(shmsem_create(name.c_str(), nullptr, 0, &s), -EINVAL);
  EXPECT_EQ(shmsem_create(name.c_str(), &cfg, 0x80, &s), -EINVAL);
  cfg.permits = SHMSEM_MAX_PERMITS + 1;
  EXPECT_EQ(shmsem_create(name.c_str(), &cfg, 0, &s), -EINVAL);
  cfg = config(1);
  cfg.policy = 2;
  EXPECT_EQ(shmsem_create(name.c_str(), &cfg, 0, &s), -EINVAL);
  cfg = config(1);
  cfg.max_bypass_ns = 1000;  // a bound without the bounded policy
  EXPECT_EQ(shmsem_create(name.c_str(), &cfg, 0, &s), -EINVAL);
  cfg = config(1);
  cfg.lease_ttl_ms = 1000;  // a local semaphore's leases never expire
  EXPECT_EQ(shmsem_create(name.c_str(), &cfg, 0, &s), -EINVAL);
}

TEST(Create, ExclusiveFailsIfItExistsAndPlainCreateOpensIt) {
  Segment seg(2);
  shmsem_config cfg = config(2);
  shmsem_t *s = nullptr;
  EXPECT_EQ(shmsem_create(seg.name().c_str(), &cfg, SHMSEM_EXCL, &s), -EEXIST);
  ASSERT_EQ(shmsem_create(seg.name().c_str(), &cfg, 0, &s), 0);
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(s, &l), 0);
  EXPECT_COUNTS(seg.get(), 1, 1, 0, 0);  // the same semaphore
  EXPECT_EQ(shmsem_release(seg.get(), &l), 0);
  shmsem_detach(s);
  cfg = config(3);
  EXPECT_EQ(shmsem_create(seg.name().c_str(), &cfg, 0, &s), -EEXIST)
      << "different configuration";
}

TEST(Create, ModeIsApplied) {
  std::string name = unique_name();
  Unlinker u{name};
  shmsem_config cfg = config(1);
  cfg.mode = 0640;
  shmsem_t *s = nullptr;
  ASSERT_EQ(shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s), 0);
  struct stat st;
  ASSERT_EQ(stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  shmsem_detach(s);
}

TEST(Open, MissingIsEnoent) {
  shmsem_t *s = nullptr;
  EXPECT_EQ(shmsem_open(unique_name().c_str(), 0, &s), -ENOENT);
  EXPECT_EQ(shmsem_unlink(unique_name().c_str()), -ENOENT);
}

// Writes `bytes` as the segment `name`.
void write_segment(const std::string &name, const void *bytes, size_t n) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bytes, n), ssize_t(n));
  close(fd);
}

TEST(Open, ForeignOrDamagedSegmentsAreRejected) {
  std::string name = unique_name();
  Unlinker u{name};
  shmsem_t *s = nullptr;
  std::vector<char> junk(4096, 'x');
  write_segment(name, junk.data(), junk.size());
  EXPECT_EQ(shmsem_open(name.c_str(), 0, &s), -EBADMSG) << "not ours";
  write_segment(name, junk.data(), 3);
  EXPECT_EQ(shmsem_open(name.c_str(), 0, &s), -EBADMSG) << "too small";
  write_segment(name, junk.data(), 0);
  EXPECT_EQ(shmsem_open(name.c_str(), 0, &s), -EBADMSG) << "empty";
}

TEST(Open, OtherLayoutVersionIsEproto) {
  Segment seg(1);
  std::string path = "/dev/shm" + seg.name();
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint32_t v = detail::kLayoutVersion + 1;
  ASSERT_EQ(pwrite(fd, &v, sizeof v, offsetof(detail::Header, layout_version)),
            ssize_t(sizeof v));
  shmsem_t *s = nullptr;
  EXPECT_EQ(shmsem_open(seg.name().c_str(), 0, &s), -EPROTO);
  // Truncated below the size its header states.
  v = detail::kLayoutVersion;
  pwrite(fd, &v, sizeof v, offsetof(detail::Header, layout_version));
  struct stat st;
  fstat(fd, &st);
  ASSERT_EQ(ftruncate(fd, st.st_size - 64), 0);
  EXPECT_EQ(shmsem_open(seg.name().c_str(), 0, &s), -EBADMSG);
  close(fd);
}

TEST(Open, ReadOnlyHandleCannotChangeAnything) {
  Segment seg(1);
  shmsem_t *ro = seg.open_again(SHMSEM_RDONLY);
  ASSERT_NE(ro, nullptr);
  shmsem_lease_t l{1, 0, 0, 0};
  EXPECT_EQ(shmsem_acquire(ro, &l), -EBADF);
  EXPECT_EQ(shmsem_try_acquire(ro, &l), -EBADF);
  EXPECT_EQ(shmsem_release(ro, &l), -EBADF);
  EXPECT_EQ(shmsem_shutdown(ro), -EBADF);
  EXPECT_EQ(shmsem_recover(ro), -EBADF);
  struct shmsem_stat st;
  EXPECT_EQ(shmsem_stat(ro, &st), 0);
  EXPECT_EQ(st.permits, 1u);
  EXPECT_EQ(shmsem_check(ro), 0);
  shmsem_detach(ro);
}

TEST(Lease, UncontendedAcquireAndRelease) {
  Segment seg(2);
  shmsem_t *s = seg.get();
  shmsem_lease_t a, b, c;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  EXPECT_COUNTS(s, 1, 1, 0, 0);
  ASSERT_EQ(shmsem_try_acquire(s, &b), 0);
  EXPECT_COUNTS(s, 0, 2, 0, 0);
  EXPECT_NE(a.index, b.index);
  EXPECT_EQ(shmsem_try_acquire(s, &c), -EAGAIN);
  EXPECT_INVARIANTS(s);
  EXPECT_EQ(shmsem_release(s, &a), 0);
  EXPECT_EQ(shmsem_release(s, &b), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  EXPECT_INVARIANTS(s);
  struct shmsem_stat st;
  shmsem_stat(s, &st);
  EXPECT_EQ(st.acquisitions, 2u);
}

// shmsem_lease_resource: the leases held at once name distinct indices
// below max_permits (a weighted lease: n of them, the first named), and an
// index comes back into use only after its lease is released.
TEST(Lease, LeasesHeldAtOnceNameDistinctResources) {
  shmsem_config cfg{};
  cfg.permits = 6;
  Segment seg(cfg);
  shmsem_t *s = seg.get();
  shmsem_lease_t one[3], three;
  std::vector<bool> named(6, false);
  for (shmsem_lease_t &l : one) {
    ASSERT_EQ(shmsem_acquire(s, &l), 0);
    uint32_t i = shmsem_lease_resource(&l);
    ASSERT_LT(i, 6u);
    EXPECT_FALSE(named[i]) << i;
    named[i] = true;
  }
  ASSERT_EQ(shmsem_acquire_n(s, 3, &three), 0);
  uint32_t i = shmsem_lease_resource(&three);
  ASSERT_LT(i, 6u);
  EXPECT_FALSE(named[i]) << i;
  EXPECT_EQ(shmsem_release(s, &one[1]), 0);
  shmsem_lease_t again;
  ASSERT_EQ(shmsem_acquire(s, &again), 0);
  EXPECT_EQ(shmsem_lease_resource(&again), shmsem_lease_resource(&one[1]));
  for (shmsem_lease_t *l : {&one[0], &one[2], &three, &again})
    EXPECT_EQ(shmsem_release(s, l), 0);
  EXPECT_INVARIANTS(s);
}

TEST(Lease, DuplicateReleaseIsEalreadyAndChangesNothing) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t a, b;
  ASSERT_EQ(shmsem_acquire(s, &a), 0);
  ASSERT_EQ(shmsem_release(s, &a), 0);
  EXPECT_EQ(shmsem_release(s, &a), -EALREADY);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  // The record is reused by a new lease: the old token still cannot free it.
  ASSERT_EQ(shmsem_acquire(s, &b), 0);
  EXPECT_EQ(b.index, a.index);
  EXPECT_NE(b.gen, a.gen);
  EXPECT_EQ(shmsem_release(s, &a), -EALREADY);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &b), 0);
  EXPECT_INVARIANTS(s);
}

// Under seccomp strict mode any system call but read, write, exit and
// sigreturn kills the process: 1000 uncontended acquire/release pairs (and
// try_acquire) must survive it.
TEST(Lease, UncontendedPathMakesNoSystemCall) {
  Segment seg(2);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    shmsem_t *s = seg.open_again();
    shmsem_lease_t l;
    int bad = 0;
    // Warm up: the first call caches this process's identity (/proc).
    if (shmsem_acquire(s, &l) != 0 || shmsem_release(s, &l) != 0) bad = 1;
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT);
    for (int i = 0; i < 1000 && !bad; i++) {
      if (shmsem_acquire(s, &l) != 0) bad = 2;
      if (shmsem_release(s, &l) != 0) bad = 3;
      if (shmsem_try_acquire(s, &l) != 0) bad = 4;
      if (shmsem_release(s, &l) != 0) bad = 5;
    }
    if (write(fds[1], &bad, sizeof bad) != sizeof bad) bad = 6;
    syscall(SYS_exit, bad);  // exit_group is not allowed in strict mode
  }
  close(fds[1]);  // so a killed child means end-of-file, not a hang
  int status = 0, bad = -1;
  ssize_t n = read(fds[0], &bad, sizeof bad);
  close(fds[0]);
  waitpid(child, &status, 0);
  ASSERT_EQ(n, ssize_t(sizeof bad))
      << "the child was killed: it made a system call";
  EXPECT_EQ(bad, 0);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_COUNTS(seg.get(), 2, 0, 0, 0);
  EXPECT_INVARIANTS(seg.get());
}

TEST(Lease, MalformedLeaseIsEinvalAndChangesNothing) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  shmsem_lease_t good;
  ASSERT_EQ(shmsem_acquire(s, &good), 0);
  shmsem_lease_t bad_index = good, zero_gen = good, reserved = good,
                 other_sem = good, zero{0, 0, 0, 0};
  bad_index.index = 5;
  zero_gen.gen = 0;
  reserved.__reserved = 1;
  other_sem.sem ^= 1;
  EXPECT_EQ(shmsem_release(s, &bad_index), -EINVAL);
  EXPECT_EQ(shmsem_release(s, &zero_gen), -EINVAL);
  EXPECT_EQ(shmsem_release(s, &reserved), -EINVAL);
  EXPECT_EQ(shmsem_release(s, &other_sem), -EINVAL);
  EXPECT_EQ(shmsem_release(s, &zero), -EINVAL);
  EXPECT_EQ(shmsem_release(s, nullptr), -EINVAL);
  EXPECT_COUNTS(s, 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(s, &good), 0);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
}

TEST(Lease, TokenOfAnotherSemaphoreNeverReleasesThisOnesLease) {
  Segment a(1), b(1);
  shmsem_lease_t la, lb;
  ASSERT_EQ(shmsem_acquire(a.get(), &la), 0);
  ASSERT_EQ(shmsem_acquire(b.get(), &lb), 0);
  ASSERT_EQ(la.index, lb.index);
  ASSERT_EQ(la.gen, lb.gen) << "same record, same generation: only sem differs";
  EXPECT_EQ(shmsem_release(b.get(), &la), -EINVAL);
  EXPECT_COUNTS(b.get(), 0, 1, 0, 0);
  EXPECT_EQ(shmsem_release(b.get(), &lb), 0);
  EXPECT_EQ(shmsem_release(a.get(), &la), 0);
}

TEST(Lease, FailingTaskStillReleasesThroughRaii) {
  Segment seg(1);
  shmsem_t *s = seg.get();
  auto task = [&] {
    Lease lease;
    if (acquire(s, &lease) != 0) return;
    EXPECT_COUNTS(s, 0, 1, 0, 0);
    throw std::runtime_error("task failed");
  };
  EXPECT_THROW(task(), std::runtime_error);
  EXPECT_COUNTS(s, 1, 0, 0, 0);
  EXPECT_INVARIANTS(s);
}

TEST(Strerror, SpeaksTheSemaphoresWords) {
  EXPECT_STREQ(shmsem_strerror(-ESHUTDOWN), "semaphore is closed");
  EXPECT_STREQ(shmsem_strerror(-EALREADY), "lease already released");
  EXPECT_STREQ(shmsem_strerror(-EBUSY), "wait queue is full");
  EXPECT_STREQ(shmsem_strerror(EBUSY), "wait queue is full");
  EXPECT_NE(shmsem_strerror(-12345), nullptr);
}

// A setuid, setgid, sticky or executable segment file is a program waiting
// to happen in a /dev/shm without nosuid: only read/write bits are taken.
TEST(Create, ModeBitsOutsideReadWriteAreRefused) {
  for (uint32_t mode : {04777u, 02660u, 01666u, 0700u, 0661u}) {
    std::string name = unique_name("mode");
    shmsem_config cfg{};
    cfg.permits = 1;
    cfg.mode = mode;
    shmsem_t *s = nullptr;
    EXPECT_EQ(shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s), -EINVAL)
        << std::oct << mode;
    EXPECT_EQ(shmsem_unlink(name.c_str()), -ENOENT) << "nothing was created";
  }
}

// Another user created the name first: create without SHMSEM_EXCL must not
// silently use that user's segment, unless SHMSEM_ANY_OWNER says so.
TEST(Create, ExistingSemaphoreOfAnotherOwnerIsNotUsedSilently) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the file away";
  Segment seg(1);
  std::string path = "/dev/shm" + seg.name();
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  shmsem_config cfg{};
  cfg.permits = 1;
  shmsem_t *s = nullptr;
  EXPECT_EQ(shmsem_create(seg.name().c_str(), &cfg, 0, &s), -EPERM);
  EXPECT_EQ(s, nullptr);
  EXPECT_STREQ(shmsem_strerror(-EPERM), "semaphore belongs to another user");
  ASSERT_EQ(shmsem_create(seg.name().c_str(), &cfg, SHMSEM_ANY_OWNER, &s), 0);
  shmsem_detach(s);
  ASSERT_EQ(chown(path.c_str(), 0, 0), 0);
  ASSERT_EQ(shmsem_create(seg.name().c_str(), &cfg, 0, &s), 0) << "ours again";
  shmsem_detach(s);
}

// A FIFO (or any non-regular file) under a semaphore's name: open refuses
// it at once instead of blocking in open(2) for a writer that never comes.
TEST(Open, FifoUnderTheNameIsRefusedWithoutBlocking) {
  std::string name = unique_name("fifo");
  std::string path = "/dev/shm" + name;
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  shmsem_t *s = nullptr;
  EXPECT_EQ(shmsem_open(name.c_str(), SHMSEM_RDONLY, &s), -EBADMSG);
  EXPECT_EQ(shmsem_open(name.c_str(), 0, &s), -EBADMSG);
  unlink(path.c_str());
}

TEST(Strerror, IntMinIsAnUnknownErrorNotAnOverflow) {
  EXPECT_STREQ(shmsem_strerror(INT_MIN), "unknown error");
}

TEST(Abi, PublicStructSizesArePinned) {
  EXPECT_EQ(sizeof(shmsem_lease_t), 24u);
  EXPECT_EQ(sizeof(shmsem_config), 48u);
  EXPECT_EQ(sizeof(shmsem_cancel_t), 48u);
  EXPECT_EQ(sizeof(struct shmsem_stat), 32u + 8 * 8 + 8 * SHMSEM_HIST_BUCKETS +
                                            8 * SHMSEM_HOLD_BUCKETS + 2 * 8 +
                                            64);
  EXPECT_EQ(sizeof(detail::LeaseRecord), 64u);
  EXPECT_EQ(sizeof(detail::WaiterSlot), 128u);
  EXPECT_EQ(offsetof(detail::WaiterSlot, owner), 64u) << "owner on line 2";
  EXPECT_EQ(offsetof(shmsem_lease_t, index), 16u);
}

TEST(Stat, WaitQuantileReadsTheHistogram) {
  struct shmsem_stat st {};
  EXPECT_EQ(shmsem_stat_wait_quantile(&st, 0.5), 0u);
  st.wait_hist[0] = 90;                              // 0 ns
  st.wait_hist[shmsem_hist_bucket(1'500'000)] = 10;  // [1.44, 1.57) ms
  EXPECT_EQ(shmsem_stat_wait_quantile(&st, 0.5), 0u);
  EXPECT_EQ(shmsem_stat_wait_quantile(&st, 0.99), (12u << 17) - 1);
  EXPECT_EQ(shmsem_hist_quantile(st.wait_hist, 0.99), (12u << 17) - 1);
  EXPECT_EQ(shmsem_stat_wait_quantile(&st, 0), 0u) << "q out of range";
}

}  // namespace
}  // namespace shmsem::test
