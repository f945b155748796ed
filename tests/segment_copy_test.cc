// The CLI's read of a semaphore file for `status` and `list`
// (tools/segment_copy.cc): one descriptor, one copy, and a file truncated
// under the copy is an error, not a SIGBUS.
#include "segment_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "support/segment.h"

namespace {

using shmsem::cli::copy_segment;
using shmsem::cli::SegmentCopy;
using shmsem::test::Segment;

std::string g_truncate_path;

void truncate_to_one_page(int) {
  ASSERT_EQ(truncate(g_truncate_path.c_str(), 4096), 0) << strerror(errno);
}

TEST(SegmentCopy, CopiesAValidSemaphoreAndItsFileFacts) {
  Segment seg(3);
  shmsem_lease_t l;
  ASSERT_EQ(shmsem_acquire(seg.get(), &l), 0);
  SegmentCopy c;
  ASSERT_EQ(copy_segment(seg.name().c_str(), &c), 0);
  struct shmsem_stat st;
  ASSERT_EQ(shmsem_stat(c.s, &st), 0);
  EXPECT_EQ(st.permits, 3u);
  EXPECT_EQ(st.held, 1u);
  EXPECT_EQ(c.file.st_uid, geteuid());
  // It is a copy: the release below does not change it.
  ASSERT_EQ(shmsem_release(seg.get(), &l), 0);
  ASSERT_EQ(shmsem_stat(c.s, &st), 0);
  EXPECT_EQ(st.held, 1u);
}

TEST(SegmentCopy, FileTruncatedWhileBeingCopiedIsEioNotSigbus) {
  Segment seg(64, 1024);  // larger than one page, so the copy faults
  g_truncate_path = "/dev/shm" + seg.name();
  shmsem::cli::g_copy_after_map = truncate_to_one_page;
  SegmentCopy c;
  int e = copy_segment(seg.name().c_str(), &c);
  shmsem::cli::g_copy_after_map = nullptr;
  EXPECT_EQ(e, -EIO);
  EXPECT_EQ(c.s, nullptr);
  // And now that it is short, it is refused before mapping.
  EXPECT_EQ(copy_segment(seg.name().c_str(), &c), -EBADMSG);
}

// The handler is ours only while copying: a SIGBUS elsewhere still kills.
TEST(SegmentCopy, SigbusOutsideACopyStillKills) {
  Segment seg(1);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SegmentCopy c;
    if (copy_segment(seg.name().c_str(), &c) != 0) _exit(2);
    int fd = shm_open(seg.name().c_str(), O_RDWR, 0);
    if (fd < 0) _exit(3);
    struct stat st;
    fstat(fd, &st);
    auto *p = static_cast<volatile char *>(
        mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0));
    if (ftruncate(fd, 0) != 0) _exit(4);
    char x = p[0];  // SIGBUS
    (void)x;
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
}

TEST(SegmentCopy, LinksFifosAndDirectoriesAreNotSemaphores) {
  Segment seg(1);
  std::string base = "/dev/shm" + seg.name();
  std::string link = base + "-link", fifo = base + "-fifo", dir = base + "-dir";
  ASSERT_EQ(symlink(base.c_str(), link.c_str()), 0);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  SegmentCopy c;
  EXPECT_EQ(copy_segment((seg.name() + "-link").c_str(), &c), -EBADMSG);
  EXPECT_EQ(copy_segment((seg.name() + "-fifo").c_str(), &c), -EBADMSG);
  EXPECT_EQ(copy_segment((seg.name() + "-dir").c_str(), &c), -EBADMSG);
  EXPECT_EQ(copy_segment((seg.name() + "-none").c_str(), &c), -ENOENT);
  unlink(link.c_str());
  unlink(fifo.c_str());
  rmdir(dir.c_str());
}

}  // namespace
