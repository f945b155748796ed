// shmsem top [-d SECONDS] [-n ITERATIONS] [-b] [NAME...]: a live view of
// semaphores, one header line per semaphore (capacity, held, waiting, the
// oldest wait, overdue leases, acquisitions and timeouts per second) with its
// holders and its queue. The data and the lines come from top_view.h; this
// file owns the loop, the terminal and the signals.
//
// On a terminal (stdout a tty, no -b) it redraws in place with plain ANSI
// sequences (cursor home, erase to end of line and of screen; the cursor
// hidden), reads keys in non-canonical mode (q quits), fits the lines to the
// window (TIOCGWINSZ, redrawn on SIGWINCH) and puts the terminal back as it
// found it on every way out: q, -n, an error, SIGINT/SIGTERM/SIGHUP/SIGQUIT
// (after which it dies of that signal, so a calling shell sees it) and
// SIGTSTP (restored while stopped, taken again on SIGCONT). Off a terminal,
// or with -b, it prints plain snapshots one after another, a blank line
// between, and touches nothing.
//
// The signals it handles are blocked (pthread_sigmask; the command has one
// thread) except inside ppoll(), so one that arrives while a screen is being
// sampled or drawn is seen at the next wait instead of being lost before it.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"
#include "top_view.h"

namespace shmsem::cli {
namespace {

// -d: at least this, so a typo cannot make a redraw loop that only burns
// CPU; at most an hour, beyond which "live" means nothing.
constexpr uint64_t kMinDelayNs = 10'000'000ull;         // 10ms
constexpr uint64_t kMaxDelayNs = 3'600'000'000'000ull;  // 1h
constexpr uint64_t kDefaultDelayNs = 2'000'000'000ull;
// -n: at most this many refreshes.
constexpr uint64_t kMaxIterations = 1'000'000'000ull;

struct TopOptions {
  std::vector<std::string> names;
  uint64_t delay_ns = kDefaultDelayNs;
  uint64_t iterations = 0;  // 0: until q or a signal
  bool batch = false;
};

std::string delay_problem(const std::string &text, uint64_t *ns) {
  std::string what = "invalid delay '" + text + "': ";
  uint64_t v = 0;
  if (!parse_duration(text, &v).empty())
    return what + "expected seconds, e.g. 2, 0.5 or 500ms";
  if (v < kMinDelayNs)
    return what + "must be more than 0, at least 0.01 seconds (10ms)";
  if (v > kMaxDelayNs) return what + "must be at most 3600 seconds (1h)";
  *ns = v;
  return "";
}

std::string wall_clock() {
  time_t t = time(nullptr);
  struct tm tm;
  char buf[32];
  localtime_r(&t, &tm);
  size_t n = strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return std::string(buf, n);
}

// Some of `names` are places: the semaphores found there are not named
// one by one, so one of them that cannot be read is shown, not fatal.
bool named_by_place(const std::vector<std::string> &names) {
  for (const std::string &n : names)
    if (is_place(n)) return true;
  return false;
}

// Sample every semaphore asked for (or in /dev/shm), with rates against
// the previous samples. One that cannot be read shows only its header
// line, with the error.
std::vector<PoolSample> sample_pools(const TopOptions &o,
                                     const std::vector<PoolSample> &prev) {
  std::vector<Snapshot> snaps;
  (void)read_pools(o.names, true, &snaps);  // /dev/shm unreadable: none
  std::map<std::string, const PoolSample *> by_name;
  for (const PoolSample &p : prev) by_name[p.snap.name] = &p;
  std::vector<PoolSample> cur(snaps.size());
  for (size_t i = 0; i < snaps.size(); i++) {
    PoolSample &p = cur[i];
    p.snap = std::move(snaps[i]);
    if (p.snap.error) {  // a damaged one's lists too: only the error shows
      p.snap.holders.clear();
      p.snap.waiters.clear();
    }
    auto it = by_name.find(p.snap.name);
    compute_rates(it == by_name.end() ? nullptr : it->second, &p);
  }
  return cur;
}

// All of `s` to fd 1; false on an error.
bool write_all(const std::string &s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(STDOUT_FILENO, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// The signals the interactive view handles, and what the handler saw.
constexpr int kQuitSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
volatile sig_atomic_t g_quit_signal = 0;
volatile sig_atomic_t g_resized = 0;
volatile sig_atomic_t g_stop = 0;

void on_signal(int sig) {
  if (sig == SIGWINCH)
    g_resized = 1;
  else if (sig == SIGTSTP)
    g_stop = 1;
  else if (sig != SIGCONT)
    g_quit_signal = sig;
}

// The terminal while the view runs: non-canonical, no echo, cursor hidden.
// Everything it changes it puts back in leave(), which the destructor
// calls on every way out of run_top().
class Terminal {
 public:
  Terminal() = default;
  Terminal(const Terminal &) = delete;
  Terminal &operator=(const Terminal &) = delete;
  ~Terminal() { leave(); }

  void enter() {
    keys_ = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0;
    if (keys_) {
      struct termios raw = saved_;
      raw.c_lflag &= ~tcflag_t(ICANON | ECHO);
      raw.c_cc[VMIN] = 1;
      raw.c_cc[VTIME] = 0;
      (void)tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    (void)write_all("\x1b[?25l\x1b[H\x1b[2J");  // hide the cursor, clear
    entered_ = true;
    mid_line_ = true;
  }

  void leave() {
    if (!entered_) return;
    entered_ = false;
    if (keys_) (void)tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    (void)write_all(std::string(mid_line_ ? "\r\n" : "") + "\x1b[?25h");
  }

  // Columns and rows of the window (80x24 if it will not say).
  void size(size_t *cols, size_t *rows) const {
    struct winsize ws = {};
    bool ok = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0;
    *cols = ok && ws.ws_col ? ws.ws_col : 80;
    *rows = ok && ws.ws_row ? ws.ws_row : 24;
  }

  // Repaint with `lines` (at most `rows` of them, none wider than `cols`):
  // home, each line then erase to its end, then erase below. A line that
  // fills the row is not followed by an erase, which would take its last
  // character (the cursor waits on it to wrap).
  bool draw(const std::vector<std::string> &lines, size_t cols, size_t rows) {
    std::string out = "\x1b[H";
    for (size_t i = 0; i < lines.size(); i++) {
      out += lines[i];
      if (fit_width(lines[i], cols - 1) == lines[i]) out += "\x1b[K";
      if (i + 1 < lines.size()) out += "\r\n";
    }
    mid_line_ = true;
    if (lines.size() < rows) {
      out += "\r\n\x1b[J";
      mid_line_ = false;
    }
    return write_all(out);
  }

  bool keys() const { return keys_; }
  void no_keys() { keys_ = false; }

 private:
  bool entered_ = false;
  bool keys_ = false;      // stdin is a terminal we set non-canonical
  bool mid_line_ = false;  // the cursor is not at the start of a line
  struct termios saved_ = {};
};

void set_handlers(void (*handler)(int)) {
  struct sigaction sa = {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: ppoll() returns EINTR
  for (int sig : kQuitSignals) (void)sigaction(sig, &sa, nullptr);
  (void)sigaction(SIGWINCH, &sa, nullptr);
  (void)sigaction(SIGTSTP, &sa, nullptr);
  (void)sigaction(SIGCONT, &sa, nullptr);
}

// Stop as a plain SIGTSTP would, the terminal restored while stopped.
void suspend(Terminal *term, const sigset_t &handled) {
  term->leave();
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  (void)sigaction(SIGTSTP, &dfl, nullptr);
  sigset_t tstp;
  sigemptyset(&tstp);
  sigaddset(&tstp, SIGTSTP);
  (void)raise(SIGTSTP);  // pending while blocked
  // raise() returns: SIGTSTP is blocked until the next line.
  // cppcheck-suppress unreachableCode
  (void)pthread_sigmask(SIG_UNBLOCK, &tstp, nullptr);   // stops here
  (void)pthread_sigmask(SIG_BLOCK, &handled, nullptr);  // continued
  set_handlers(on_signal);
  term->enter();
}

uint64_t mono_ns() { return now_ns(CLOCK_MONOTONIC); }

// One run of the view: its options, what it shows, and the terminal and
// signal mask it changed.
struct TopSession {
  const TopOptions &o;
  bool interactive = false;  // repaints a terminal (else plain snapshots)
  TopLayout layout;
  Terminal term;
  sigset_t handled = {}, old_mask = {};
  std::vector<PoolSample> cur;
  uint64_t screens = 0;  // drawn so far, counted with -n only
  int rc = kExitOk;
  bool quit = false;

  explicit TopSession(const TopOptions &opts) : o(opts) {}
};

// Interactive: the handled signals blocked (taken only inside ppoll) and
// the terminal set up. Otherwise only the mask is noted.
void enter_view(TopSession *t) {
  sigemptyset(&t->handled);
  for (int sig : kQuitSignals) sigaddset(&t->handled, sig);
  sigaddset(&t->handled, SIGWINCH);
  sigaddset(&t->handled, SIGTSTP);
  sigaddset(&t->handled, SIGCONT);
  if (!t->interactive) {
    (void)pthread_sigmask(SIG_BLOCK, nullptr, &t->old_mask);
    return;
  }
  (void)pthread_sigmask(SIG_BLOCK, &t->handled, &t->old_mask);
  set_handlers(on_signal);
  t->term.enter();
  t->layout.interactive = t->term.keys();  // the title says "q quits"
}

// Paint the terminal (at its size now) with the current samples.
bool repaint(TopSession *t) {
  size_t cols, rows;
  t->term.size(&cols, &rows);
  t->layout.width = cols;
  t->layout.height = rows;
  return t->term.draw(render_top(t->cur, t->layout), cols, rows);
}

// Show the current samples: a repaint, or a plain snapshot after a blank
// line. False if the output failed.
bool show(TopSession *t) {
  t->layout.clock = wall_clock();
  if (t->interactive) return repaint(t);
  std::string out = t->screens ? "\n" : "";
  for (const std::string &l : render_top(t->cur, t->layout)) out += l + "\n";
  return write_all(out);
}

// Keys typed: q quits, space asks for a refresh now (true).
bool read_keys(TopSession *t, const struct pollfd &pfd, int n) {
  bool refresh = false;
  if (n > 0 && (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))) {
    t->term.no_keys();  // the terminal went away; SIGHUP follows
  } else if (n > 0 && (pfd.revents & POLLIN)) {
    char keys[64];
    ssize_t got = read(STDIN_FILENO, keys, sizeof keys);
    for (ssize_t i = 0; i < got; i++) {
      if (keys[i] == 'q' || keys[i] == 'Q') t->quit = true;
      if (keys[i] == ' ') refresh = true;
    }
    if (got == 0) t->term.no_keys();
  }
  return refresh;
}

// Wait out the delay from `started`: keys, a resize (redraw the same
// samples) and signals end the wait early.
void wait_delay(TopSession *t, uint64_t started) {
  const uint64_t deadline = started + t->o.delay_ns;
  bool refresh = false;
  while (!t->quit && !refresh) {
    uint64_t now = mono_ns();
    if (now >= deadline) break;
    struct timespec left = {time_t((deadline - now) / 1'000'000'000ull),
                            long((deadline - now) % 1'000'000'000ull)};
    struct pollfd pfd = {STDIN_FILENO, POLLIN, 0};
    int n = ppoll(&pfd, t->term.keys() ? 1 : 0, &left, &t->old_mask);
    if (g_quit_signal) {
      t->quit = true;
    } else if (g_stop) {
      g_stop = 0;
      suspend(&t->term, t->handled);
      g_resized = 1;
    }
    if (g_resized && !t->quit) {
      g_resized = 0;
      if (!repaint(t)) {
        t->rc = kExitFailure;
        t->quit = true;
      }
    }
    refresh = read_keys(t, pfd, n);
  }
}

// The terminal put back; if a signal ended the view, die of it now, so a
// calling shell sees the signal (as after any program it interrupts).
void leave_view(TopSession *t) {
  t->term.leave();
  if (!t->interactive) return;
  int sig = g_quit_signal;
  if (sig) {
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    (void)sigaction(sig, &dfl, nullptr);
    (void)fflush(nullptr);
    (void)raise(sig);
  }
  (void)pthread_sigmask(SIG_SETMASK, &t->old_mask, nullptr);  // delivers it
}

int run_top(const TopOptions &o) {
  TopSession t(o);
  // The semaphores named must exist when we start; one that disappears
  // later shows its error in its header line. Without names, every
  // semaphore found is shown, a damaged one with its error (another
  // user's damage is no reason to show nothing).
  // A place named (a server) must be reachable when we start too.
  for (const std::string &n : o.names) {
    std::vector<FoundPool> found;
    const int e = is_place(n) ? find_pools(&found, n) : 0;
    if (e) {
      report_error("top", n, e);
      return exit_code_for(e);
    }
  }
  t.cur = sample_pools(o, {});
  for (const PoolSample &p : t.cur)
    if (p.snap.error && !o.names.empty() && !named_by_place(o.names)) {
      report_error("top", p.snap.name, p.snap.error);
      return exit_code_for(p.snap.error);
    }
  t.interactive = !o.batch && isatty(STDOUT_FILENO);
  t.layout.delay = format_duration(o.delay_ns);
  t.layout.place = o.names.empty()                               ? kShmPlace
                   : o.names.size() == 1 && is_place(o.names[0]) ? o.names[0]
                                                                 : "";
  enter_view(&t);
  while (!t.quit) {
    uint64_t started = mono_ns();
    if (!show(&t)) {
      t.rc = kExitFailure;
      break;
    }
    if (o.iterations && ++t.screens >= o.iterations) break;
    wait_delay(&t, started);
    if (t.quit) break;
    t.cur = sample_pools(o, t.cur);
  }
  leave_view(&t);
  return t.rc;
}

}  // namespace

Subcommand add_top(CLI::App &parent) {
  auto o = std::make_shared<TopOptions>();
  CLI::App *sub = parent.add_subcommand(
      "top", "Live view of holders, queues and rates, refreshed (read-only)");
  sub->add_option("NAME", o->names,
                  "Semaphores to show (default: every one in /dev/shm); a "
                  "server, redis://HOST[:PORT], shows all its pools")
      ->option_text(" ")
      ->check(CLI::Validator(
          // cppcheck-suppress constParameter ; CLI11's validator signature
          [](std::string &value) { return name_or_place_problem(value); }, "",
          ""));
  sub->add_option_function<std::string>(
         "-d,--delay", [o](const std::string &) {},
         "Seconds between refreshes (default 2; e.g. 0.5, 500ms; 10ms to 1h)")
      ->option_text("SECONDS")
      ->check(CLI::Validator(
          // cppcheck-suppress constParameter ; CLI11's validator signature
          [o](std::string &value) {
            return delay_problem(value, &o->delay_ns);
          },
          "", ""));
  sub->add_option("-n,--iterations", o->iterations,
                  "Refresh this many times, then exit 0 (default: until q)")
      ->option_text("N")
      ->transform(decimal(1, kMaxIterations));
  sub->add_flag("-b,--batch", o->batch,
                "Print plain snapshots one after another, no screen control "
                "(also when stdout is not a terminal)");
  sub->footer(
      "Each semaphore: capacity, held, waiting, the oldest wait, the rate "
      "limit's tokens (with the\nnext one's time when none is left), overdue "
      "leases, leases of dead processes (with the\n'shmsem recover' that "
      "frees them), and acquisitions and timeouts per second over the last\n"
      "interval ('-' on the first screen); then its holders and its waiters "
      "in queue order (a head\nthat has its permits and waits for a token: "
      "'token in 50ms'). Keys: q quits, space refreshes now.\nReads through "
      "read-only snapshots: read permission on /dev/shm/NAME is enough.");
  return {sub, [o] { return run_top(*o); },
          "shmsem top [-d SECONDS] [-n N] [-b] [NAME|SERVER...]"};
}

}  // namespace shmsem::cli
