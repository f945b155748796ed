// The fuzzer's seed corpus: real segments, brought into several states by
// the library itself (threads queued, forked children that crash), copied
// byte for byte and written out as fuzzer inputs (fuzz_input.h) with a few
// op scripts each: every state gets the common ones, and the states of the
// newer surface (weighted leases, reservations, a rate, a shrink, process
// records) scripts that aim a writer at their own fields. An image is
// written up to its last byte that is neither zero nor in the fresh process
// records at the end of their table (the fuzzer fills both in again).
// Usage: shmsem_fuzz_seeds DIR
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <shmsem/shmsem.h>

#include "fuzz_input.h"
#include "handle.h"
#include "layout.h"
#include "testing.h"

namespace {

using namespace shmsem::fuzz;
using shmsem::detail::Core;
using shmsem::testing::HookPoint;
using Bytes = std::vector<uint8_t>;

std::string g_dir;
int g_seq = 0;
int g_written = 0;

[[noreturn]] void die(const char *what, int e) {
  fprintf(stderr, "shmsem_fuzz_seeds: %s: %s\n", what, shmsem_strerror(e));
  exit(1);
}

struct Sem {
  std::string name;
  shmsem_t *s = nullptr;
  Sem(uint32_t permits, uint32_t max_waiters, uint32_t max_permits = 0,
      uint32_t rate = 0, uint32_t burst = 0, uint64_t period_ns = 0) {
    name = "/shmsem-fuzz-seed-" + std::to_string(getpid()) + "-" +
           std::to_string(g_seq++);
    shmsem_config cfg{};
    cfg.permits = permits;
    cfg.max_waiters = max_waiters;
    cfg.max_permits = max_permits;
    cfg.rate = rate;
    cfg.burst = burst;
    cfg.rate_period_ns = period_ns;
    int e = shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s);
    if (e) die("create", e);
  }
  ~Sem() {
    shmsem_detach(s);
    shmsem_unlink(name.c_str());
  }
  Bytes bytes() const {
    const auto *b = static_cast<const uint8_t *>(s->base);
    return Bytes(b, b + s->size);
  }
  uint32_t link(uint32_t l) const { return s->leases[l].link; }
};

// A script, little-endian, as segment_fuzz.cc reads it.
struct Script {
  Bytes b;
  Script &u8(uint32_t v) {
    b.push_back(uint8_t(v));
    return *this;
  }
  Script &u16(uint32_t v) { return u8(v).u8(v >> 8); }
  Script &u32(uint32_t v) { return u16(v).u16(v >> 16); }
  Script &u64(uint64_t v) { return u32(uint32_t(v)).u32(uint32_t(v >> 32)); }
  Script &op(Op o) { return u8(o); }
  // A token made up for record `index` at its current generation: what a
  // process that learnt the index would release.
  Script &release_index(uint32_t index) {
    return op(kReleaseToken).u8(0).u8(4 | 16).u64(0).u32(index);
  }
  Script &val(SymValue v, uint8_t state = 0) {
    u8(v);
    if (v == kVState) u8(state);
    return *this;
  }
  Script &poke(Field f, uint32_t idx, SymValue v, uint8_t state = 0) {
    return op(kPokeSym).u8(f).u16(idx).val(v, state);
  }
  // At each of `times` passes of `p`: a, b, a, ...
  Script &at(HookPoint p, Field f, uint32_t idx, SymValue a, SymValue bv,
             uint8_t times) {
    return op(kAtHookSym)
        .u8(writer_point_byte(p))
        .u8(f)
        .u16(idx)
        .val(a)
        .val(bv)
        .u8(times - 1);
  }
  Script &try_n(uint32_t n) { return op(kTryAcquireN).u8(n); }
  Script &brief_n(uint32_t n, uint8_t us, uint8_t flags = 0) {
    return op(kAcquireBriefN).u8(n).u8(us).u8(flags);
  }
  Script &set_permits(uint32_t n) { return op(kSetPermits).u8(n); }
  Script &poke_raw(Field f, uint32_t idx, uint64_t v) {
    return op(kPokeSym).u8(f).u16(idx).u8(kVRaw).u64(v);
  }
  // The lock word names a dead thread: the next locker takes over and
  // repairs (after 1 ms).
  Script &takeover() { return op(kDeadLockHolder).u8(0).u8(0).op(kStat).u8(0); }
  Script &end() { return op(kRecover).op(kCheck).op(kSnapshot); }
};

// The word index (4-byte words) of a Core field, as kPokeField counts.
template <typename T>
uint8_t core_word(const Sem &sem, T Core::*field) {
  return uint8_t((reinterpret_cast<const char *>(&(sem.s->core->*field)) -
                  reinterpret_cast<const char *>(sem.s->core)) /
                 4);
}

// A process record as shmsem_create leaves it: FREE, every lane kNone.
bool fresh_proc(const uint8_t *p) {
  shmsem::detail::ProcRecord rec;
  memcpy(static_cast<void *>(&rec), p, sizeof rec);
  if (rec.state.load() != shmsem::detail::kProcFree) return false;
  for (const auto &ln : rec.lanes)
    if (ln.loose.load() != shmsem::detail::kNone || ln.pad ||
        ln.acquisitions.load())
      return false;
  const auto *b = reinterpret_cast<const uint8_t *>(&rec.pad);
  for (size_t i = 0; i < sizeof rec.pad + sizeof rec.owner; i++)
    if (b[i]) return false;
  return true;
}

void write_seed(const char *tag, const Sem &sem, const Bytes &image,
                const Bytes &script, uint8_t mode = 0) {
  InputHeader h{};
  h.mode = mode;
  h.pidns = kPidnsOurs;
  h.permits = uint16_t(sem.s->permits - 1);
  h.max_waiters = uint16_t(sem.s->max_waiters);
  h.script_len = uint16_t(script.size());
  std::string path = g_dir + "/seed-" + tag + "-" + std::to_string(g_written++);
  FILE *f = fopen(path.c_str(), "wb");
  if (!f) die(path.c_str(), -errno);
  size_t len = image.size();
  if (!(mode & kModeRawHeader)) {
    // Up to the last byte that is neither zero nor a fresh process record
    // at the end of the table (the fuzzer fills both in again).
    const auto geo =
        shmsem::detail::geometry(sem.s->permits, sem.s->max_waiters);
    while (len && image[len - 1] == 0) len--;
    for (uint32_t p = geo.max_procs; p-- > 0;) {
      size_t off = geo.proc_off + p * sizeof(shmsem::detail::ProcRecord);
      if (len <= off) continue;
      if (len > off + sizeof(shmsem::detail::ProcRecord) ||
          !fresh_proc(image.data() + off))
        break;
      len = off;
      while (len && image[len - 1] == 0) len--;
    }
  }
  fwrite(&h, sizeof h, 1, f);
  fwrite(script.data(), 1, script.size(), f);
  fwrite(image.data(), 1, len, f);
  if (fclose(f) != 0) die(path.c_str(), -errno);
}

// A few scripts that every state gets.
std::vector<Bytes> scripts(const Sem &sem) {
  uint8_t head = core_word(sem, &Core::head);
  return {
      // take, give back, look
      {kTryAcquire, kTryAcquire, kRelease, 0, 0, kCheck, kStat, 200, kSnapshot},
      // wait a little, reclaim, close
      {kAcquireBrief, 5, 0, kRecover, kCheck, kShutdown, kAcquirePast, kCheck,
       kSnapshot},
      // a release from "another thread" while we are queued grants us
      {kTryAcquire, kAtHook, 1, kActRelease, 0, kAcquireBrief, 20, 0, kRelease,
       0, 0, kCheck},
      // a queue head far out of range, then everything
      {kPokeField, kRegionCore, 0, 0, head, 8, kTryAcquire, kAcquireBrief, 3, 0,
       kRelease, 0, 0, kRecover, kCheck, kSnapshot},
      // reopen, read-only, tokens, cancellation
      {kReopen,
       kReadOnly,
       kCreateExisting,
       0,
       0,
       kTryAcquire,
       kReleaseToken,
       0,
       1 | 16,
       0,
       0,
       0,
       0,
       0,
       0,
       0,
       0,
       0,
       0,
       0,
       0,
       kAcquireCancelled,
       kAcquireCancelLater,
       0,
       0,
       kAcquireCancelLater,
       1,
       10,
       kCheck},
  };
}

void write_all(const char *tag, const Sem &sem, const Bytes &image,
               uint8_t mode = 0, const std::vector<Script> &own = {}) {
  for (const Bytes &sc : scripts(sem)) write_seed(tag, sem, image, sc, mode);
  for (const Script &sc : own) write_seed(tag, sem, image, sc.b, mode);
}

bool wait_waiting(shmsem_t *s, uint32_t n) {
  for (int i = 0; i < 10000; i++) {
    struct shmsem_stat st;
    if (shmsem_stat(s, &st) == 0 && st.waiting == n) return true;
    usleep(1000);
  }
  return false;
}

// Threads of this process queued on `s` until cancelled, each for
// `weight` permits.
struct Queued {
  std::vector<std::thread> threads;
  std::vector<shmsem_cancel_t> cancels;
  std::atomic<int> granted{0};
  uint32_t weight;
  explicit Queued(size_t n, uint32_t w = 1) : cancels(n), weight(w) {
    for (auto &c : cancels) shmsem_cancel_init(&c);
  }
  // `already`: waiters queued before these.
  void start(shmsem_t *s, uint32_t already = 0) {
    for (size_t i = 0; i < cancels.size(); i++) {
      threads.emplace_back([this, s, i] {
        shmsem_lease_t l;
        if (shmsem_acquire_ex_n(s, weight, nullptr, &cancels[i], 0, &l) == 0) {
          granted++;
          shmsem_release(s, &l);
        }
      });
      if (!wait_waiting(s, already + uint32_t(i + 1))) die("queue", -ETIMEDOUT);
    }
  }
  void stop() {
    for (auto &c : cancels) shmsem_cancel(&c);
    for (auto &t : threads) t.join();
    threads.clear();
  }
};

void fresh() {
  Sem a(1, 2);
  write_all("fresh-1x2", a, a.bytes());
  Sem b(3, 4);
  write_all("fresh-3x4", b, b.bytes());
}

// Leases held by this process (dead by the time the fuzzer runs), and one
// recorded for pid 1 (alive, but not that process: start time 1).
void held() {
  Sem sem(4, 8);
  shmsem_lease_t l[3];
  for (auto &x : l)
    if (int e = shmsem_try_acquire(sem.s, &x)) die("acquire", e);
  shmsem::testing::set_lease_owner(sem.s, l[2], 1, 1, 0);
  write_all("held", sem, sem.bytes());
}

void queued() {
  Sem sem(1, 4);
  shmsem_lease_t l;
  if (int e = shmsem_acquire(sem.s, &l)) die("acquire", e);
  Queued q(3);
  q.start(sem.s);
  Bytes image = sem.bytes();
  q.stop();
  write_all("queued", sem, image);
}

// A permit granted to a waiter that has not returned yet (lease RESERVED,
// slot GRANTED), copied from inside the waiter's critical section: its
// lock word names a thread that is gone when the fuzzer runs.
Bytes g_captured;
const Sem *g_capture_sem = nullptr;
void capture_hook(HookPoint p, void *ctx) {
  if (p == *static_cast<HookPoint *>(ctx) && g_captured.empty())
    g_captured = g_capture_sem->bytes();
}

void granted() {
  Sem sem(1, 4);
  shmsem_lease_t l;
  if (int e = shmsem_acquire(sem.s, &l)) die("acquire", e);
  Queued q(1);
  q.start(sem.s);
  static HookPoint at = HookPoint::WAIT_RETURN_LOCKED;
  g_captured.clear();
  g_capture_sem = &sem;
  shmsem::testing::set_hook(capture_hook, &at);
  shmsem_release(sem.s, &l);
  for (int i = 0; i < 10000 && q.granted.load() == 0; i++) usleep(1000);
  shmsem::testing::set_hook(nullptr, nullptr);
  q.stop();
  if (g_captured.empty()) die("granted capture", -ETIMEDOUT);
  write_all("granted", sem, g_captured);
  write_all("granted-locked", sem, g_captured, kModeKeepDeadLockHolder);
}

void closed() {
  Sem sem(2, 4);
  shmsem_lease_t a, b;
  if (shmsem_acquire(sem.s, &a) || shmsem_acquire(sem.s, &b))
    die("acquire", -EAGAIN);
  Queued q(1);
  q.start(sem.s);
  shmsem_shutdown(sem.s);
  q.stop();
  write_all("closed", sem, sem.bytes());
}

// A child that took `hook` as its cue to die (inside the lock, for the
// LOCKED points), and then what a recover pass left.
void die_at(HookPoint p, void *ctx) {
  if (p == *static_cast<HookPoint *>(ctx)) _exit(0);
}

void run_child(const std::function<void()> &body) {
  pid_t pid = fork();
  if (pid < 0) die("fork", -errno);
  if (pid == 0) {
    body();
    _exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
}

void crashed() {
  {
    Sem sem(3, 4);
    run_child([&] {
      shmsem_lease_t l;
      shmsem_acquire(sem.s, &l);
      shmsem_acquire(sem.s, &l);
    });
    write_all("dead-holders", sem, sem.bytes());
    shmsem_recover(sem.s);
    write_all("reclaimed", sem, sem.bytes());
  }
  {
    Sem sem(2, 4);
    static HookPoint at = HookPoint::ACQUIRE_LEASE_POPPED;
    run_child([&] {
      shmsem::testing::set_hook(die_at, &at);
      shmsem_lease_t l;
      shmsem_acquire(sem.s, &l);
    });
    write_all("died-in-acquire", sem, sem.bytes(), kModeKeepDeadLockHolder);
  }
  {
    // A releaser that died between RESERVED and GRANTED.
    Sem sem(1, 4);
    shmsem_lease_t l;
    if (int e = shmsem_acquire(sem.s, &l)) die("acquire", e);
    Queued q(1);
    q.start(sem.s);
    static HookPoint at = HookPoint::RELEASE_RESERVED;
    run_child([&] {
      shmsem::testing::set_hook(die_at, &at);
      shmsem_release(sem.s, &l);
    });
    Bytes image = sem.bytes();
    shmsem_recover(sem.s);  // takes over the lock and completes the grant
    q.stop();
    write_all("died-in-release", sem, image, kModeKeepDeadLockHolder);
  }
}

// The largest geometry the fuzzer builds, full and with waiters.
void largest() {
  Sem sem(kMaxPermits, kMaxWaiters);
  std::vector<shmsem_lease_t> l(kMaxPermits);
  for (auto &x : l)
    if (int e = shmsem_try_acquire(sem.s, &x)) die("acquire", e);
  Queued q(5);
  q.start(sem.s);
  Bytes image = sem.bytes();
  q.stop();
  write_all("largest", sem, image);
}

// --- the newer surface -----------------------------------------------------
void must(int e, const char *what) {
  if (e) die(what, e);
}

// Field values for a lease word in kVState (fuzz_input.h): state index
// (Free, Held, Reserved, Loose, HeldFast, Retired, 0, 0xF) | proc << 3.
constexpr uint8_t kStHeldFastBeyond = 4 | 3 << 3;  // HELD_FAST, max_procs
constexpr uint8_t kSlotStCancelled = 3;

// A lease of 3 held as one (a chain of HELD records: the token's record
// a -> b -> c), a single lease, and one permit free; then the same left by
// a child that died.
void weighted() {
  Sem sem(5, 4);
  shmsem_lease_t w, one;
  must(shmsem_try_acquire_n(sem.s, 3, &w), "acquire_n");
  must(shmsem_try_acquire(sem.s, &one), "acquire");
  const uint32_t a = w.index, b = sem.link(a), c = sem.link(b);
  const uint32_t lone = one.index;
  uint32_t free_rec = 0;
  while (free_rec == a || free_rec == b || free_rec == c || free_rec == lone)
    free_rec++;
  std::vector<Script> own;
  // Released by a token made up from the index, twice; then taken again.
  own.push_back(Script()
                    .release_index(a)
                    .release_index(a)
                    .try_n(3)
                    .try_n(7)
                    .brief_n(2, 5)
                    .end());
  // Finding 3: the chain bent into a loop (c -> a), then released.
  own.push_back(Script()
                    .poke_raw(kFLeaseLink, c, a)
                    .release_index(a)
                    .op(kStat)
                    .u8(0)
                    .try_n(2)
                    .end());
  own.push_back(Script().poke(kFLeaseLink, b, kVSelf).release_index(a).end());
  // The chain changing while a release walks it (RELEASE_CHAIN_READ).
  own.push_back(
      Script()
          .op(kTryAcquire)
          .at(HookPoint::RELEASE_CHAIN_READ, kFLeaseLink, b, kVNone, kVBit31, 8)
          .at(HookPoint::RELEASE_CHAIN_READ, kFLeaseLink, a, kVCount, kVPrev, 8)
          .release_index(a)
          .end());
  // Finding 2: a weighted async waiter (ours) granted while the links of
  // every record it can get toggle between kNone and far out of range
  // (WAIT_CHAIN_READ: between the walk that checks its chain and the one
  // that makes the records HELD).
  for (SymValue bad : {kVBit31, kVCount}) {
    Script sc;
    sc.op(kWaiterStart).u8(3).u8(0);
    for (uint32_t l : {a, b, c, free_rec})
      sc.at(HookPoint::WAIT_CHAIN_READ, kFLeaseLink, l, bad, kVNone, 8);
    sc.release_index(a).op(kWaiterPoll).op(kWaiterPoll).end();
    own.push_back(sc);
  }
  // Finding 4: our waiter at the head with a partial reservation whose
  // chain is bent into a loop; then it polls, is cancelled, tries again.
  own.push_back(Script()
                    .op(kWaiterStart)
                    .u8(3)
                    .u8(0)
                    .release_index(lone)
                    .poke(kFLeaseLink, lone, kVSelf)
                    .op(kWaiterPoll)
                    .op(kStat)
                    .u8(0)
                    .op(kWaiterCancel)
                    .try_n(3)
                    .end());
  // Finding 8: garbage in a held lease's link, then a takeover's repair
  // (of a lease of ours: a dead owner's would be reclaimed whole).
  own.push_back(Script().poke(kFLeaseLink, a, kVBit31).takeover().end());
  for (uint32_t l : {a, b, c, free_rec})
    own.push_back(Script()
                      .release_index(a)
                      .try_n(3)
                      .poke(kFLeaseLink, l, kVBit31)
                      .takeover());
  own.push_back(Script()
                    .poke(kFLeaseSlot, b, kVNone)
                    .poke(kFLeaseLink, c, kVMember)
                    .takeover()
                    .release_index(a)
                    .end());
  // Declared hold times on every kind of record.
  own.push_back(Script()
                    .op(kDeclareHold)
                    .u8(a)
                    .u8(1)
                    .u8(3)
                    .op(kDeclareHold)
                    .u8(b)
                    .u8(1)
                    .u8(3)
                    .op(kDeclareHold)
                    .u8(lone)
                    .u8(1)
                    .u8(4)
                    .op(kDeclareHold)
                    .u8(lone)
                    .u8(3)
                    .u8(5)
                    .op(kSnapshot)
                    .end());
  write_all("weighted", sem, sem.bytes(), 0, own);

  Sem dead(4, 4);
  run_child([&] {
    shmsem_lease_t l;
    shmsem_try_acquire_n(dead.s, 2, &l);
    shmsem_try_acquire(dead.s, &l);
  });
  write_all(
      "weighted-dead", dead, dead.bytes(), 0,
      {Script().op(kRecover).try_n(4).end(),
       Script().poke(kFLeaseLink, 0, kVSelf).op(kRecover).end(),
       Script()
           .at(HookPoint::RECLAIM_ONE, kFLeaseLink, 1, kVBit31, kVNone, 8)
           .at(HookPoint::RECLAIM_LOCKED, kFLeaseLink, 0, kVNext, kVSelf, 8)
           .op(kRecover)
           .end()});
}

// Waiters queued for a lease of 4 of 4 (the head: two permits reserved
// for it, a RESERVED chain) and for 1 behind it; and a lease of 2 granted
// to a waiter not yet returned (slot GRANTED, two RESERVED).
void reserved() {
  Sem sem(4, 4);
  shmsem_lease_t l[3];
  for (auto &x : l) must(shmsem_try_acquire(sem.s, &x), "acquire");
  Queued head(1, 4);
  head.start(sem.s);
  must(shmsem_release(sem.s, &l[0]), "release");
  Queued behind(1, 1);
  behind.start(sem.s, 1);
  Bytes image = sem.bytes();
  const uint32_t h = sem.s->core->head;
  const uint32_t r0 = sem.s->slots[h].lease, r1 = sem.link(r0);
  behind.stop();
  head.stop();
  std::vector<Script> own;
  // One more permit for the head, then its owner is found dead: its
  // reservation passes on.
  own.push_back(Script().release_index(l[1].index).op(kRecover).try_n(2).end());
  // Finding 1: the head's slot CANCELLED with its chain, a takeover's
  // repair orphans the reservation while the writer keeps storing an
  // out-of-range lease index in the slot and the chain's link.
  own.push_back(Script()
                    .poke(kFSlotWord, h, kVState, kSlotStCancelled)
                    .at(HookPoint::REPAIR_CHAINS_READ, kFSlotLease, h, kVBit31,
                        kVInt31, 8)
                    .at(HookPoint::REPAIR_CHAINS_READ, kFLeaseLink, r0, kVCount,
                        kVBit31, 8)
                    .takeover()
                    .end());
  // Finding 4 in another shape: the reservation chain looped.
  own.push_back(Script()
                    .poke_raw(kFLeaseLink, r1, r0)
                    .op(kRecover)
                    .op(kStat)
                    .u8(0)
                    .end());
  // Finding 8: a CANCELLED slot whose weight is 0 or 2^32 - 1, repaired.
  own.push_back(Script()
                    .poke(kFSlotWord, h, kVState, kSlotStCancelled)
                    .poke(kFSlotWeight, h, kVZero)
                    .takeover()
                    .end());
  own.push_back(Script()
                    .poke(kFSlotWord, h, kVState, kSlotStCancelled)
                    .poke(kFSlotWeight, h, kVU32Max)
                    .takeover()
                    .end());
  // The counts of a reservation wrong: got, the slot's lease, a shrink.
  own.push_back(
      Script().poke(kFSlotGot, h, kVInc).poke(kFSlotLease, h, kVNone).end());
  own.push_back(
      Script().set_permits(2).set_permits(4).release_index(l[2].index).end());
  write_all("reserved", sem, image, 0, own);

  Sem g2(3, 4);
  shmsem_lease_t k[3];
  for (auto &x : k) must(shmsem_try_acquire(g2.s, &x), "acquire");
  Queued q(1, 2);
  q.start(g2.s);
  static HookPoint at = HookPoint::WAIT_RETURN_LOCKED;
  g_captured.clear();
  g_capture_sem = &g2;
  shmsem::testing::set_hook(capture_hook, &at);
  must(shmsem_release(g2.s, &k[0]), "release");
  must(shmsem_release(g2.s, &k[1]), "release");
  for (int i = 0; i < 10000 && q.granted.load() == 0; i++) usleep(1000);
  shmsem::testing::set_hook(nullptr, nullptr);
  q.stop();
  if (g_captured.empty()) die("weighted grant capture", -ETIMEDOUT);
  std::vector<Script> gown = {
      Script().poke(kFLeaseLink, k[0].index, kVBit31).op(kRecover).end(),
      Script()
          .at(HookPoint::REPAIR_CHAINS_READ, kFLeaseLink, k[1].index, kVNone,
              kVBit31, 8)
          .op(kStat)
          .u8(0)
          .end()};
  write_all("granted-n", g2, g_captured, 0, gown);
  write_all("granted-n-locked", g2, g_captured, kModeKeepDeadLockHolder, gown);
}

// Rate limits: a bucket taken down to nothing, a semaphore limited by the
// rate alone, and a head that has its permit and waits for its start.
void rated() {
  std::vector<Script> own = {
      // Finding 6: the arrival time at 2^64 - 1, then tries.
      Script()
          .poke(kFRateTat, 0, kVU64Max)
          .op(kTryAcquire)
          .op(kTryAcquire)
          .end(),
      // An interval of 1 ns, of a day and more; a burst of 0 and 2^31 - 1.
      Script()
          .poke(kFRateInterval, 0, kVOne)
          .op(kWaiterStart)
          .u8(1)
          .u8(3)
          .op(kWaiterPoll)
          .op(kWaiterPoll)
          .end(),
      Script()
          .poke(kFRateInterval, 0, kVMaxIntervalPlus)
          .poke(kFRateBurst, 0, kVInt31)
          .op(kTryAcquire)
          .op(kStat)
          .u8(0)
          .end(),
      Script()
          .poke(kFRateBurst, 0, kVZero)
          .poke(kFRateTat, 0, kVNowPlus)
          .brief_n(1, 20)
          .end(),
      Script().poke(kFRateInterval, 0, kVZero).op(kFastCycle).u8(3).end(),
      // The rate word changed while an acquire is inside the lock.
      Script()
          .at(HookPoint::ACQUIRE_LOCKED, kFRateTat, 0, kVU64Max, kVZero, 4)
          .op(kTryAcquire)
          .brief_n(2, 10)
          .end()};
  {
    Sem sem(2, 4, 4, 1000, 2);
    shmsem_lease_t a, b;
    must(shmsem_try_acquire(sem.s, &a), "acquire");
    must(shmsem_try_acquire(sem.s, &b), "acquire");
    write_all("rate", sem, sem.bytes(), 0, own);
  }
  {
    Sem sem(0, 4, 6, 100, 3);  // no concurrency limit: the rate alone
    shmsem_lease_t a;
    must(shmsem_try_acquire_n(sem.s, 2, &a), "acquire_n");
    write_all("rate-only", sem, sem.bytes(), 0, own);
  }
  {
    Sem sem(2, 4, 0, 1, 1, 10'000'000'000ull);  // one per 10 s
    shmsem_lease_t a;
    must(shmsem_try_acquire(sem.s, &a), "acquire");
    Queued q(1);
    q.start(sem.s);
    Bytes image = sem.bytes();
    q.stop();
    write_all("rate-head", sem, image, 0, own);
  }
}

// A shrink in progress: records RETIRED and permits still to retire (held
// now), one of them weighted; the capacity below the records from the
// start (max_permits).
void shrinking() {
  Sem sem(4, 4, 6);
  shmsem_lease_t w, one;
  must(shmsem_try_acquire_n(sem.s, 2, &w), "acquire_n");
  must(shmsem_try_acquire(sem.s, &one), "acquire");
  must(shmsem_set_permits(sem.s, 1), "set_permits");
  std::vector<Script> own = {
      Script().release_index(one.index).release_index(w.index).try_n(1).end(),
      Script().set_permits(6).try_n(4).set_permits(0).brief_n(1, 10).end(),
      // Finding 5: the counters trusted over the records.
      Script()
          .poke(kFRetired, 0, kVCount)
          .set_permits(2)
          .try_n(1)
          .op(kTryAcquire)
          .op(kTryAcquire)
          .end(),
      Script()
          .poke(kFRetiring, 0, kVInt31)
          .release_index(one.index)
          .op(kFastCycle)
          .u8(2)
          .end(),
      Script().poke(kFCapacity, 0, kVCountPlus).set_permits(3).end(),
      // The counts changing while the records settle.
      Script()
          .at(HookPoint::CAPACITY_ONE, kFRetired, 0, kVDec, kVCount, 8)
          .at(HookPoint::CAPACITY_SET, kFRetiring, 0, kVU32Max, kVZero, 2)
          .set_permits(6)
          .set_permits(1)
          .end(),
      Script()
          .op(kWaiterStart)
          .u8(2)
          .u8(0)
          .set_permits(5)
          .op(kWaiterPoll)
          .release_index(one.index)
          .op(kWaiterPoll)
          .end()};
  write_all("shrinking", sem, sem.bytes(), 0, own);
}

// Process records of children that died using the lock-free path: leases
// HELD_FAST under their records and LOOSE ones their lanes name.
void lockfree() {
  Sem sem(3, 4);
  for (int k = 0; k < 2; k++)
    run_child([&] {
      shmsem_lease_t a, b;
      shmsem_try_acquire(sem.s, &a);
      shmsem_release(sem.s, &a);
      shmsem_try_acquire(sem.s, &a);  // lock-free: its lane names it
      if (shmsem_try_acquire(sem.s, &b) == 0) shmsem_release(sem.s, &b);
    });
  std::vector<Script> own = {
      Script().op(kRecover).op(kFastCycle).u8(5).op(kTryAcquire).end(),
      // Finding 7: the mark lowered below the dead children's records (and
      // nothing of ours raises it again before the final recover).
      Script().poke(kFProcsHwm, 0, kVZero).op(kRecover).op(kStat).u8(0),
      Script()
          .poke(kFProcsHwm, 0, kVZero)
          .op(kRecover)
          .op(kTryAcquire)
          .brief_n(1, 20)
          .end(),
      Script().poke(kFProcsHwm, 0, kVU32Max).op(kRecover).end(),
      // A lane naming a lease out of range, ours too (after a cycle).
      Script()
          .poke(kFLaneLoose, 0x10, kVCount)
          .poke(kFLaneLoose, 0, kVBit31)
          .op(kRecover)
          .op(kFastCycle)
          .u8(0x83)
          .end(),
      Script()
          .op(kFastCycle)
          .u8(1)
          .poke(kFLaneLoose, 0x20, kVLast)
          .op(kFastCycle)
          .u8(2)
          .op(kCheck)
          .end(),
      // A process record's state garbage, or free under held leases.
      Script()
          .poke(kFProcState, 1, kVState, 0)
          .op(kRecover)
          .op(kTryAcquire)
          .end(),
      Script().poke(kFProcState, 0, kVState, 2).op(kCheck).op(kRecover).end(),
      // "Also seen": a lease word naming a process record beyond the table.
      Script()
          .poke(kFLeaseWord, 0, kVState, kStHeldFastBeyond)
          .op(kSnapshot)
          .op(kStat)
          .u8(0)
          .end(),
      // Finding 9: waiting above max_waiters with nobody queued.
      Script()
          .poke(kFWaiting, 0, kVCountPlus)
          .op(kTryAcquire)
          .brief_n(1, 10)
          .end(),
      // The lock-free steps with a writer between their reads.
      Script()
          .op(kFastCycle)
          .u8(0)
          .at(HookPoint::FAST_ACQUIRE_READ, kFLeaseWord, 0, kVState, kVState, 2)
          .at(HookPoint::FAST_RELEASE_NAMED, kFLaneLoose, 0, kVCount, kVNone, 4)
          .op(kFastCycle)
          .u8(4)
          .end()};
  write_all("lockfree-dead", sem, sem.bytes(), 0, own);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  fresh();
  held();
  queued();
  granted();
  closed();
  crashed();
  largest();
  weighted();
  reserved();
  rated();
  shrinking();
  lockfree();
  printf("shmsem_fuzz_seeds: %d seeds in %s\n", g_written, g_dir.c_str());
  return 0;
}
