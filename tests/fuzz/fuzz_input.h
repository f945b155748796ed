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
// ready marker, sizes and offsets are rewritten for a small geometry, so
// the rest of the image is what the library meets; and a lock word that
// names a thread which may be alive, as far as the handle in use can tell,
// is cleared (a live holder is allowed to block every caller:
// docs/DESIGN.md §7a).
#ifndef SHMSEM_TESTS_FUZZ_FUZZ_INPUT_H
#define SHMSEM_TESTS_FUZZ_FUZZ_INPUT_H

#include <stdint.h>

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
  kOpCount
};

// kAtHook actions: run once when the library reaches the hook point, to
// stand for another process writing, or another thread calling, right then.
// Calls only at the points where the caller holds no lock.
enum HookAction : uint8_t {
  kActPokeField,    // u8 region, u16 idx, u8 word, val32
  kActPokeField64,  // u8 region, u16 idx, u8 word, val64
  kActRelease,      // u8 lease
  kActTryAcquire,   // -
  kActAcquireBrief, // u8 us
  kActShutdown,     // -
  kActRecover,      // -
  kActStat,         // -
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

}  // namespace shmsem::fuzz

#endif  // SHMSEM_TESTS_FUZZ_FUZZ_INPUT_H
