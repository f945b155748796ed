// shmsem run NAME [--weight K] [--timeout D] [--expect D] [--] COMMAND
// [ARGS...]: hold one permit (K permits as one lease) while COMMAND runs. On
// a semaphore with a rate limit each run also takes a token, so a shell loop
// of runs is rate-limited. --expect declares how long the lease will be held
// (shmsem_declare_hold), so `status` marks it OVERDUE once held longer.
//
// Signals. SIGINT, SIGTERM, SIGHUP and SIGQUIT (those not inherited as
// ignored) are blocked in every thread and taken by one signal thread with
// sigwaitinfo(). While we wait for a permit, the thread fires the acquire's
// cancellation handle (shmsem_cancel), so the wait ends with -ECANCELED and
// leaves the queue cleanly. (SHMSEM_WAIT_INTERRUPTIBLE would be simpler, but
// a signal that lands while the waiter is awake -- the watcher wakes every
// millisecond -- runs its handler and is then lost, leaving us queued.)
// Once COMMAND runs, the thread forwards those signals to it, except ones the
// terminal sent to the whole foreground process group (si_code SI_KERNEL):
// COMMAND got those itself. A mutex orders "signal arrived" against "child
// started", so a signal between the grant and the fork is not lost either.
// Forwarding goes through a pidfd taken while the child cannot yet have been
// reaped, and the child is reaped only after forwarding stopped (waitid
// WNOWAIT first), so a signal can never hit a process that reused its PID.
//
// Exit. If COMMAND was killed by a signal, we release the permit and die of
// the same signal (without a core dump of our own, as timeout(1) does), so a
// shell loop sees "killed by SIGINT" and stops; likewise when a signal ends
// our wait for a permit.
//
// The child restores the inherited signal mask (and SIGCHLD disposition)
// before exec, so COMMAND starts as it would have without us, and asks for
// SIGTERM if we die (PR_SET_PDEATHSIG): our permit is reclaimed then, and
// COMMAND should not go on running without it. exec failures travel back
// over a close-on-exec pipe, so the parent prints the message and the child
// only calls async-signal-safe functions.
//
// A remote semaphore (redis://, shmsem(7) "Across hosts"): its lease can be
// lost while COMMAND runs (we were paused or cut off from the server past
// the lease's TTL). COMMAND then runs in a process group of its own, and a
// watcher renews the lease every kLeaseWatchMs; when the server says it is
// gone, the watcher says so and kills COMMAND's whole group (SIGKILL): it
// must not go on using what the permit guarded.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

struct RunOptions {
  std::string name;
  std::string timeout;
  bool timeout_given = false;
  std::string weight;
  bool weight_given = false;  // else 1
  std::string expect;
  bool expect_given = false;  // else nothing is declared
  std::vector<std::string> command;
};

// What the process looked like when we started; the child gets it back.
struct Inherited {
  sigset_t mask;
  struct sigaction chld;
  bool own_group = false;  // a remote lease: COMMAND in its own group
};

constexpr int kLeaseWatchMs = 250;

// The watcher of a remote lease (above).
class LeaseWatch {
 public:
  ~LeaseWatch() { stop(); }
  void start(shmsem_t *s, const shmsem_lease_t *lease, pid_t group,
             const std::string &name) {
    t_ = std::thread([this, s, lease, group, name] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(kLeaseWatchMs),
                           [this] { return stop_; })) {
        const int e = shmsem_lease_renew(s, lease);
        if (e != -EKEYEXPIRED && e != -EALREADY && e != -EIDRM) continue;
        fprintf(stderr,
                "shmsem: run %s: lease lost (%s); killing the "
                "command's process group\n",
                printable(name).c_str(), shmsem_strerror(e));
        kill(-group, SIGKILL);
        return;
      }
    });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (t_.joinable()) t_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread t_;
};

// Shared by the main thread and the signal thread.
struct SignalState {
  sigset_t set;  // the forwarded signals we handle (not inherited-ignored)
  shmsem_cancel_t cancel;
  std::mutex mu;
  int pending = 0;  // first signal that arrived before the child started
  pid_t child = 0;  // > 0 while COMMAND runs and may be signalled
  int pidfd = -1;   // of `child`, if the kernel has pidfd_open (5.3+)
};

void forward(const SignalState *st, int sig) {
  if (st->pidfd >= 0 &&
      syscall(SYS_pidfd_send_signal, st->pidfd, sig, nullptr, 0) == 0)
    return;
  // No pidfd: kill() is still exact, because `child` is not reaped (so its
  // PID is not free) until forwarding has stopped; see wait_child().
  kill(st->child, sig);
}

// Wait for COMMAND to end; stop forwarding signals to it before reaping it.
int wait_child(SignalState *st, pid_t child) {
  siginfo_t info;
  while (waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT) != 0 &&
         errno == EINTR) {
  }
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->child = -1;
    if (st->pidfd >= 0) close(st->pidfd);
    st->pidfd = -1;
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Die of `sig` as COMMAND did (or as we would have without our handling);
// our own core dump would only confuse.
// Each step is best effort: if one fails, the exit status below still says
// "signal n" the way a shell would.
[[noreturn]] void die_of_signal(int sig) {
  (void)fflush(nullptr);
  struct rlimit no_core = {0, 0};
  (void)setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  (void)sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  (void)pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  (void)raise(sig);
  // Reached if the signal's default action does not terminate (cppcheck
  // takes raise() for noreturn).
  // cppcheck-suppress unreachableCode
  _exit(kExitRunSignalBase + sig);
}

void signal_thread(SignalState *st) {
  for (;;) {
    siginfo_t info;
    int sig = sigwaitinfo(&st->set, &info);
    if (sig < 0) continue;  // EINTR
    std::lock_guard<std::mutex> lock(st->mu);
    if (st->child > 0) {
      if (info.si_code != SI_KERNEL) forward(st, sig);
    } else if (st->child == 0 && !st->pending) {
      st->pending = sig;
      shmsem_cancel(&st->cancel);
    }
  }
}

// In the child, after fork: only async-signal-safe calls until exec.
[[noreturn]] void exec_child(const Inherited &in, pid_t parent, int errfd,
                             char **argv) {
  sigaction(SIGCHLD, &in.chld, nullptr);
  if (in.own_group) setpgid(0, 0);
  int err = 0;
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) err = errno;
  if (!err && getppid() != parent)
    _exit(kExitRunFailed);  // parent already gone
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the child has one thread
  sigprocmask(SIG_SETMASK, &in.mask, nullptr);
  if (!err) {
    execvp(argv[0], argv);
    err = errno;
  }
  ssize_t ignored = write(errfd, &err, sizeof err);
  (void)ignored;
  _exit(err == ENOENT ? kExitRunNotFound : kExitRunCannotExecute);
}

std::string exec_problem(int err) {
  switch (err) {
    case ENOENT:
      return "command not found";
    case EACCES:
      return "permission denied (is it executable?)";
    case ENOEXEC:
      return "not an executable format";
    default:
      // NOLINTNEXTLINE(concurrency-mt-unsafe): no other thread calls it
      return strerror(err);
  }
}

// CLI11 stops parsing at the first positional after NAME (prefix_command),
// so options written between NAME and COMMAND, and the "--" that ends them,
// arrive at the front of o->command. Take them off; "" or the problem.
std::string take_late_options(RunOptions *o) {
  auto &cmd = o->command;
  while (!cmd.empty() && cmd[0].size() > 1 && cmd[0][0] == '-') {
    std::string arg = cmd[0];
    cmd.erase(cmd.begin());
    if (arg == "--") break;
    if (arg == "-t" || arg == "--timeout") {
      if (cmd.empty()) return "option " + arg + " needs a duration";
      o->timeout = cmd[0];
      o->timeout_given = true;
      cmd.erase(cmd.begin());
    } else if (arg.rfind("--timeout=", 0) == 0) {
      o->timeout = arg.substr(10);
      o->timeout_given = true;
    } else if (arg.rfind("-t", 0) == 0) {
      o->timeout = arg.substr(2);
      o->timeout_given = true;
    } else if (arg == "-w" || arg == "--weight") {
      if (cmd.empty()) return "option " + arg + " needs a number of permits";
      o->weight = cmd[0];
      o->weight_given = true;
      cmd.erase(cmd.begin());
    } else if (arg.rfind("--weight=", 0) == 0) {
      o->weight = arg.substr(9);
      o->weight_given = true;
    } else if (arg.rfind("-w", 0) == 0) {
      o->weight = arg.substr(2);
      o->weight_given = true;
    } else if (arg == "--expect") {
      if (cmd.empty()) return "option " + arg + " needs a duration";
      o->expect = cmd[0];
      o->expect_given = true;
      cmd.erase(cmd.begin());
    } else if (arg.rfind("--expect=", 0) == 0) {
      o->expect = arg.substr(9);
      o->expect_given = true;
    } else {
      return "unknown option '" + arg +
             "' (put '--' before a command whose name starts with '-')";
    }
  }
  if (cmd.empty()) return "no COMMAND given";
  return "";
}

// --weight: 1 to SHMSEM_MAX_PERMITS, in decimal (parse_decimal, as every
// numeric option). "" or the problem, naming the option.
std::string parse_weight(const std::string &text, uint32_t *k) {
  uint64_t v = 0;
  std::string why = parse_decimal(text, 1, SHMSEM_MAX_PERMITS, &v);
  if (!why.empty()) return "--weight: " + why;
  *k = uint32_t(v);
  return "";
}

// --expect: a duration above 0 and at most what shmsem_declare_hold(3)
// takes, SHMSEM_MAX_DECLARED_NS (about 12.7 days). "" or the problem.
std::string parse_expect(const std::string &text, uint64_t *ns) {
  std::string why = parse_duration(text, ns);
  if (!why.empty()) return "--expect: " + why;
  if (*ns == 0 || *ns > SHMSEM_MAX_DECLARED_NS)
    return "invalid --expect '" + text +
           "': give how long COMMAND should "
           "hold its permit, more than 0 and at most " +
           format_duration(SHMSEM_MAX_DECLARED_NS) + " (e.g. 30s, 10m, 2h)";
  return "";
}

// What the command line asks for, parsed and checked.
struct RunPlan {
  uint32_t weight = 1;
  bool has_timeout = false;
  uint64_t timeout_ns = 0;
  uint64_t expect_ns = 0;  // 0: nothing is declared
};

// "shmsem: run NAME: <why>" on stderr; the status for it.
int run_failed(const RunOptions &o, const std::string &why) {
  fprintf(stderr, "shmsem: run %s: %s\n", printable(o.name).c_str(),
          printable(why).c_str());
  return kExitRunFailed;
}

// Step 1, parse: the options (those after NAME too) into *plan. kExitOk, or
// the status after saying what is wrong.
int parse_run(RunOptions &o, RunPlan *plan) {
  std::string problem = take_late_options(&o);
  if (!problem.empty()) {
    fprintf(
        stderr,
        "shmsem: run %s: %s\nRun 'shmsem run --help' for more information.\n",
        printable(o.name).c_str(), printable(problem).c_str());
    return kExitRunFailed;
  }
  std::string why;
  if (o.weight_given) why = parse_weight(o.weight, &plan->weight);
  if (why.empty() && o.timeout_given)
    why = parse_duration(o.timeout, &plan->timeout_ns);
  if (why.empty() && o.expect_given)
    why = parse_expect(o.expect, &plan->expect_ns);
  if (!why.empty()) return run_failed(o, why);
  plan->has_timeout = o.timeout_given;
  return kExitOk;
}

// Block the signals we handle before any thread exists, so that only the
// signal thread ever takes them, and start that thread. *in: what the
// child gets back.
SignalState *start_signal_thread(Inherited *in) {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): no thread yet
  sigprocmask(SIG_SETMASK, nullptr, &in->mask);
  // Never freed: the detached signal thread uses it until the process exits.
  SignalState *st = new SignalState;
  shmsem_cancel_init(&st->cancel);
  sigemptyset(&st->set);
  for (int sig : kForwarded) {
    struct sigaction old;
    sigaction(sig, nullptr, &old);
    if (old.sa_handler != SIG_IGN) sigaddset(&st->set, sig);  // respect nohup
  }
  pthread_sigmask(SIG_BLOCK, &st->set, nullptr);
  // An inherited SIG_IGN for SIGCHLD would make the kernel reap the child
  // for us and hide its status.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, &in->chld);
  // From here on the process has two threads. strerror() below is safe all
  // the same (concurrency-mt-unsafe): the signal thread calls no strerror.
  std::thread(signal_thread, st).detach();
  return st;
}

// No lease: say why in the words of the options, for the errors whose
// library text would not (a timeout, a weight above the maximum). The exit
// status.
int report_no_lease(const RunOptions &o, const RunPlan &p, shmsem_t *s, int e) {
  struct shmsem_stat now_st;
  bool have_st = (e == -ETIMEDOUT || e == -EINVAL) && p.weight > 1 &&
                 shmsem_stat(s, &now_st) == 0;
  if (e == -ETIMEDOUT) {
    std::string when = p.timeout_ns ? "within " + format_duration(p.timeout_ns)
                                    : std::string("free right now");
    // After a shrink, a weight above the capacity waits for it to grow.
    std::string why =
        have_st && p.weight > now_st.permits
            ? " (the capacity is " + std::to_string(now_st.permits) + " now)"
            : "";
    std::string what = p.weight == 1 ? std::string("permit")
                                     : std::to_string(p.weight) + " permits";
    fprintf(stderr, "shmsem: run %s: no %s %s%s; '%s' was not run\n",
            printable(o.name).c_str(), what.c_str(), when.c_str(), why.c_str(),
            printable(o.command[0]).c_str());
    return kExitRunTimedOut;
  }
  // The library's -EINVAL does not say which argument; the one it can be
  // here is the weight (the deadline and flags are ours).
  if (e == -EINVAL && have_st && p.weight > now_st.max_permits) {
    fprintf(stderr,
            "shmsem: run %s: --weight %u is above the semaphore's maximum of "
            "%u permits (its --max-permits): it could never be granted; '%s' "
            "was not run\n",
            printable(o.name).c_str(), p.weight, now_st.max_permits,
            printable(o.command[0]).c_str());
    return kExitRunFailed;
  }
  report_error("run", o.name, e);
  return kExitRunFailed;
}

// Step 2, acquire: the lease, waiting as the plan says. kExitOk, or the
// status after saying why not; a signal while queued (we hold nothing)
// kills us with it.
int acquire_lease(const RunOptions &o, const RunPlan &p, Handle *h,
                  SignalState *st, shmsem_lease_t *lease) {
  struct timespec deadline;
  if (p.has_timeout) {
    uint64_t at = now_ns(CLOCK_MONOTONIC) + p.timeout_ns;
    deadline.tv_sec = time_t(at / 1'000'000'000ull);
    deadline.tv_nsec = long(at % 1'000'000'000ull);
  }
  int e =
      shmsem_acquire_ex_n(h->s, p.weight, p.has_timeout ? &deadline : nullptr,
                          &st->cancel, 0, lease);
  if (e == -ECANCELED) {
    int sig;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      sig = st->pending;
    }
    shmsem_detach(h->s);
    h->s = nullptr;
    die_of_signal(sig);
  }
  return e ? report_no_lease(o, p, h->s, e) : kExitOk;
}

// Fork COMMAND unless a signal came first (then *early is that signal and
// nothing is started). The child's PID, or -1 with errno from fork().
pid_t start_child(SignalState *st, const Inherited &in, int errfd, int readfd,
                  std::vector<char *> *argv, int *early) {
  std::lock_guard<std::mutex> lock(st->mu);
  *early = st->pending;  // arrived between the grant and now
  if (*early) return -1;
  pid_t parent = getpid();
  pid_t child = fork();
  if (child == 0) {
    close(readfd);
    exec_child(in, parent, errfd, argv->data());
  }
  st->child = child;
  if (child > 0 && in.own_group) setpgid(child, child);  // as the child does
  // Not reaped yet, so `child` still names our child.
  if (child > 0) st->pidfd = int(syscall(SYS_pidfd_open, child, 0));
  return child;
}

// What exec in the child said over the pipe, if it failed: printed.
void report_exec_failure(const RunOptions &o, int readfd) {
  int exec_err = 0;
  ssize_t n;
  do {
    n = read(readfd, &exec_err, sizeof exec_err);
  } while (n < 0 && errno == EINTR);
  close(readfd);
  if (n == ssize_t(sizeof exec_err))
    fprintf(stderr, "shmsem: run %s: cannot run '%s': %s\n",
            printable(o.name).c_str(), printable(o.command[0]).c_str(),
            exec_problem(exec_err).c_str());
}

// Step 3, spawn: run COMMAND while holding `lease`, release it after, and
// return COMMAND's status (or die of the signal that killed it).
int spawn_holding(const RunOptions &o, Handle *h, SignalState *st,
                  const Inherited &in, shmsem_lease_t *lease) {
  auto release = [&] {
    int r = shmsem_release(h->s, lease);
    if (r) report_error("run: release permit of", o.name, r);
  };
  std::vector<char *> argv;
  for (const std::string &a : o.command)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  int errpipe[2];
  if (pipe2(errpipe, O_CLOEXEC) != 0) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): no other thread calls it
    const char *why = strerror(errno);
    fprintf(stderr, "shmsem: run %s: cannot create a pipe: %s\n",
            printable(o.name).c_str(), why);
    release();
    return kExitRunFailed;
  }
  // Flush before fork, so the child cannot write our buffered output again.
  // (A failed write leaves the stream's error flag set; nothing to add here.)
  (void)fflush(nullptr);
  int early = 0;
  pid_t child = start_child(st, in, errpipe[1], errpipe[0], &argv, &early);
  int fork_errno = errno;
  close(errpipe[1]);
  if (early) {  // a signal between the grant and the fork: nothing started
    close(errpipe[0]);
    release();
    shmsem_detach(h->s);
    h->s = nullptr;
    die_of_signal(early);
  }
  if (child < 0) {
    close(errpipe[0]);
    // NOLINTNEXTLINE(concurrency-mt-unsafe): no other thread calls it
    const char *why = strerror(fork_errno);
    fprintf(stderr, "shmsem: run %s: cannot start '%s': %s\n",
            printable(o.name).c_str(), printable(argv[0]).c_str(), why);
    release();
    return kExitRunFailed;
  }
  report_exec_failure(o, errpipe[0]);
  LeaseWatch watch;
  if (in.own_group) watch.start(h->s, lease, child, o.name);
  int status = wait_child(st, child);
  watch.stop();
  release();
  if (WIFSIGNALED(status)) {
    shmsem_detach(h->s);
    h->s = nullptr;
    die_of_signal(WTERMSIG(status));
  }
  return WEXITSTATUS(status);
}

int run_run(RunOptions &o) {
  RunPlan plan;
  int rc = parse_run(o, &plan);
  if (rc != kExitOk) return rc;
  Handle h;
  int e = shmsem_open(o.name.c_str(), 0, &h.s);
  if (e) {
    report_error("run", o.name, e);
    return kExitRunFailed;
  }
  Inherited in;
  in.own_group = is_remote_name(o.name);
  SignalState *st = start_signal_thread(&in);
  shmsem_lease_t lease;
  rc = acquire_lease(o, plan, &h, st, &lease);
  if (rc != kExitOk) return rc;
  // Holding the permit from here on: every path below releases it.
  // The declaration counts from the grant, which was a moment ago. It is
  // reporting only, so a failure to make it does not stop COMMAND.
  if (plan.expect_ns) {
    int d = shmsem_declare_hold(h.s, &lease, plan.expect_ns);
    if (d)
      fprintf(stderr,
              "shmsem: run %s: cannot declare --expect %s: %s; running '%s' "
              "all the same\n",
              printable(o.name).c_str(), printable(o.expect).c_str(),
              shmsem_strerror(d), printable(o.command[0]).c_str());
  }
  return spawn_holding(o, &h, st, in, &lease);
}

}  // namespace

Subcommand add_run(CLI::App &parent) {
  auto o = std::make_shared<RunOptions>();
  CLI::App *sub = parent.add_subcommand(
      "run",
      "Run a command while holding a permit (or --weight K of them), then "
      "release it");
  CLI::Option *timeout =
      sub->add_option("-t,--timeout", o->timeout,
                      "Give up after this long without a permit (exit 124); "
                      "e.g. 500ms, 5s, 2m; 0 means try once")
          ->option_text("DURATION");
  CLI::Option *weight =
      sub->add_option("-w,--weight", o->weight,
                      "Hold K permits as one lease (default 1), granted all at "
                      "once in FIFO order")
          ->option_text("K");
  CLI::Option *expect =
      sub->add_option("--expect", o->expect,
                      "Declare how long COMMAND will hold the permit (at most "
                      "about 12 days); 'status' marks it OVERDUE after that")
          ->option_text("DURATION");
  add_name_option(sub, &o->name);
  sub->add_option("COMMAND", o->command, "The command and its arguments")
      ->required()
      ->option_text(" ");
  // Everything from COMMAND on belongs to the command, options included.
  sub->prefix_command();
  sub->positionals_at_end();
  sub->footer(
      "SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to COMMAND. Exit "
      "status: COMMAND's own; if a signal\nkilled COMMAND (or one of those "
      "signals ended the wait for a permit), shmsem dies of the same\n"
      "signal after releasing; 124 no permit before --timeout; 125 shmsem "
      "failed; 126 COMMAND not\nexecutable; 127 COMMAND not found. If "
      "shmsem itself is killed, its permit is reclaimed and\nCOMMAND gets "
      "SIGTERM.\nOn a semaphore created with --rate, each run also waits for "
      "a token (one per run, whatever\nits --weight): a loop of 'shmsem "
      "run' is a rate limiter.\n--expect is reporting only: an OVERDUE "
      "holder keeps its permit until COMMAND ends.");
  return {sub,
          [o, timeout, weight, expect] {
            o->timeout_given = timeout->count() > 0;
            o->weight_given = weight->count() > 0;
            o->expect_given = expect->count() > 0;
            return run_run(*o);
          },
          "shmsem run NAME [--weight K] [--timeout DURATION] "
          "[--expect DURATION] [--] COMMAND [ARGS...]"};
}

}  // namespace shmsem::cli
