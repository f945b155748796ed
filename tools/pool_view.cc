#include "pool_view.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <new>
#include <set>
#include <utility>

#include "common.h"

namespace shmsem::cli {

namespace {

std::string group_name(gid_t gid) {
  struct group gr, *res = nullptr;
  char buf[1024];
  if (getgrgid_r(gid, &gr, buf, sizeof buf, &res) == 0 && res)
    return gr.gr_name;
  return "";
}

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
    case SHMSEM_OWNER_ALIVE:
      return "alive";
    case SHMSEM_OWNER_DEAD:
      return "dead";
    default:
      return "unknown";
  }
}

// An owner as shmsem_inspect judged it (SHMSEM_OWNER_*), not yet named.
ProcessInfo judged_owner(int32_t pid, uint32_t liveness) {
  ProcessInfo info;
  info.pid = pid;
  info.judged = liveness;
  // The library's rules: "dead" only with proof; "unknown" counts as alive.
  info.alive = liveness != SHMSEM_OWNER_DEAD;
  info.liveness = liveness_word(liveness);
  return info;
}

// The percentiles `quantile` gives.
template <typename Quantile>
Quantiles quantiles(Quantile quantile) {
  return {quantile(0.50), quantile(0.90), quantile(0.99)};
}

// Everything but the lists, from the inspection of the copy.
void fill_state(const struct shmsem_inspection &in, Snapshot *out) {
  // The file the copy came from (its descriptor), not whatever the name
  // points at now.
  out->mode = in.file_mode;
  out->uid = in.file_uid;
  out->gid = in.file_gid;
  out->user = user_name(in.file_uid);
  out->group = group_name(in.file_gid);
  out->created_unix_ns = in.created_realtime_ns;
  out->created_permits = in.created_permits;
  out->lease_ttl_ms = in.lease_ttl_ms;
  out->st = in.stat;
  out->now_ns = in.now_ns;
  out->now_coarse_ns = in.now_coarse_ns;
  out->wait = quantiles(
      [&in](double q) { return shmsem_hist_quantile(in.stat.wait_hist, q); });
  out->hold = quantiles(
      [&in](double q) { return shmsem_stat_hold_quantile(&in.stat, q); });
  out->queue_rebuilt = in.flags & SHMSEM_INSPECT_REBUILT;
  out->overdue = in.overdue;
  out->overdue_permits = in.overdue_permits;
  out->oldest_wait_since_ns = in.oldest_wait_since_ns;
  out->oldest_lease_since_ns = in.oldest_lease_since_ns;
  // The realtime clock now, less the time since the snapshot's monotonic
  // reading.
  uint64_t mono = now_ns(CLOCK_MONOTONIC);
  uint64_t real = now_ns(CLOCK_REALTIME);
  out->unix_at_snapshot_ns = real - (mono > in.now_ns ? mono - in.now_ns : 0);
}

// The lists, in the order and with the fields of pool_view.h's Holder and
// Waiter.
void fill_lists(const std::vector<struct shmsem_holder> &holders,
                const std::vector<struct shmsem_waiter_info> &waiters,
                Snapshot *out) {
  out->holders.reserve(holders.size());
  for (const struct shmsem_holder &r : holders)
    out->holders.push_back(Holder{
        r.lease, r.gen, r.weight, (r.flags & SHMSEM_HOLDER_RESERVED) != 0,
        judged_owner(r.pid, r.liveness), r.held_ns, r.since_ns, r.declared_ns,
        (r.flags & SHMSEM_HOLDER_OVERDUE) != 0});
  out->waiters.reserve(waiters.size());
  for (const struct shmsem_waiter_info &r : waiters)
    out->waiters.push_back(Waiter{r.position, r.slot, r.ticket, r.weight,
                                  r.reserved, judged_owner(r.pid, r.liveness),
                                  r.waited_ns, r.tid, r.since_ns});
}

int read_pool_copy(const std::string &name, Snapshot *out) {
  Handle h;
  int e = shmsem_open(name.c_str(), SHMSEM_SNAPSHOT, &h.s);
  if (e) return e;
  struct shmsem_inspection in = {};
  std::vector<struct shmsem_holder> holders;
  std::vector<struct shmsem_waiter_info> waiters;
  e = inspect_all(h.s, &in, &holders, &waiters);
  if (e && e != -EUCLEAN) return e;
  out->damaged = e == -EUCLEAN;
  fill_state(in, out);
  fill_lists(holders, waiters, out);
  return e;
}

// A list a library call counts and fills (shmsem_list, shmsem_leftovers:
// call(buffer, room) returns how many there are, filling at most `room`):
// counted first, then filled; files may appear between the two, so again
// with the new count, a few times, then the first ones as many as there was
// room for. 0, or the call's negative errno (with `out` empty).
template <typename T, typename Call>
int fill_counted(Call call, std::vector<T> *out) {
  out->clear();
  int n = call(nullptr, 0);
  for (int attempt = 0; n > 0 && size_t(n) > out->size() && attempt < 4;
       attempt++) {
    out->assign(size_t(n), T{});
    n = call(out->data(), uint32_t(out->size()));
  }
  if (n < 0) {
    out->clear();
    return n;
  }
  out->resize(std::min(size_t(n), out->size()));
  return 0;
}

// `name` read as read_pool() does, into a new element of `out`.
void read_into(const std::string &name, bool named,
               std::vector<Snapshot> *out) {
  out->emplace_back();
  if (read_pool(name, &out->back()) == 0 && named) name_owners(&out->back());
}

}  // namespace

std::string user_name(uid_t uid) {
  struct passwd pw, *res = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res)
    return pw.pw_name;
  return "";
}

int find_pools(std::vector<FoundPool> *out, const std::string &where) {
  out->clear();
  std::vector<struct shmsem_list_entry> entries;
  const char *at = where.empty() ? nullptr : where.c_str();
  int e = fill_counted(
      [at](struct shmsem_list_entry *buf, uint32_t room) {
        return shmsem_list_at(at, buf, room);
      },
      &entries);
  if (e) return e;
  out->reserve(entries.size());
  for (const struct shmsem_list_entry &entry : entries)
    out->push_back(FoundPool{entry.name, entry.error, entry.stat,
                             entry.file_uid, is_remote_name(where)});
  return 0;
}

std::vector<struct shmsem_leftover> find_leftovers() {
  std::vector<struct shmsem_leftover> out;
  (void)fill_counted(shmsem_leftovers, &out);  // none if unreadable
  return out;
}

bool readable(int error) { return error == 0 || error == -EUCLEAN; }

bool shown_when_found(int error) {
  return error != -EBADMSG && error != -EACCES && error != -EPERM &&
         error != -ENOENT;
}

int read_pool(const std::string &name, Snapshot *out) {
  *out = Snapshot{};
  out->name = name;
  int e;
  try {
    e = read_pool_copy(name, out);
  } catch (const std::bad_alloc &) {
    e = -ENOMEM;
  }
  if (e && e != -EUCLEAN) {  // only the name and the error
    *out = Snapshot{};
    out->name = name;
  }
  out->error = e;
  return e;
}

void name_owners(Snapshot *snap) {
  // /proc is read once per distinct process: a semaphore with thousands of
  // holders or waiters usually has few.
  std::map<int32_t, std::pair<std::string, std::string>> seen;
  auto name = [&seen](ProcessInfo *info) {
    // Only the recorded process, which shmsem_inspect found alive a moment
    // ago: a dead owner's PID may name another process by now, and so may
    // an unknown one's (another PID namespace, a torn read). (Should the
    // owner exit and its PID be reused in that moment, the name shown is
    // the newcomer's; the liveness stays right for the snapshot.)
    if (info->judged != SHMSEM_OWNER_ALIVE || info->pid <= 0) return;
    auto it = seen.find(info->pid);
    if (it == seen.end())
      it = seen.emplace(info->pid, std::make_pair(proc_comm(info->pid),
                                                  proc_cmdline(info->pid)))
               .first;
    info->comm = it->second.first;
    info->cmdline = it->second.second;
  };
  for (Holder &h : snap->holders) name(&h.owner);
  for (Waiter &w : snap->waiters) name(&w.owner);
}

namespace {

// Every semaphore found at `where` ("" for /dev/shm) that
// shown_when_found() admits and `seen` does not hold yet, read into `out`.
int read_place(const std::string &where, bool named,
               std::set<std::string> *seen, std::vector<Snapshot> *out) {
  std::vector<FoundPool> found;
  int e = find_pools(&found, where);
  if (e) return e;
  for (const FoundPool &f : found) {
    if (!shown_when_found(f.error) || !seen->insert(f.name).second) continue;
    if (readable(f.error)) {
      // Again, with its holders and waiters; gone or replaced meanwhile by
      // a file it would not show: left out, as if found so.
      read_into(f.name, named, out);
      if (!shown_when_found(out->back().error)) out->pop_back();
    } else {
      out->emplace_back();  // shown with the error it was found with
      out->back().name = f.name;
      out->back().error = f.error;
    }
  }
  return 0;
}

}  // namespace

int read_pools(const std::vector<std::string> &names, bool named,
               std::vector<Snapshot> *out) {
  out->clear();
  std::set<std::string> seen;
  if (names.empty()) return read_place("", named, &seen, out);
  int first = 0;
  for (const std::string &n : names) {
    if (is_place(n)) {
      const int e = read_place(n, named, &seen, out);
      if (e && !first) first = e;
    } else if (seen.insert(n).second) {
      read_into(n, named, out);
    }
  }
  return first;
}

DeadHolders dead_holders(const Snapshot &snap) {
  DeadHolders d;
  for (const Holder &h : snap.holders)
    if (!h.owner.alive) {  // proven dead ("unknown" counts as alive)
      d.leases++;
      d.permits += h.weight;
    }
  return d;
}

uint64_t token_due_in(const struct shmsem_stat &st, uint64_t now_ns) {
  return st.rate && st.rate_tokens == 0 && st.rate_next_ns > now_ns
             ? st.rate_next_ns - now_ns
             : 0;
}

bool waits_for_token(const struct shmsem_stat &st, uint32_t position,
                     uint32_t weight, uint32_t reserved) {
  return st.rate && position == 1 && weight > 0 && reserved >= weight;
}

}  // namespace shmsem::cli
