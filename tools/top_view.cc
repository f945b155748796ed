#include "top_view.h"

#include <stdio.h>

#include <algorithm>

#include "common.h"

namespace shmsem::cli {
namespace {

// Column widths of the holder and waiter rows (fixed, so that the columns do
// not jump between refreshes as values change width); kHolderTitle and
// kWaiterTitle below are laid out to match.
constexpr size_t kIdWidth = 5;  // LEASE, POS
constexpr size_t kWeightWidth = 6;
constexpr size_t kPidWidth = 7;        // pid_max is at most 4194304
constexpr size_t kCommandWidth = 16;   // comm is at most 15 bytes, unescaped
constexpr size_t kStateWidth = 15;     // "partial 1/2", "token in 12m05s"
constexpr size_t kTimeWidth = 8;       // HELD FOR, WAITING
constexpr size_t kDeclaredWidth = 14;  // "3m20s OVERDUE"

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

// "  OVERDUE 1 lease (2 permits)", "  DEAD 2 leases (2 permits)"
std::string leases_text(const char *what, uint64_t leases, uint64_t permits) {
  return std::string("  ") + what + " " + std::to_string(leases) +
         (leases == 1 ? " lease (" : " leases (") + std::to_string(permits) +
         (permits == 1 ? " permit)" : " permits)");
}

std::string pool_header(const PoolSample &p) {
  const Snapshot &s = p.snap;
  std::string out = printable(s.name);
  if (s.error) return out + "  (" + shmsem_strerror(s.error) + ")";
  const struct shmsem_stat &st = s.st;
  out += "  capacity " + std::to_string(st.permits) + "  held " +
         std::to_string(st.held) + "  waiting " + std::to_string(st.waiting);
  uint64_t oldest = 0;
  if (s.oldest_wait_since_ns && s.now_ns > s.oldest_wait_since_ns)
    oldest = s.now_ns - s.oldest_wait_since_ns;
  else if (!s.waiters.empty())
    oldest = s.waiters.front().waiting_ns;
  if (st.waiting || !s.waiters.empty())
    out += "  oldest wait " + format_duration(oldest);
  if (st.rate) {
    out += "  tokens " + std::to_string(st.rate_tokens) + "/" +
           std::to_string(st.burst);
    uint64_t due = token_due_in(st, s.now_ns);
    if (due) out += " (next in " + format_duration(due) + ")";
  }
  if (s.overdue) out += leases_text("OVERDUE", s.overdue, s.overdue_permits);
  const DeadHolders dead = dead_holders(s);
  if (dead.leases)
    out += leases_text("DEAD", dead.leases, dead.permits) +
           ": run 'shmsem recover " + printable(s.name) + "'";
  out += "  acq/s " + per_second_text(p.rates_known, p.acquisitions_per_s) +
         "  timeouts/s " + per_second_text(p.rates_known, p.timeouts_per_s);
  if (st.closed) out += "  CLOSED";
  if (s.queue_rebuilt) out += "  (queue order rebuilt)";
  // Last, where a narrow window cuts first: FIFO, the default, says
  // nothing; a bounded policy its bound, and "hand-off" while permits go
  // to the queue in order.
  if (st.policy != SHMSEM_POLICY_FIFO)
    out += "  " + format_policy(st.policy, st.max_bypass_ns) +
           (st.hand_off ? " hand-off" : "");
  return out;
}

const char *kHolderTitle =
    "  LEASE WEIGHT     PID COMMAND          STATE           HELD FOR  "
    "DECLARED       ARGS";
const char *kWaiterTitle =
    "    POS WEIGHT     PID COMMAND          STATE            WAITING  ARGS";

// PID, command name (cut to its column) and state, padded: the middle of
// a holder's or a waiter's row.
std::string owner_cells(const ProcessInfo &owner, const std::string &state) {
  return pad_left(std::to_string(owner.pid), kPidWidth) + " " +
         pad_right(
             fit_width(dash_if_empty(printable(owner.comm)), kCommandWidth),
             kCommandWidth) +
         " " + pad_right(state, kStateWidth) + " ";
}

std::string holder_row(const Holder &h) {
  const char *state = !h.owner.alive ? "DEAD" : h.reserved ? "granted" : "held";
  std::string declared = "-";
  if (h.declared_ns) declared = format_duration(h.declared_ns);
  if (h.overdue) declared += " OVERDUE";
  return "  " + pad_left(std::to_string(h.index), kIdWidth) + " " +
         pad_left(std::to_string(h.weight), kWeightWidth) + " " +
         owner_cells(h.owner, state) +
         pad_left(format_duration(h.held_ns), kTimeWidth) + "  " +
         pad_right(declared, kDeclaredWidth) + " " +
         dash_if_empty(printable(h.owner.cmdline));
}

// `stat` and `now_ns`: the sample's, for a head waiting for a token.
std::string waiter_row(const Waiter &w, const struct shmsem_stat &stat,
                       uint64_t now_ns) {
  std::string state = "queued";
  if (!w.owner.alive) {
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
         owner_cells(w.owner, state) +
         pad_left(format_duration(w.waiting_ns), kTimeWidth) + "  " +
         dash_if_empty(printable(w.owner.cmdline));
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
    total += 1 + list_lines(p.snap.holders.size(), cap) +
             list_lines(p.snap.waiters.size(), cap);
  return total;
}

template <typename T, typename Row>
void add_list(std::vector<std::string> *out, const std::vector<T> &items,
              size_t cap, const char *title, const char *one, const char *many,
              Row render) {
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

void compute_rates(const PoolSample *prev, PoolSample *cur) {
  cur->rates_known = false;
  if (!prev || prev->snap.error || cur->snap.error) return;
  const Snapshot &was = prev->snap, &now = cur->snap;
  const struct shmsem_stat &a = was.st, &b = now.st;
  if (now.now_ns <= was.now_ns || now.created_unix_ns != was.created_unix_ns ||
      b.acquisitions < a.acquisitions || b.timeouts < a.timeouts)
    return;  // no time passed, or another semaphore under the same name
  double secs = double(now.now_ns - was.now_ns) / 1e9;
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
           (layout.place.empty() ? "" : " in " + printable(layout.place)) +
           ", every " + layout.delay;
  if (layout.interactive) title += "  (q quits)";
  lines.push_back(title);
  lines.push_back("");
  if (pools.empty() && !layout.place.empty())
    lines.push_back("no semaphores in " + printable(layout.place) +
                    " (or none readable)");

  // The most rows any one list may show: all of them if the screen has
  // room, else the largest cap that fits, the same for every list.
  size_t cap = 0;
  for (const PoolSample &p : pools)
    cap = std::max({cap, p.snap.holders.size(), p.snap.waiters.size()});
  if (layout.height)
    while (cap > 0 && screen_lines(pools, cap) > layout.height) cap--;

  std::vector<size_t> pool_starts;
  for (const PoolSample &p : pools) {
    pool_starts.push_back(lines.size());
    lines.push_back(pool_header(p));
    add_list(&lines, p.snap.holders, cap, kHolderTitle, "holder", "holders",
             holder_row);
    add_list(&lines, p.snap.waiters, cap, kWaiterTitle, "waiter", "waiters",
             [&p](const Waiter &w) {
               return waiter_row(w, p.snap.st, p.snap.now_ns);
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
