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

#include <algorithm>
#include <atomic>
#include <new>

#include "clock.h"
#include "owner.h"

namespace shmsem::detail {
namespace {

// Builds the handle from the header fields segment_validate() checked,
// copied once: a writer changing the header later cannot enlarge the
// geometry this process trusts.
shmsem_t *make_handle(void *base, size_t size, bool rdonly, const Header &hdr) {
  auto *s = new (std::nothrow) shmsem_t;
  if (!s) return nullptr;
  char *b = static_cast<char *>(base);
  s->base = base;
  s->size = size;
  s->rdonly = rdonly;
  s->hdr = static_cast<Header *>(base);
  s->core = reinterpret_cast<Core *>(b + kCoreOff);
  s->leases = reinterpret_cast<LeaseRecord *>(b + hdr.lease_off);
  s->slots = reinterpret_cast<WaiterSlot *>(b + hdr.slot_off);
  s->used_leases = reinterpret_cast<std::atomic<uint32_t> *>(b + hdr.used_off);
  s->used_slots = s->used_leases + hdr.permits;
  s->procs = reinterpret_cast<ProcRecord *>(b + hdr.proc_off);
  s->declared = reinterpret_cast<std::atomic<uint64_t> *>(b + hdr.declared_off);
  s->holds = reinterpret_cast<LaneHold *>(b + hdr.hold_off);
  s->snapshot = false;
  s->file_mode = s->file_uid = s->file_gid = 0;
  s->max_procs = hdr.max_procs;
  s->fast_pid.store(0, std::memory_order_relaxed);
  s->fast_proc.store(kNoProc, std::memory_order_relaxed);
  s->permits = hdr.permits;
  s->max_waiters = hdr.max_waiters;
  s->nonce = hdr.nonce;
  s->pidns = hdr.pidns;
  // As segment_build() computed it, clamped as rate_read() clamps.
  s->rate_interval = hdr.rate
                         ? std::clamp<uint64_t>(hdr.rate_period_ns / hdr.rate,
                                                1, kMaxRateIntervalNs)
                         : 0;
  s->rate_burst = std::clamp<uint32_t>(hdr.burst, 1, SHMSEM_MAX_BURST);
  s->bound_ns =
      hdr.policy == SHMSEM_POLICY_BOUNDED
          ? std::clamp<uint64_t>(hdr.max_bypass_ns, 1, SHMSEM_MAX_BYPASS_NS)
          : 0;
  s->corrupt = false;
  return s;
}

}  // namespace

// The creator's handle on the segment it has just built (and trusts).
shmsem_t *created_handle(void *base, size_t size) {
  Header hdr;
  memcpy(static_cast<void *>(&hdr), base, sizeof hdr);
  return make_handle(base, size, false, hdr);
}

namespace {

void set_file(shmsem_t *s, const struct stat &st) {
  s->file_mode = st.st_mode & 07777;
  s->file_uid = st.st_uid;
  s->file_gid = st.st_gid;
}

int map_fd(int fd, bool rdonly, const uid_t *owner, shmsem_t **out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  if (!S_ISREG(st.st_mode)) return -EBADMSG;
  if (owner && st.st_uid != *owner) return -EPERM;
  if (size_t(st.st_size) < sizeof(Header)) return -EBADMSG;
  size_t size = size_t(st.st_size);
  int prot = PROT_READ | (rdonly ? 0 : PROT_WRITE);
  void *base = mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return -errno;
  Header hdr;
  int e = segment_validate(base, size, &hdr);
  if (e == 0 && !pidns_compatible(hdr.pidns)) e = -EXDEV;
  if (e == 0) {
    *out = make_handle(base, size, rdonly, hdr);
    if (!*out) e = -ENOMEM;
  }
  if (e) {
    munmap(base, size);
    return e;
  }
  set_file(*out, st);
  return 0;
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

int segment_validate(const void *base, size_t size, Header *copy) {
  if (size < sizeof(Header)) return -EBADMSG;
  auto *shared = static_cast<const Header *>(base);
  // One copy, then every check on the copy: another process may be
  // rewriting the header while we read it.
  Header hdr;
  memcpy(static_cast<void *>(&hdr), static_cast<const void *>(shared),
         sizeof hdr);
  if (hdr.magic != kMagic) return -EBADMSG;
  if (hdr.layout_version != kLayoutVersion) return -EPROTO;
  if (shared->ready.load(std::memory_order_acquire) != kReady) return -EBADMSG;
  memcpy(static_cast<void *>(&hdr), static_cast<const void *>(shared),
         sizeof hdr);  // again, after the acquire of ready
  if (hdr.ready.load(std::memory_order_relaxed) != kReady ||
      hdr.magic != kMagic || hdr.layout_version != kLayoutVersion)
    return -EBADMSG;
  if (hdr.permits < 1 || hdr.permits > SHMSEM_MAX_PERMITS ||
      hdr.max_waiters > SHMSEM_MAX_WAITERS)
    return -EBADMSG;
  Geometry g = geometry(hdr.permits, hdr.max_waiters);
  if (hdr.lease_off != g.lease_off || hdr.slot_off != g.slot_off ||
      hdr.used_off != g.used_off || hdr.proc_off != g.proc_off ||
      hdr.declared_off != g.declared_off || hdr.hold_off != g.hold_off ||
      hdr.max_procs != g.max_procs || hdr.total_size != g.total_size ||
      size != g.total_size)
    return -EBADMSG;
  if (copy)
    memcpy(static_cast<void *>(copy), static_cast<const void *>(&hdr),
           sizeof hdr);
  return 0;
}

// Open `name`; with `owner`, only a file that user owns (else -EPERM).
int open_named(const char *name, int flags, const uid_t *owner,
               shmsem_t **out) {
  if (!out) return -EINVAL;
  *out = nullptr;
  int e = check_name(name);
  if (e) return e;
  if (flags & ~int(SHMSEM_RDONLY | SHMSEM_SNAPSHOT)) return -EINVAL;
  if (flags & SHMSEM_SNAPSHOT) return segment_copy(name, out);
  bool rdonly = flags & SHMSEM_RDONLY;
  // O_NONBLOCK: a FIFO planted under the name must not block the open (it
  // is then refused as not a regular file); glibc adds O_NOFOLLOW.
  int fd =
      shm_open(name, (rdonly ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_CLOEXEC, 0);
  if (fd < 0) return -errno;
  e = map_fd(fd, rdonly, owner, out);
  close(fd);
  return e;
}

int segment_open(const char *name, int flags, shmsem_t **out) {
  return open_named(name, flags, nullptr, out);
}

int segment_view(void *copy, size_t size, shmsem_t **out) {
  *out = nullptr;
  Header hdr;
  int e = segment_validate(copy, size, &hdr);
  if (e) return e;
  if (!pidns_compatible(hdr.pidns)) return -EXDEV;
  *out = make_handle(copy, size, true, hdr);
  return *out ? 0 : -ENOMEM;
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
