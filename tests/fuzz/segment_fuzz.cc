// libFuzzer target: the segment is input, not memory (docs/DESIGN.md §7a).
//
// Each input (format: fuzz_input.h) becomes a real POSIX shm segment, written
// through a mapping of the fuzzer's own that stands for another process with
// write access. The target then opens it with the library and runs the op
// script over it: acquires that never block (a past deadline, a few
// microseconds, or a cancel fired before or during the wait), releases of
// granted and of made-up tokens, shutdown, recover, check, stat and its
// quantiles, a read-only handle, reopening, and shmsem_inspect (what the
// CLI's snapshot and every monitor read a segment with) through the
// writable handle, a read-only one and a SHMSEM_SNAPSHOT copy, with buffers
// of every size. Between operations, and at the library's hook
// points inside them, the script may write anything anywhere in the segment
// except the lock word, as a concurrent writer could. Any sanitizer report,
// crash, hang (-timeout) or leak is a finding.
//
// Nothing here sends a signal or waits without a deadline: the only waits
// are the library's, and each one has a deadline of at most kMaxBriefUs, or
// is cancelled before it can sleep. The lock word is cleared unless it names
// a thread that provably does not exist (a live holder may block everyone
// forever by design, §7a), so no input can hang on a live holder.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

#include "fuzz_input.h"
#include "handle.h"
#include "layout.h"
#include "owner.h"
#include "testing.h"

namespace {

using namespace shmsem::detail;
using namespace shmsem::fuzz;
using shmsem::testing::HookPoint;

// The script: each read past its end yields zeros.
class Reader {
 public:
  Reader(const uint8_t *p, size_t n) : p_(p), n_(n) {}
  bool empty() const { return n_ == 0; }
  uint8_t u8() {
    if (!n_) return 0;
    n_--;
    return *p_++;
  }
  uint16_t u16() { return uint16_t(u8() | u8() << 8); }
  uint32_t u32() { return uint32_t(u16()) | uint32_t(u16()) << 16; }
  uint64_t u64() { return uint64_t(u32()) | uint64_t(u32()) << 32; }

 private:
  const uint8_t *p_;
  size_t n_;
};

// A write through the writer's mapping, prepared when the op is read.
struct Poke {
  size_t off = 0;
  size_t len = 0;
  uint8_t bytes[8] = {};
};

// One action waiting at a hook point.
struct Pending {
  bool armed = false;
  HookPoint at{};
  HookAction act{};
  Poke poke;
  uint8_t arg = 0;
};

constexpr size_t kMaxLeases = 16;
constexpr size_t kMaxPending = 4;

// The state of the input being run (one at a time per process).
struct State {
  std::string name;
  int fd = -1;
  char *map = nullptr;  // the writer's mapping
  size_t size = 0;       // of this input's segment
  size_t file_size = 0;  // of the file now
  uint64_t pidns = 0;    // ours
  shmsem_t *s = nullptr;
  uint32_t permits = 1, max_waiters = 0;
  Geometry geo{};
  uint64_t nonce = 0;
  bool judge = false;  // this process may judge the segment's owners dead
  bool dead_lock_used = false;
  std::vector<shmsem_lease_t> leases;
  Pending pending[kMaxPending];
  shmsem_cancel_t cancel;
  bool fire_armed = false;
  HookPoint fire_at{};
  int depth = 0;
};
State g;

uint64_t mono_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

timespec ts_of(uint64_t ns) {
  timespec ts;
  ts.tv_sec = time_t(ns / 1'000'000'000ull);
  ts.tv_nsec = long(ns % 1'000'000'000ull);
  return ts;
}

// The writer never touches the lock word: a value naming a live thread
// would block every caller, which §7a allows. kDeadLockHolder is the one
// exception, with a holder that provably does not exist.
bool is_lock_word(size_t off) {
  return off >= kCoreOff && off < kCoreOff + sizeof(uint32_t);
}

void apply(const Poke &p) {
  for (size_t i = 0; i < p.len; i++) {
    size_t off = p.off + i;
    if (off >= g.size || is_lock_word(off)) continue;
    __atomic_store_n(&g.map[off], char(p.bytes[i]), __ATOMIC_RELAXED);
  }
}

uint32_t val32(Reader &r) {
  uint8_t i = r.u8();
  const uint32_t table[] = {
      0, 1, 2, 3, kNone, kNone - 1, 0x7fff'ffffu, 0x8000'0000u, 0x4000'0000u,
      g.permits, g.permits - 1, g.max_waiters, g.max_waiters - 1,
      g.permits + g.max_waiters, kLeaseFree, kLeaseHeld, kLeaseReserved,
      kSlotFree, kSlotWaiting, kSlotGranted, kSlotCancelled, kSlotClosed,
      uint32_t(getpid()), uint32_t(syscall(SYS_gettid)), kReady,
      kLayoutVersion, 0xffff'fffeu, 0x0001'0000u};
  constexpr size_t n = sizeof table / sizeof table[0];
  return i < n ? table[i] : r.u32();
}

uint64_t val64(Reader &r) {
  uint8_t i = r.u8();
  uint64_t now = mono_now();
  const uint64_t table[] = {
      0, 1, ~uint64_t{0}, uint64_t{1} << 63, ~uint64_t{0} >> 1, now,
      now + 1'000'000'000ull, now - 1'000'000ull, g.nonce, kMagic,
      0xffff'ffffull, uint64_t{1} << 32, 10'000'000'000ull,
      lease_word(kLeaseLoose, 0, 1), lease_word(kLeaseHeldFast, 0, 1),
      lease_word(kLeaseFree, kNoProc, 0), lease_word(kLeaseHeld, kNoProc, 1),
      lease_word(kLeaseHeldFast, kMaxProcs, 2)};
  constexpr size_t n = sizeof table / sizeof table[0];
  return i < n ? table[i] : r.u64();
}

// The offset of a field: a record (by region and index) and a word in it.
size_t field_off(uint8_t region, uint16_t idx, uint8_t word, size_t width) {
  switch (region % kRegionCount) {
    case kRegionLease:
      return g.geo.lease_off + (idx % g.permits) * sizeof(LeaseRecord) +
             width * (word % (sizeof(LeaseRecord) / width));
    case kRegionSlot:
      if (g.max_waiters)
        return g.geo.slot_off + (idx % g.max_waiters) * sizeof(WaiterSlot) +
               width * (word % (sizeof(WaiterSlot) / width));
      [[fallthrough]];
    case kRegionCore:
      return kCoreOff + width * (word % (sizeof(Core) / width));
    case kRegionUsed:
      return g.geo.used_off +
             sizeof(uint32_t) * (idx % (g.permits + g.max_waiters));
    default:
      return width * (word % (kCoreOff / width));
  }
}

Poke read_field_poke(Reader &r, size_t width) {
  uint8_t region = r.u8();
  uint16_t idx = r.u16();
  uint8_t word = r.u8();
  Poke p;
  p.off = field_off(region, idx, word, width);
  p.len = width;
  if (width == 4) {
    uint32_t v = val32(r);
    memcpy(p.bytes, &v, 4);
  } else {
    uint64_t v = val64(r);
    memcpy(p.bytes, &v, 8);
  }
  return p;
}

void keep_lease(const shmsem_lease_t &l) {
  if (g.leases.size() < kMaxLeases) g.leases.push_back(l);
}

void acquire_brief(uint8_t us, unsigned flags) {
  if (!g.s) return;
  timespec dl = ts_of(mono_now() + uint64_t(us % (kMaxBriefUs + 1)) * 1000);
  shmsem_lease_t l;
  if (shmsem_acquire_ex(g.s, &dl, nullptr, flags, &l) == 0) keep_lease(l);
}

void release_kept(uint8_t i, bool keep) {
  if (!g.s || g.leases.empty()) return;
  size_t k = i % g.leases.size();
  shmsem_release(g.s, &g.leases[k]);
  if (!keep) g.leases.erase(g.leases.begin() + long(k));
}

// Hook points at which the caller holds no lock, where another thread's
// call may come in. (At the others, a call would wait for our own lock.)
constexpr HookPoint kCallPoints[] = {
    HookPoint::ACQUIRE_TAKEN,      HookPoint::ACQUIRE_ENQUEUED,
    HookPoint::WAIT_WOKEN,         HookPoint::WAIT_TIMEOUT_FIRED,
    HookPoint::WAIT_CANCEL_SEEN,   HookPoint::RELEASE_GRANTED,
    HookPoint::RECLAIM_SCANNED};
constexpr size_t kNumCallPoints = sizeof kCallPoints / sizeof kCallPoints[0];
// Every point an operation on an open segment can reach.
constexpr int kNumPokePoints = int(HookPoint::CREATE_OPENED);

void run_action(const Pending &a) {
  shmsem_lease_t l;
  switch (a.act) {
    case kActPokeField:
    case kActPokeField64: apply(a.poke); break;
    case kActRelease: release_kept(a.arg, false); break;
    case kActTryAcquire:
      if (g.s && shmsem_try_acquire(g.s, &l) == 0) keep_lease(l);
      break;
    case kActAcquireBrief: acquire_brief(a.arg, 0); break;
    case kActShutdown:
      if (g.s) shmsem_shutdown(g.s);
      break;
    case kActRecover:
      if (g.s) shmsem_recover(g.s);
      break;
    case kActStat: {
      struct shmsem_stat st;
      if (g.s) shmsem_stat(g.s, &st);
      break;
    }
    default: break;
  }
}

void on_hook(HookPoint p, void *) {
  if (g.depth) return;  // not inside an action's own calls
  g.depth++;
  if (g.fire_armed && p == g.fire_at) {
    g.fire_armed = false;
    shmsem_cancel(&g.cancel);
  }
  for (Pending &a : g.pending) {
    if (a.armed && a.at == p) {
      a.armed = false;
      run_action(a);
    }
  }
  g.depth--;
}

void op_at_hook(Reader &r) {
  uint8_t point = r.u8();
  Pending a;
  a.act = HookAction(r.u8() % kActionCount);
  switch (a.act) {
    case kActPokeField: a.poke = read_field_poke(r, 4); break;
    case kActPokeField64: a.poke = read_field_poke(r, 8); break;
    case kActRelease:
    case kActAcquireBrief: a.arg = r.u8(); break;
    default: break;
  }
  bool call = a.act != kActPokeField && a.act != kActPokeField64;
  a.at = call ? kCallPoints[point % kNumCallPoints]
              : HookPoint(point % kNumPokePoints);
  a.armed = true;
  for (Pending &slot : g.pending) {
    if (!slot.armed) {
      slot = a;
      return;
    }
  }
}

void op_acquire_cancel_later(Reader &r) {
  uint8_t point = r.u8();
  uint8_t us = r.u8();
  if (!g.s) return;
  static constexpr HookPoint kFirePoints[] = {HookPoint::ACQUIRE_ENQUEUED,
                                              HookPoint::WAIT_WOKEN,
                                              HookPoint::WAIT_TIMEOUT_FIRED};
  shmsem_cancel_init(&g.cancel);
  g.fire_at = kFirePoints[point % 3];
  g.fire_armed = true;
  // No deadline only where the fire is certain to come before any sleep:
  // a queued acquire always reaches ACQUIRE_ENQUEUED first.
  timespec dl = ts_of(mono_now() + uint64_t(us % (kMaxBriefUs + 1)) * 1000);
  bool forever = g.fire_at == HookPoint::ACQUIRE_ENQUEUED && us == 0;
  shmsem_lease_t l;
  if (shmsem_acquire_ex(g.s, forever ? nullptr : &dl, &g.cancel, 0, &l) == 0)
    keep_lease(l);
  g.fire_armed = false;
}

void op_release_token(Reader &r) {
  uint8_t k = r.u8();
  uint8_t what = r.u8();
  uint64_t gen = r.u64();
  uint32_t index = r.u32();
  if (!g.s) return;
  shmsem_lease_t l{};
  if (!g.leases.empty() && (what & 1)) l = g.leases[k % g.leases.size()];
  l.sem = (what & 2) ? gen ^ index : g.nonce;
  if (what & 4) l.index = index;
  if (what & 8) {
    l.gen = gen;
  } else if (what & 16) {
    // The record's current generation: a token that looks right.
    const auto *rec = reinterpret_cast<const LeaseRecord *>(
        g.map + g.geo.lease_off + (l.index % g.permits) * sizeof(LeaseRecord));
    l.gen = word_gen(rec->word.load(std::memory_order_relaxed));
  }
  if (what & 32) l.__reserved = index | 1;
  shmsem_release(g.s, &l);
}

void op_stat(Reader &r) {
  uint8_t qb = r.u8();
  if (!g.s) return;
  struct shmsem_stat st;
  if (shmsem_stat(g.s, &st) != 0) return;
  double q = qb == 0 ? 0.0 : qb == 1 ? NAN : qb == 2 ? 1.5 : qb / 255.0;
  shmsem_stat_wait_quantile(&st, q);
  shmsem_stat_wait_quantile(&st, 0.5);
  shmsem_stat_wait_quantile(&st, 1.0);
  shmsem_stat_hold_quantile(&st, q);
  shmsem_stat_hold_quantile(&st, 1.0);
}

// shmsem_inspect through `s` with room for `room` holders and waiters
// (at most the geometry's), touching everything it filled in as a
// renderer would; every result is allowed, a crash is not.
void inspect_through(shmsem_t *s, uint32_t room) {
  if (!s) return;
  const uint32_t nh = room < g.permits ? room : g.permits;
  const uint32_t nw = room < g.max_waiters ? room : g.max_waiters;
  std::vector<struct shmsem_holder> holders(nh);
  std::vector<struct shmsem_waiter_info> waiters(nw);
  struct shmsem_inspection in;
  int r = shmsem_inspect(s, &in, holders.data(), nh, waiters.data(), nw);
  if (r != 0 && r != -ENOBUFS && r != -EUCLEAN) return;
  uint64_t n = in.overdue + in.oldest_lease_since_ns;
  for (uint32_t i = 0; i < nh && i < in.nholders; i++)
    n += holders[i].lease + holders[i].weight + uint32_t(holders[i].pid) +
         holders[i].declared_ns;
  for (uint32_t i = 0; i < nw && i < in.nwaiters; i++)
    n += waiters[i].position + waiters[i].slot + waiters[i].reserved;
  shmsem_hist_quantile(in.stat.wait_hist, 0.99);
  (void)n;
}

// The op takes no argument (the script format and the corpus stay as they
// were): every way, with short buffers through the read-only mapping.
void op_snapshot() {
  inspect_through(g.s, ~0u);
  shmsem_t *ro = nullptr;
  if (shmsem_open(g.name.c_str(), SHMSEM_RDONLY, &ro) == 0) {
    inspect_through(ro, 1);
    shmsem_detach(ro);
  }
  shmsem_t *copy = nullptr;  // as `shmsem status` reads it
  if (shmsem_open(g.name.c_str(), SHMSEM_SNAPSHOT, &copy) == 0) {
    inspect_through(copy, ~0u);
    shmsem_detach(copy);
  }
}

void op_read_only() {
  shmsem_t *ro = nullptr;
  if (shmsem_open(g.name.c_str(), SHMSEM_RDONLY, &ro) != 0) return;
  struct shmsem_stat st;
  shmsem_stat(ro, &st);
  shmsem_check(ro);
  shmsem_lease_t l;
  shmsem_try_acquire(ro, &l);
  timespec past{0, 0};
  shmsem_acquire_until(ro, &past, &l);
  if (!g.leases.empty()) shmsem_release(ro, &g.leases[0]);
  shmsem_shutdown(ro);
  shmsem_recover(ro);
  shmsem_detach(ro);
}

void op_create_existing(Reader &r) {
  uint8_t p = r.u8();
  uint8_t w = r.u8();
  shmsem_config cfg{};
  cfg.permits = p ? p : g.permits;
  cfg.max_waiters = w == 1 ? g.max_waiters : w;
  shmsem_t *h = nullptr;
  // The name exists, so this only opens (and compares): it never creates.
  if (shmsem_create(g.name.c_str(), &cfg, (p & 0x80) ? SHMSEM_ANY_OWNER : 0,
                    &h) == 0)
    shmsem_detach(h);
}

// The lock word names a thread that almost surely does not exist (just
// below PID_MAX_LIMIT, the highest tid the word can hold): the
// next locker takes over after 1 ms and repairs. Once per input (it costs
// that millisecond), and only where owners may be judged.
void op_dead_lock_holder(Reader &r) {
  uint8_t t = r.u8();
  uint8_t flags = r.u8();
  if (!g.s || !may_judge(g.s->pidns) || g.dead_lock_used) return;
  g.dead_lock_used = true;
  auto *core = reinterpret_cast<Core *>(g.map + kCoreOff);
  uint32_t tid = kLockTidMask - t;
  if (flags & 2) __atomic_store_n(&core->lock_owner.tid, int32_t(tid), __ATOMIC_RELEASE);
  core->lock_word.store(tid | ((flags & 1) ? kLockWaiters : 0));
}

// A dead holder in the lock word is taken over only by a handle that may
// judge owners; one that may not (the header's PID namespace was written
// to 0 and the segment reopened) waits for it forever, as designed
// ("unknown counts as alive", docs/DESIGN.md §7). Such a lock word stands
// for a live holder then, which the writer must not leave (§7a).
void keep_lock_takeable() {
  if (!g.s || may_judge(g.s->pidns)) return;
  reinterpret_cast<Core *>(g.map + kCoreOff)->lock_word.store(0);
}

void run_op(Reader &r) {
  keep_lock_takeable();
  shmsem_lease_t l;
  switch (Op(r.u8() % kOpCount)) {
    case kTryAcquire:
      if (g.s && shmsem_try_acquire(g.s, &l) == 0) keep_lease(l);
      break;
    case kAcquirePast: {
      timespec past{0, 0};
      if (g.s && shmsem_acquire_until(g.s, &past, &l) == 0) keep_lease(l);
      break;
    }
    case kAcquireBrief: {
      uint8_t us = r.u8();
      uint8_t f = r.u8();
      if (!g.s) break;
      if (f & 0x40) {  // a malformed deadline
        timespec bad{0, -1};
        shmsem_acquire_until(g.s, &bad, &l);
      } else if (f & 0x20) {
        timespec dl = ts_of(mono_now() + uint64_t(us % (kMaxBriefUs + 1)) * 1000);
        if (shmsem_acquire_until(g.s, &dl, &l) == 0) keep_lease(l);
      } else {
        acquire_brief(us, (f & 1 ? SHMSEM_WAIT_INTERRUPTIBLE : 0) |
                              (f & 0x80 ? 1u << 7 : 0));
      }
      break;
    }
    case kAcquireCancelled: {
      if (!g.s) break;
      shmsem_cancel_t c;
      shmsem_cancel_init(&c);
      shmsem_cancel(&c);
      // No deadline: a fired handle returns before any wait.
      shmsem_acquire_ex(g.s, nullptr, &c, 0, &l);
      break;
    }
    case kAcquireCancelLater: op_acquire_cancel_later(r); break;
    case kRelease: {
      uint8_t i = r.u8();
      uint8_t keep = r.u8();
      release_kept(i, keep & 1);
      break;
    }
    case kReleaseToken: op_release_token(r); break;
    case kShutdown:
      if (g.s) shmsem_shutdown(g.s);
      break;
    case kRecover:
      if (g.s) shmsem_recover(g.s);
      break;
    case kCheck:
      if (g.s) shmsem_check(g.s);
      break;
    case kStat: op_stat(r); break;
    case kSnapshot: op_snapshot(); break;
    case kPokeBytes: {
      Poke p;
      p.off = r.u16();
      size_t len = r.u8() % 17;
      while (len) {  // in chunks of up to 8 bytes
        p.len = len < 8 ? len : 8;
        for (size_t i = 0; i < p.len; i++) p.bytes[i] = r.u8();
        apply(p);
        p.off += p.len;
        len -= p.len;
      }
      break;
    }
    case kPokeField: apply(read_field_poke(r, 4)); break;
    case kPokeField64: apply(read_field_poke(r, 8)); break;
    case kAtHook: op_at_hook(r); break;
    case kReopen:
      shmsem_detach(g.s);
      g.s = nullptr;
      shmsem_open(g.name.c_str(), 0, &g.s);
      break;
    case kReadOnly: op_read_only(); break;
    case kCreateExisting: op_create_existing(r); break;
    case kDeadLockHolder: op_dead_lock_holder(r); break;
    default: break;
  }
}

// The segment file for this input, written through the writer's mapping.
// One file per process, kept under its name and mapped between inputs
// (munmap and unlink cost more than the rest of a typical input on a
// virtual machine); each input rewrites every byte of it. Returns false if
// it could not be made (a system limit, not a finding).
constexpr size_t kMaxFile = 64 * 1024;  // > geometry(kMaxPermits, kMaxWaiters)
static_assert(kMaxFile >= sizeof(Header) + kCoreOff + sizeof(Core) +
                              kMaxPermits * sizeof(LeaseRecord) +
                              kMaxWaiters * sizeof(WaiterSlot) +
                              (kMaxPermits + kMaxWaiters) * sizeof(uint32_t) +
                              kMinProcs * sizeof(ProcRecord));

bool open_file() {
  if (g.fd >= 0) return true;
  g.fd = shm_open(g.name.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (g.fd < 0) return false;
  // Mapped once past the end of the (empty) file: only [0, g.size) is ever
  // touched, after ftruncate has made it exist.
  void *m = mmap(nullptr, kMaxFile, PROT_READ | PROT_WRITE, MAP_SHARED, g.fd, 0);
  if (m == MAP_FAILED) {
    close(g.fd);
    g.fd = -1;
    return false;
  }
  g.map = static_cast<char *>(m);
  return true;
}

bool build_segment(const InputHeader &h, const uint8_t *image, size_t len) {
  bool raw = h.mode & kModeRawHeader;
  uint32_t permits = 1 + h.permits % kMaxPermits;
  uint32_t max_waiters = h.max_waiters % (kMaxWaiters + 1);
  g.geo = geometry(permits, max_waiters);
  if (!open_file()) return false;
  size_t size = raw ? (len < kMaxFile ? len : kMaxFile) : g.geo.total_size;
  if (size != g.file_size) {
    if (ftruncate(g.fd, off_t(size)) != 0) return false;
    g.file_size = size;
  }
  g.size = size;
  size_t n = len < g.size ? len : g.size;
  memcpy(g.map, image, n);
  memset(g.map + n, 0, g.size - n);
  if (g.size < sizeof(Header)) return true;
  auto *hdr = reinterpret_cast<Header *>(g.map);
  if (!raw) {
    hdr->magic = kMagic;
    hdr->layout_version = kLayoutVersion;
    hdr->total_size = g.geo.total_size;
    hdr->permits = permits;
    hdr->max_waiters = max_waiters;
    hdr->lease_off = g.geo.lease_off;
    hdr->slot_off = g.geo.slot_off;
    hdr->used_off = g.geo.used_off;
    hdr->ready.store(kReady, std::memory_order_release);
  }
  switch (h.pidns % 4) {
    case kPidnsOurs: hdr->pidns = g.pidns; break;
    case kPidnsUnknown: hdr->pidns = 0; break;
    case kPidnsOther: hdr->pidns = g.pidns + 1; break;
    default: break;
  }
  g.judge = may_judge(hdr->pidns);
  if (g.size >= kCoreOff + sizeof(uint32_t)) {
    auto *core = reinterpret_cast<Core *>(g.map + kCoreOff);
    uint32_t w = core->lock_word.load(std::memory_order_relaxed);
    Owner o{};
    o.tid = int32_t(w & kLockTidMask);
    bool keep = (h.mode & kModeKeepDeadLockHolder) && g.judge && o.tid > 0 &&
                thread_verdict(o) == Verdict::kDead;
    if (w && !keep) core->lock_word.store(0, std::memory_order_relaxed);
  }
  return true;
}

void finish_input() {
  for (Pending &a : g.pending) a.armed = false;
  g.fire_armed = false;
  shmsem_detach(g.s);
  g.s = nullptr;
  g.leases.clear();
  g.size = 0;
  g.dead_lock_used = false;
}

void remove_file() {
  if (g.fd < 0) return;
  munmap(g.map, kMaxFile);
  close(g.fd);
  shm_unlink(g.name.c_str());
  g.fd = -1;
  g.map = nullptr;
}

// Segments left by fuzzer processes that died mid-input (a crash, a
// timeout): /dev/shm/shmsem-fuzz-<pid> whose process is gone.
void remove_stale_segments() {
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  while (dirent *e = readdir(d)) {
    int pid;
    char tail;
    if (sscanf(e->d_name, "shmsem-fuzz-%d%c", &pid, &tail) != 1) continue;
    std::string proc = "/proc/" + std::to_string(pid);
    if (access(proc.c_str(), F_OK) != 0 && errno == ENOENT)
      shm_unlink(("/" + std::string(e->d_name)).c_str());
  }
  closedir(d);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  g.name = "/shmsem-fuzz-" + std::to_string(getpid());
  g.pidns = pidns_inode();
  // Brief deadlines should be brief: futex timeouts get 50 us of slack
  // otherwise.
  prctl(PR_SET_TIMERSLACK, 1UL);
  shmsem::testing::set_hook(on_hook, nullptr);
  remove_stale_segments();
  atexit(remove_file);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < sizeof(InputHeader)) return 0;
  InputHeader h;
  memcpy(&h, data, sizeof h);
  data += sizeof h;
  size -= sizeof h;
  size_t script_len = h.script_len < size ? h.script_len : size;
  Reader script(data, script_len);
  if (build_segment(h, data + script_len, size - script_len) &&
      shmsem_open(g.name.c_str(), 0, &g.s) == 0) {
    g.permits = g.s->permits;
    g.max_waiters = g.s->max_waiters;
    g.geo = geometry(g.permits, g.max_waiters);
    g.nonce = g.s->nonce;
    for (uint32_t i = 0; i < kMaxOps && !script.empty(); i++) run_op(script);
  }
  finish_input();
  return 0;
}
