#include "segment_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "layout.h"
#include "segment.h"

namespace shmsem::cli {

namespace d = shmsem::detail;

void (*g_copy_after_map)(int fd) = nullptr;

namespace {

// Where the SIGBUS handler jumps while this thread copies a mapping.
// volatile: the compiler knows memcpy() does not read it and would
// otherwise drop the store before the copy (seen with g++ 12 -O2).
thread_local sigjmp_buf *volatile t_copying = nullptr;

void on_sigbus(int sig, siginfo_t *, void *) {
  if (t_copying) siglongjmp(*t_copying, 1);
  // Not a copy of ours: the default action, as if we had no handler (the
  // fault repeats on return if raise() could not deliver it).
  (void)signal(sig, SIG_DFL);
  (void)raise(sig);
}

// memcpy that returns false instead of dying when the file behind `src`
// shrinks under it (access past its end raises SIGBUS).
bool copy_surviving_sigbus(void *dst, const void *src, size_t n) {
  struct sigaction sa = {}, old = {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &old);
  sigjmp_buf env;
  bool ok = false;
  if (sigsetjmp(env, 1) == 0) {
    t_copying = &env;
    memcpy(dst, src, n);
    ok = true;
  }
  t_copying = nullptr;
  sigaction(SIGBUS, &old, nullptr);
  return ok;
}

// The largest file a valid semaphore can be.
uint64_t max_segment_size() {
  return d::geometry(SHMSEM_MAX_PERMITS, SHMSEM_MAX_WAITERS).total_size;
}

}  // namespace

int copy_segment(int dirfd, const char *file, SegmentCopy *out) {
  shmsem_detach(out->s);
  out->s = nullptr;
  // Look before opening for reading: opening a device node or a FIFO can
  // have effects of its own (it unblocks a FIFO's writer), and a symbolic
  // link may point anywhere. An O_PATH descriptor opens nothing; its fstat
  // is about the very file we then reopen through /proc/self/fd, so a
  // rename in between cannot slip a FIFO in. Without /proc, fall back to
  // lstat and an O_NONBLOCK open (the file is checked again below).
  struct stat before;
  int fd = -1;
  int path = openat(dirfd, file, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (path < 0) return -errno;
  if (fstat(path, &before) != 0 || !S_ISREG(before.st_mode)) {
    close(path);
    return -EBADMSG;  // a symbolic link (O_PATH opened the link), FIFO, ...
  }
  char proc[64];
  (void)snprintf(proc, sizeof proc, "/proc/self/fd/%d", path);  // fits
  fd = open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)  // no /proc
    fd = openat(dirfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  int open_errno = errno;
  close(path);
  if (fd < 0) return open_errno == ELOOP || open_errno == ENXIO ? -EBADMSG : -open_errno;
  struct stat st;
  int e = 0;
  if (fstat(fd, &st) != 0)
    e = -errno;
  else if (!S_ISREG(st.st_mode) || st.st_ino != before.st_ino ||
           st.st_dev != before.st_dev ||  // replaced since the look
           st.st_size < off_t(sizeof(d::Header)) ||
           uint64_t(st.st_size) > max_segment_size())
    e = -EBADMSG;
  uint64_t magic = 0;  // cheap: never map (and copy) unrelated files
  if (!e && (pread(fd, &magic, sizeof magic, 0) != ssize_t(sizeof magic) ||
             magic != d::kMagic))
    e = -EBADMSG;
  if (e) {
    close(fd);
    return e;
  }
  size_t size = size_t(st.st_size);
  void *map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  e = map == MAP_FAILED ? -errno : 0;
  if (!e && g_copy_after_map) g_copy_after_map(fd);
  close(fd);
  if (e) return e;
  void *copy = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) {
    munmap(map, size);
    return -ENOMEM;
  }
  bool whole = copy_surviving_sigbus(copy, map, size);
  munmap(map, size);
  e = whole ? d::segment_view(copy, size, &out->s) : -EIO;
  if (e) {
    munmap(copy, size);
    return e;
  }
  out->file = st;
  return 0;
}

int copy_segment(const char *name, SegmentCopy *out) {
  int e = d::check_name(name);
  if (e) return e;
  int dir = open(kShmDir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -errno;
  e = copy_segment(dir, name + 1, out);
  close(dir);
  return e;
}

}  // namespace shmsem::cli
