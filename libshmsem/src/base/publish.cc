// Create, then publish (docs/DESIGN.md section 3): a segment is built in an
// unnamed file and linked into place complete, so no opener ever maps a
// half-built one and a creator killed at any instruction leaves no file.
#include "publish.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "clock.h"
#include "hooks.h"
#include "testing_state.h"

namespace shmsem::detail {
namespace {

// glibc's shm_open maps "/name" to this directory.
constexpr char kShmDir[] = "/dev/shm";

// Not an errno: "this kernel, mount or caller cannot take the unnamed route".
constexpr int kRouteUnavailable = 1;

std::atomic<uint32_t> g_tmp_counter{0};

void note_route(PublishRoute r) {
#ifdef SHMSEM_TESTING
  g_create_route.store(int(r), std::memory_order_relaxed);
#else
  (void)r;
#endif
}

bool named_route_forced() {
#ifdef SHMSEM_TESTING
  return g_force_named_tmp.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

bool proc_fd_forced() {
#ifdef SHMSEM_TESTING
  return g_force_proc_fd.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// A link error that says the route is missing (no capability, no /proc,
// AT_EMPTY_PATH unknown), not that linking this file here failed.
bool route_missing(int err) {
  return err == ENOENT || err == EPERM || err == EACCES || err == EINVAL;
}

// Sizes, maps and fills the just-opened file `fd`; *base is the mapping.
int build(int fd, mode_t mode, size_t size, InitFn init, void *ctx,
          void **base) {
  SHMSEM_HOOK(CREATE_OPENED);
  // The open applied the umask; the caller asked for exactly `mode`.
  if (fchmod(fd, mode) != 0) return -errno;
  if (ftruncate(fd, off_t(size)) != 0) return -errno;
  SHMSEM_HOOK(CREATE_SIZED);
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -errno;
  int e = init(p, ctx);
  if (e) {
    munmap(p, size);
    return e;
  }
  SHMSEM_HOOK(CREATE_INITIALISED);
  *base = p;
  return 0;
}

// Gives the unnamed file `fd` the path `to`. 0, -errno, or kRouteUnavailable.
int link_unnamed(int fd, const char *to) {
  // Needs CAP_DAC_READ_SEARCH before Linux 6.10; since then the opener may.
  int err = ENOENT;
  // cppcheck-suppress knownConditionTrueFalse ; false outside the tests' build
  if (!proc_fd_forced()) {
    if (linkat(fd, "", AT_FDCWD, to, AT_EMPTY_PATH) == 0) {
      note_route(PublishRoute::kEmptyPath);
      return 0;
    }
    err = errno;
  }
  if (!route_missing(err)) return -err;
  // Needs /proc, and /proc/self/fd readable (not after a setuid change).
  char proc[40];
  (void)snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);  // fits
  if (linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW) == 0) {
    note_route(PublishRoute::kProcFd);
    return 0;
  }
  err = errno;
  return route_missing(err) ? kRouteUnavailable : -err;
}

// The unnamed route: until linkat succeeds the file has no name, and the
// kernel frees it with the creator's last reference, whenever it dies.
int create_unnamed(const char *to, mode_t mode, size_t size, InitFn init,
                   void *ctx, Mapping *out) {
  int fd = open(kShmDir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
  if (fd < 0) {
    int err = errno;
    // No O_TMPFILE on this file system (EOPNOTSUPP) or kernel (EISDIR).
    if (err == EOPNOTSUPP || err == EISDIR || err == EINVAL)
      return kRouteUnavailable;
    return -err;
  }
  note_route(PublishRoute::kUnnamed);
  void *base = nullptr;
  int e = build(fd, mode, size, init, ctx, &base);
  if (!e) e = link_unnamed(fd, to);
  if (!e) SHMSEM_HOOK(CREATE_LINKED);
  close(fd);
  if (e) {
    if (base) munmap(base, size);
    return e;
  }
  *out = Mapping{base, size};
  return 0;
}

// The fallback: a private temporary name, link()ed into place (as glibc's
// sem_open does). A creator killed before shm_unlink leaves the temporary
// name behind; remove_leftover cleans it up once the creator is gone.
int create_named_tmp(const char *to, mode_t mode, size_t size, InitFn init,
                     void *ctx, Mapping *out) {
  char tmp[96];
  // At most 1 + 12 + 10 + 1 + 10 + 1 + 16 characters: fits.
  (void)snprintf(tmp, sizeof tmp, "/%s%d-%u-%lx", kTmpPrefix, int(getpid()),
                 g_tmp_counter.fetch_add(1, std::memory_order_relaxed),
                 (unsigned long)real_mono_ns());
  int fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return -errno;
  note_route(PublishRoute::kNamedTmp);
  void *base = nullptr;
  int e = build(fd, mode, size, init, ctx, &base);
  char from[sizeof kShmDir + sizeof tmp];
  (void)snprintf(from, sizeof from, "%s%s", kShmDir, tmp);  // sized to fit
  if (!e && link(from, to) != 0) e = -errno;
  if (!e) SHMSEM_HOOK(CREATE_LINKED);
  shm_unlink(tmp);
  close(fd);
  if (e) {
    if (base) munmap(base, size);
    return e;
  }
  *out = Mapping{base, size};
  return 0;
}

bool creator_gone(pid_t pid) {
  return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

int publish_segment(const char *name, mode_t mode, size_t size, InitFn init,
                    void *ctx, Mapping *out) {
  *out = Mapping{nullptr, 0};
  note_route(PublishRoute::kNone);
  char to[sizeof kShmDir + NAME_MAX + 1];
  if (snprintf(to, sizeof to, "%s%s", kShmDir, name) >= int(sizeof to))
    return -EINVAL;
  int e = kRouteUnavailable;
  // cppcheck-suppress knownConditionTrueFalse ; false outside the tests' build
  if (!named_route_forced()) e = create_unnamed(to, mode, size, init, ctx, out);
  if (e == kRouteUnavailable)
    e = create_named_tmp(to, mode, size, init, ctx, out);
  return e;
}

pid_t leftover_pid(const char *file) {
  if (strncmp(file, kTmpPrefix, sizeof kTmpPrefix - 1) != 0) return -1;
  const char *p = file + sizeof kTmpPrefix - 1;
  long pid = 0;
  const char *digits = p;
  for (; *p >= '0' && *p <= '9'; p++) {
    pid = pid * 10 + (*p - '0');
    if (pid > INT_MAX) return -1;
  }
  if (p == digits || *p != '-' || pid <= 0) return -1;
  return pid_t(pid);
}

int scan_leftovers(void (*fn)(const Leftover &, void *ctx), void *ctx) {
  DIR *dir = opendir(kShmDir);
  if (!dir) return -errno;
  int n = 0;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): unsafe only on a shared DIR
  while (struct dirent *de = readdir(dir)) {
    if (strncmp(de->d_name, kTmpPrefix, sizeof kTmpPrefix - 1) != 0) continue;
    struct stat st;
    if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    Leftover l{};
    (void)snprintf(l.file, sizeof l.file, "%s", de->d_name);  // NAME_MAX + 1
    l.pid = leftover_pid(l.file);
    l.creator_gone = creator_gone(l.pid);
    l.size = uint64_t(st.st_size);
    l.uid = st.st_uid;
    fn(l, ctx);
    n++;
  }
  closedir(dir);
  return n;
}

int remove_leftover(const char *file) {
  if (!file || strchr(file, '/') ||
      strncmp(file, kTmpPrefix, sizeof kTmpPrefix - 1) != 0)
    return -EINVAL;
  char path[sizeof kShmDir + NAME_MAX + 1];
  if (snprintf(path, sizeof path, "%s/%s", kShmDir, file) >= int(sizeof path))
    return -EINVAL;
  struct stat st;
  if (lstat(path, &st) != 0) return -errno;
  if (!S_ISREG(st.st_mode)) return -EINVAL;
  // Only a creator that provably no longer exists: a live one (or a zombie,
  // or one we may not signal) could still be about to link() it.
  if (!creator_gone(leftover_pid(file))) return -EBUSY;
  return unlink(path) == 0 ? 0 : -errno;
}

}  // namespace shmsem::detail
