// SHMSEM_SNAPSHOT: a semaphore file read once into private memory, for
// monitors. pread(2), not a mapping: a file that another process truncates
// meanwhile gives a short read (-EIO), never SIGBUS, and nothing after the
// copy can move what the reader looks at. The copy is validated like a
// mapping (segment_view) and read through a read-only handle.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handle.h"
#include "hooks.h"
#include "segment.h"

namespace shmsem::detail {
namespace {

// The largest file a valid semaphore can be.
uint64_t max_segment_size() {
  return geometry(SHMSEM_MAX_PERMITS, SHMSEM_MAX_WAITERS).total_size;
}

// Open `file` in the directory `dirfd` for reading, refusing without
// opening anything that is not a regular file: opening a FIFO or a device
// can have effects of its own (it unblocks a FIFO's writer), and a symbolic
// link may point anywhere. An O_PATH descriptor opens nothing; its fstat is
// about the very file then reopened through /proc/self/fd, so a rename in
// between cannot slip a FIFO in. Without /proc: an O_NOFOLLOW | O_NONBLOCK
// open, checked again by the caller's fstat.
int open_regular(int dirfd, const char *file, struct stat *before) {
  int path = openat(dirfd, file, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (path < 0) return -errno;
  if (fstat(path, before) != 0 || !S_ISREG(before->st_mode)) {
    close(path);
    return -EBADMSG;  // a symbolic link (O_PATH opened the link), FIFO, ...
  }
  char proc[64];
  (void)snprintf(proc, sizeof proc, "/proc/self/fd/%d", path);  // fits
  int fd = open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)  // no /proc
    fd = openat(dirfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  int open_errno = errno;
  close(path);
  if (fd < 0)
    return open_errno == ELOOP || open_errno == ENXIO ? -EBADMSG : -open_errno;
  return fd;
}

// All `size` bytes from offset 0, or false (the file shrank, or an error).
bool read_all(int fd, char *to, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd, to + done, size - done, off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

}  // namespace

int segment_copy(const char *name, shmsem_t **out) {
  *out = nullptr;
  int dir = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -errno;
  struct stat before = {}, st = {};
  int fd = open_regular(dir, name + 1, &before);
  close(dir);
  if (fd < 0) return fd;
  int e = 0;
  if (fstat(fd, &st) != 0)
    e = -errno;
  else if (!S_ISREG(st.st_mode) || st.st_ino != before.st_ino ||
           st.st_dev != before.st_dev ||  // replaced since the look
           st.st_size < off_t(sizeof(Header)) ||
           uint64_t(st.st_size) > max_segment_size())
    e = -EBADMSG;
  uint64_t magic = 0;  // cheap: never copy unrelated files
  if (!e && (pread(fd, &magic, sizeof magic, 0) != ssize_t(sizeof magic) ||
             magic != kMagic))
    e = -EBADMSG;
  if (e) {
    close(fd);
    return e;
  }
  const size_t size = size_t(st.st_size);
  void *copy = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) {
    close(fd);
    return -ENOMEM;
  }
  SHMSEM_HOOK(SNAPSHOT_COPY);  // a test truncates or rewrites the file here
  const bool whole = read_all(fd, static_cast<char *>(copy), size);
  close(fd);
  e = whole ? segment_view(copy, size, out) : -EIO;
  if (e) {
    munmap(copy, size);
    return e;
  }
  (*out)->snapshot = true;
  (*out)->file_mode = st.st_mode & 07777;
  (*out)->file_uid = st.st_uid;
  (*out)->file_gid = st.st_gid;
  return 0;
}

}  // namespace shmsem::detail
