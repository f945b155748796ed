// The shared-memory layout of a semaphore segment. Everything here lives in
// /dev/shm and is read and written by many processes, each mapping it at its
// own address: only fixed-width integers, indices and offsets, no pointers.
// docs/DESIGN.md section 3 is the long form.
#ifndef SHMSEM_SRC_LAYOUT_H
#define SHMSEM_SRC_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include <shmsem/shmsem.h>

namespace shmsem::detail {

inline constexpr size_t kCacheLine = 64;
inline constexpr uint64_t kMagic = 0x0100'4d45'534d'4853ull;  // "SHMSEM\0\1"
inline constexpr uint32_t kLayoutVersion = 9;
inline constexpr uint32_t kReady = 0x5245'4459u;  // "READY", stored last
inline constexpr uint32_t kNone = 0xffff'ffffu;   // "no index"
// LeaseRecord::slot of a HELD record that is not the one its weighted
// lease's token names: no token may release it alone (section 13).
inline constexpr uint32_t kMember = 0xffff'fffeu;
// The lock word: a tid (at most 2^22 on Linux) and one flag.
inline constexpr uint32_t kLockWaiters = 0x8000'0000u;
// Flipped by every takeover, so a takeover by a thread that reuses the dead
// holder's tid still changes the word (lock.cc, DESIGN.md section 2).
inline constexpr uint32_t kLockTakeover = 0x4000'0000u;
// Tids are below PID_MAX_LIMIT (2^22).
inline constexpr uint32_t kLockTidMask = 0x003f'ffffu;

// Lease record states: the top 4 bits of LeaseRecord::word. Distinct values
// other than 0x0 and 0xF, so that zeroed or 0xff-filled memory never decodes
// as a valid state. FREE, HELD and RESERVED change only under the lock; LOOSE
// and HELD_FAST are the lock-free path's (fastpath.h), and every change of a
// word in one of those two states is a CAS, by anyone.
enum LeaseState : uint32_t {
  kLeaseFree = 0x3,      // on the free list (under the lock)
  kLeaseHeld = 0x5,      // held; `owner` names it; listed in used_leases
  kLeaseReserved = 0x6,  // granted to waiter `slot`; listed
  kLeaseLoose = 0x9,     // free, off the free list, named by a lane of `proc`
  kLeaseHeldFast = 0xA,  // held by process record `proc`; not listed
  kLeaseRetired = 0xC,   // above the capacity (a shrink): nobody's; not listed
};
// The lease word: state (4 bits) | process record (12 bits) | generation
// (48 bits). One word, so that one CAS both checks a token's generation and
// changes the state (an exactly-once release needs nothing else), and a
// fast-path holder is named by the same store that makes it a holder.
inline constexpr uint32_t kNoProc = 0xfff;
inline constexpr uint64_t kGenMask = (uint64_t{1} << 48) - 1;
inline constexpr uint32_t word_state(uint64_t w) { return uint32_t(w >> 60); }
inline constexpr uint32_t word_proc(uint64_t w) {
  return uint32_t(w >> 48) & 0xfff;
}
inline constexpr uint64_t word_gen(uint64_t w) { return w & kGenMask; }
inline constexpr uint64_t lease_word(uint32_t state, uint32_t proc,
                                     uint64_t gen) {
  return uint64_t{state} << 60 | uint64_t{proc & 0xfff} << 48 |
         (gen & kGenMask);
}

// Waiter slot states; this value is the slot's futex word.
enum SlotState : uint32_t {
  kSlotFree = 0x534c'0001u,
  kSlotWaiting = 0x534c'0002u,
  kSlotGranted = 0x534c'0003u,
  kSlotCancelled = 0x534c'0004u,
  kSlotClosed = 0x534c'0005u,
  // The owner left without the lock: its limit ran out while another
  // process held the lock (waiter.cc). Nobody's waiter any more; the next
  // lock holder that meets the slot frees it (grant.cc sweep_left()).
  // LEFT_QUEUED came from WAITING: still linked, still counted in
  // `waiting`, never granted. LEFT came from GRANTED (its lease is still
  // RESERVED for it, and is passed on), CANCELLED or CLOSED: not linked.
  kSlotLeftQueued = 0x534c'0006u,
  kSlotLeft = 0x534c'0007u,
};
enum LeftWhy : uint32_t {
  kLeftTimedOut = 0,   // counted in timeouts (also any other value)
  kLeftCancelled = 1,  // -ECANCELED or -EINTR: counted in cancellations
  kLeftCounted = 2,    // CANCELLED or CLOSED before: counted already
};
inline bool slot_left(uint32_t word) {
  return word == kSlotLeftQueued || word == kSlotLeft;
}

// Who owns a record. A PID alone is not an identity (PIDs are recycled), so
// the owner also records what names that very process for the life of the
// boot: its pidfs inode (Linux 6.9+) and its start time (field 22 of
// /proc/<pid>/stat); either may be 0 when it could not be learnt. Waiter
// slots also name the waiting thread (tid and its pidfs inode), because a
// wait belongs to the thread that waits: exec kills it while the process
// lives on. Leases belong to the process (tid = 0). docs/DESIGN.md §7,
// "What counts as dead".
struct Owner {
  int32_t pid;
  int32_t tid;
  uint64_t start;
  uint64_t ino;
  uint64_t tino;
};
static_assert(sizeof(Owner) == 32);
// The process part of an owner: what a lease records.
inline Owner process_of(Owner o) {
  o.tid = 0;
  o.tino = 0;
  return o;
}

struct Header {
  uint64_t magic;
  uint32_t layout_version;
  std::atomic<uint32_t> ready;  // kReady, stored (release) last at create
  uint64_t total_size;
  uint32_t permits;
  uint32_t max_waiters;
  uint64_t lease_off;
  uint64_t slot_off;
  uint64_t used_off;    // used_leases[permits] then used_slots[max_waiters]
  uint64_t pidns;       // inode of the creator's PID namespace (0: unknown)
  uint64_t created_ns;  // CLOCK_REALTIME of creation, for display only
  uint64_t nonce;       // random per creation: tokens name their semaphore
  uint64_t proc_off;    // procs[max_procs]
  uint32_t max_procs;
  // The configuration it was created with (shmsem_create compares a
  // caller's with it; the capacity itself lives in Core and changes).
  // `permits` above is the number of lease records: the maximum capacity.
  uint32_t created_permits;  // 0: no concurrency limit (rate only)
  uint32_t rate;             // acquisitions per rate_period_ns; 0 none
  uint32_t burst;
  uint64_t rate_period_ns;
  // declared[permits]: each record's declared hold time (shmsem_declare_hold;
  // decl_word() below). Reporting only; nothing in the protocol reads it.
  uint64_t declared_off;
  uint64_t hold_off;  // holds[max_procs * kLanes] (LaneHold)
  // SHMSEM_POLICY_*, and the bounded policy's max_bypass_ns (0 under FIFO):
  // copied into the handle at open, checked (handle.h bound_ns).
  uint32_t policy;
  uint32_t pad1;
  uint64_t max_bypass_ns;
};
static_assert(sizeof(Header) <= 3 * kCacheLine);

// A declared hold time: the low 24 bits of the generation it was declared
// for, and up to 2^40 - 1 us (12.7 days; rounded up to whole us). Stale
// (another generation) once the lease is released and granted again, so a
// grant never has to clear it.
inline constexpr uint32_t kDeclBits = 40;
inline constexpr uint64_t kDeclMask = (uint64_t{1} << kDeclBits) - 1;
inline constexpr uint64_t kMaxDeclaredNs = SHMSEM_MAX_DECLARED_NS;
static_assert(kMaxDeclaredNs == kDeclMask * 1000);
inline constexpr uint64_t decl_word(uint64_t gen, uint64_t hold_ns) {
  return (gen & 0xff'ffff) << kDeclBits | ((hold_ns + 999) / 1000 & kDeclMask);
}
// The hold time (ns) declared for generation `gen`, or 0.
inline constexpr uint64_t decl_for(uint64_t word, uint64_t gen) {
  return (word >> kDeclBits) == (gen & 0xff'ffff) ? (word & kDeclMask) * 1000
                                                  : 0;
}

struct alignas(kCacheLine) LeaseRecord {
  std::atomic<uint64_t> word;  // state | proc | gen (above); the commit word
  uint32_t slot;  // RESERVED: the slot it is granted to; HELD: kMember or not
  uint32_t next_free;  // free-list link (rebuildable)
  Owner owner;         // HELD: the process (tid, tino are 0); else stale
  uint32_t used_pos;   // index in used_leases while HELD/RESERVED (rebuildable)
  // The next record of the same reservation (RESERVED for one slot) or of
  // the same weighted lease (HELD under one token), or kNone. Section 13.
  uint32_t link;
  std::atomic<uint64_t> since_ns;  // coarse monotonic time of the grant
};
static_assert(sizeof(LeaseRecord) == kCacheLine);

// Process records (fastpath.h): one per process that uses the semaphore,
// registered under the lock at its first acquire and freed only once the
// process is proven dead. A HELD_FAST lease names its holder's record in
// its word. Each thread of the process has a lane (a process-local index
// below kLanes): `loose` names the lease it freed last, which it takes back
// first on its next acquire; only the lane's thread writes it.
inline constexpr uint32_t kLanes = 16;
inline constexpr uint32_t kMaxProcs = 4094;  // below kNoProc
enum ProcState : uint32_t {
  kProcFree = 0x5052'0001u,
  kProcUsed = 0x5052'0002u,
};
struct Lane {
  std::atomic<uint32_t> loose;  // a lease index, or kNone; a hint
  uint32_t pad;
  std::atomic<uint64_t> acquisitions;  // lock-free acquisitions (lane's thread)
};
struct alignas(kCacheLine) ProcRecord {
  std::atomic<uint32_t> state;  // ProcState; the commit word
  uint32_t pad;
  Owner owner;  // the process (tid, tino are 0)
  alignas(kCacheLine) Lane lanes[kLanes];
};
static_assert(sizeof(ProcRecord) == kCacheLine + kLanes * sizeof(Lane));
// How many process records a segment has: as many as waiter slots, within
// [kMinProcs, kMaxProcs]. A process that finds none free works, without the
// lock-free path.
inline constexpr uint32_t kMinProcs = 64;
inline constexpr uint32_t procs_for(uint32_t max_waiters) {
  return max_waiters < kMinProcs   ? kMinProcs
         : max_waiters > kMaxProcs ? kMaxProcs
                                   : max_waiters;
}

// Two cache lines: the futex word and the fields the hand-off touches on the
// first, the owner on the second.
struct alignas(kCacheLine) WaiterSlot {
  std::atomic<uint32_t> word;    // SlotState; the futex word and commit word
  uint32_t lease;                // GRANTED: the lease reserved for it
  uint64_t ticket;               // position in FIFO order, never reused
  std::atomic<uint64_t> enq_ns;  // monotonic time of enqueue
  uint32_t prev;                 // queue links (rebuildable)
  uint32_t next;
  uint32_t next_free;  // free-list link (rebuildable)
  // 1 while the owner is (about to be) in FUTEX_WAIT on `word`: a release
  // to a waiter still spinning skips the FUTEX_WAKE. Advisory only.
  std::atomic<uint32_t> sleeping;
  uint32_t used_pos;  // index in used_slots while not FREE (rebuildable)
  // Permits this wait asks for (1..permits), and how many are RESERVED for
  // it so far (`lease` heads their chain; rebuildable). Section 13.
  uint32_t weight;
  uint32_t got;
  // Why the owner left without the lock (LeftWhy), written by the owner
  // before its CAS to LEFT / LEFT_QUEUED (which publishes it): the lock
  // holder that frees the slot counts the outcome (grant.cc free_left).
  uint32_t left_why;
  // Changed (+1) by every wake of the slot (section.h wake_slot): under the
  // bounded policy a blocking waiter sleeps on it, not on `word`, so that
  // a nudge (a permit freed for the head to race for, which leaves `word`
  // WAITING) is never lost. Advisory.
  std::atomic<uint32_t> nudge;
  alignas(kCacheLine) Owner owner;
};
static_assert(sizeof(WaiterSlot) == 2 * kCacheLine);

// Everything below `lock` is changed only while holding it; the std::atomic
// types are for lock-free readers (read-only status, the waiter's poll).
struct alignas(kCacheLine) Core {
  // The segment lock (lock.cc): 0 free, else the holder's tid, with
  // kLockWaiters set while someone may sleep on it. No pointer, unlike a
  // robust pthread mutex, whose robust-list links live in the mutex.
  std::atomic<uint32_t> lock_word;
  // Sequence count of lock_owner (a seqlock: odd while its holder rewrites
  // it), so a waiter never judges a record torn between two holders.
  std::atomic<uint32_t> lock_seq;
  // Who holds it: written by the holder right after taking it; `tid` is
  // cleared again before unlocking, so a record never names a later holder
  // that reuses the tid. Read by waiters that suspect the holder died.
  Owner lock_owner;
  std::atomic<uint32_t> available;
  std::atomic<uint32_t> held;
  std::atomic<uint32_t> reserved;
  std::atomic<uint32_t> waiting;
  std::atomic<uint32_t> closed;
  uint32_t head;  // oldest WAITING slot or kNone
  uint32_t tail;
  uint32_t free_lease;  // free-list heads
  uint32_t free_slot;
  std::atomic<uint32_t> watcher;  // the queued slot polling owners for deaths
  // The bounded policy (section 15): 1 while the head has waited past the
  // bound, and every permit goes to the queue in order (as under FIFO); 0
  // while newcomers may take free permits past the queue. Derived: set at
  // the end of every section from the head's enq_ns (policy_sync). Always
  // 0 under FIFO.
  std::atomic<uint32_t> hand_off;
  uint64_t next_ticket;
  std::atomic<uint64_t> last_reclaim_ns;  // rate limit for lazy reclamation
  // The watcher's period (ns), adapted to what a pass costs; the backups
  // and the rate limit read it. Advisory: clamped by every reader.
  std::atomic<uint64_t> watch_period_ns;
  // When the watcher looks again at the latest (real monotonic ns): the end
  // of its current sleep. Backups take over once it is kStaleNs past.
  std::atomic<uint64_t> watch_due_ns;
  // 1 while the watcher sleeps on events (a death wakes it: deathwatch.h),
  // 0 while it polls; backups nap longer while it is 1. Advisory.
  std::atomic<uint32_t> watch_events;
  // Recent enqueue-to-grant times of waiters (ns, a moving average): how
  // long the head spins before sleeping. Advisory: clamped by readers.
  std::atomic<uint32_t> handoff_ns;
  // Compact arrays of the records in use (section 7): a reclamation pass
  // costs what the live records cost, not N + W. Rebuilt by repair.
  std::atomic<uint32_t> n_used_leases;
  std::atomic<uint32_t> n_used_slots;
  // One past the highest process record ever USED (sweeps scan below it).
  std::atomic<uint32_t> procs_hwm;
  // The capacity (section 13): the committed target, at most the number of
  // records. `retired` records are RETIRED; `retiring` more (held or
  // reserved now) retire as they come back. Caches of the record states and
  // `capacity`: capacity + retired + retiring == records.
  std::atomic<uint32_t> capacity;
  std::atomic<uint32_t> retired;
  std::atomic<uint32_t> retiring;
  // The rate limit (GCRA): one acquisition per rate_interval_ns, `burst` at
  // once; rate_tat_ns is the theoretical arrival time (mono_ns()). Interval
  // 0: no rate limit. Section 13.
  std::atomic<uint32_t> rate_burst;
  std::atomic<uint64_t> rate_interval_ns;
  std::atomic<uint64_t> rate_tat_ns;

  // The gate of the lock-free path, on its own line (read by every fast
  // acquire and release, written only when it changes): kGateQueued while
  // anyone is queued (waiting > 0), kGateClosed once shut down. Written
  // under the lock.
  alignas(kCacheLine) std::atomic<uint32_t> gate;

  alignas(kCacheLine) std::atomic<uint64_t> acquisitions;
  std::atomic<uint64_t> timeouts;
  std::atomic<uint64_t> cancellations;
  std::atomic<uint64_t> queue_full;
  std::atomic<uint64_t> shutdown_failures;
  std::atomic<uint64_t> reclaimed_holders;
  std::atomic<uint64_t> reclaimed_waiters;
  std::atomic<uint64_t> repairs;
  // The wait histogram (log-linear, hist.h) and the hold histogram (fixed
  // buckets) of the locked path and of process records reclaimed; the
  // lock-free releases' holds are in the LaneHolds. Under the lock.
  std::atomic<uint64_t> wait_sum_ns;
  std::atomic<uint64_t> hold_sum_ns;
  std::atomic<uint64_t> wait_hist[SHMSEM_HIST_BUCKETS];
  std::atomic<uint64_t> hold_hist[SHMSEM_HOLD_BUCKETS];
};

// The hold times of one lane's lock-free releases: written only by the
// lane's thread (plain relaxed load and store, as Lane::acquisitions), so a
// release shares no line with other processes. Zero until first written:
// tmpfs gives the pages only to lanes that release without the lock. Added
// to the core's by the stat, and into it when the process record is
// reclaimed.
struct alignas(kCacheLine) LaneHold {
  std::atomic<uint64_t> sum_ns;
  std::atomic<uint64_t> hist[SHMSEM_HOLD_BUCKETS];
};
static_assert(sizeof(LaneHold) == 2 * kCacheLine);

inline constexpr uint32_t kGateQueued = 1;
inline constexpr uint32_t kGateClosed = 2;
// A shrink waits for permits to come back: releases take the lock.
inline constexpr uint32_t kGateRetiring = 4;
// A rate limit: every acquire takes a token under the lock.
inline constexpr uint32_t kGateRate = 8;
// Bits that send a release to the lock (a permit is wanted there).
inline constexpr uint32_t kGateHandOn = kGateQueued | kGateRetiring;
// Instead of kGateQueued under the bounded policy while the head is within
// its bound (core.hand_off 0): the lock-free acquire may take a LOOSE lease
// past the queue, and a lock-free release frees its lease LOOSE and nudges
// the head (fastpath.h). Section 15.
inline constexpr uint32_t kGateBarge = 16;

inline constexpr size_t kCoreOff = 3 * kCacheLine;
static_assert(sizeof(Header) <= kCoreOff);

inline constexpr size_t align_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

// Geometry of a segment for N permits and W waiter slots.
struct Geometry {
  uint64_t lease_off, slot_off, used_off, declared_off, proc_off, hold_off,
      total_size;
  uint32_t max_procs;
};
inline Geometry geometry(uint32_t permits, uint32_t max_waiters) {
  const uint64_t n = permits, w = max_waiters;
  const uint32_t procs = procs_for(max_waiters);
  const uint64_t p = procs;
  const uint64_t lease = align_up(kCoreOff + sizeof(Core), kCacheLine);
  const uint64_t slot = lease + n * sizeof(LeaseRecord);
  const uint64_t used = slot + w * sizeof(WaiterSlot);
  const uint64_t declared =
      align_up(used + (n + w) * sizeof(uint32_t), kCacheLine);
  const uint64_t proc = align_up(declared + n * sizeof(uint64_t), kCacheLine);
  const uint64_t hold = proc + p * sizeof(ProcRecord);
  const uint64_t total = hold + p * kLanes * sizeof(LaneHold);
  return Geometry{lease, slot, used, declared, proc, hold, total, procs};
}

// An interval between two acquisitions: at most a day; a burst's refill
// (burst * interval): at most 2^62 ns.
inline constexpr uint64_t kMaxRateIntervalNs = 86'400'000'000'000ull;
inline constexpr uint64_t kMaxRateWindowNs = uint64_t{1} << 62;

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_LAYOUT_H
