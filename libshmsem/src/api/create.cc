// Creating a semaphore: the configuration checked, the segment built in
// its initial state and published under its name (base/publish.h), or an
// existing compatible one opened.
#include "create.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "clock.h"
#include "lock.h"
#include "owner.h"
#include "publish.h"
#include "rate.h"
#include "reclaim.h"
#include "segment.h"
#include "transitions.h"

namespace shmsem::detail {
namespace {

// A 64-bit value that names this creation of a semaphore: tokens carry it,
// so a token of another semaphore, or of an earlier one under the same
// name, is refused. getrandom(2), or a mix of clocks, pid and addresses if
// the entropy pool cannot answer now.
uint64_t draw_nonce() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == ssize_t(sizeof v) && v)
    return v;
  timespec a, b;
  clock_gettime(CLOCK_REALTIME, &a);
  clock_gettime(CLOCK_MONOTONIC, &b);
  v = uint64_t(a.tv_nsec) * 0x9e3779b97f4a7c15ull ^ uint64_t(a.tv_sec) << 20 ^
      uint64_t(b.tv_nsec) * 0xbf58476d1ce4e5b9ull ^ uint64_t(getpid()) << 40 ^
      uint64_t(reinterpret_cast<uintptr_t>(&v));
  return v ? v : 1;
}

// What a segment is built from: shmsem_config, checked and with its
// defaults filled in.
struct Build {
  uint32_t records;   // max_permits: lease records
  uint32_t capacity;  // permits at creation
  uint32_t created;   // cfg->permits (0: no concurrency limit)
  uint32_t max_waiters;
  uint32_t rate, burst;
  uint64_t period_ns, interval_ns;
  uint32_t policy;
  uint64_t bypass_ns;  // 0 under FIFO
};

int init_segment(void *base, const Build &b) {
  const uint32_t permits = b.records, max_waiters = b.max_waiters;
  Geometry g = geometry(permits, max_waiters);
  auto *hdr = static_cast<Header *>(base);
  auto *core = reinterpret_cast<Core *>(static_cast<char *>(base) + kCoreOff);
  auto *leases =
      reinterpret_cast<LeaseRecord *>(static_cast<char *>(base) + g.lease_off);
  auto *slots =
      reinterpret_cast<WaiterSlot *>(static_cast<char *>(base) + g.slot_off);

  // The file is fresh from ftruncate, so all bytes are zero (which is also
  // an empty array of records in use).
  init_lock(core);
  core->available.store(b.capacity, std::memory_order_relaxed);
  core->capacity.store(b.capacity, std::memory_order_relaxed);
  core->retired.store(permits - b.capacity, std::memory_order_relaxed);
  core->rate_interval_ns.store(b.interval_ns, std::memory_order_relaxed);
  core->rate_burst.store(b.burst, std::memory_order_relaxed);
  core->gate.store(b.interval_ns ? kGateRate : 0, std::memory_order_relaxed);
  core->head = core->tail = core->watcher = kNone;
  core->next_ticket = 1;
  core->watch_period_ns.store(kWatchPeriodNs, std::memory_order_relaxed);
  // Records [0, capacity) free, the rest RETIRED until the capacity grows.
  for (uint32_t i = 0; i < permits; i++) {
    lease_init(leases[i], i >= b.capacity);
    leases[i].slot = kNone;
    leases[i].link = kNone;
    leases[i].next_free = i + 1 < b.capacity ? i + 1 : kNone;
  }
  auto *procs =
      reinterpret_cast<ProcRecord *>(static_cast<char *>(base) + g.proc_off);
  for (uint32_t i = 0; i < g.max_procs; i++) {
    proc_init(procs[i]);
    for (Lane &ln : procs[i].lanes)
      ln.loose.store(kNone, std::memory_order_relaxed);
  }
  core->free_lease = b.capacity ? 0 : kNone;
  for (uint32_t i = 0; i < max_waiters; i++) {
    slot_init(slots[i]);
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
  hdr->used_off = g.used_off;
  hdr->proc_off = g.proc_off;
  hdr->declared_off = g.declared_off;
  hdr->hold_off = g.hold_off;
  hdr->max_procs = g.max_procs;
  hdr->created_permits = b.created;
  hdr->rate = b.rate;
  hdr->burst = b.burst;
  hdr->rate_period_ns = b.period_ns;
  hdr->policy = b.policy;
  hdr->max_bypass_ns = b.bypass_ns;
  hdr->pidns = pidns_inode();
  hdr->nonce = draw_nonce();
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  hdr->created_ns = ts_to_ns(now);
  // Publish: everything above happens-before any opener's acquire of ready.
  hdr->ready.store(kReady, std::memory_order_release);
  return 0;
}

// The configuration, checked, with its defaults (shmsem.h).
int build_of(const shmsem_config *cfg, Build *b) {
  // Read and write bits only: a setuid, setgid, sticky or executable
  // segment file in a /dev/shm without nosuid is a way to run code as its
  // owner (an unprivileged user wrote an ELF into a 04777 one and ran it).
  if (cfg->max_waiters > SHMSEM_MAX_WAITERS || (cfg->mode & ~0666u))
    return -EINVAL;
  if (cfg->policy > SHMSEM_POLICY_BOUNDED || cfg->lease_ttl_ms ||
      (cfg->policy == SHMSEM_POLICY_FIFO && cfg->max_bypass_ns) ||
      cfg->max_bypass_ns > SHMSEM_MAX_BYPASS_NS)
    return -EINVAL;
  b->policy = cfg->policy;
  b->bypass_ns = cfg->policy != SHMSEM_POLICY_BOUNDED ? 0
                 : cfg->max_bypass_ns                 ? cfg->max_bypass_ns
                                      : SHMSEM_DEFAULT_MAX_BYPASS_NS;
  if (cfg->permits > SHMSEM_MAX_PERMITS ||
      cfg->max_permits > SHMSEM_MAX_PERMITS)
    return -EINVAL;
  b->rate = cfg->rate;
  b->burst = b->period_ns = b->interval_ns = 0;
  if (cfg->rate) {
    b->burst = cfg->burst ? cfg->burst : 1;
    b->period_ns = cfg->rate_period_ns ? cfg->rate_period_ns : kNsPerSec;
    b->interval_ns = b->period_ns / cfg->rate;
    // A burst takes burst * interval to refill: at most 2^62 ns (146
    // years), which the core's arithmetic keeps exact.
    if (b->burst > SHMSEM_MAX_BURST || b->interval_ns < 1 ||
        b->interval_ns > kMaxRateIntervalNs ||
        (unsigned __int128)b->burst * b->interval_ns > kMaxRateWindowNs)
      return -EINVAL;
  } else if (cfg->burst || cfg->rate_period_ns) {
    return -EINVAL;  // a burst or period without a rate
  }
  // No concurrency limit needs a rate (else nothing limits anything).
  if (cfg->permits == 0 && !cfg->rate) return -EINVAL;
  b->created = cfg->permits;
  b->records = cfg->max_permits ? cfg->max_permits
               : cfg->permits   ? cfg->permits
                                : SHMSEM_DEFAULT_RATE_ONLY_PERMITS;
  b->capacity = cfg->permits ? cfg->permits : b->records;
  if (b->records < b->capacity) return -EINVAL;
  b->max_waiters =
      cfg->max_waiters ? cfg->max_waiters : SHMSEM_DEFAULT_MAX_WAITERS;
  return 0;
}

}  // namespace

int segment_create(const char *name, const shmsem_config *cfg, int flags,
                   shmsem_t **out) {
  if (!out) return -EINVAL;
  *out = nullptr;
  int e = check_name(name);
  if (e) return e;
  if (!cfg || flags & ~int(SHMSEM_EXCL | SHMSEM_ANY_OWNER)) return -EINVAL;
  Build build;
  e = build_of(cfg, &build);
  if (e) return e;
  mode_t mode = cfg->mode ? cfg->mode : SHMSEM_DEFAULT_MODE;
  const uid_t euid_now = geteuid();

  // Without SHMSEM_ANY_OWNER an existing semaphore is used only if the
  // caller owns it: another user may have created the name first (a
  // "squatter" with mode 0666) to make our processes use its segment.
  const uid_t *owner = (flags & SHMSEM_ANY_OWNER) ? nullptr : &euid_now;
  auto open_existing = [&]() -> int {
    int r = open_named(name, 0, owner, out);
    if (r) return r;
    // Compatible: created with the same configuration (the capacity may
    // have changed since: shmsem_set_permits), and the same queue bound
    // unless the caller left it 0 ("the default, or whatever it already
    // has"). The header fields are display and comparison only.
    // open_named() returns 0 only with *out set; the analyzer takes a
    // failed shm_open() to leave errno 0, i.e. "returned 0, *out null".
    // NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
    const Header *h = (*out)->hdr;
    if ((*out)->permits != build.records ||
        __atomic_load_n(&h->created_permits, __ATOMIC_RELAXED) !=
            build.created ||
        __atomic_load_n(&h->rate, __ATOMIC_RELAXED) != build.rate ||
        __atomic_load_n(&h->burst, __ATOMIC_RELAXED) != build.burst ||
        __atomic_load_n(&h->rate_period_ns, __ATOMIC_RELAXED) !=
            build.period_ns ||
        (*out)->bound_ns != build.bypass_ns ||
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

  // Build the whole segment in a file nobody can name yet, then give it its
  // name in one step (publish.cc): it appears complete or not at all.
  Mapping m;
  e = publish_segment(
      name, mode, geometry(build.records, build.max_waiters).total_size,
      [](void *base, void *ctx) {
        return init_segment(base, *static_cast<Build *>(ctx));
      },
      &build, &m);
  if (!e) {
    *out = created_handle(m.base, m.size);
    if (!*out) {
      e = -ENOMEM;
      munmap(m.base, m.size);
    }
  }
  if (e == -EEXIST && !(flags & SHMSEM_EXCL)) return open_existing();
  return e;
}

}  // namespace shmsem::detail
