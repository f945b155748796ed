// Reading a semaphore file for inspection (`status`, `list`): open it once
// (O_NOFOLLOW | O_NONBLOCK, regular files only), take its owner and mode from
// that descriptor, map it from that descriptor, and copy it into private
// memory in one pass that survives SIGBUS. Everything after reads the copy,
// so a process that truncates or rewrites the file cannot crash the reader
// or move what it is looking at.
#ifndef SHMSEM_TOOLS_SEGMENT_COPY_H
#define SHMSEM_TOOLS_SEGMENT_COPY_H

#include <sys/stat.h>

#include <shmsem/shmsem.h>

namespace shmsem::cli {

// Where glibc's shm_open() keeps the names.
inline constexpr char kShmDir[] = "/dev/shm";

struct SegmentCopy {
  shmsem_t *s = nullptr;  // read-only handle over the private copy
  struct stat file = {};  // fstat of the descriptor the copy came from

  SegmentCopy() = default;
  SegmentCopy(const SegmentCopy &) = delete;
  SegmentCopy &operator=(const SegmentCopy &) = delete;
  ~SegmentCopy() { shmsem_detach(s); }
};

// Copy the semaphore `file` (a name in the directory `dirfd`, normally
// /dev/shm) into `out`. 0, or a negative errno: -ENOENT, -EACCES; -EBADMSG
// for anything that is not a semaphore (a symbolic link, a FIFO, a
// directory, a file of the wrong size or contents); -EPROTO, -EXDEV as for
// shmsem_open(3); -EIO if the file shrank while it was being copied.
int copy_segment(int dirfd, const char *file, SegmentCopy *out);

// The same for a semaphore name ("/pool").
int copy_segment(const char *name, SegmentCopy *out);

// Test hook: called with the descriptor after the file is mapped and before
// it is copied (a test truncates the file there). Null outside tests.
extern void (*g_copy_after_map)(int fd);

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_SEGMENT_COPY_H
