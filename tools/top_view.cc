#include "top_view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include <algorithm>

#include "common.h"
#include "snapshot.h"

namespace shmsem::cli {
namespace {

// Buffers for the first shmsem_inspect call; a bigger semaphore costs one
// more call, sized from the counts the first one reports (-ENOBUFS).
constexpr uint32_t kFirstHolders = 64, kFirstWaiters = 64;

// Column widths of the holder and waiter rows (fixed, so that the columns do
// not jump between refreshes as values change width); kHolderTitle and
// kWaiterTitle below are laid out to match.
constexpr size_t kIdWidth = 5;        // LEASE, POS
constexpr size_t kWeightWidth = 6;
constexpr size_t kPidWidth = 7;       // pid_max is at most 4194304
constexpr size_t kCommandWidth = 16;  // comm is at most 15 bytes, unescaped
constexpr size_t kStateWidth = 15;    // "partial 1/2", "token in 12m05s"
constexpr size_t kTimeWidth = 8;      // HELD FOR, WAITING
constexpr size_t kDeclaredWidth = 14; // "3m20s OVERDUE"

std::string dash_if_empty(const std::string &s) { return s.empty() ? "-" : s; }

// "12.5", "0", "1234": acquisitions or timeouts per second.
std::string per_second_text(bool known, double per_s) {
  if (!known) return "-";
  char buf[32];
  if (per_s == 0)
    return "0";
  else if (per_s < 100)
    (void)snprintf(buf, sizeof buf, "%.1f", per_s);
  else
    (void)snprintf(buf, sizeof buf, "%.0f", per_s);
  return buf;
}

size_t cell_width(const std::string &s) {
  size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xc0) != 0x80) w++;
  return w;
}

// `s` padded with spaces to `width` display columns, on the left (right
// aligned) or on the right; never cut.
std::string pad_left(const std::string &s, size_t width) {
  size_t w = cell_width(s);
  return w >= width ? s : std::string(width - w, ' ') + s;
}
std::string pad_right(const std::string &s, size_t width) {
  size_t w = cell_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

std::string pool_header(const PoolSample &p) {
  std::string out = printable(p.name);
  if (p.error) return out + "  (" + shmsem_strerror(p.error) + ")";
  const struct shmsem_inspection &in = p.in;
  const struct shmsem_stat &st = in.stat;
  out += "  capacity " + std::to_string(st.permits) + "  held " +
         std::to_string(st.held) + "  waiting " + std::to_string(st.waiting);
  uint64_t oldest = 0;
  if (in.oldest_wait_since_ns && in.now_ns > in.oldest_wait_since_ns)
    oldest = in.now_ns - in.oldest_wait_since_ns;
  else if (!p.waiters.empty())
    oldest = p.waiters.front().w.waited_ns;
  if (st.waiting || !p.waiters.empty())
    out += "  oldest wait " + format_duration(oldest);
  if (st.rate) {
    out += "  tokens " + std::to_string(st.rate_tokens) + "/" +
           std::to_string(st.burst);
    uint64_t due = token_due_in(st, in.now_ns);
    if (due) out += " (next in " + format_duration(due) + ")";
  }
  if (in.overdue)
    out += "  OVERDUE " + std::to_string(in.overdue) +
           (in.overdue == 1 ? " lease (" : " leases (") +
           std::to_string(in.overdue_permits) +
           (in.overdue_permits == 1 ? " permit)" : " permits)");
  uint64_t dead = 0, dead_permits = 0;
  for (const TopHolder &t : p.holders)
    if (t.h.liveness == SHMSEM_OWNER_DEAD) {
      dead++;
      dead_permits += t.h.weight;
    }
  if (dead)
    out += "  DEAD " + std::to_string(dead) +
           (dead == 1 ? " lease (" : " leases (") +
           std::to_string(dead_permits) +
           (dead_permits == 1 ? " permit)" : " permits)") +
           ": run 'shmsem recover " + printable(p.name) + "'";
  out += "  acq/s " + per_second_text(p.rates_known, p.acquisitions_per_s) +
         "  timeouts/s " + per_second_text(p.rates_known, p.timeouts_per_s);
  if (st.closed) out += "  CLOSED";
  if (in.flags & SHMSEM_INSPECT_REBUILT) out += "  (queue order rebuilt)";
  return out;
}

const char *kHolderTitle =
    "  LEASE WEIGHT     PID COMMAND          STATE           HELD FOR  DECLARED       ARGS";
const char *kWaiterTitle =
    "    POS WEIGHT     PID COMMAND          STATE            WAITING  ARGS";

std::string holder_row(const TopHolder &t) {
  const struct shmsem_holder &h = t.h;
  const char *state = h.liveness == SHMSEM_OWNER_DEAD          ? "DEAD"
                      : (h.flags & SHMSEM_HOLDER_RESERVED) ? "granted"
                                                           : "held";
  std::string declared = "-";
  if (h.declared_ns) declared = format_duration(h.declared_ns);
  if (h.flags & SHMSEM_HOLDER_OVERDUE) declared += " OVERDUE";
  return "  " + pad_left(std::to_string(h.lease), kIdWidth) + " " +
         pad_left(std::to_string(h.weight), kWeightWidth) + " " +
         pad_left(std::to_string(h.pid), kPidWidth) + " " +
         pad_right(fit_width(dash_if_empty(printable(t.comm)), kCommandWidth),
                   kCommandWidth) +
         " " + pad_right(state, kStateWidth) + " " +
         pad_left(format_duration(h.held_ns), kTimeWidth) + "  " +
         pad_right(declared, kDeclaredWidth) + " " +
         dash_if_empty(printable(t.cmdline));
}

// `stat` and `now_ns`: the sample's, for a head waiting for a token.
std::string waiter_row(const TopWaiter &t, const struct shmsem_stat &stat,
                       uint64_t now_ns) {
  const struct shmsem_waiter_info &w = t.w;
  std::string state = "queued";
  if (w.liveness == SHMSEM_OWNER_DEAD) {
    state = "DEAD";
  } else if (waits_for_token(stat, w.position, w.weight, w.reserved)) {
    uint64_t due = token_due_in(stat, now_ns);
    state = due ? "token in " + format_duration(due) : "token now";
  } else if (w.reserved) {
    state = "partial " + std::to_string(w.reserved) + "/" +
            std::to_string(w.weight);
  }
  return "  " + pad_left(std::to_string(w.position), kIdWidth) + " " +
         pad_left(std::to_string(w.weight), kWeightWidth) + " " +
         pad_left(std::to_string(w.pid), kPidWidth) + " " +
         pad_right(fit_width(dash_if_empty(printable(t.comm)), kCommandWidth),
                   kCommandWidth) +
         " " + pad_right(state, kStateWidth) + " " +
         pad_left(format_duration(w.waited_ns), kTimeWidth) + "  " +
         dash_if_empty(printable(t.cmdline));
}

// Lines a list of n entries takes when at most `cap` rows are shown: a
// column title and the rows, the last of them "... N more" when cut; when
// not even two rows fit, one line that counts them ("... 5 waiters").
size_t list_lines(size_t n, size_t cap) {
  if (n == 0) return 0;
  if (n <= cap) return 1 + n;
  return cap >= 2 ? 1 + cap : 1;
}

size_t screen_lines(const std::vector<PoolSample> &pools, size_t cap) {
  size_t total = 2;  // title, blank line
  for (const PoolSample &p : pools)
    total += 1 + list_lines(p.holders.size(), cap) +
             list_lines(p.waiters.size(), cap);
  return total;
}

template <typename T, typename Row>
void add_list(std::vector<std::string> *out, const std::vector<T> &items,
              size_t cap, const char *title, const char *one,
              const char *many, Row render) {
  if (items.empty()) return;
  if (items.size() > cap && cap < 2) {
    out->push_back("  ... " + std::to_string(items.size()) + " " +
                   (items.size() == 1 ? one : many));
    return;
  }
  out->push_back(title);
  size_t shown = items.size() <= cap ? items.size() : cap - 1;
  for (size_t i = 0; i < shown; i++) out->push_back(render(items[i]));
  if (shown < items.size())
    out->push_back("  ... " + std::to_string(items.size() - shown) + " more " +
                   many);  // cut only at 2 or more
}

}  // namespace

std::string fit_width(const std::string &line, size_t width) {
  if (width == 0) return line;
  size_t cols = 0;
  for (size_t i = 0; i < line.size(); i++) {
    if ((static_cast<unsigned char>(line[i]) & 0xc0) == 0x80) continue;
    if (cols == width) return line.substr(0, i);
    cols++;
  }
  return line;
}

int sample_pool(const std::string &name, PoolSample *out) {
  out->name = name;
  out->holders.clear();
  out->waiters.clear();
  shmsem_t *s = nullptr;
  int e = shmsem_open(name.c_str(), SHMSEM_SNAPSHOT, &s);
  if (e == 0) {
    std::vector<struct shmsem_holder> hs(kFirstHolders);
    std::vector<struct shmsem_waiter_info> ws(kFirstWaiters);
    e = shmsem_inspect(s, &out->in, hs.data(), uint32_t(hs.size()), ws.data(),
                       uint32_t(ws.size()));
    if (e == -ENOBUFS) {  // a snapshot handle reads one copy: this one fits
      hs.resize(std::max<size_t>(out->in.nholders, 1));
      ws.resize(std::max<size_t>(out->in.nwaiters, 1));
      e = shmsem_inspect(s, &out->in, hs.data(), uint32_t(hs.size()),
                         ws.data(), uint32_t(ws.size()));
    }
    shmsem_detach(s);
    if (e == 0) {
      for (uint32_t i = 0; i < out->in.nholders && i < hs.size(); i++) {
        TopHolder t;
        t.h = hs[i];
        // Only a live owner's PID is known to name it: a dead one's may name
        // another process now, and so may an unknown one's (another PID
        // namespace, or a torn read).
        if (t.h.liveness == SHMSEM_OWNER_ALIVE) {
          t.comm = proc_comm(t.h.pid);
          t.cmdline = proc_cmdline(t.h.pid);
        }
        out->holders.push_back(std::move(t));
      }
      for (uint32_t i = 0; i < out->in.nwaiters && i < ws.size(); i++) {
        TopWaiter t;
        t.w = ws[i];
        if (t.w.liveness == SHMSEM_OWNER_ALIVE) {
          t.comm = proc_comm(t.w.pid);
          t.cmdline = proc_cmdline(t.w.pid);
        }
        out->waiters.push_back(std::move(t));
      }
    }
  }
  out->error = e;
  return e;
}

std::vector<PoolSample> sample_all_pools() {
  std::vector<std::string> names;
  DIR *dir = opendir("/dev/shm");
  if (dir) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): unsafe only on a shared DIR
    while (const struct dirent *d = readdir(dir)) {
      bool regular = d->d_type == DT_REG;
      if (d->d_type == DT_UNKNOWN) {
        struct stat sb;
        regular = fstatat(dirfd(dir), d->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
                  S_ISREG(sb.st_mode);
      }
      std::string name = std::string("/") + d->d_name;
      if (regular && name_problem(name).empty()) names.push_back(name);
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  std::vector<PoolSample> out;
  for (const std::string &name : names) {
    // Files that are not semaphores are skipped (as `shmsem list` does); a
    // damaged one, another layout's or an unreadable one is shown with its
    // error, as the exporter shows it down, not hidden.
    PoolSample p;
    const int e = sample_pool(name, &p);
    if (e == 0 || e == -EUCLEAN || e == -EPROTO || e == -EACCES)
      out.push_back(std::move(p));
  }
  return out;
}

void compute_rates(const PoolSample *prev, PoolSample *cur) {
  cur->rates_known = false;
  if (!prev || prev->error || cur->error) return;
  const struct shmsem_stat &a = prev->in.stat, &b = cur->in.stat;
  if (cur->in.now_ns <= prev->in.now_ns ||
      cur->in.created_realtime_ns != prev->in.created_realtime_ns ||
      b.acquisitions < a.acquisitions || b.timeouts < a.timeouts)
    return;  // no time passed, or another semaphore under the same name
  double secs = double(cur->in.now_ns - prev->in.now_ns) / 1e9;
  cur->acquisitions_per_s = double(b.acquisitions - a.acquisitions) / secs;
  cur->timeouts_per_s = double(b.timeouts - a.timeouts) / secs;
  cur->rates_known = true;
}

std::vector<std::string> render_top(const std::vector<PoolSample> &pools,
                                    const TopLayout &layout) {
  std::vector<std::string> lines;
  std::string title = "shmsem top  " + layout.clock + "  ";
  title += std::to_string(pools.size()) +
           (pools.size() == 1 ? " semaphore" : " semaphores") +
           (layout.all ? " in /dev/shm" : "") + ", every " + layout.delay;
  if (layout.interactive) title += "  (q quits)";
  lines.push_back(title);
  lines.push_back("");
  if (pools.empty() && layout.all)
    lines.push_back("no semaphores in /dev/shm (or none readable)");

  // The most rows any one list may show: all of them if the screen has
  // room, else the largest cap that fits, the same for every list.
  size_t cap = 0;
  for (const PoolSample &p : pools)
    cap = std::max({cap, p.holders.size(), p.waiters.size()});
  if (layout.height)
    while (cap > 0 && screen_lines(pools, cap) > layout.height) cap--;

  std::vector<size_t> pool_starts;
  for (const PoolSample &p : pools) {
    pool_starts.push_back(lines.size());
    lines.push_back(pool_header(p));
    add_list(&lines, p.holders, cap, kHolderTitle, "holder", "holders",
             holder_row);
    add_list(&lines, p.waiters, cap, kWaiterTitle, "waiter", "waiters",
             [&p](const TopWaiter &t) {
               return waiter_row(t, p.in.stat, p.in.now_ns);
             });
  }

  // Still too tall (many semaphores): cut, saying how many are not shown.
  if (layout.height && lines.size() > layout.height) {
    size_t keep = layout.height > 1 ? layout.height - 1 : layout.height;
    size_t hidden = 0;
    for (size_t start : pool_starts)
      if (start >= keep) hidden++;
    lines.resize(keep);
    if (layout.height > 1)
      lines.push_back(hidden ? "... " + std::to_string(hidden) + " more " +
                                   (hidden == 1 ? "semaphore" : "semaphores") +
                                   " (a taller window shows them)"
                             : "... (a taller window shows more)");
  }
  if (layout.width)
    for (std::string &l : lines) l = fit_width(l, layout.width);
  return lines;
}

}  // namespace shmsem::cli
