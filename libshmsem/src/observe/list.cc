// shmsem_list: the semaphores in /dev/shm, for monitors (`shmsem list`,
// `top` and the exporter without a name). One rule says which files may be
// semaphores (regular files, links not followed, not the leftovers of
// interrupted creates), and each is read on its own, as SHMSEM_SNAPSHOT
// reads it (segment_copy: a private copy, validated like a mapping, never a
// FIFO opened or a link followed), then counted as shmsem_inspect counts
// it: whatever one file is (another program's, unreadable, damaged, gone),
// it is that entry's error and the next file is read all the same.
#include "list.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include "inspect.h"
#include "publish.h"
#include "segment.h"
#include "thread_cancel.h"

namespace shmsem::detail {
namespace {

constexpr char kShmDir[] = "/dev/shm";

// A regular file (not followed if a link) that is not a leftover.
bool may_be_semaphore(int dir, const struct dirent *de) {
  const char *file = de->d_name;
  if (!strcmp(file, ".") || !strcmp(file, "..") ||
      !strncmp(file, kTmpPrefix, sizeof kTmpPrefix - 1))
    return false;
  if (de->d_type != DT_UNKNOWN) return de->d_type == DT_REG;
  struct stat st;
  return fstatat(dir, file, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISREG(st.st_mode);
}

// The names ("/" and the file's) of the files that may be semaphores,
// sorted; 0 or the negative errno of reading the directory.
int list_names(std::vector<std::string> *names) {
  DIR *dir = opendir(kShmDir);
  if (!dir) return -errno;
  int e = 0;
  for (;;) {
    errno = 0;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): unsafe only on a shared DIR
    const struct dirent *de = readdir(dir);
    if (!de) {
      e = -errno;  // 0 at the end of the directory
      break;
    }
    if (may_be_semaphore(dirfd(dir), de))
      names->push_back(std::string("/") + de->d_name);
  }
  closedir(dir);
  std::sort(names->begin(), names->end());
  return e;
}

// One entry: /dev/shm<name> read from a private copy and counted.
void read_entry(const std::string &name, struct shmsem_list_entry *e) {
  memset(e, 0, sizeof *e);
  // At most NAME_MAX (255) bytes after the slash: it fits with its NUL.
  memcpy(e->name, name.data(), std::min(name.size(), sizeof e->name - 1));
  shmsem_t *s = nullptr;
  e->error = segment_copy(e->name, &s);
  if (e->error) return;
  struct shmsem_inspection in;
  // Nothing asked for but the counts: 0, or -EUCLEAN with all filled in.
  e->error = inspect(s, &in, nullptr, 0, nullptr, 0);
  segment_detach(s);
  if (e->error && e->error != -EUCLEAN) return;
  e->stat = in.stat;
  e->file_mode = in.file_mode;
  e->file_uid = in.file_uid;
  e->file_gid = in.file_gid;
}

}  // namespace

int list(struct shmsem_list_entry *out, uint32_t max) {
  std::vector<std::string> names;
  int e = list_names(&names);
  if (e) return e;
  for (size_t i = 0; i < names.size() && i < max; i++)
    read_entry(names[i], &out[i]);
  return int(std::min<size_t>(names.size(), INT_MAX));
}

}  // namespace shmsem::detail

// The C entry point (the others are in api/capi.cc): it opens and reads
// files, which are cancellation points; the API promises none outside the
// queue.
extern "C" __attribute__((visibility("default"))) int shmsem_list(
    struct shmsem_list_entry *out, uint32_t max) {
  shmsem::detail::NoCancel no_cancel;
  if (!out && max) return -EINVAL;
  return shmsem::detail::list(out, max);
}
