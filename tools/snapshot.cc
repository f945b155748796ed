#include "snapshot.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "common.h"
#include "handle.h"
#include "layout.h"
#include "owner.h"
#include "segment_copy.h"

namespace shmsem::cli {

namespace d = shmsem::detail;

namespace {

// Fields the library changes under its lock are plain integers; we read them
// without the lock (we could not take it through a read-only mapping), so
// read each one once, atomically, and accept that the snapshot may be torn.
template <typename T>
T peek(const T &field) {
  return __atomic_load_n(&field, __ATOMIC_RELAXED);
}

std::string user_name(uid_t uid) {
  struct passwd pw, *res = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return pw.pw_name;
  return "";
}

std::string group_name(gid_t gid) {
  struct group gr, *res = nullptr;
  char buf[1024];
  if (getgrgid_r(gid, &gr, buf, sizeof buf, &res) == 0 && res) return gr.gr_name;
  return "";
}

// describe_process()'s memo for the snapshot being taken. Not kept across
// snapshots: a process may die between two, and every distinct owner a
// writer puts in the segment would stay here for the life of a long-running
// caller (the segment fuzzer, a future exporter): memory without bound.
using OwnerKey = std::tuple<int32_t, int32_t, uint64_t, uint64_t, uint64_t, bool>;
std::map<OwnerKey, ProcessInfo> g_seen;

d::Owner read_owner(const d::Owner &o) {
  d::Owner copy{};
  copy.pid = peek(o.pid);
  copy.tid = peek(o.tid);
  copy.start = peek(o.start);
  copy.ino = peek(o.ino);
  copy.tino = peek(o.tino);
  return copy;
}

bool same_owner(const d::Owner &a, const d::Owner &b) {
  return a.pid == b.pid && a.tid == b.tid && a.start == b.start &&
         a.ino == b.ino && a.tino == b.tino;
}

// One holder line for lease record `l` (the one a token names) and
// `weight` permits. A HELD_FAST record names its holder's process record.
void add_holder(const shmsem_t *s, uint32_t l, uint64_t word, uint32_t weight,
                uint64_t now, Snapshot *out) {
  const d::LeaseRecord &rec = s->leases[l];
  uint32_t state = d::word_state(word);
  uint32_t p = d::word_proc(word);
  if (state == d::kLeaseHeldFast && p >= s->max_procs) return;
  Holder h;
  h.index = l;
  h.gen = d::word_gen(word);
  h.weight = weight;
  h.reserved = state == d::kLeaseReserved;
  d::Owner o = read_owner(state == d::kLeaseHeldFast ? s->procs[p].owner
                                                      : rec.owner);
  describe_process(o, false, d::may_judge(s->pidns), &h.owner);
  uint64_t since = rec.since_ns.load(std::memory_order_relaxed);
  h.held_ns = now > since ? now - since : 0;
  out->holders.push_back(std::move(h));
}

// The records that are not free, one line per lease. A weighted lease is
// HELD records of one owner linked (LeaseRecord::link) from the one its
// token names, which no other record links to; a reservation is the
// RESERVED records linked from its slot's `lease`. What was granted to a
// waiter that has not returned yet is a holder line ("reserved"); what a
// queued head has gathered so far is not a lease yet: it is counted in
// (*reserved_for)[slot] and shown with the waiter.
//
// The segment is untrusted, and a copy of a busy one may be torn: every
// link is checked against the geometry, and each record joins at most one
// line (`taken`), so every walk together visits each record at most once
// and a loop of links ends. A HELD record no walk reached (a loop) is shown
// from itself; so is a RESERVED record on no slot's chain. RETIRED records
// (above the capacity after a shrink) are nobody's and not shown.
void read_holders(const shmsem_t *s, Snapshot *out,
                  std::vector<uint32_t> *reserved_for) {
  const uint32_t n = s->permits, m = s->max_waiters;
  const uint64_t now = now_ns(CLOCK_MONOTONIC_COARSE);
  // Each word read once: whether a link is followed depends on it.
  std::vector<uint64_t> word(n);
  for (uint32_t l = 0; l < n; l++)
    word[l] = s->leases[l].word.load(std::memory_order_acquire);
  auto state = [&word](uint32_t l) { return d::word_state(word[l]); };
  auto link = [s](uint32_t l) { return peek(s->leases[l].link); };
  std::vector<char> taken(n, 0);
  // x (HELD) belongs to the lease of l (HELD): the library's rule
  // (release.cc), which ends a chain at a record of another owner.
  auto part_of = [&](uint32_t l, uint32_t x) {
    return x < n && !taken[x] && state(x) == d::kLeaseHeld &&
           same_owner(read_owner(s->leases[x].owner),
                      read_owner(s->leases[l].owner));
  };
  std::vector<char> linked(n, 0);
  for (uint32_t l = 0; l < n; l++) {
    if (state(l) != d::kLeaseHeld) continue;
    uint32_t x = link(l);
    if (x != l && part_of(l, x)) linked[x] = 1;
  }
  auto walk_lease = [&](uint32_t l) {
    taken[l] = 1;
    uint32_t weight = 1;
    for (uint32_t x = link(l); part_of(l, x); x = link(x)) {
      taken[x] = 1;
      weight++;
    }
    add_holder(s, l, word[l], weight, now, out);
  };
  for (uint32_t l = 0; l < n; l++)
    if (state(l) == d::kLeaseHeld && !linked[l]) walk_lease(l);
  for (uint32_t l = 0; l < n; l++) {
    if (state(l) == d::kLeaseHeld && !taken[l]) walk_lease(l);
    if (state(l) == d::kLeaseHeldFast) {  // never weighted
      taken[l] = 1;
      add_holder(s, l, word[l], 1, now, out);
    }
  }

  reserved_for->assign(m, 0);
  for (uint32_t w = 0; w < m; w++) {
    const d::WaiterSlot &ws = s->slots[w];
    uint32_t sw = ws.word.load(std::memory_order_acquire);
    if (sw == d::kSlotFree) continue;
    const uint32_t first = peek(ws.lease);
    uint32_t count = 0;
    for (uint32_t x = first; x < n && !taken[x] &&
                             state(x) == d::kLeaseReserved &&
                             peek(s->leases[x].slot) == w;
         x = link(x)) {
      taken[x] = 1;
      count++;
    }
    if (count == 0) continue;
    if (sw == d::kSlotWaiting)
      (*reserved_for)[w] = count;
    else
      add_holder(s, first, word[first], count, now, out);
  }
  for (uint32_t l = 0; l < n; l++)
    if (state(l) == d::kLeaseReserved && !taken[l])
      add_holder(s, l, word[l], 1, now, out);
  std::sort(out->holders.begin(), out->holders.end(),
            [](const Holder &a, const Holder &b) { return a.index < b.index; });
}

Waiter make_waiter(const shmsem_t *s, uint32_t idx, uint64_t now,
                   const std::vector<uint32_t> &reserved_for) {
  const d::WaiterSlot &ws = s->slots[idx];
  Waiter w;
  w.slot = idx;
  w.ticket = peek(ws.ticket);
  w.weight = peek(ws.weight);
  w.reserved = reserved_for[idx];
  d::Owner o = read_owner(ws.owner);
  describe_process(o, true, d::may_judge(s->pidns), &w.owner);
  uint64_t enq = ws.enq_ns.load(std::memory_order_relaxed);
  w.waiting_ns = now > enq ? now - enq : 0;
  return w;
}

// Follow core->head and slot.next. A walk that leaves the WAITING slots
// (and LEFT_QUEUED ones, still linked but nobody's waiter: not shown),
// loops, or disagrees with core->waiting was torn by a concurrent change:
// then rebuild the order from the tickets of all WAITING slots instead.
void read_waiters(const shmsem_t *s, uint32_t waiting,
                  const std::vector<uint32_t> &reserved_for, Snapshot *out) {
  uint64_t now = now_ns(CLOCK_MONOTONIC);
  std::vector<bool> seen(s->max_waiters, false);
  bool torn = false;
  size_t left = 0;
  uint32_t idx = peek(s->core->head);
  while (idx != d::kNone) {
    uint32_t word = idx < s->max_waiters
                        ? s->slots[idx].word.load(std::memory_order_acquire)
                        : 0;
    if (idx >= s->max_waiters || seen[idx] ||
        (word != d::kSlotWaiting && word != d::kSlotLeftQueued)) {
      torn = true;
      break;
    }
    seen[idx] = true;
    if (word == d::kSlotWaiting)
      out->waiters.push_back(make_waiter(s, idx, now, reserved_for));
    else
      left++;
    idx = peek(s->slots[idx].next);
  }
  if (torn || out->waiters.size() + left != waiting) {
    out->waiters.clear();
    for (uint32_t i = 0; i < s->max_waiters; i++)
      if (s->slots[i].word.load(std::memory_order_acquire) == d::kSlotWaiting)
        out->waiters.push_back(make_waiter(s, i, now, reserved_for));
    std::sort(out->waiters.begin(), out->waiters.end(),
              [](const Waiter &a, const Waiter &b) { return a.ticket < b.ticket; });
    out->queue_rebuilt = true;
  }
  for (size_t i = 0; i < out->waiters.size(); i++)
    out->waiters[i].position = uint32_t(i + 1);
}

}  // namespace

void describe_process(const d::Owner &o, bool is_slot, bool can_judge,
                      ProcessInfo *info) {
  // Memoised per owner within one snapshot (take_snapshot() empties it):
  // a semaphore with thousands of holders or waiters usually has few
  // distinct processes, and /proc/<pid>/stat of a process with many threads
  // costs time proportional to its threads.
  OwnerKey key{o.pid, o.tid, o.start, o.ino, o.tino, is_slot};
  auto it = g_seen.find(key);
  if (it != g_seen.end()) {
    *info = it->second;
    return;
  }
  info->pid = o.pid;
  // The library's rules: "dead" only with proof, and only by a process
  // that shares the semaphore's PID namespace.
  d::Verdict v = can_judge ? d::record_verdict(o, is_slot) : d::Verdict::kUnknown;
  info->alive = v != d::Verdict::kDead;
  info->liveness = v == d::Verdict::kAlive  ? "alive"
                   : v == d::Verdict::kDead ? "dead"
                                            : "unknown";
  // Name the process only if it is the recorded one (not a reused PID).
  uint64_t now_start = 0;
  char state;
  if (v == d::Verdict::kAlive && d::proc_stat(o.pid, &now_start, &state) &&
      (o.start == 0 || now_start == o.start)) {
    info->comm = proc_comm(o.pid);
    info->cmdline = proc_cmdline(o.pid);
  }
  g_seen[key] = *info;
}

int take_snapshot(const std::string &name, Snapshot *out) {
  *out = Snapshot{};
  out->name = name;
  g_seen.clear();
  SegmentCopy h;
  int e = copy_segment(name.c_str(), &h);
  if (e) return e;
  const shmsem_t *s = h.s;

  // The file the copy came from (same descriptor), not whatever the name
  // points at now.
  out->mode = h.file.st_mode & 07777;
  out->uid = h.file.st_uid;
  out->gid = h.file.st_gid;
  out->user = user_name(h.file.st_uid);
  out->group = group_name(h.file.st_gid);
  out->created_unix_ns = s->hdr->created_ns;

  out->created_permits = peek(s->hdr->created_permits);

  e = shmsem_stat(h.s, &out->st);
  if (e) return e;
  out->stat_mono_ns = now_ns(CLOCK_MONOTONIC);
  out->wait_p50_ns = shmsem_stat_wait_quantile(&out->st, 0.50);
  out->wait_p90_ns = shmsem_stat_wait_quantile(&out->st, 0.90);
  out->wait_p99_ns = shmsem_stat_wait_quantile(&out->st, 0.99);

  std::vector<uint32_t> reserved_for;  // by slot: what a queued head gathered
  read_holders(s, out, &reserved_for);
  read_waiters(s, out->st.waiting, reserved_for, out);
  return 0;
}

}  // namespace shmsem::cli
