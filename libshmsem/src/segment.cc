#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "clock.h"
#include "lock.h"
#include "owner.h"

namespace shmsem::detail {
namespace {

// glibc's shm_open maps "/name" to this directory; create needs the path to
// link() a fully built segment into place, as glibc's sem_open does.
constexpr char kShmDir[] = "/dev/shm";

std::atomic<uint32_t> g_tmp_counter{0};

int init_segment(void *base, uint32_t permits, uint32_t max_waiters) {
  Geometry g = geometry(permits, max_waiters);
  auto *hdr = static_cast<Header *>(base);
  auto *core = reinterpret_cast<Core *>(static_cast<char *>(base) + kCoreOff);
  auto *leases =
      reinterpret_cast<LeaseRecord *>(static_cast<char *>(base) + g.lease_off);
  auto *slots =
      reinterpret_cast<WaiterSlot *>(static_cast<char *>(base) + g.slot_off);

  // The file is fresh from ftruncate, so all bytes are zero.
  int e = init_lock(&core->lock);
  if (e) return e;
  core->available.store(permits, std::memory_order_relaxed);
  core->head = core->tail = core->watcher = kNone;
  core->next_ticket = 1;
  for (uint32_t i = 0; i < permits; i++) {
    leases[i].state.store(kLeaseFree, std::memory_order_relaxed);
    leases[i].slot = kNone;
    leases[i].next_free = i + 1 < permits ? i + 1 : kNone;
  }
  core->free_lease = 0;
  for (uint32_t i = 0; i < max_waiters; i++) {
    slots[i].word.store(kSlotFree, std::memory_order_relaxed);
    slots[i].lease = kNone;
    slots[i].prev = slots[i].next = kNone;
    slots[i].next_free = i + 1 < max_waiters ? i + 1 : kNone;
  }
  core->free_slot = max_waiters ? 0 : kNone;

  hdr->magic = kMagic;
  hdr->layout_version = kLayoutVersion;
  hdr->total_size = g.total_size;
  hdr->permits = permits;
  hdr->max_waiters = max_waiters;
  hdr->lease_off = g.lease_off;
  hdr->slot_off = g.slot_off;
  hdr->pidns = pidns_inode();
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  hdr->created_ns = ts_to_ns(now);
  // Publish: everything above happens-before any opener's acquire of ready.
  hdr->ready.store(kReady, std::memory_order_release);
  return 0;
}

shmsem_t *make_handle(void *base, size_t size, bool rdonly) {
  auto *s = new (std::nothrow) shmsem_t;
  if (!s) return nullptr;
  auto *hdr = static_cast<Header *>(base);
  s->base = base;
  s->size = size;
  s->rdonly = rdonly;
  s->hdr = hdr;
  s->core = reinterpret_cast<Core *>(static_cast<char *>(base) + kCoreOff);
  s->leases =
      reinterpret_cast<LeaseRecord *>(static_cast<char *>(base) + hdr->lease_off);
  s->slots =
      reinterpret_cast<WaiterSlot *>(static_cast<char *>(base) + hdr->slot_off);
  s->permits = hdr->permits;
  s->max_waiters = hdr->max_waiters;
  return s;
}

int map_fd(int fd, bool rdonly, shmsem_t **out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  if (size_t(st.st_size) < sizeof(Header)) return -EBADMSG;
  size_t size = size_t(st.st_size);
  int prot = PROT_READ | (rdonly ? 0 : PROT_WRITE);
  void *base = mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return -errno;
  int e = segment_validate(base, size);
  if (e == 0) {
    auto *hdr = static_cast<Header *>(base);
    uint64_t ns = pidns_inode();
    if (hdr->pidns && ns && hdr->pidns != ns) e = -EXDEV;
  }
  if (e == 0) {
    *out = make_handle(base, size, rdonly);
    if (!*out) e = -ENOMEM;
  }
  if (e) munmap(base, size);
  return e;
}

}  // namespace

int check_name(const char *name) {
  if (!name || name[0] != '/') return -EINVAL;
  size_t len = strlen(name + 1);
  if (len == 0 || len > NAME_MAX) return -EINVAL;
  if (strchr(name + 1, '/')) return -EINVAL;
  if (!strcmp(name, "/.") || !strcmp(name, "/..")) return -EINVAL;
  return 0;
}

int segment_validate(const void *base, size_t size) {
  auto *hdr = static_cast<const Header *>(base);
  if (size < sizeof(Header) || hdr->magic != kMagic) return -EBADMSG;
  if (hdr->layout_version != kLayoutVersion) return -EPROTO;
  if (hdr->ready.load(std::memory_order_acquire) != kReady) return -EBADMSG;
  if (hdr->permits < 1 || hdr->permits > SHMSEM_MAX_PERMITS ||
      hdr->max_waiters > SHMSEM_MAX_WAITERS)
    return -EBADMSG;
  Geometry g = geometry(hdr->permits, hdr->max_waiters);
  if (hdr->lease_off != g.lease_off || hdr->slot_off != g.slot_off ||
      hdr->total_size != g.total_size || size != g.total_size)
    return -EBADMSG;
  return 0;
}

int segment_open(const char *name, int flags, shmsem_t **out) {
  if (!out) return -EINVAL;
  *out = nullptr;
  int e = check_name(name);
  if (e) return e;
  if (flags & ~int(SHMSEM_RDONLY)) return -EINVAL;
  bool rdonly = flags & SHMSEM_RDONLY;
  int fd = shm_open(name, (rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC, 0);
  if (fd < 0) return -errno;
  e = map_fd(fd, rdonly, out);
  close(fd);
  return e;
}

int segment_create(const char *name, const shmsem_config *cfg, int flags,
                   shmsem_t **out) {
  if (!out) return -EINVAL;
  *out = nullptr;
  int e = check_name(name);
  if (e) return e;
  if (!cfg || flags & ~int(SHMSEM_EXCL)) return -EINVAL;
  if (cfg->permits < 1 || cfg->permits > SHMSEM_MAX_PERMITS) return -EINVAL;
  if (cfg->max_waiters > SHMSEM_MAX_WAITERS || cfg->mode > 07777)
    return -EINVAL;
  if (cfg->__reserved0) return -EINVAL;
  for (uint64_t r : cfg->__reserved)
    if (r) return -EINVAL;
  uint32_t max_waiters =
      cfg->max_waiters ? cfg->max_waiters : SHMSEM_DEFAULT_MAX_WAITERS;
  mode_t mode = cfg->mode ? cfg->mode : SHMSEM_DEFAULT_MODE;

  auto open_existing = [&]() -> int {
    int r = segment_open(name, 0, out);
    if (r) return r;
    // Compatible: same permits, and the same queue bound unless the caller
    // left it 0 ("the default, or whatever it already has").
    if ((*out)->permits != cfg->permits ||
        (cfg->max_waiters && (*out)->max_waiters != cfg->max_waiters)) {
      segment_detach(*out);
      *out = nullptr;
      return -EEXIST;
    }
    return 0;
  };
  if (!(flags & SHMSEM_EXCL)) {
    e = open_existing();
    if (e != -ENOENT) return e;
  }

  // Build the whole segment under a private temporary name...
  char tmp[96];
  snprintf(tmp, sizeof tmp, "/.shmsem-tmp-%d-%u-%lx", int(getpid()),
           g_tmp_counter.fetch_add(1, std::memory_order_relaxed),
           (unsigned long)real_mono_ns());
  int fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return -errno;
  Geometry g = geometry(cfg->permits, max_waiters);
  void *base = MAP_FAILED;
  e = 0;
  if (fchmod(fd, mode) != 0 || ftruncate(fd, off_t(g.total_size)) != 0)
    e = -errno;
  if (!e) {
    base = mmap(nullptr, g.total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                0);
    if (base == MAP_FAILED) e = -errno;
  }
  if (!e) e = init_segment(base, cfg->permits, max_waiters);
  // ...then link it into place: it appears complete or not at all.
  char from[128], to[128 + NAME_MAX];
  snprintf(from, sizeof from, "%s%s", kShmDir, tmp);
  snprintf(to, sizeof to, "%s%s", kShmDir, name);
  if (!e && link(from, to) != 0) e = -errno;
  shm_unlink(tmp);
  close(fd);
  if (!e) {
    *out = make_handle(base, g.total_size, false);
    if (!*out) e = -ENOMEM;
  }
  if (e && base != MAP_FAILED) munmap(base, g.total_size);
  if (e == -EEXIST && !(flags & SHMSEM_EXCL)) return open_existing();
  return e;
}

void segment_detach(shmsem_t *s) {
  if (!s) return;
  munmap(s->base, s->size);
  delete s;
}

int segment_unlink(const char *name) {
  int e = check_name(name);
  if (e) return e;
  return shm_unlink(name) == 0 ? 0 : -errno;
}

}  // namespace shmsem::detail
