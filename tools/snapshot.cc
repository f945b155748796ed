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

void read_holders(const shmsem_t *s, Snapshot *out) {
  uint64_t now = now_ns(CLOCK_MONOTONIC_COARSE);
  for (uint32_t i = 0; i < s->permits; i++) {
    const d::LeaseRecord &rec = s->leases[i];
    uint64_t word = rec.word.load(std::memory_order_acquire);
    uint32_t state = d::word_state(word);
    if (state != d::kLeaseHeld && state != d::kLeaseReserved &&
        state != d::kLeaseHeldFast)
      continue;
    Holder h;
    h.index = i;
    h.gen = d::word_gen(word);
    h.reserved = state == d::kLeaseReserved;
    // A lease taken without the lock names its holder's process record.
    uint32_t p = d::word_proc(word);
    if (state == d::kLeaseHeldFast && p >= s->max_procs) continue;
    d::Owner o = read_owner(state == d::kLeaseHeldFast ? s->procs[p].owner
                                                        : rec.owner);
    describe_process(o, false, d::may_judge(s->pidns), &h.owner);
    uint64_t since = rec.since_ns.load(std::memory_order_relaxed);
    h.held_ns = now > since ? now - since : 0;
    out->holders.push_back(std::move(h));
  }
}

Waiter make_waiter(const shmsem_t *s, uint32_t idx, uint64_t now) {
  const d::WaiterSlot &ws = s->slots[idx];
  Waiter w;
  w.slot = idx;
  w.ticket = peek(ws.ticket);
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
void read_waiters(const shmsem_t *s, uint32_t waiting, Snapshot *out) {
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
      out->waiters.push_back(make_waiter(s, idx, now));
    else
      left++;
    idx = peek(s->slots[idx].next);
  }
  if (torn || out->waiters.size() + left != waiting) {
    out->waiters.clear();
    for (uint32_t i = 0; i < s->max_waiters; i++)
      if (s->slots[i].word.load(std::memory_order_acquire) == d::kSlotWaiting)
        out->waiters.push_back(make_waiter(s, i, now));
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

  e = shmsem_stat(h.s, &out->st);
  if (e) return e;
  out->wait_p50_ns = shmsem_stat_wait_quantile(&out->st, 0.50);
  out->wait_p90_ns = shmsem_stat_wait_quantile(&out->st, 0.90);
  out->wait_p99_ns = shmsem_stat_wait_quantile(&out->st, 0.99);

  read_holders(s, out);
  read_waiters(s, out->st.waiting, out);
  return 0;
}

}  // namespace shmsem::cli
