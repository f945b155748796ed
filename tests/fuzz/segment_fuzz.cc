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
// of every size. The newer surface too: weighted acquires (blocking with a
// brief deadline or a cancel, tried, and through an async waiter that stays
// queued across ops), shmsem_set_permits growing and shrinking the
// capacity, declared hold times, and the lock-free path (a thread's lane
// and its process record) by acquire-release cycles. Between operations,
// and at the library's hook points inside them, the script may write
// anything anywhere in the segment except the lock word, as a concurrent
// writer could: raw bytes, a word of a record, or a field by name (a lease's
// link, a slot's reservation, a capacity, rate or process-record word),
// with values chosen to hurt (kNone, an index one past the table, a link
// back to an earlier record, the value just read plus or minus one), once
// or alternating at every pass of a hook point between two reads of the
// same chain. Any sanitizer report, crash, hang (-timeout) or leak is a
// finding.
//
// And two invariants: when the script is done, the writer stops, the async
// waiter is cancelled, shmsem_recover runs, and then shmsem_check must
// return 0: whatever a writer left, a recovery with the writer gone leaves
// a segment every invariant holds for (issue 24); and a permit the stat
// then shows free (nobody queued, not closed, a rate token there) must be
// taken by shmsem_try_acquire: no permanent stop once the writer stopped.
// A failure aborts with the check's message. SHMSEM_FUZZ_FINAL=repaired
// asserts them only after a recover that repaired (core.repairs moved),
// =off not at all (memory safety alone). While fixes are pending,
// SHMSEM_FUZZ_KNOWN="msg|msg..." lists messages (prefixes) that are
// printed once each and not aborted on, so that one known failure does not
// hide the others. SHMSEM_FUZZ_TRACE=1 prints what an input does.
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

#include "check.h"
#include "fuzz_input.h"
#include "handle.h"
#include "layout.h"
#include "owner.h"
#include "rate.h"
#include "testing.h"

namespace {

using namespace shmsem::detail;
using namespace shmsem::fuzz;
using shmsem::testing::HookPoint;

// The script: each read past its end yields zeros.
class Reader {
 public:
  Reader(const uint8_t *p, size_t n) : p0_(p), p_(p), n_(n) {}
  bool empty() const { return n_ == 0; }
  size_t pos() const { return size_t(p_ - p0_); }
  uint8_t u8() {
    if (!n_) return 0;
    n_--;
    return *p_++;
  }
  uint16_t u16() { return uint16_t(u8() | u8() << 8); }
  uint32_t u32() { return uint32_t(u16()) | uint32_t(u16()) << 16; }
  uint64_t u64() { return uint64_t(u32()) | uint64_t(u32()) << 32; }

 private:
  const uint8_t *p0_;
  const uint8_t *p_;
  size_t n_;
};

// A write through the writer's mapping, prepared when the op is read.
struct Poke {
  size_t off = 0;
  size_t len = 0;
  uint8_t bytes[8] = {};
};

// A value of a kPokeSym as read from the script (fuzz_input.h SymValue);
// turned into bytes when the poke is applied.
struct SymVal {
  uint8_t sel = 0;
  uint8_t state = 0;
  uint64_t raw = 0;
};

// A named field of a record, and the values to store there.
struct SymPoke {
  uint8_t field = 0;
  uint16_t idx = 0;
  SymVal a, b;
  uint8_t times = 1;  // passes left (alternating a, b)
  uint8_t done = 0;
};

// One action waiting at a hook point.
struct Pending {
  bool armed = false;
  HookPoint at{};
  HookAction act{};
  Poke poke;
  SymPoke sym;
  uint8_t arg = 0;
};

constexpr size_t kMaxLeases = 16;
constexpr size_t kMaxPending = 4;

// The state of the input being run (one at a time per process).
struct State {
  std::string name;
  int fd = -1;
  char *map = nullptr;   // the writer's mapping
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
  shmsem_waiter_t waiter;  // the async waiter (kWaiterStart)
  bool waiter_queued = false;
  uint32_t snapshots = 0;  // kSnapshot ops run in this input
};
State g;

// SHMSEM_FUZZ_TRACE=1: each op (at its script offset), each write (offset
// into the segment, value) and how long each op took, on stderr: to read
// what a finding's input does, or why one is slow.
bool g_trace = false;

enum FinalMode { kFinalCheck, kFinalIfRepaired, kFinalOff };
FinalMode g_final = kFinalCheck;
std::vector<std::string> g_known;  // SHMSEM_FUZZ_KNOWN
std::vector<bool> g_known_seen;

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
  if (g_trace) {
    uint64_t v = 0;
    memcpy(&v, p.bytes, p.len < 8 ? p.len : 8);
    fprintf(stderr, "segment_fuzz:   write @%zu len %zu value %#llx\n", p.off,
            p.len, (unsigned long long)v);
  }
  for (size_t i = 0; i < p.len; i++) {
    size_t off = p.off + i;
    if (off >= g.size || is_lock_word(off)) continue;
    __atomic_store_n(&g.map[off], char(p.bytes[i]), __ATOMIC_RELAXED);
  }
}

uint32_t val32(Reader &r) {
  uint8_t i = r.u8();
  const uint32_t table[] = {0,
                            1,
                            2,
                            3,
                            kNone,
                            kNone - 1,
                            0x7fff'ffffu,
                            0x8000'0000u,
                            0x4000'0000u,
                            g.permits,
                            g.permits - 1,
                            g.max_waiters,
                            g.max_waiters - 1,
                            g.permits + g.max_waiters,
                            kLeaseFree,
                            kLeaseHeld,
                            kLeaseReserved,
                            kSlotFree,
                            kSlotWaiting,
                            kSlotGranted,
                            kSlotCancelled,
                            kSlotClosed,
                            uint32_t(getpid()),
                            uint32_t(syscall(SYS_gettid)),
                            kReady,
                            kLayoutVersion,
                            0xffff'fffeu,
                            0x0001'0000u};
  constexpr size_t n = sizeof table / sizeof table[0];
  return i < n ? table[i] : r.u32();
}

uint64_t val64(Reader &r) {
  uint8_t i = r.u8();
  uint64_t now = mono_now();
  const uint64_t table[] = {0,
                            1,
                            ~uint64_t{0},
                            uint64_t{1} << 63,
                            ~uint64_t{0} >> 1,
                            now,
                            now + 1'000'000'000ull,
                            now - 1'000'000ull,
                            g.nonce,
                            kMagic,
                            0xffff'ffffull,
                            uint64_t{1} << 32,
                            10'000'000'000ull,
                            lease_word(kLeaseLoose, 0, 1),
                            lease_word(kLeaseHeldFast, 0, 1),
                            lease_word(kLeaseFree, kNoProc, 0),
                            lease_word(kLeaseHeld, kNoProc, 1),
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

// --- fields by name (kPokeSym) ----------------------------------------------
// Which table a field's record is in, what range its value indexes (for
// kVCount and its neighbours), and what a kVState value of it is.
enum Table : uint8_t {
  kTCore,
  kTLease,
  kTSlot,
  kTProc,
  kTLane,
  kTUsedLease,
  kTUsedSlot,
  kTDeclared
};
enum Range : uint8_t { kRLeases, kRSlots, kRProcs };
enum Kind : uint8_t { kKPlain, kKLeaseWord, kKSlotWord, kKProcState, kKGate };
struct FieldDef {
  Table table;
  uint32_t off;  // within the record
  uint8_t width;
  Range range;
  Kind kind;
};

#define SHMSEM_F(T, Rec, m, R, K) \
  FieldDef { T, uint32_t(offsetof(Rec, m)), uint8_t(sizeof(Rec::m)), R, K }
#define SHMSEM_OWNER(T, Rec, m, R)                          \
  FieldDef {                                                \
    T, uint32_t(offsetof(Rec, owner) + offsetof(Owner, m)), \
        uint8_t(sizeof(Owner::m)), R, kKPlain               \
  }
const FieldDef kFields[] = {
    SHMSEM_F(kTLease, LeaseRecord, word, kRLeases, kKLeaseWord),
    SHMSEM_F(kTLease, LeaseRecord, slot, kRSlots, kKPlain),
    SHMSEM_F(kTLease, LeaseRecord, next_free, kRLeases, kKPlain),
    SHMSEM_F(kTLease, LeaseRecord, link, kRLeases, kKPlain),
    SHMSEM_F(kTLease, LeaseRecord, used_pos, kRLeases, kKPlain),
    SHMSEM_OWNER(kTLease, LeaseRecord, pid, kRLeases),
    SHMSEM_F(kTLease, LeaseRecord, since_ns, kRLeases, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, word, kRSlots, kKSlotWord),
    SHMSEM_F(kTSlot, WaiterSlot, lease, kRLeases, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, ticket, kRSlots, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, prev, kRSlots, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, next, kRSlots, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, next_free, kRSlots, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, used_pos, kRSlots, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, weight, kRLeases, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, got, kRLeases, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, left_why, kRLeases, kKPlain),
    SHMSEM_F(kTSlot, WaiterSlot, sleeping, kRLeases, kKPlain),
    SHMSEM_OWNER(kTSlot, WaiterSlot, pid, kRSlots),
    SHMSEM_OWNER(kTSlot, WaiterSlot, tid, kRSlots),
    SHMSEM_F(kTCore, Core, available, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, held, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, reserved, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, waiting, kRSlots, kKPlain),
    SHMSEM_F(kTCore, Core, closed, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, head, kRSlots, kKPlain),
    SHMSEM_F(kTCore, Core, tail, kRSlots, kKPlain),
    SHMSEM_F(kTCore, Core, free_lease, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, free_slot, kRSlots, kKPlain),
    SHMSEM_F(kTCore, Core, watcher, kRSlots, kKPlain),
    SHMSEM_F(kTCore, Core, next_ticket, kRSlots, kKPlain),
    SHMSEM_F(kTCore, Core, n_used_leases, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, n_used_slots, kRSlots, kKPlain),
    SHMSEM_F(kTCore, Core, procs_hwm, kRProcs, kKPlain),
    SHMSEM_F(kTCore, Core, capacity, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, retired, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, retiring, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, rate_burst, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, rate_interval_ns, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, rate_tat_ns, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, gate, kRLeases, kKGate),
    SHMSEM_F(kTCore, Core, lock_seq, kRLeases, kKPlain),
    SHMSEM_F(kTProc, ProcRecord, state, kRProcs, kKProcState),
    SHMSEM_OWNER(kTProc, ProcRecord, pid, kRProcs),
    SHMSEM_OWNER(kTProc, ProcRecord, start, kRProcs),
    SHMSEM_F(kTLane, Lane, loose, kRLeases, kKPlain),
    SHMSEM_F(kTLane, Lane, acquisitions, kRLeases, kKPlain),
    FieldDef{kTUsedLease, 0, 4, kRLeases, kKPlain},
    FieldDef{kTUsedSlot, 0, 4, kRSlots, kKPlain},
    FieldDef{kTDeclared, 0, 8, kRLeases, kKPlain},
    // Layout 9, the bounded policy (appended: inputs name fields by index).
    SHMSEM_F(kTSlot, WaiterSlot, nudge, kRLeases, kKPlain),
    SHMSEM_F(kTCore, Core, hand_off, kRLeases, kKPlain),
};
#undef SHMSEM_F
#undef SHMSEM_OWNER
static_assert(sizeof kFields / sizeof kFields[0] == kFieldCount);

uint32_t range_count(Range r) {
  switch (r) {
    case kRSlots:
      return g.max_waiters;
    case kRProcs:
      return g.geo.max_procs;
    default:
      return g.permits;
  }
}

// Where field `f` of record `idx` is, and that record's index in its
// table; false if the table is empty (no waiter slots).
bool sym_locate(const FieldDef &f, uint16_t idx, size_t *off, uint32_t *rec) {
  const Geometry &geo = g.geo;
  uint32_t i = 0;
  size_t base = 0;
  switch (f.table) {
    case kTCore:
      base = kCoreOff;
      break;
    case kTLease:
      i = idx % g.permits;
      base = geo.lease_off + i * sizeof(LeaseRecord);
      break;
    case kTSlot:
      if (!g.max_waiters) return false;
      i = idx % g.max_waiters;
      base = geo.slot_off + i * sizeof(WaiterSlot);
      break;
    case kTProc:
      i = idx % geo.max_procs;
      base = geo.proc_off + i * sizeof(ProcRecord);
      break;
    case kTLane:
      i = (uint32_t(idx) >> 4) % geo.max_procs;
      base = geo.proc_off + i * sizeof(ProcRecord) +
             offsetof(ProcRecord, lanes) + (idx % kLanes) * sizeof(Lane);
      break;
    case kTUsedLease:
      i = idx % g.permits;
      base = geo.used_off + i * sizeof(uint32_t);
      break;
    case kTUsedSlot:
      if (!g.max_waiters) return false;
      i = idx % g.max_waiters;
      base = geo.used_off + (g.permits + i) * sizeof(uint32_t);
      break;
    case kTDeclared:
      i = idx % g.permits;
      base = geo.declared_off + i * sizeof(uint64_t);
      break;
  }
  *off = base + f.off;
  *rec = i;
  return true;
}

SymVal read_sym_val(Reader &r) {
  SymVal v;
  v.sel = uint8_t(r.u8() % kSymValueCount);
  if (v.sel == kVState) v.state = r.u8();
  if (v.sel == kVRaw) v.raw = r.u64();
  return v;
}

SymPoke read_sym_poke(Reader &r) {
  SymPoke p;
  p.field = uint8_t(r.u8() % kFieldCount);
  p.idx = r.u16();
  p.a = read_sym_val(r);
  return p;
}

// A state word valid for the field (or near it).
uint64_t sym_state(const FieldDef &f, uint8_t b, uint64_t cur) {
  switch (f.kind) {
    case kKLeaseWord: {
      static constexpr uint32_t kStates[] = {kLeaseFree,
                                             kLeaseHeld,
                                             kLeaseReserved,
                                             kLeaseLoose,
                                             kLeaseHeldFast,
                                             kLeaseRetired,
                                             0x0,
                                             0xF};
      uint32_t ours = g.s ? g.s->fast_proc.load(std::memory_order_relaxed) : 0;
      const uint32_t procs[] = {kNoProc, 0, ours, g.geo.max_procs};
      uint64_t gen = word_gen(cur);
      if (b & 32) gen = (gen + 1) & kGenMask;
      return lease_word(kStates[b & 7], procs[(b >> 3) & 3], gen);
    }
    case kKSlotWord: {
      static constexpr uint32_t kStates[] = {
          kSlotFree,   kSlotWaiting,    kSlotGranted, kSlotCancelled,
          kSlotClosed, kSlotLeftQueued, kSlotLeft,    0};
      return kStates[b & 7];
    }
    case kKProcState: {
      static constexpr uint32_t kStates[] = {kProcFree, kProcUsed, 0, kNone};
      return kStates[b & 3];
    }
    case kKGate:
      return b & 15;
    default:
      return b;
  }
}

uint64_t sym_value(const FieldDef &f, const SymVal &v, uint32_t rec,
                   uint64_t cur) {
  const uint64_t n = range_count(f.range);
  const bool wide = f.width == 8;
  switch (SymValue(v.sel)) {
    case kVZero:
      return 0;
    case kVOne:
      return 1;
    case kVTwo:
      return 2;
    case kVNone:
      return wide ? ~uint64_t{0} : kNone;
    case kVMember:
      return wide ? ~uint64_t{0} - 1 : kMember;
    case kVU32Max:
      return 0xffff'ffffu;
    case kVInt31:
      return 0x7fff'ffffu;
    case kVBit31:
      return 0x8000'0000u;
    case kVCount:
      return n;
    case kVCountPlus:
      return n + 1;
    case kVLast:
      return n - 1;
    case kVSelf:
      return rec;
    case kVPrev:
      return rec ? rec - 1 : n - 1;
    case kVNext:
      return rec + 1;
    case kVInc:
      return cur + 1;
    case kVDec:
      return cur - 1;
    case kVPermits:
      return g.permits;
    case kVWaiters:
      return g.max_waiters;
    case kVProcs:
      return g.geo.max_procs;
    case kVNow:
      return mono_now();
    case kVNowPlus:
      return mono_now() + 1'000'000'000ull;
    case kVNowMinus:
      return mono_now() - 1'000'000ull;
    case kVMaxInterval:
      return kMaxRateIntervalNs;
    case kVMaxIntervalPlus:
      return kMaxRateIntervalNs + 1;
    case kVU64Max:
      return ~uint64_t{0};
    case kVI64Max:
      return ~uint64_t{0} >> 1;
    case kVOurPid:
      return uint32_t(getpid());
    case kVOurTid:
      return uint32_t(syscall(SYS_gettid));
    case kVState:
      return sym_state(f, v.state, cur);
    default:
      return v.raw;
  }
}

// Store the value into the field, through the writer's mapping (never the
// lock word, which no field names).
void apply_sym(uint8_t field, uint16_t idx, const SymVal &v) {
  const FieldDef &f = kFields[field % kFieldCount];
  size_t off;
  uint32_t rec;
  if (!sym_locate(f, idx, &off, &rec) || off + f.width > g.size) return;
  char *p = g.map + off;
  uint64_t val;
  if (f.width == 8) {
    auto *q = reinterpret_cast<uint64_t *>(p);
    val = sym_value(f, v, rec, __atomic_load_n(q, __ATOMIC_RELAXED));
    __atomic_store_n(q, val, __ATOMIC_RELAXED);
  } else {
    auto *q = reinterpret_cast<uint32_t *>(p);
    val = uint32_t(sym_value(f, v, rec, __atomic_load_n(q, __ATOMIC_RELAXED)));
    __atomic_store_n(q, uint32_t(val), __ATOMIC_RELAXED);
  }
  if (g_trace)
    fprintf(stderr,
            "segment_fuzz:   write @%zu len %u value %#llx (field %u of "
            "record %u)\n",
            off, f.width, (unsigned long long)val, field % kFieldCount, rec);
}

// One pass of a hook point: a, then b at the next pass, then a again ...
// until `times` passes are done. Returns true while more are left.
bool step_sym(SymPoke &p) {
  apply_sym(p.field, p.idx, (p.done & 1) ? p.b : p.a);
  p.done++;
  return p.done < p.times;
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
  shmsem_lease_t l = g.leases[k];
  shmsem_release(g.s, &l);
  // A call made at a hook point inside the release may have taken or
  // released kept leases meanwhile: the list is looked at again. (The
  // harness erased past its end once: a negative-size memmove.)
  if (!keep && k < g.leases.size() && memcmp(&g.leases[k], &l, sizeof l) == 0)
    g.leases.erase(g.leases.begin() + long(k));
}

// Hook points at which the caller holds no lock, where another thread's
// call may come in. (At the others, a call would wait for our own lock.)
constexpr HookPoint kCallPoints[] = {
    HookPoint::ACQUIRE_TAKEN,    HookPoint::ACQUIRE_ENQUEUED,
    HookPoint::WAIT_WOKEN,       HookPoint::WAIT_TIMEOUT_FIRED,
    HookPoint::WAIT_CANCEL_SEEN, HookPoint::RELEASE_GRANTED,
    HookPoint::RECLAIM_SCANNED};
constexpr size_t kNumCallPoints = sizeof kCallPoints / sizeof kCallPoints[0];
// Every point an operation on an open segment can reach.
constexpr int kNumPokePoints = int(HookPoint::CREATE_OPENED);
// A kAtHookSym point byte (fuzz_input.h kWriterPoints).
HookPoint writer_point(uint8_t b) {
  return b < 0x80 ? kWriterPoints[b % kNumWriterPoints]
                  : HookPoint(b % kNumPokePoints);
}

void run_action(const Pending &a) {
  shmsem_lease_t l;
  switch (a.act) {
    case kActPokeField:
    case kActPokeField64:
      apply(a.poke);
      break;
    case kActRelease:
      release_kept(a.arg, false);
      break;
    case kActTryAcquire:
      if (g.s && shmsem_try_acquire(g.s, &l) == 0) keep_lease(l);
      break;
    case kActAcquireBrief:
      acquire_brief(a.arg, 0);
      break;
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
    case kActSetPermits:
      if (g.s) shmsem_set_permits(g.s, a.arg % (g.permits + 2));
      break;
    default:
      break;
  }
}

// How often each hook point was passed (printed at exit under
// SHMSEM_FUZZ_TRACE: which steps the corpus reaches).
uint64_t g_hook_hits[int(HookPoint::kCount)];
uint64_t g_hook_acts[int(HookPoint::kCount)];

void on_hook(HookPoint p, void *) {
  g_hook_hits[int(p)]++;
  if (g.depth) return;  // not inside an action's own calls
  g.depth++;
  if (g.fire_armed && p == g.fire_at) {
    g.fire_armed = false;
    shmsem_cancel(&g.cancel);
  }
  for (Pending &a : g.pending) {
    if (!a.armed || a.at != p) continue;
    g_hook_acts[int(p)]++;
    if (g_trace)
      fprintf(stderr, "segment_fuzz:   at %s:\n",
              shmsem::testing::hook_name(p));
    if (a.act == kActPokeSym) {
      a.armed = step_sym(a.sym);  // again at the next pass, alternating
    } else {
      a.armed = false;
      run_action(a);
    }
  }
  g.depth--;
}

void arm(const Pending &a) {
  for (Pending &slot : g.pending) {
    if (!slot.armed) {
      slot = a;
      slot.armed = true;
      return;
    }
  }
}

// The tail of kAtHookSym and of kActPokeSym: field, index, a, b, times.
SymPoke read_sym_pokes(Reader &r) {
  SymPoke p = read_sym_poke(r);
  p.b = read_sym_val(r);
  p.times = uint8_t(1 + r.u8() % 8);
  return p;
}

void op_at_hook_sym(Reader &r) {
  Pending a;
  a.at = writer_point(r.u8());
  a.act = kActPokeSym;
  a.sym = read_sym_pokes(r);
  arm(a);
}

void op_at_hook(Reader &r) {
  uint8_t point = r.u8();
  Pending a;
  a.act = HookAction(r.u8() % kActionCount);
  switch (a.act) {
    case kActPokeField:
      a.poke = read_field_poke(r, 4);
      break;
    case kActPokeField64:
      a.poke = read_field_poke(r, 8);
      break;
    case kActRelease:
    case kActAcquireBrief:
    case kActSetPermits:
      a.arg = r.u8();
      break;
    case kActPokeSym:
      a.sym = read_sym_pokes(r);
      break;
    default:
      break;
  }
  if (a.act == kActPokeSym)
    a.at = writer_point(point);
  else if (a.act == kActPokeField || a.act == kActPokeField64)
    a.at = HookPoint(point % kNumPokePoints);
  else
    a.at = kCallPoints[point % kNumCallPoints];
  arm(a);
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
// were): one way per call, in turn within an input (each costs a few
// hundred microseconds under the sanitizers: owners judged, the file
// mapped or read): the writable handle, a read-only mapping with short
// buffers, a SHMSEM_SNAPSHOT copy.
//
// Through the writable handle, a lock word naming a (dead) holder is
// taken over first: shmsem_inspect waits 50 ms for such a holder to go
// before it reads without the lock (a monitor must not hang on a stopped
// holder), and the fuzzer would spend most of its time there
// (inspect_test covers that wait).
void op_snapshot() {
  switch (g.snapshots++ % 3) {
    case 0:
      if (g.s && (reinterpret_cast<Core *>(g.map + kCoreOff)
                      ->lock_word.load(std::memory_order_relaxed) &
                  kLockTidMask)) {
        struct shmsem_stat st;
        shmsem_stat(g.s, &st);
      }
      inspect_through(g.s, ~0u);
      break;
    case 1: {
      shmsem_t *ro = nullptr;
      if (shmsem_open(g.name.c_str(), SHMSEM_RDONLY, &ro) == 0) {
        inspect_through(ro, 1);
        shmsem_detach(ro);
      }
      break;
    }
    default: {
      shmsem_t *copy = nullptr;  // as `shmsem status` reads it
      if (shmsem_open(g.name.c_str(), SHMSEM_SNAPSHOT, &copy) == 0) {
        inspect_through(copy, ~0u);
        shmsem_detach(copy);
      }
    }
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
  shmsem_try_acquire_n(ro, 2, &l);
  shmsem_acquire_until_n(ro, 1, &past, &l);
  shmsem_set_permits(ro, 0);
  if (!g.leases.empty()) {
    shmsem_declare_hold(ro, &g.leases[0], 1000);
    shmsem_release(ro, &g.leases[0]);
  }
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
  if (flags & 2)
    __atomic_store_n(&core->lock_owner.tid, int32_t(tid), __ATOMIC_RELEASE);
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

// --- the newer surface -----------------------------------------------------
// A weight: 0 and max_permits + 1 are -EINVAL, the rest 1..max_permits.
uint32_t weight_of(uint8_t b) { return b % (g.permits + 2); }

timespec brief_deadline(uint8_t us) {
  return ts_of(mono_now() + uint64_t(us % (kMaxBriefUs + 1)) * 1000);
}

void op_try_acquire_n(Reader &r) {
  uint32_t n = weight_of(r.u8());
  shmsem_lease_t l;
  if (g.s && shmsem_try_acquire_n(g.s, n, &l) == 0) keep_lease(l);
}

// A weighted acquire that never sleeps past kMaxBriefUs: a deadline, or a
// cancel fired before the call or from a point where the lock is not held
// (firing takes it).
void op_acquire_brief_n(Reader &r) {
  uint32_t n = weight_of(r.u8());
  uint8_t us = r.u8();
  uint8_t f = r.u8();
  if (!g.s) return;
  timespec dl = brief_deadline(us);
  shmsem_lease_t l;
  int e;
  if (f & kNCancelled) {
    shmsem_cancel_t c;
    shmsem_cancel_init(&c);
    shmsem_cancel(&c);
    e = shmsem_acquire_ex_n(g.s, n, nullptr, &c, 0, &l);
  } else if (f & kNCancelLater) {
    static constexpr HookPoint kFirePoints[] = {
        HookPoint::ACQUIRE_ENQUEUED, HookPoint::WAIT_WOKEN,
        HookPoint::WAIT_TIMEOUT_FIRED, HookPoint::WAIT_SLEEPING};
    shmsem_cancel_init(&g.cancel);
    g.fire_at = kFirePoints[(f >> 4) & 3];
    g.fire_armed = true;
    e = shmsem_acquire_ex_n(g.s, n, &dl, &g.cancel, 0, &l);
    g.fire_armed = false;
  } else if (f & kNUntil) {
    e = shmsem_acquire_until_n(g.s, n, &dl, &l);
  } else {
    e = shmsem_acquire_ex_n(g.s, n, &dl, nullptr,
                            (f & 8) ? SHMSEM_WAIT_INTERRUPTIBLE : 0, &l);
  }
  if (e == 0) keep_lease(l);
}

void op_declare_hold(Reader &r) {
  uint8_t k = r.u8();
  uint8_t what = r.u8();
  uint8_t nsb = r.u8();
  if (!g.s) return;
  static constexpr uint64_t kHolds[] = {
      0,           1, 999, 1'000'000'000ull, kMaxDeclaredNs, kMaxDeclaredNs + 1,
      ~uint64_t{0}};
  uint64_t ns = kHolds[nsb % (sizeof kHolds / sizeof kHolds[0])];
  shmsem_lease_t l{};
  if (!g.leases.empty() && !(what & 1)) {
    l = g.leases[k % g.leases.size()];
  } else {  // a made-up token that looks right: any record, its generation
    l.sem = g.nonce;
    l.index = k % g.permits;
    const auto *rec = reinterpret_cast<const LeaseRecord *>(
        g.map + g.geo.lease_off + l.index * sizeof(LeaseRecord));
    l.gen = word_gen(rec->word.load(std::memory_order_relaxed));
  }
  if (what & 2) l.gen++;
  shmsem_declare_hold(g.s, &l, ns);
}

// The lock-free path: a thread that releases the permit it took takes it
// back through its lane next time (gate shut), and its release frees it
// with one CAS. `count` rounds, the last lease kept if bit 7.
void op_fast_cycle(Reader &r) {
  uint8_t c = r.u8();
  if (!g.s) return;
  for (int i = 0; i <= (c & 7); i++) {
    shmsem_lease_t l;
    if (shmsem_try_acquire(g.s, &l) != 0) break;
    if ((c & 0x80) && i == (c & 7)) {
      keep_lease(l);
      break;
    }
    shmsem_release(g.s, &l);
  }
}

// The async waiter: started (and left queued across ops), polled,
// cancelled; cancelled before the handle goes (a waiter left queued on a
// detached handle is the caller's use after free, shmsem.h).
void waiter_done(int e, const shmsem_lease_t &l) {
  if (e == -EINPROGRESS) return;
  g.waiter_queued = false;
  if (e == 0) keep_lease(l);
}

void op_waiter_start(Reader &r) {
  uint32_t n = weight_of(r.u8());
  uint8_t us = r.u8();
  if (!g.s || g.waiter_queued) return;
  timespec dl = brief_deadline(us);
  shmsem_lease_t l;
  // us 0: no deadline (polls never block; cancelled at the latest at the
  // end of the input).
  int e = shmsem_waiter_start_n(g.s, &g.waiter, n, us ? &dl : nullptr, &l);
  if (e == SHMSEM_QUEUED)
    g.waiter_queued = true;
  else if (e == 0)
    keep_lease(l);
}

void op_waiter_poll() {
  if (!g.waiter_queued) return;
  shmsem_lease_t l;
  waiter_done(shmsem_waiter_poll(&g.waiter, &l), l);
}

void waiter_cancel() {
  if (!g.waiter_queued) return;
  shmsem_lease_t l;
  waiter_done(shmsem_waiter_cancel(&g.waiter, &l), l);
  g.waiter_queued = false;
}

const char *const kOpNames[] = {"TryAcquire",
                                "AcquirePast",
                                "AcquireBrief",
                                "AcquireCancelled",
                                "AcquireCancelLater",
                                "Release",
                                "ReleaseToken",
                                "Shutdown",
                                "Recover",
                                "Check",
                                "Stat",
                                "Snapshot",
                                "PokeBytes",
                                "PokeField",
                                "PokeField64",
                                "AtHook",
                                "Reopen",
                                "ReadOnly",
                                "CreateExisting",
                                "DeadLockHolder",
                                "TryAcquireN",
                                "AcquireBriefN",
                                "SetPermits",
                                "DeclareHold",
                                "FastCycle",
                                "WaiterStart",
                                "WaiterPoll",
                                "WaiterCancel",
                                "PokeSym",
                                "AtHookSym"};
static_assert(sizeof kOpNames / sizeof kOpNames[0] == kOpCount);

void run_op_body(Reader &r, Op op);

void run_op(Reader &r) {
  keep_lock_takeable();
  size_t at = r.pos();
  Op op = Op(r.u8() % kOpCount);
  if (!g_trace) return run_op_body(r, op);
  fprintf(stderr, "segment_fuzz: @%zu %s\n", at, kOpNames[op]);
  uint64_t t0 = mono_now();
  run_op_body(r, op);
  fprintf(stderr, "segment_fuzz: %-18s %8.1f us\n", kOpNames[op],
          double(mono_now() - t0) / 1000);
}

void run_op_body(Reader &r, Op op) {
  shmsem_lease_t l;
  switch (op) {
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
        timespec dl =
            ts_of(mono_now() + uint64_t(us % (kMaxBriefUs + 1)) * 1000);
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
    case kAcquireCancelLater:
      op_acquire_cancel_later(r);
      break;
    case kRelease: {
      uint8_t i = r.u8();
      uint8_t keep = r.u8();
      release_kept(i, keep & 1);
      break;
    }
    case kReleaseToken:
      op_release_token(r);
      break;
    case kShutdown:
      if (g.s) shmsem_shutdown(g.s);
      break;
    case kRecover:
      if (g.s) shmsem_recover(g.s);
      break;
    case kCheck:
      if (g.s) shmsem_check(g.s);
      break;
    case kStat:
      op_stat(r);
      break;
    case kSnapshot:
      op_snapshot();
      break;
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
    case kPokeField:
      apply(read_field_poke(r, 4));
      break;
    case kPokeField64:
      apply(read_field_poke(r, 8));
      break;
    case kAtHook:
      op_at_hook(r);
      break;
    case kReopen:
      waiter_cancel();
      shmsem_detach(g.s);
      g.s = nullptr;
      shmsem_open(g.name.c_str(), 0, &g.s);
      break;
    case kReadOnly:
      op_read_only();
      break;
    case kCreateExisting:
      op_create_existing(r);
      break;
    case kDeadLockHolder:
      op_dead_lock_holder(r);
      break;
    case kTryAcquireN:
      op_try_acquire_n(r);
      break;
    case kAcquireBriefN:
      op_acquire_brief_n(r);
      break;
    case kSetPermits: {
      uint8_t v = r.u8();
      if (g.s) shmsem_set_permits(g.s, v % (g.permits + 2));
      break;
    }
    case kDeclareHold:
      op_declare_hold(r);
      break;
    case kFastCycle:
      op_fast_cycle(r);
      break;
    case kWaiterStart:
      op_waiter_start(r);
      break;
    case kWaiterPoll:
      op_waiter_poll();
      break;
    case kWaiterCancel:
      waiter_cancel();
      break;
    case kPokeSym: {
      SymPoke p = read_sym_poke(r);
      apply_sym(p.field, p.idx, p.a);
      break;
    }
    case kAtHookSym:
      op_at_hook_sym(r);
      break;
    default:
      break;
  }
}

// The segment file for this input, written through the writer's mapping.
// One file per process, kept under its name and mapped between inputs
// (munmap and unlink cost more than the rest of a typical input on a
// virtual machine); each input rewrites every byte of it. Returns false if
// it could not be made (a system limit, not a finding).
// At least geometry(kMaxPermits, kMaxWaiters).total_size (checked at
// start: 168 KiB with layout version 8, most of it the lanes' hold times).
constexpr size_t kMaxFile = 256 * 1024;

bool open_file() {
  if (g.fd >= 0) return true;
  g.fd = shm_open(g.name.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (g.fd < 0) return false;
  // Mapped once past the end of the (empty) file: only [0, g.size) is ever
  // touched, after ftruncate has made it exist.
  void *m =
      mmap(nullptr, kMaxFile, PROT_READ | PROT_WRITE, MAP_SHARED, g.fd, 0);
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
    // Process records wholly past the image are as a fresh segment has
    // them (FREE, no lane naming a lease): zero bytes there would each be
    // a record in no state, and an image long enough to reach the end of
    // the table is longer than -max_len.
    for (uint32_t p = 0; p < g.geo.max_procs; p++) {
      size_t off = g.geo.proc_off + p * sizeof(ProcRecord);
      if (off < n) continue;
      auto *rec = reinterpret_cast<ProcRecord *>(g.map + off);
      rec->state.store(kProcFree, std::memory_order_relaxed);
      for (Lane &ln : rec->lanes)
        ln.loose.store(kNone, std::memory_order_relaxed);
    }
    hdr->magic = kMagic;
    hdr->layout_version = kLayoutVersion;
    hdr->total_size = g.geo.total_size;
    hdr->permits = permits;
    hdr->max_waiters = max_waiters;
    hdr->lease_off = g.geo.lease_off;
    hdr->slot_off = g.geo.slot_off;
    hdr->used_off = g.geo.used_off;
    hdr->proc_off = g.geo.proc_off;
    hdr->declared_off = g.geo.declared_off;
    hdr->hold_off = g.geo.hold_off;
    hdr->max_procs = g.geo.max_procs;
    hdr->ready.store(kReady, std::memory_order_release);
  }
  switch (h.pidns % 4) {
    case kPidnsOurs:
      hdr->pidns = g.pidns;
      break;
    case kPidnsUnknown:
      hdr->pidns = 0;
      break;
    case kPidnsOther:
      hdr->pidns = g.pidns + 1;
      break;
    default:
      break;
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

// A broken invariant: abort with its message, unless SHMSEM_FUZZ_KNOWN
// lists it (then say so once).
void finding(const char *when, const char *msg) {
  for (size_t i = 0; i < g_known.size(); i++) {
    if (strncmp(msg, g_known[i].c_str(), g_known[i].size()) != 0) continue;
    if (!g_known_seen[i])
      fprintf(stderr, "segment_fuzz: known, not aborted on: %s\n", msg);
    g_known_seen[i] = true;
    return;
  }
  fprintf(stderr, "==%d== ERROR: shmsem fuzz: %s: %s\n", int(getpid()), when,
          msg);
  abort();
}

// The invariant of issue 24: with the writer gone, a recover leaves a
// segment that passes every check. Writes stop first (hook actions
// disarmed), our async wait is withdrawn (a queued waiter of a live thread
// is allowed to stay, but it is ours: the input ends here).
void final_check() {
  for (Pending &a : g.pending) a.armed = false;
  g.fire_armed = false;
  waiter_cancel();
  if (!g.s || g_final == kFinalOff) return;
  keep_lock_takeable();
  const auto *core = reinterpret_cast<const Core *>(g.map + kCoreOff);
  const uint64_t repairs = core->repairs.load(std::memory_order_relaxed);
  const uint64_t t0 = mono_now();
  int rec = shmsem_recover(g.s);
  if (g_trace)
    fprintf(stderr, "segment_fuzz: final recover %d, %.1f us\n", rec,
            double(mono_now() - t0) / 1000);
  if (rec < 0) return;  // -EXDEV, -EBADF: nothing was recovered
  if (g_final == kFinalIfRepaired &&
      core->repairs.load(std::memory_order_relaxed) == repairs)
    return;
  char msg[160];
  int e = shmsem::detail::check(g.s, msg, sizeof msg);
  if (e == -EUCLEAN)
    return finding("shmsem_check after shmsem_recover (the writer stopped)",
                   msg);
  if (e != 0) return;
  // And no permanent stop (issue 24, "the stated promise"): a permit the
  // stat shows free, with nobody queued and a token in the bucket, is
  // taken by a try.
  // (The core's rate words, not the stat's `rate`, which is the header's
  // rate as created: a writer may have set an interval of up to a day on
  // a semaphore created without one, a rate limit like any other.)
  struct shmsem_stat st;
  const bool rated = reinterpret_cast<const Core *>(g.map + kCoreOff)
                         ->rate_interval_ns.load(std::memory_order_relaxed);
  if (shmsem_stat(g.s, &st) != 0 || st.closed || st.waiting || !st.available ||
      ((st.rate || rated) && !st.rate_tokens))
    return;
  shmsem_lease_t l;
  e = shmsem_try_acquire(g.s, &l);
  if (e == 0) {
    shmsem_release(g.s, &l);
    return;
  }
  snprintf(msg, sizeof msg,
           "try_acquire fails (%s) on a free permit (available %u of %u, "
           "rate tokens %u)",
           shmsem_strerror(e), st.available, st.permits, st.rate_tokens);
  finding("after shmsem_recover (the writer stopped)", msg);
}

void print_hook_counts() {
  for (int i = 0; i < int(HookPoint::kCount); i++)
    fprintf(stderr, "segment_fuzz: hook %-24s passed %10llu, acted at %8llu\n",
            shmsem::testing::hook_name(HookPoint(i)),
            (unsigned long long)g_hook_hits[i],
            (unsigned long long)g_hook_acts[i]);
}

void finish_input() {
  final_check();
  for (Pending &a : g.pending) a.armed = false;
  g.fire_armed = false;
  shmsem_detach(g.s);
  g.s = nullptr;
  g.leases.clear();
  g.size = 0;
  g.dead_lock_used = false;
  g.snapshots = 0;
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
  if (geometry(kMaxPermits, kMaxWaiters).total_size > kMaxFile) {
    fprintf(stderr, "segment_fuzz: kMaxFile is below the largest segment\n");
    abort();
  }
  if (const char *f = getenv("SHMSEM_FUZZ_FINAL")) {
    if (!strcmp(f, "off"))
      g_final = kFinalOff;
    else if (!strcmp(f, "repaired"))
      g_final = kFinalIfRepaired;
  }
  g_trace = getenv("SHMSEM_FUZZ_TRACE") != nullptr;
  if (g_trace) atexit(print_hook_counts);
  if (const char *k = getenv("SHMSEM_FUZZ_KNOWN")) {
    std::string all = k;
    for (size_t at = 0; at <= all.size();) {
      size_t bar = all.find('|', at);
      if (bar == std::string::npos) bar = all.size();
      if (bar > at) g_known.push_back(all.substr(at, bar - at));
      at = bar + 1;
    }
    g_known_seen.assign(g_known.size(), false);
  }
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
