// shmsem_list (<shmsem/inspect.h>): the semaphores in /dev/shm, sorted by
// name, each read on its own. A file that is not a semaphore, one another
// layout wrote, a damaged one and an unreadable one are entries with their
// own error, and the files after them are read all the same; links, FIFOs
// and the leftovers of interrupted creates are no entries. Other tests
// create and remove semaphores at the same time, so these look only at
// their own names and never at the total.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

#include "handle.h"
#include "layout.h"
#include "support/process.h"
#include "support/segment.h"

namespace shmsem::test {
namespace {

// The whole list: counted, then read into room for a few more than counted
// (others may create semaphores between the two calls), again if that was
// not enough.
std::vector<struct shmsem_list_entry> list_all() {
  std::vector<struct shmsem_list_entry> out;
  int n = shmsem_list(nullptr, 0);
  EXPECT_GE(n, 0);
  for (int attempt = 0; n >= 0 && attempt < 5; attempt++) {
    out.resize(size_t(n) + 16);
    n = shmsem_list(out.data(), uint32_t(out.size()));
    EXPECT_GE(n, 0);
    if (n >= 0 && size_t(n) <= out.size()) {
      out.resize(size_t(n));
      return out;
    }
  }
  ADD_FAILURE() << "the list kept growing";
  return {};
}

// The entry named `name`, or nullptr.
const struct shmsem_list_entry *find(
    const std::vector<struct shmsem_list_entry> &list,
    const std::string &name) {
  for (const struct shmsem_list_entry &e : list)
    if (name == e.name) return &e;
  return nullptr;
}

// A file /dev/shm<name> holding `bytes`, removed at the end of the test.
class PlainFile {
 public:
  PlainFile(std::string name, const std::string &bytes, mode_t mode = 0600)
      : path_("/dev/shm" + std::move(name)) {
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    EXPECT_GE(fd, 0) << path_ << ": " << strerror(errno);
    if (fd < 0) return;
    EXPECT_EQ(write(fd, bytes.data(), bytes.size()), ssize_t(bytes.size()));
    close(fd);
  }
  ~PlainFile() { unlink(path_.c_str()); }
  PlainFile(const PlainFile &) = delete;
  PlainFile &operator=(const PlainFile &) = delete;

 private:
  std::string path_;
};

TEST(List, ShowsEachSemaphoreWithItsCountsAndOwnerSortedByName) {
  Segment a(3, 64, "list-a");
  Segment b(2, 64, "list-b");
  shmsem_lease_t lease;
  ASSERT_EQ(shmsem_acquire(b.get(), &lease), 0);
  std::vector<struct shmsem_list_entry> list = list_all();
  EXPECT_TRUE(std::is_sorted(
      list.begin(), list.end(),
      [](const auto &x, const auto &y) { return strcmp(x.name, y.name) < 0; }));
  const struct shmsem_list_entry *ea = find(list, a.name());
  const struct shmsem_list_entry *eb = find(list, b.name());
  ASSERT_NE(ea, nullptr);
  ASSERT_NE(eb, nullptr);
  EXPECT_LT(ea, eb) << "sorted by name";
  EXPECT_EQ(ea->error, 0);
  EXPECT_EQ(eb->error, 0);
  EXPECT_EQ(ea->stat.permits, 3u);
  EXPECT_EQ(ea->stat.available, 3u);
  EXPECT_EQ(eb->stat.permits, 2u);
  EXPECT_EQ(eb->stat.held, 1u);
  EXPECT_EQ(eb->stat.acquisitions, 1u);
  EXPECT_EQ(ea->file_uid, uint32_t(geteuid()));
  EXPECT_EQ(ea->file_gid, uint32_t(getegid()));
  EXPECT_EQ(ea->file_mode, uint32_t(SHMSEM_DEFAULT_MODE));
  EXPECT_EQ(shmsem_release(b.get(), &lease), 0);
}

TEST(List, CountsWithoutReadingAndReadsOnlyTheRoomGiven) {
  Segment a(1, 64, "count");
  int n = shmsem_list(nullptr, 0);
  ASSERT_GE(n, 1);
  // One entry of room: the first name is read, the next entry is untouched.
  struct shmsem_list_entry two[2];
  memset(two, 0x5a, sizeof two);
  n = shmsem_list(two, 1);
  ASSERT_GE(n, 1);
  EXPECT_EQ(two[0].name[0], '/');
  EXPECT_NE(memchr(two[0].name, 0, sizeof two[0].name), nullptr);
  EXPECT_EQ(two[1].name[0], 0x5a) << "written past max";
  EXPECT_EQ(two[1].error, 0x5a5a5a5a);
}

TEST(List, NullWithRoomIsEinval) {
  EXPECT_EQ(shmsem_list(nullptr, 1), -EINVAL);
}

// Names sort in the order the files are created here: the bad ones come
// before the semaphore, which is read all the same.
TEST(List, FileThatIsNoSemaphoreIsAnEntryAndDoesNotHideTheNext) {
  std::string base = unique_name("order");
  PlainFile junk(base + "-1-junk", std::string(4096, 'x'));
  PlainFile empty(base + "-2-empty", "");
  shmsem_config cfg{};
  cfg.permits = 2;
  shmsem_t *s = nullptr;
  ASSERT_EQ(shmsem_create((base + "-3-sem").c_str(), &cfg, SHMSEM_EXCL, &s), 0);
  std::vector<struct shmsem_list_entry> list = list_all();
  shmsem_detach(s);
  shmsem_unlink((base + "-3-sem").c_str());
  const struct shmsem_list_entry *j = find(list, base + "-1-junk");
  const struct shmsem_list_entry *e = find(list, base + "-2-empty");
  const struct shmsem_list_entry *sem = find(list, base + "-3-sem");
  ASSERT_NE(j, nullptr);
  ASSERT_NE(e, nullptr);
  ASSERT_NE(sem, nullptr);
  EXPECT_EQ(j->error, -EBADMSG);
  EXPECT_EQ(e->error, -EBADMSG);
  EXPECT_EQ(j->stat.permits, 0u) << "nothing read is filled in";
  EXPECT_EQ(j->file_uid, 0u);
  EXPECT_EQ(sem->error, 0);
  EXPECT_EQ(sem->stat.permits, 2u);
}

TEST(List, DamagedSemaphoreIsEucleanWithWhatWasRead) {
  Segment seg(2, 64, "damaged");
  seg.get()->core->available.store(0xffffffffu);  // past the geometry
  std::vector<struct shmsem_list_entry> list = list_all();
  seg.get()->core->available.store(2);
  const struct shmsem_list_entry *e = find(list, seg.name());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->error, -EUCLEAN);
  EXPECT_EQ(e->stat.max_permits, 2u) << "what was read is filled in";
  EXPECT_EQ(e->file_uid, uint32_t(geteuid()));
}

TEST(List, OtherLayoutVersionIsEproto) {
  Segment seg(1, 64, "layout");
  std::string path = "/dev/shm" + seg.name();
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  uint32_t v = detail::kLayoutVersion + 1;
  ASSERT_EQ(pwrite(fd, &v, sizeof v, offsetof(detail::Header, layout_version)),
            ssize_t(sizeof v));
  std::vector<struct shmsem_list_entry> list = list_all();
  v = detail::kLayoutVersion;
  EXPECT_EQ(pwrite(fd, &v, sizeof v, offsetof(detail::Header, layout_version)),
            ssize_t(sizeof v));
  close(fd);
  const struct shmsem_list_entry *e = find(list, seg.name());
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->error, -EPROTO);
}

// As another user (root drops to nobody in a child; anyone else makes the
// file unreadable to itself): a file it may not read is -EACCES.
TEST(List, FileThisProcessMayNotReadIsEacces) {
  Segment seg(1, 64, "private");
  std::string path = "/dev/shm" + seg.name();
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  Children kids;
  pid_t p = kids.spawn([&] {
    if (geteuid() == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) return 10;
    } else if (chmod(path.c_str(), 0) != 0) {
      return 11;
    }
    if (access(path.c_str(), R_OK) == 0) return 12;  // CAP_DAC_OVERRIDE
    std::vector<struct shmsem_list_entry> list = list_all();
    const struct shmsem_list_entry *e = find(list, seg.name());
    if (!e) return 1;
    return e->error == -EACCES ? 0 : 2;
  });
  int rc = kids.wait(p);
  chmod(path.c_str(), 0600);
  if (rc == 10 || rc == 12)
    GTEST_SKIP() << "cannot become a user that may not read the file";
  EXPECT_EQ(rc, 0) << "1: not listed, 2: another error";
}

TEST(List, LinksFifosAndLeftoversAreNoEntries) {
  Segment seg(1, 64, "target");
  std::string link = unique_name("link"), fifo = unique_name("fifo");
  std::string leftover =
      "/.shmsem-tmp-1-0-list-test-" + std::to_string(getpid());
  ASSERT_EQ(
      symlink(("/dev/shm" + seg.name()).c_str(), ("/dev/shm" + link).c_str()),
      0);
  ASSERT_EQ(mkfifo(("/dev/shm" + fifo).c_str(), 0600), 0);
  std::vector<struct shmsem_list_entry> list;
  {
    PlainFile left(leftover, "");
    list = list_all();
  }
  unlink(("/dev/shm" + link).c_str());
  unlink(("/dev/shm" + fifo).c_str());
  EXPECT_NE(find(list, seg.name()), nullptr);
  EXPECT_EQ(find(list, link), nullptr) << "a link is followed by nobody";
  EXPECT_EQ(find(list, fifo), nullptr) << "a FIFO is never opened";
  EXPECT_EQ(find(list, leftover), nullptr) << "shmsem_leftovers lists those";
}

TEST(List, EntryLayoutIsPinned) {
  EXPECT_EQ(sizeof(struct shmsem_list_entry),
            257u + 3 + 4 * 5 + sizeof(struct shmsem_stat) + 4 * 8);
  EXPECT_EQ(offsetof(struct shmsem_list_entry, error), 260u);
  EXPECT_EQ(offsetof(struct shmsem_list_entry, stat), 280u);
}

}  // namespace
}  // namespace shmsem::test
