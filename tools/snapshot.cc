#include "snapshot.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <map>
#include <new>
#include <utility>

#include "common.h"

namespace shmsem::cli {

namespace {

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

// RAII for the snapshot handle.
struct SnapshotHandle {
  shmsem_t *s = nullptr;
  SnapshotHandle() = default;
  SnapshotHandle(const SnapshotHandle &) = delete;
  SnapshotHandle &operator=(const SnapshotHandle &) = delete;
  ~SnapshotHandle() { shmsem_detach(s); }
};

// Room for the holders and waiters a call may report: what the counters
// say plus some slack, never more than the geometry allows (max_permits
// leases, max_waiters waiters always suffice, shmsem_inspect(3)). A copy
// does not change, so one retry with the numbers -ENOBUFS reported is
// enough; a damaged copy whose counters lie costs that retry.
constexpr uint32_t kSlack = 16;

uint32_t room(uint64_t counted, uint32_t bound) {
  return uint32_t(std::min<uint64_t>(counted + kSlack, bound));
}

// shmsem_inspect into vectors sized as above; its result, with the vectors
// cut to what it filled in.
int inspect_all(shmsem_t *s, struct shmsem_inspection *in,
                std::vector<struct shmsem_holder> *holders,
                std::vector<struct shmsem_waiter_info> *waiters) {
  struct shmsem_stat st;
  int e = shmsem_stat(s, &st);
  if (e) return e;
  uint32_t nh = room(uint64_t(st.held) + st.reserved, st.max_permits);
  uint32_t nw = room(st.waiting, st.max_waiters);
  for (int attempt = 0;; attempt++) {
    holders->assign(nh, {});
    waiters->assign(nw, {});
    e = shmsem_inspect(s, in, holders->data(), nh, waiters->data(), nw);
    // -EUCLEAN is checked before -ENOBUFS: the buffers may be short then too.
    bool short_buffers = in->nholders > nh || in->nwaiters > nw;
    if ((e != -ENOBUFS && !(e == -EUCLEAN && short_buffers)) || attempt == 2)
      break;
    nh = std::max(nh, in->nholders);
    nw = std::max(nw, in->nwaiters);
  }
  holders->resize(std::min(nh, in->nholders));
  waiters->resize(std::min(nw, in->nwaiters));
  return e;
}

const char *liveness_word(uint32_t liveness) {
  switch (liveness) {
    case SHMSEM_OWNER_ALIVE: return "alive";
    case SHMSEM_OWNER_DEAD: return "dead";
    default: return "unknown";
  }
}

}  // namespace

uint64_t token_due_in(const struct shmsem_stat &st, uint64_t now_ns) {
  return st.rate && st.rate_tokens == 0 && st.rate_next_ns > now_ns
             ? st.rate_next_ns - now_ns
             : 0;
}

bool waits_for_token(const struct shmsem_stat &st, uint32_t position,
                     uint32_t weight, uint32_t reserved) {
  return st.rate && position == 1 && weight > 0 && reserved >= weight;
}

void describe_process(int32_t pid, uint32_t liveness, ProcessInfo *info) {
  info->pid = pid;
  // The library's rules: "dead" only with proof; "unknown" counts as alive.
  info->alive = liveness != SHMSEM_OWNER_DEAD;
  info->liveness = liveness_word(liveness);
  info->comm.clear();
  info->cmdline.clear();
  // Only the recorded process, which shmsem_inspect found alive a moment
  // ago: a dead owner's PID may name another process by now. (Should the
  // owner exit and its PID be reused in that moment, the name shown is the
  // newcomer's; the liveness stays right for the snapshot.)
  if (liveness == SHMSEM_OWNER_ALIVE && pid > 0) {
    info->comm = proc_comm(pid);
    info->cmdline = proc_cmdline(pid);
  }
}

int take_snapshot(const std::string &name, Snapshot *out) {
  *out = Snapshot{};
  out->name = name;
  SnapshotHandle h;
  int e = shmsem_open(name.c_str(), SHMSEM_SNAPSHOT, &h.s);
  if (e) return e;

  struct shmsem_inspection in;
  std::vector<struct shmsem_holder> holders;
  std::vector<struct shmsem_waiter_info> waiters;
  try {
    e = inspect_all(h.s, &in, &holders, &waiters);
  } catch (const std::bad_alloc &) {
    return -ENOMEM;
  }
  if (e && e != -EUCLEAN) return e;
  out->damaged = e == -EUCLEAN;

  // The file the copy came from (its descriptor), not whatever the name
  // points at now.
  out->mode = in.file_mode;
  out->uid = in.file_uid;
  out->gid = in.file_gid;
  out->user = user_name(in.file_uid);
  out->group = group_name(in.file_gid);
  out->created_unix_ns = in.created_realtime_ns;
  out->created_permits = in.created_permits;

  out->st = in.stat;
  out->now_ns = in.now_ns;
  out->now_coarse_ns = in.now_coarse_ns;
  out->stat_mono_ns = in.now_ns;
  out->wait_p50_ns = shmsem_hist_quantile(in.stat.wait_hist, 0.50);
  out->wait_p90_ns = shmsem_hist_quantile(in.stat.wait_hist, 0.90);
  out->wait_p99_ns = shmsem_hist_quantile(in.stat.wait_hist, 0.99);
  out->hold_p50_ns = shmsem_stat_hold_quantile(&in.stat, 0.50);
  out->hold_p90_ns = shmsem_stat_hold_quantile(&in.stat, 0.90);
  out->hold_p99_ns = shmsem_stat_hold_quantile(&in.stat, 0.99);
  out->queue_rebuilt = in.flags & SHMSEM_INSPECT_REBUILT;
  out->torn = in.flags & SHMSEM_INSPECT_TORN;
  out->overdue = in.overdue;
  out->overdue_permits = in.overdue_permits;
  out->oldest_wait_since_ns = in.oldest_wait_since_ns;
  out->oldest_lease_since_ns = in.oldest_lease_since_ns;

  // /proc is read once per distinct process: a semaphore with thousands of
  // holders or waiters usually has few.
  std::map<std::pair<int32_t, uint32_t>, ProcessInfo> seen;
  auto describe = [&seen](int32_t pid, uint32_t liveness, ProcessInfo *info) {
    auto key = std::make_pair(pid, liveness);
    auto it = seen.find(key);
    if (it != seen.end()) {
      *info = it->second;
      return;
    }
    describe_process(pid, liveness, info);
    seen.emplace(key, *info);
  };
  out->holders.reserve(holders.size());
  for (const struct shmsem_holder &r : holders) {
    Holder hd;
    hd.index = r.lease;
    hd.gen = r.gen;
    hd.weight = r.weight;
    hd.reserved = r.flags & SHMSEM_HOLDER_RESERVED;
    describe(r.pid, r.liveness, &hd.owner);
    hd.held_ns = r.held_ns;
    hd.since_ns = r.since_ns;
    hd.declared_ns = r.declared_ns;
    hd.overdue = r.flags & SHMSEM_HOLDER_OVERDUE;
    out->holders.push_back(std::move(hd));
  }
  out->waiters.reserve(waiters.size());
  for (const struct shmsem_waiter_info &r : waiters) {
    Waiter w;
    w.position = r.position;
    w.slot = r.slot;
    w.ticket = r.ticket;
    w.weight = r.weight;
    w.reserved = r.reserved;
    describe(r.pid, r.liveness, &w.owner);
    w.waiting_ns = r.waited_ns;
    w.tid = r.tid;
    w.since_ns = r.since_ns;
    out->waiters.push_back(std::move(w));
  }
  return out->damaged ? -EUCLEAN : 0;
}

}  // namespace shmsem::cli
