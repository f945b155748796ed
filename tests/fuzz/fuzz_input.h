// The input format of the segment fuzzer (segment_fuzz.cc), shared with the
// seed generator (make_seeds.cc): which segment to build from the bytes, and
// the script of operations to run on it.
//
//   offset 0                InputHeader (8 bytes, little-endian)
//   offset 8                the op script, script_len bytes (Op, then its
//                           arguments; a script that runs out reads zeros)
//   offset 8 + script_len   the segment image, copied over the segment from
//                           its offset 0 (shorter: zero-filled; longer: cut)
//
// The fuzzer repairs only what would make every input useless or would make
// it block forever: with a fixed header (the default) the magic, version,
// ready marker, sizes and offsets (of every table: leases, slots, the
// arrays in use, declared holds, process records, lane hold times) are
// rewritten for a small geometry, so the rest of the image is what the
// library meets, and process records wholly past the image's end are
// FREE with every lane naming no lease, as a fresh segment has them (the
// table ends beyond -max_len); and a lock word that
// names a thread which may be alive, as far as the handle in use can tell,
// is cleared (a live holder is allowed to block every caller:
// docs/DESIGN.md §7a).
#ifndef SHMSEM_TESTS_FUZZ_FUZZ_INPUT_H
#define SHMSEM_TESTS_FUZZ_FUZZ_INPUT_H

#include <stdint.h>

#include "hooks.h"

namespace shmsem::fuzz {

struct InputHeader {
  uint8_t mode;          // kMode* bits
  uint8_t pidns;         // PidnsMode (mod 4)
  uint16_t permits;      // fixed header: clamped into [1, kMaxPermits]
  uint16_t max_waiters;  // fixed header: clamped into [0, kMaxWaiters]
  uint16_t script_len;
};
static_assert(sizeof(InputHeader) == 8);

// Raw header: the image is the whole file, header included, as it is; the
// file is exactly as long as the image.
inline constexpr uint8_t kModeRawHeader = 1u << 0;
// Keep a lock word naming a thread that provably does not exist (a holder
// that died inside the lock): the next locker takes over after its first
// check interval (1 ms) and repairs. Otherwise the lock word is cleared.
inline constexpr uint8_t kModeKeepDeadLockHolder = 1u << 1;

enum PidnsMode : uint8_t {
  kPidnsOurs = 0,     // header.pidns = ours: owners may be judged dead
  kPidnsUnknown = 1,  // 0: the handle opens but judges nobody
  kPidnsOther = 2,    // ours + 1: open fails with -EXDEV
  kPidnsImage = 3,    // whatever the image holds
};

inline constexpr uint32_t kMaxPermits = 64;
inline constexpr uint32_t kMaxWaiters = 64;
inline constexpr uint32_t kMaxOps = 64;      // per input
inline constexpr uint32_t kMaxBriefUs = 32;  // longest deadline of a wait

// The operations; the first script byte of each, modulo kOpCount. The
// arguments each reads are listed beside it (u8, u16, u32, u64 script
// values; "val32"/"val64" are a table index byte, then a raw value only if
// the index is past the table).
enum Op : uint8_t {
  kTryAcquire,          // -
  kAcquirePast,         // -                    acquire_until(a past deadline)
  kAcquireBrief,        // u8 us, u8 flags      acquire_ex(now + us, flags)
  kAcquireCancelled,    // -                    acquire_ex(no deadline, fired)
  kAcquireCancelLater,  // u8 point, u8 us      fired from a hook point
  kRelease,             // u8 lease, u8 keep    release one we were granted
  kReleaseToken,        // u8 lease, u8 what, u64 gen, u32 index
  kShutdown,            // -
  kRecover,             // -
  kCheck,               // -
  kStat,                // u8 q                 stat, its quantiles
  kSnapshot,            // -                    shmsem_inspect, every handle
  kPokeBytes,           // u16 off, u8 len, bytes   through the 2nd mapping
  kPokeField,           // u8 region, u16 idx, u8 word, val32
  kPokeField64,         // u8 region, u16 idx, u8 word, val64
  kAtHook,              // u8 point, u8 action, action's args (see kAction*)
  kReopen,              // -                    detach, open again
  kReadOnly,            // -                    every call on an RDONLY handle
  kCreateExisting,      // u8 permits, u8 max_waiters   create without EXCL
  kDeadLockHolder,      // u8 tid, u8 flags     lock word: a dead thread
  // The newer surface (appended: the ops above keep their numbers, so the
  // corpus and tests/fuzz/regressions/ mean what they meant).
  kTryAcquireN,    // u8 n                 try_acquire_n
  kAcquireBriefN,  // u8 n, u8 us, u8 flags    acquire_ex_n / until_n
  kSetPermits,     // u8 permits           set_permits (grow, shrink)
  kDeclareHold,    // u8 lease, u8 what, u8 ns   declare_hold
  kFastCycle,      // u8 count             try_acquire + release, again
  kWaiterStart,    // u8 n, u8 us          waiter_start_n (async)
  kWaiterPoll,     // -
  kWaiterCancel,   // -
  kPokeSym,        // u8 field, u16 idx, sym value    field F of record i
  kAtHookSym,      // u8 point, u8 field, u16 idx, sym value a,
                   //   sym value b, u8 times: a, b, a, ... at each pass
  kOpCount
};

// kAcquireBriefN flags.
inline constexpr uint8_t kNUntil = 1u << 0;        // acquire_until_n
inline constexpr uint8_t kNCancelLater = 1u << 1;  // fired at a hook point
inline constexpr uint8_t kNCancelled = 1u << 2;    // fired before the call
// Bits 4-5: the hook point of kNCancelLater (ACQUIRE_ENQUEUED, WAIT_WOKEN,
// WAIT_TIMEOUT_FIRED, WAIT_CHAIN_READ).

// kAtHook actions: run once when the library reaches the hook point, to
// stand for another process writing, or another thread calling, right then.
// Calls only at the points where the caller holds no lock.
enum HookAction : uint8_t {
  kActPokeField,     // u8 region, u16 idx, u8 word, val32
  kActPokeField64,   // u8 region, u16 idx, u8 word, val64
  kActRelease,       // u8 lease
  kActTryAcquire,    // -
  kActAcquireBrief,  // u8 us
  kActShutdown,      // -
  kActRecover,       // -
  kActStat,          // -
  kActSetPermits,    // u8 permits
  kActPokeSym,       // as kAtHookSym's tail: u8 field, u16 idx, a, b, u8 times
  kActionCount
};

// kPokeField regions: the record an index and word number select.
enum Region : uint8_t {
  kRegionCore,    // word of Core (idx unused)
  kRegionLease,   // word of lease[idx % permits]
  kRegionSlot,    // word of slot[idx % max_waiters]
  kRegionUsed,    // used_leases[] / used_slots[] entry idx
  kRegionHeader,  // word of Header (idx unused)
  kRegionCount
};

// The hook points of kAtHookSym whose point byte is below 0x80 (byte modulo
// the table's length): where a writer between two reads hurts most. Bytes
// from 0x80 on pick any point an open segment reaches (byte modulo
// CREATE_OPENED).
using detail::HookPoint;
inline constexpr HookPoint kWriterPoints[] = {HookPoint::WAIT_CHAIN_READ,
                                              HookPoint::RELEASE_CHAIN_READ,
                                              HookPoint::REPAIR_CHAINS_READ,
                                              HookPoint::RELEASE_LOCKED,
                                              HookPoint::RELEASE_CHOSEN,
                                              HookPoint::RELEASE_RESERVED,
                                              HookPoint::RELEASE_FREED,
                                              HookPoint::WAIT_RETURN_LOCKED,
                                              HookPoint::WAIT_CONSUME_COMMITTED,
                                              HookPoint::ACQUIRE_LOCKED,
                                              HookPoint::ACQUIRE_LEASE_POPPED,
                                              HookPoint::ENQUEUE_COMMITTED,
                                              HookPoint::CAPACITY_SET,
                                              HookPoint::CAPACITY_ONE,
                                              HookPoint::RECLAIM_SCANNED,
                                              HookPoint::RECLAIM_LOCKED,
                                              HookPoint::RECLAIM_ONE,
                                              HookPoint::REPAIR_LOCKED,
                                              HookPoint::FAST_ACQUIRE_READ,
                                              HookPoint::FAST_RELEASE_NAMED,
                                              HookPoint::FAST_RELEASE_FREED,
                                              HookPoint::FAST_HANDOFF_LOCKED,
                                              HookPoint::PROC_NAMED,
                                              HookPoint::GATE_OPENED,
                                              HookPoint::CHECK_LEASE_READ,
                                              HookPoint::CANCEL_LOCKED,
                                              HookPoint::WAIT_CANCEL_SEEN,
                                              HookPoint::WAIT_TIMEOUT_FIRED,
                                              HookPoint::LOCK_TAKEN,
                                              HookPoint::INSPECT_SCANNED};
inline constexpr uint32_t kNumWriterPoints =
    sizeof kWriterPoints / sizeof kWriterPoints[0];
static_assert(kNumWriterPoints < 0x80);
// The point byte that picks `p` from the table (seeds write it).
constexpr uint8_t writer_point_byte(HookPoint p) {
  for (uint32_t i = 0; i < kNumWriterPoints; i++)
    if (kWriterPoints[i] == p) return uint8_t(i);
  return 0xff;  // not in the table
}

// kPokeSym fields: field F of record i, by name (offsetof over layout.h),
// so that a poke lands on a link, a count or a state word rather than on
// padding. The record index is the u16 modulo the table's length; a lane
// is idx bits 0-3 (the lane) and 4-15 (the process record).
enum Field : uint8_t {
  // LeaseRecord[i % permits]
  kFLeaseWord,
  kFLeaseSlot,
  kFLeaseNextFree,
  kFLeaseLink,
  kFLeaseUsedPos,
  kFLeaseOwnerPid,
  kFLeaseSince,
  // WaiterSlot[i % max_waiters] (Core::head with no slots)
  kFSlotWord,
  kFSlotLease,
  kFSlotTicket,
  kFSlotPrev,
  kFSlotNext,
  kFSlotNextFree,
  kFSlotUsedPos,
  kFSlotWeight,
  kFSlotGot,
  kFSlotLeftWhy,
  kFSlotSleeping,
  kFSlotOwnerPid,
  kFSlotOwnerTid,
  // Core (i unused)
  kFAvailable,
  kFHeld,
  kFReserved,
  kFWaiting,
  kFClosed,
  kFHead,
  kFTail,
  kFFreeLease,
  kFFreeSlot,
  kFWatcher,
  kFNextTicket,
  kFNUsedLeases,
  kFNUsedSlots,
  kFProcsHwm,
  kFCapacity,
  kFRetired,
  kFRetiring,
  kFRateBurst,
  kFRateInterval,
  kFRateTat,
  kFGate,
  kFLockSeq,
  // ProcRecord[i % max_procs]
  kFProcState,
  kFProcOwnerPid,
  kFProcOwnerStart,
  // ProcRecord[(i >> 4) % max_procs].lanes[i % 16]
  kFLaneLoose,
  kFLaneAcquisitions,
  // used_leases[i % permits], used_slots[i % max_waiters], declared[i]
  kFUsedLease,
  kFUsedSlot,
  kFDeclared,
  kFSlotNudge,  // layout 9: the bounded policy
  kFCoreHandOff,
  kFieldCount
};

// Symbolic values of a kPokeSym (one byte; chosen when the poke is applied,
// so "the current value + 1" is the value at that moment). For a 64-bit
// field 32-bit constants are zero-extended, except kVNone: all ones.
enum SymValue : uint8_t {
  kVZero,
  kVOne,
  kVTwo,
  kVNone,
  kVMember,
  kVU32Max,
  kVInt31,
  kVBit31,
  kVCount,      // the record count of the field's table: first out of range
  kVCountPlus,  // count + 1
  kVLast,       // count - 1
  kVSelf,       // this record's own index (a link to itself: a loop)
  kVPrev,       // index - 1 (a link back to an earlier record: a loop)
  kVNext,       // index + 1
  kVInc,        // current value + 1
  kVDec,        // current value - 1
  kVPermits,
  kVWaiters,
  kVProcs,  // the geometry's counts
  kVNow,
  kVNowPlus,
  kVNowMinus,  // monotonic ns, + 1 s, - 1 ms
  kVMaxInterval,
  kVMaxIntervalPlus,
  kVU64Max,
  kVI64Max,
  kVOurPid,
  kVOurTid,
  kVState,  // then u8: a state word valid for the field (lease: bits 0-2
            // the state, 3-4 the process record, 5 the next generation)
  kVRaw,    // then the raw value (u32, or u64 for a 64-bit field)
  kSymValueCount
};

}  // namespace shmsem::fuzz

#endif  // SHMSEM_TESTS_FUZZ_FUZZ_INPUT_H
