// The fuzzer's seed corpus: real segments, brought into several states by
// the library itself (threads queued, forked children that crash), copied
// byte for byte and written out as fuzzer inputs (fuzz_input.h) with a few
// op scripts each. Usage: shmsem_fuzz_seeds DIR
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
  Sem(uint32_t permits, uint32_t max_waiters) {
    name = "/shmsem-fuzz-seed-" + std::to_string(getpid()) + "-" +
           std::to_string(g_seq++);
    shmsem_config cfg{};
    cfg.permits = permits;
    cfg.max_waiters = max_waiters;
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
};

// The word index (4-byte words) of a Core field, as kPokeField counts.
template <typename T>
uint8_t core_word(const Sem &sem, T Core::*field) {
  return uint8_t((reinterpret_cast<const char *>(&(sem.s->core->*field)) -
                  reinterpret_cast<const char *>(sem.s->core)) / 4);
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
  fwrite(&h, sizeof h, 1, f);
  fwrite(script.data(), 1, script.size(), f);
  fwrite(image.data(), 1, image.size(), f);
  if (fclose(f) != 0) die(path.c_str(), -errno);
}

// A few scripts that every state gets.
std::vector<Bytes> scripts(const Sem &sem) {
  uint8_t head = core_word(sem, &Core::head);
  return {
      // take, give back, look
      {kTryAcquire, kTryAcquire, kRelease, 0, 0, kCheck, kStat, 200,
       kSnapshot},
      // wait a little, reclaim, close
      {kAcquireBrief, 5, 0, kRecover, kCheck, kShutdown, kAcquirePast,
       kCheck, kSnapshot},
      // a release from "another thread" while we are queued grants us
      {kTryAcquire, kAtHook, 1, kActRelease, 0, kAcquireBrief, 20, 0,
       kRelease, 0, 0, kCheck},
      // a queue head far out of range, then everything
      {kPokeField, kRegionCore, 0, 0, head, 8, kTryAcquire, kAcquireBrief, 3,
       0, kRelease, 0, 0, kRecover, kCheck, kSnapshot},
      // reopen, read-only, tokens, cancellation
      {kReopen, kReadOnly, kCreateExisting, 0, 0, kTryAcquire, kReleaseToken,
       0, 1 | 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, kAcquireCancelled,
       kAcquireCancelLater, 0, 0, kAcquireCancelLater, 1, 10, kCheck},
  };
}

void write_all(const char *tag, const Sem &sem, const Bytes &image,
               uint8_t mode = 0) {
  for (const Bytes &sc : scripts(sem)) write_seed(tag, sem, image, sc, mode);
}

bool wait_waiting(shmsem_t *s, uint32_t n) {
  for (int i = 0; i < 10000; i++) {
    struct shmsem_stat st;
    if (shmsem_stat(s, &st) == 0 && st.waiting == n) return true;
    usleep(1000);
  }
  return false;
}

// Threads of this process queued on `s` until cancelled.
struct Queued {
  std::vector<std::thread> threads;
  std::vector<shmsem_cancel_t> cancels;
  std::atomic<int> granted{0};
  explicit Queued(size_t n) : cancels(n) {
    for (auto &c : cancels) shmsem_cancel_init(&c);
  }
  void start(shmsem_t *s) {
    for (size_t i = 0; i < cancels.size(); i++) {
      threads.emplace_back([this, s, i] {
        shmsem_lease_t l;
        if (shmsem_acquire_ex(s, nullptr, &cancels[i], 0, &l) == 0) {
          granted++;
          shmsem_release(s, &l);
        }
      });
      if (!wait_waiting(s, uint32_t(i + 1))) die("queue", -ETIMEDOUT);
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
  printf("shmsem_fuzz_seeds: %d seeds in %s\n", g_written, g_dir.c_str());
  return 0;
}
