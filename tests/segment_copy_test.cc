// shmsem_open(SHMSEM_SNAPSHOT) (libshmsem/src/segment_copy.cc): the file is
// read once into private memory through one descriptor; a file truncated
// while it is read is -EIO, never a SIGBUS; links, FIFOs and directories
// are refused without opening them.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

#include "support/hook_gate.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

// Detaches whatever a test opened.
struct Opened {
  shmsem_t *s = nullptr;
  ~Opened() { shmsem_detach(s); }
  int open(const std::string &name) {
    shmsem_detach(s);
    s = nullptr;
    return shmsem_open(name.c_str(), SHMSEM_SNAPSHOT, &s);
  }
};

TEST(SegmentCopy, CopiesAValidSemaphoreAndItsFileFacts) {
  Segment seg(3);
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &l), 0);
  Opened c;
  ASSERT_EQ(c.open(seg.name()), 0);
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(c.s, &st), 0);
  EXPECT_EQ(st.permits, 3u);
  EXPECT_EQ(st.held, 1u);
  struct shmsem_inspection in;
  ASSERT_EQ(shmsem_inspect(c.s, &in, nullptr, 0, nullptr, 0), 0)
      << "counting only";
  EXPECT_EQ(in.file_uid, geteuid());
  EXPECT_EQ(in.file_mode, 0600u);
  EXPECT_EQ(in.nholders, 1u);
  // It is a copy: the release below does not change it.
  ASSERT_EQ(shmsem_release(seg.get(), &l), 0);
  ASSERT_EQ(shmsem_stat(c.s, &st), 0);
  EXPECT_EQ(st.held, 1u);
  // And it only reads: everything that writes is refused.
  shmsem_lease_t x;
  EXPECT_EQ(shmsem_try_acquire(c.s, &x), -EBADF);
  EXPECT_EQ(shmsem_release(c.s, &l), -EBADF);
  EXPECT_EQ(shmsem_recover(c.s), -EBADF);
}

// Needs only read permission: the file is opened O_RDONLY.
TEST(SegmentCopy, ReadPermissionIsEnough) {
  Segment seg(1);
  const std::string path = "/dev/shm" + seg.name();
  ASSERT_EQ(chmod(path.c_str(), 0400), 0);
  Opened c;
  EXPECT_EQ(c.open(seg.name()), 0);
  struct shmsem_inspection in;
  EXPECT_EQ(shmsem_inspect(c.s, &in, nullptr, 0, nullptr, 0), 0);
  EXPECT_EQ(in.file_mode, 0400u);
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
}

// The file shrinks after it was opened and checked, before it is read (the
// hook point SNAPSHOT_COPY): a short read, -EIO, and no SIGBUS (pread, not
// a mapping). Then it is too short to be a semaphore at all.
TEST(SegmentCopy, FileTruncatedWhileBeingCopiedIsEioNotSigbus) {
  Segment seg(64, 1024);  // many pages
  const std::string path = "/dev/shm" + seg.name();
  {
    HookGate gate;
    gate.on_every([&path](HookPoint p) {
      if (p == HookPoint::SNAPSHOT_COPY) {
        EXPECT_EQ(truncate(path.c_str(), 4096), 0) << strerror(errno);
      }
    });
    Opened c;
    EXPECT_EQ(c.open(seg.name()), -EIO);
    EXPECT_EQ(c.s, nullptr);
  }
  Opened c;
  EXPECT_EQ(c.open(seg.name()), -EBADMSG);
}

// Rewritten in place between the look and the read: the copy is checked
// like a mapping, so garbage is -EBADMSG, not a handle over it.
TEST(SegmentCopy, FileRewrittenWhileBeingCopiedIsRefused) {
  Segment seg(2);
  const std::string path = "/dev/shm" + seg.name();
  HookGate gate;
  gate.on_every([&path](HookPoint p) {
    if (p != HookPoint::SNAPSHOT_COPY) return;
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    char junk[512];
    memset(junk, 0xa5, sizeof junk);
    EXPECT_EQ(pwrite(fd, junk, sizeof junk, 0), ssize_t(sizeof junk));
    close(fd);
  });
  Opened c;
  EXPECT_EQ(c.open(seg.name()), -EBADMSG);
  EXPECT_EQ(c.s, nullptr);
}

// Copying installs no signal handler: SIGBUS keeps its disposition.
TEST(SegmentCopy, CopyingLeavesSigbusAlone) {
  Segment seg(1);
  struct sigaction before = {}, after = {};
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &before), 0);
  Opened c;
  ASSERT_EQ(c.open(seg.name()), 0);
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &after), 0);
  EXPECT_EQ(reinterpret_cast<void *>(after.sa_sigaction),
            reinterpret_cast<void *>(before.sa_sigaction));
}

TEST(SegmentCopy, LinksFifosAndDirectoriesAreNotSemaphores) {
  Segment seg(1);
  std::string base = "/dev/shm" + seg.name();
  std::string link = base + "-link", fifo = base + "-fifo", dir = base + "-dir";
  ASSERT_EQ(symlink(base.c_str(), link.c_str()), 0);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  Opened c;
  EXPECT_EQ(c.open(seg.name() + "-link"), -EBADMSG) << "a link is not followed";
  EXPECT_EQ(c.open(seg.name() + "-fifo"), -EBADMSG) << "and a FIFO not opened";
  EXPECT_EQ(c.open(seg.name() + "-dir"), -EBADMSG);
  EXPECT_EQ(c.open(seg.name() + "-none"), -ENOENT);
  EXPECT_EQ(c.s, nullptr);
  unlink(link.c_str());
  unlink(fifo.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace shmsem::test
