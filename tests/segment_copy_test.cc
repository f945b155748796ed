// The CLI's read of a semaphore file for `status` and `list`
// (tools/segment_copy.cc): one descriptor, one copy, and a file truncated
// under the copy is an error, not a SIGBUS.
#include "segment_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

// The handler is ours only while copying: afterwards SIGBUS has exactly the
// disposition it had before (whatever that is: the default, or a
// sanitizer's), so a SIGBUS elsewhere is handled as it would have been.
TEST(SegmentCopy, SigbusDispositionIsRestoredAfterACopy) {
  Segment seg(1);
  struct sigaction before = {}, after = {};
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &before), 0);
  SegmentCopy c;
  ASSERT_EQ(copy_segment(seg.name().c_str(), &c), 0);
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &after), 0);
  EXPECT_EQ(reinterpret_cast<void *>(after.sa_sigaction),
            reinterpret_cast<void *>(before.sa_sigaction));
  // (sa_flags may differ by SA_RESTORER, which glibc adds on install.)
  // And after a copy that did take SIGBUS.
  Segment big(64, 1024);
  g_truncate_path = "/dev/shm" + big.name();
  shmsem::cli::g_copy_after_map = truncate_to_one_page;
  EXPECT_EQ(copy_segment(big.name().c_str(), &c), -EIO);
  shmsem::cli::g_copy_after_map = nullptr;
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
