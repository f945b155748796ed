// Create, then publish: build a segment in a file nobody can name, then give
// it its name in one step; and the leftovers of the older temporary-name route.
#ifndef SHMSEM_SRC_PUBLISH_H
#define SHMSEM_SRC_PUBLISH_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

namespace shmsem::detail {

// How publish_segment named the file (tests read it through testing.h).
enum class PublishRoute : int {
  kNone = 0,
  kUnnamed,    // O_TMPFILE open, not (yet) linked
  kEmptyPath,  // O_TMPFILE, linkat(fd, "", AT_EMPTY_PATH)
  kProcFd,     // O_TMPFILE, linkat("/proc/self/fd/N", AT_SYMLINK_FOLLOW)
  kNamedTmp,   // "/.shmsem-tmp-<pid>-<n>-<hex>", link(), shm_unlink()
};

// Fills a fresh, all-zero shared mapping of the new file. 0 or -errno.
using InitFn = int (*)(void *base, void *ctx);

struct Mapping {
  void *base;
  size_t size;
};

// Creates /dev/shm<name> (`name` passed check_name) of `size` bytes with
// exactly `mode` (the umask does not apply), maps it shared read-write, runs
// init(base, ctx) on it and only then gives it its name, so the name appears
// complete or not at all: the file is built unnamed (O_TMPFILE) and linked
// with linkat(AT_EMPTY_PATH), else through /proc/self/fd. Only if this kernel,
// mount or caller cannot take that route, it is built under a temporary name
// ".shmsem-tmp-<pid>-<n>-<hex>" and link()ed, which a creator killed before
// its cleanup leaves behind (see remove_leftover).
// Returns 0 and the mapping in *out (the caller unmaps it), or a negative
// errno with nothing mapped, open or named: -EEXIST if the name exists.
// Makes system calls; does not block.
int publish_segment(const char *name, mode_t mode, size_t size, InitFn init,
                    void *ctx, Mapping *out);

// Leftovers of the temporary-name route (every version before the unnamed
// route used it for every create).
constexpr char kTmpPrefix[] = ".shmsem-tmp-";

struct Leftover {
  char file[NAME_MAX + 1];  // its name in /dev/shm, without a '/'
  pid_t pid;                // creator, from the name; -1 if it has none
  bool creator_gone;        // kill(pid, 0) failed with ESRCH
  uint64_t size;
  uid_t uid;
};

// The creator PID in a temporary file's name, or -1 if `file` is not
// ".shmsem-tmp-<pid>-...".
pid_t leftover_pid(const char *file);
// Calls fn for every regular file in /dev/shm named ".shmsem-tmp-*".
// Returns how many, or a negative errno if /dev/shm cannot be read.
int scan_leftovers(void (*fn)(const Leftover &, void *ctx), void *ctx);
// Unlinks /dev/shm/<file> if it is a leftover whose creator provably does not
// exist (kill(pid, 0) fails with ESRCH; PIDs of this PID namespace). Returns
// 0, -EBUSY if the creator may be alive (or the name names none), -EINVAL if
// `file` is not a temporary file's name, or the errno of lstat/unlink.
int remove_leftover(const char *file);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_PUBLISH_H
