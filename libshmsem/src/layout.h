// The shared-memory layout of a semaphore segment. Everything here lives in
// /dev/shm and is read and written by many processes, each mapping it at its
// own address: only fixed-width integers, indices and offsets, no pointers.
// docs/DESIGN.md section 3 is the long form.
#ifndef SHMSEM_SRC_LAYOUT_H
#define SHMSEM_SRC_LAYOUT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include <shmsem/shmsem.h>

namespace shmsem::detail {

inline constexpr size_t kCacheLine = 64;
inline constexpr uint64_t kMagic = 0x0100'4d45'534d'4853ull;  // "SHMSEM\0\1"
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr uint32_t kReady = 0x5245'4459u;  // "READY", stored last
inline constexpr uint32_t kNone = 0xffff'ffffu;   // "no index"

// Lease record states. Distinct non-zero values so that zeroed or 0xff-filled
// memory never decodes as a valid state.
enum LeaseState : uint32_t {
  kLeaseFree = 0x4c45'0001u,
  kLeaseHeld = 0x4c45'0002u,
  kLeaseReserved = 0x4c45'0003u,
};

// Waiter slot states; this value is the slot's futex word.
enum SlotState : uint32_t {
  kSlotFree = 0x534c'0001u,
  kSlotWaiting = 0x534c'0002u,
  kSlotGranted = 0x534c'0003u,
  kSlotCancelled = 0x534c'0004u,
  kSlotClosed = 0x534c'0005u,
};

// Who owns a record: a PID is only meaningful together with the process
// start time (clock ticks since boot), so a recycled PID is never mistaken
// for the old owner.
struct Owner {
  int32_t pid;
  uint32_t pad;
  uint64_t start;
};
static_assert(sizeof(Owner) == 16);

struct Header {
  uint64_t magic;
  uint32_t layout_version;
  std::atomic<uint32_t> ready;  // kReady, stored (release) last at create
  uint64_t total_size;
  uint32_t permits;
  uint32_t max_waiters;
  uint64_t lease_off;
  uint64_t slot_off;
  uint64_t pidns;  // inode of the creator's PID namespace
  uint64_t created_ns;  // CLOCK_REALTIME of creation, for display only
};
static_assert(sizeof(Header) <= kCacheLine);

struct alignas(kCacheLine) LeaseRecord {
  std::atomic<uint32_t> state;  // LeaseState; the commit word
  std::atomic<uint32_t> gen;    // bumped on every grant; 0 never valid
  Owner owner;
  uint32_t slot;       // RESERVED: the slot it is granted to
  uint32_t next_free;  // free-list link (rebuildable)
  std::atomic<uint64_t> since_ns;  // coarse monotonic time of the grant
};
static_assert(sizeof(LeaseRecord) == kCacheLine);

struct alignas(kCacheLine) WaiterSlot {
  std::atomic<uint32_t> word;  // SlotState; the futex word and commit word
  uint32_t lease;              // GRANTED: the lease reserved for it
  uint64_t ticket;             // position in FIFO order, never reused
  Owner owner;
  std::atomic<uint64_t> enq_ns;  // monotonic time of enqueue
  uint32_t prev;  // queue links (rebuildable)
  uint32_t next;
  uint32_t next_free;  // free-list link (rebuildable)
  // 1 while the owner is (about to be) in FUTEX_WAIT on `word`: a release
  // to a waiter still spinning skips the FUTEX_WAKE. Advisory only.
  std::atomic<uint32_t> sleeping;
};
static_assert(sizeof(WaiterSlot) == kCacheLine);

// Everything below `lock` is changed only while holding it; the std::atomic
// types are for lock-free readers (read-only status, the waiter's poll).
struct alignas(kCacheLine) Core {
  pthread_mutex_t lock;  // process-shared, robust
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
  uint32_t pad0;
  uint64_t next_ticket;
  std::atomic<uint64_t> last_reclaim_ns;  // rate limit for lazy reclamation

  alignas(kCacheLine) std::atomic<uint64_t> acquisitions;
  std::atomic<uint64_t> timeouts;
  std::atomic<uint64_t> cancellations;
  std::atomic<uint64_t> queue_full;
  std::atomic<uint64_t> shutdown_failures;
  std::atomic<uint64_t> reclaimed_holders;
  std::atomic<uint64_t> reclaimed_waiters;
  std::atomic<uint64_t> repairs;
  std::atomic<uint64_t> wait_hist[SHMSEM_HIST_BUCKETS];
};

inline constexpr size_t kCoreOff = kCacheLine;
static_assert(sizeof(Header) <= kCoreOff);

inline constexpr size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Geometry of a segment for N permits and W waiter slots.
struct Geometry {
  uint64_t lease_off, slot_off, total_size;
};
inline Geometry geometry(uint32_t permits, uint32_t max_waiters) {
  Geometry g;
  g.lease_off = align_up(kCoreOff + sizeof(Core), kCacheLine);
  g.slot_off = g.lease_off + uint64_t{permits} * sizeof(LeaseRecord);
  g.total_size = g.slot_off + uint64_t{max_waiters} * sizeof(WaiterSlot);
  return g;
}

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_LAYOUT_H
