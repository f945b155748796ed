// The segment lock. See lock.h and docs/DESIGN.md section 2.
//
// Word states: 0 free; T held by thread T, nobody asleep; T | kLockWaiters
// held, someone may be asleep (Drepper's "mutex 3": a waiter that takes the
// lock sets the flag again, since others may still sleep). Acquire is one
// CAS; release is one exchange, and a FUTEX_WAKE only when the flag was set.
// A takeover also flips kLockTakeover, so that the word changes even when
// the new holder's tid is the dead one's (the kernel reused it).
//
// A holder that dies inside the critical section leaves its tid in the
// word. Nothing tells the waiters (no robust list); instead each waiter
// sleeps at most kCheckNs, then judges the holder named by the word:
// lock_owner when a whole copy of it (seqlock lock_seq) names the same tid
// (the holder names itself right after its CAS and clears the tid before
// unlocking), or the bare tid when it died before naming itself.
// Dead (owner.h's proof: its thread or its process provably exited) -> CAS
// the word from that value to ourselves; the section (section.h) repairs.
// Anything else (alive, stopped, unknown) -> keep waiting, checking less often,
// until the caller's limit (limit.h), if any, ends the wait without the lock.
#include "lock.h"

#include <errno.h>

#include <algorithm>

#include "clock.h"
#include "futex.h"
#include "hooks.h"
#include "owner.h"

namespace shmsem::detail {
namespace {

// First liveness check after 1 ms of waiting, then every 2, 4, ... 64 ms.
constexpr uint64_t kCheckNs = 1'000'000;
constexpr uint64_t kMaxCheckNs = 64'000'000;
constexpr int kSpins = 64;

// The holder record as one consistent copy, or false if it was being
// rewritten (or its writer died mid-write: the count stays odd). Seqlock
// reader: the acquire load of the count and the acquire fence pair with the
// writer's release fence and release store in name_holder().
bool read_lock_owner(const Core *c, Owner *out) {
  uint32_t before = c->lock_seq.load(std::memory_order_acquire);
  const Owner &o = c->lock_owner;
  out->tid = __atomic_load_n(&o.tid, __ATOMIC_RELAXED);
  out->pid = __atomic_load_n(&o.pid, __ATOMIC_RELAXED);
  out->start = __atomic_load_n(&o.start, __ATOMIC_RELAXED);
  out->ino = __atomic_load_n(&o.ino, __ATOMIC_RELAXED);
  out->tino = __atomic_load_n(&o.tino, __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_acquire);
  uint32_t after = c->lock_seq.load(std::memory_order_relaxed);
  return before == after && !(before & 1);
}

// Holder `word` (a value read from lock_word) is provably dead.
bool holder_dead(shmsem_t *s, uint32_t word) {
  if (!may_judge(s->pidns)) return false;
  Core *c = s->core;
  int32_t tid = int32_t(word & kLockTidMask);
  Owner o;
  bool whole = read_lock_owner(c, &o);
  // Cheap early exit only; the takeover CAS from exactly `word` is what
  // makes a change of holder harmless, as long as no thread with the same
  // tid took the lock meanwhile (DESIGN.md section 2, the window we state).
  if (c->lock_word.load(std::memory_order_acquire) != word) return false;
  // First the bare tid. No thread has it: whoever holds the word is gone.
  // Some thread has it: that thread may be the holder, even if the record
  // names an earlier, dead thread with the same tid: the kernel can give a
  // dead holder's tid to a new thread that then takes the lock over (from
  // its own tid, or by its own verdict) and has not named itself yet (the
  // SPIN model's F5). Then the holder counts as alive; the price is that a
  // holder that died and whose tid went to an unrelated thread before any
  // waiter looked is waited for until that thread ends.
  Verdict bare = tid_verdict(tid);
  if (bare == Verdict::kDead) return true;
  if (bare == Verdict::kAlive) return false;
  // The kernel cannot say (no PIDFD_THREAD): the record, if it is whole and
  // names that tid (holders clear the tid before unlocking, so it was
  // written by the thread that holds, or died holding, the lock).
  if (!whole || o.tid != tid) {
    o = Owner{};  // died before naming itself, or mid-write: the bare tid
    o.tid = tid;
  }
  if (thread_verdict(o) == Verdict::kDead) return true;
  return o.pid && process_verdict(o) == Verdict::kDead;
}

// The holder named by `word` is runnable (or in a short uninterruptible
// sleep): preempted, not stuck. Anything else, or unknown, is not.
bool holder_running(shmsem_t *s, uint32_t word) {
  if (!may_judge(s->pidns)) return false;
  uint64_t start;
  char state = 0;
  return proc_stat(pid_t(word & kLockTidMask), &start, &state) &&
         (state == 'R' || state == 'D');
}

// The caller's name in the lock record. The identity fields are rewritten
// (under the sequence count) only when another thread held the lock last;
// the common case is four loads and one store of the tid.
void name_holder(Core *c, const Owner &me) {
  Owner &o = c->lock_owner;
  if (o.pid != me.pid || o.tino != me.tino || o.ino != me.ino ||
      o.start != me.start ||
      (c->lock_seq.load(std::memory_order_relaxed) & 1)) {
    // Seqlock writer. Odd from here. A writer that died mid-write left it
    // odd; whoever names itself next rewrites the record and makes it even
    // again (hence the odd test above).
    uint32_t seq = c->lock_seq.load(std::memory_order_relaxed) | 1;
    c->lock_seq.store(seq, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    __atomic_store_n(&o.pid, me.pid, __ATOMIC_RELAXED);
    __atomic_store_n(&o.start, me.start, __ATOMIC_RELAXED);
    __atomic_store_n(&o.ino, me.ino, __ATOMIC_RELAXED);
    __atomic_store_n(&o.tino, me.tino, __ATOMIC_RELAXED);
    __atomic_store_n(&o.tid, me.tid, __ATOMIC_RELAXED);
    c->lock_seq.store(seq + 1, std::memory_order_release);
    return;
  }
  // Same identity: only the tid changes (0 -> ours); a reader sees a whole
  // record either way.
  __atomic_store_n(&o.tid, me.tid, __ATOMIC_RELEASE);
}

// The word after `me` takes over from `v`: never equal to `v`, even when
// `me` is the dead holder's reused tid, so that another waiter's CAS from
// `v` (its verdict was about the dead thread) fails.
uint32_t taken_over(uint32_t v, uint32_t me) {
  return me | kLockWaiters | ((v & kLockTakeover) ^ kLockTakeover);
}

// CAS the word from `v`, a holder that is gone, to ourselves (acquire, as
// any lock). False if the word changed meanwhile.
bool take_over(std::atomic<uint32_t> &word, uint32_t v, uint32_t me) {
  SHMSEM_HOOK(LOCK_TAKEOVER);
  uint32_t expected = v;
  return word.compare_exchange_strong(expected, taken_over(v, me),
                                      std::memory_order_acquire,
                                      std::memory_order_relaxed);
}

// Returns 0 with the lock, 1 with the lock taken over from a dead holder,
// or the limit's error without the lock.
int lock_slow(shmsem_t *s, uint32_t me, const Limit *limit) {
  std::atomic<uint32_t> &word = s->core->lock_word;
  for (int i = 0; i < kSpins; i++) {
    uint32_t v = word.load(std::memory_order_relaxed);
    if (v == 0 && word.compare_exchange_weak(v, me, std::memory_order_acquire,
                                             std::memory_order_relaxed))
      return 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  StepLimit step(limit, kLockFloorNs);
  bool judged = false;  // the holder was looked at at least once
  uint64_t interval = kCheckNs;
  uint64_t check_at = real_mono_ns() + interval;
  for (;;) {
    uint32_t v = word.load(std::memory_order_relaxed);
    // Flags but no tid: no holder ever writes that (every holder's tid is
    // above 0), so a writer did; nobody holds it. Or the word names our own
    // tid, and we do not hold the lock (it is never taken recursively): an
    // earlier thread with this tid died holding it, and the kernel gave us
    // its tid; only a thread of our PID namespace can hold it (may_judge:
    // the segment's namespace is known and ours), so that one is gone.
    // Either way: take it, and repair.
    if (v != 0 && ((v & kLockTidMask) == 0 ||
                   ((v & kLockTidMask) == me && may_judge(s->pidns)))) {
      if (take_over(word, v, me)) return 1;
      continue;
    }
    if (v == 0) {
      // Others may still sleep: keep the flag (mutex 3).
      if (word.compare_exchange_strong(v, me | kLockWaiters,
                                       std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return 0;
      continue;
    }
    if (!(v & kLockWaiters) &&
        !word.compare_exchange_strong(v, v | kLockWaiters,
                                      std::memory_order_relaxed,
                                      std::memory_order_relaxed))
      continue;
    v |= kLockWaiters;
    // Bounded: a wake that never comes (a dead holder, or a read-only
    // process that requeued us with FUTEX_CMP_REQUEUE) costs one interval.
    // The caller's limit shortens the sleep only once the holder has been
    // judged: even a try takes a dead holder's lock over.
    int fr = futex_wait(&word, v, judged ? step.wake_by(check_at) : check_at);
    uint64_t now = real_mono_ns();
    if (now >= check_at) {
      judged = true;
      // Acquire: if the word now names a new holder, its CAS continued the
      // release sequence of the previous unlock, so we see that unlock's
      // cleared tid and never the earlier thread's record.
      if (word.load(std::memory_order_acquire) == v) {
        if (holder_dead(s, v)) {
          if (take_over(word, v, me)) return 1;
        } else {
          SHMSEM_HOOK(LOCK_HOLDER_ALIVE);
          if (step.limited())
            step.set_floor(holder_running(s, v) ? kLockRunningFloorNs
                                                : kLockFloorNs);
        }
      }
      interval = std::min(interval * 2, kMaxCheckNs);
      check_at = now + interval;
    }
    // Only while the word is still someone else's: a lock that is free
    // now is taken at the top of the loop even past the deadline.
    if (judged && step.limited() && word.load(std::memory_order_relaxed) != 0) {
      int e = step.reached_after(fr);
      if (e) return e;
    }
  }
}

}  // namespace

void init_lock(Core *c) {
  c->lock_word.store(0, std::memory_order_relaxed);
  c->lock_seq.store(0, std::memory_order_relaxed);
  c->lock_owner = Owner{};
}

int lock_take(shmsem_t *s, const Limit *limit) {
  const Owner &me = self_thread_owner();
  const uint32_t tid = uint32_t(me.tid) & kLockTidMask;
  uint32_t expected = 0;
  // Acquire: pairs with the release exchange in lock_release().
  int got = 0;
  if (!s->core->lock_word.compare_exchange_strong(
          expected, tid, std::memory_order_acquire, std::memory_order_relaxed))
    got = lock_slow(s, tid, limit);
  if (got < 0) return got;
  SHMSEM_HOOK(LOCK_TAKEN);
  name_holder(s->core, me);
  return got;
}

void lock_release(shmsem_t *s) {
  // No longer ours: a later holder with a reused tid must not find a
  // record naming it before it has named itself (holder_dead()).
  __atomic_store_n(&s->core->lock_owner.tid, 0, __ATOMIC_RELAXED);
  // Release: everything written under the lock (the store above included)
  // happens-before the next holder's acquire CAS.
  uint32_t v = s->core->lock_word.exchange(0, std::memory_order_release);
  if (v & kLockWaiters) futex_wake(&s->core->lock_word, 1);
}

}  // namespace shmsem::detail
