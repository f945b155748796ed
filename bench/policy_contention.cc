// Policies under contention (issue 28): glibc sem_t (process-shared, in a
// shared mapping), the fair floor (bench/adapters.h's Ticket: a minimal
// strict-FIFO ticket semaphore whose waiters sleep), shmsem under strict
// FIFO and shmsem under SHMSEM_POLICY_BOUNDED (max_bypass_ns 0 = 1 ms), all
// in ONE run with short interleaved windows, so that a change of the
// machine's load hits every contender alike.
//
// Not Google Benchmark: each cell is R repetitions of a W-second window per
// contender, the contenders' order rotated every repetition (rep r starts
// with contender r mod 4), and the statistics are over the repetitions.
//
// A window: K forked processes on one semaphore of N permits loop
//   acquire, ~100 ns critical section (calibrated spin), release
// for W seconds. Two loop shapes, because the clock reads change the
// hand-off dynamics (the question about K = 2):
//   2clk  t0 = now; acquire; t1 = now; spin; release   wait = t1 - t0
//         (the shape of scenarios_contention.cc, the project's benchmark)
//   1clk  acquire; t = now; spin; release              wait <= t - t_prev
//         (one clock read per iteration; the "wait" recorded is the whole
//         cycle between two acquisitions of the same process, an upper
//         bound of the wait by the critical section, the release and the
//         loop: ~0.2-0.5 us, noise beside the waits that matter here)
// pin 1: child i runs on CPU i mod m of the parent's affinity mask
// (sched_setaffinity before its first acquire); pin 0: the scheduler places.
//
// Output: one table row per (K, N, pin, shape, contender): median, min and
// max throughput over the repetitions (M acquire/release pairs per second,
// all processes together), p99 wait from the histogram merged over the
// repetitions, the worst single wait of any repetition, Jain's index of the
// per-process counts (median), and the ratios of shmsem (FIFO and bounded)
// to sem_t and to the fair floor, medians over repetitions; and, from the
// children's rusage, sleeps (voluntary context switches) and CPU time per
// acquisition with the kernel's share: a profile of every cell; p99.9 and
// the number of waits over 5 ms. With --dat FILE
// also gnuplot data (bench/policy.gp draws it) with every window's
// throughput and worst wait as comment lines. Nothing here asserts a
// timing.
//
// Usage: shmsem_policy_bench [--reps R] [--window SECONDS] [--dat FILE]
//                            [--shape 1clk|2clk|both] [--cells LIST]
//                            [--only sem_t|ticket|fifo|bounded] [--gap NS]
//   LIST: comma-separated K:N:pin, e.g. 2:1:1,8:4:0 (default: K = 2, 4, 8
//   with N = 1 and K = 8 with N = 4, each unpinned and pinned).
//   --only runs one contender (for a profile under perf or strace -f).
//   --gap NS spins NS after each release, before the next acquire.
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <algorithm>
#include <string>
#include <vector>

#include "adapters.h"

namespace bench {
namespace {

constexpr uint64_t kCriticalNs = 100;
// --gap NS: a calibrated spin after each release, before the next acquire
// (0: none), to tell the clock read's cost from its place in the loop.
uint64_t g_gap_ns = 0;

// shmsem with a policy (Shmsem in adapters.h is the FIFO default).
template <uint32_t kPolicy>
class ShmsemPolicy {
 public:
  static constexpr const char *kName =
      kPolicy == SHMSEM_POLICY_BOUNDED ? "shmsem_bounded" : "shmsem_fifo";
  static constexpr uint32_t kMaxPermits = SHMSEM_MAX_PERMITS;

  int init(uint32_t permits, uint32_t max_waiters) {
    char name[64];
    unique_shm_name(name, sizeof name);
    shmsem_config cfg{};
    cfg.permits = permits;
    cfg.max_waiters = max_waiters;
    cfg.policy = kPolicy;
    cfg.max_bypass_ns = 0;  // bounded: the default bound, 1 ms
    int r = shmsem_create(name, &cfg, SHMSEM_EXCL, &s_);
    if (r == 0) shmsem_unlink(name);
    return r;
  }
  ~ShmsemPolicy() {
    if (s_) shmsem_detach(s_);
  }
  void attach() {}
  uint64_t acquire() {
    shmsem_lease_t l;
    int r = shmsem_acquire(s_, &l);
    if (r != 0) die("shmsem_acquire", r);
    sem_ = l.sem;
    return l.gen << 20 | l.index;
  }
  void release(uint64_t token) {
    shmsem_lease_t l{token >> 20, sem_, uint32_t(token & 0xfffff), 0};
    int r = shmsem_release(s_, &l);
    if (r != 0) die("shmsem_release", r);
  }
  shmsem_t *handle() { return s_; }

 private:
  shmsem_t *s_ = nullptr;
  uint64_t sem_ = 0;
};
using ShmsemFifo = ShmsemPolicy<SHMSEM_POLICY_FIFO>;
using ShmsemBounded = ShmsemPolicy<SHMSEM_POLICY_BOUNDED>;

enum Contender { kSem = 0, kTicket, kFifo, kBounded, kContenders };
const char *const kNames[kContenders] = {"sem_t", "ticket (fair floor)",
                                         "shmsem FIFO", "shmsem bounded"};
const char *const kShort[kContenders] = {"sem_t", "ticket", "fifo", "bounded"};

// Waits longer than this are counted (the aim for the worst wait).
constexpr uint64_t kLongWaitNs = 5'000'000;

struct PerProcess {
  uint64_t ops;
  uint64_t long_waits;  // waits over kLongWaitNs
  uint64_t end_ns;
  Histogram wait;
};

struct Window {
  double ops_per_s = 0;
  double jain = 0;
  uint64_t max_wait = 0;
  uint64_t ops = 0;
  uint64_t long_waits = 0;
  // The children's rusage over the window (RUSAGE_CHILDREN before and
  // after reaping them): voluntary context switches (sleeps), user and
  // system CPU time.
  double sleeps = 0, user_s = 0, sys_s = 0;
  Histogram all{};
  bool ok = false;
};

struct Cell {
  int k;
  uint32_t n;
  bool pin;
};

struct Control {
  std::atomic<uint32_t> ready{0}, go{0}, stop{0}, unpinned{0};
};

// One window of one contender.
template <class A>
Window run_window(const Cell &c, bool one_clock, uint64_t window_ns,
                  const std::vector<int> &cpus, Control *ctl, PerProcess *per) {
  Window w;
  A a;
  int r = a.init(c.n, 1024);
  if (r != 0) {
    fprintf(stderr, "policy_bench: %s init: %s\n", A::kName, strerror(-r));
    return w;
  }
  memset(static_cast<void *>(per), 0, sizeof(PerProcess) * size_t(c.k));
  ctl->ready.store(0);
  ctl->go.store(0);
  ctl->stop.store(0);
  ctl->unpinned.store(0);
  rusage ru0{}, ru1{};
  getrusage(RUSAGE_CHILDREN, &ru0);
  Children kids;
  for (int i = 0; i < c.k; i++) {
    kids.spawn(i, [&](int me) {
      if (c.pin && !pin_self(cpus[size_t(me) % cpus.size()]))
        ctl->unpinned.fetch_add(1, std::memory_order_relaxed);
      a.attach();
      PerProcess &p = per[me];
      ctl->ready.fetch_add(1, std::memory_order_acq_rel);
      wait_until_equal(&ctl->go, 1);
      if (one_clock) {
        uint64_t prev = now_ns();
        while (!ctl->stop.load(std::memory_order_relaxed)) {
          uint64_t tok = a.acquire();
          uint64_t t = now_ns();
          spin_ns(kCriticalNs);
          a.release(tok);
          if (g_gap_ns) spin_ns(g_gap_ns);
          p.ops++;
          p.wait.add(t - prev);
          p.long_waits += (t - prev) > kLongWaitNs;
          prev = t;
        }
      } else {
        while (!ctl->stop.load(std::memory_order_relaxed)) {
          uint64_t t0 = now_ns();
          uint64_t tok = a.acquire();
          uint64_t t1 = now_ns();
          spin_ns(kCriticalNs);
          a.release(tok);
          if (g_gap_ns) spin_ns(g_gap_ns);
          p.ops++;
          p.wait.add(t1 - t0);
          p.long_waits += (t1 - t0) > kLongWaitNs;
        }
      }
      p.end_ns = now_ns();
    });
  }
  while (ctl->ready.load(std::memory_order_acquire) != uint32_t(c.k))
    sleep_ns(100'000);
  uint64_t start = now_ns();
  store_and_wake(&ctl->go, 1);
  sleep_ns(window_ns);
  ctl->stop.store(1, std::memory_order_relaxed);
  if (kids.wait_all(10'000'000'000u) != 0) {
    fprintf(stderr, "policy_bench: %s: child failed or hung\n", A::kName);
    return w;
  }
  getrusage(RUSAGE_CHILDREN, &ru1);
  auto secs = [](const timeval &a, const timeval &b) {
    return double(b.tv_sec - a.tv_sec) + double(b.tv_usec - a.tv_usec) * 1e-6;
  };
  w.sleeps = double(ru1.ru_nvcsw - ru0.ru_nvcsw);
  w.user_s = secs(ru0.ru_utime, ru1.ru_utime);
  w.sys_s = secs(ru0.ru_stime, ru1.ru_stime);
  if (ctl->unpinned.load() != 0) {
    fprintf(stderr, "policy_bench: sched_setaffinity failed in a child\n");
    return w;
  }
  uint64_t end = start;
  std::vector<double> ops;
  uint64_t total = 0;
  for (int i = 0; i < c.k; i++) {
    end = std::max(end, per[i].end_ns);
    ops.push_back(double(per[i].ops));
    total += per[i].ops;
    w.long_waits += per[i].long_waits;
    w.all.merge(per[i].wait);
  }
  w.ops = total;
  w.ops_per_s = double(total) / (double(end - start) * 1e-9);
  w.jain = jain_index(ops);
  w.max_wait = w.all.max;
  w.ok = true;
  return w;
}

Window run_one(int who, const Cell &c, bool one_clock, uint64_t window_ns,
               const std::vector<int> &cpus, Control *ctl, PerProcess *per) {
  switch (who) {
    case kSem:
      return run_window<GlibcSem>(c, one_clock, window_ns, cpus, ctl, per);
    case kTicket:
      return run_window<Ticket>(c, one_clock, window_ns, cpus, ctl, per);
    case kFifo:
      return run_window<ShmsemFifo>(c, one_clock, window_ns, cpus, ctl, per);
    default:
      return run_window<ShmsemBounded>(c, one_clock, window_ns, cpus, ctl, per);
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string fmt_ns(uint64_t ns) {
  char b[32];
  if (ns >= 1'000'000)
    snprintf(b, sizeof b, "%.2f ms", double(ns) / 1e6);
  else
    snprintf(b, sizeof b, "%.1f us", double(ns) / 1e3);
  return b;
}

std::vector<Cell> parse_cells(const char *s) {
  std::vector<Cell> out;
  std::string all(s);
  size_t pos = 0;
  while (pos < all.size()) {
    size_t comma = all.find(',', pos);
    std::string one = all.substr(
        pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int k = 0, pin = 0;
    unsigned n = 0;
    if (sscanf(one.c_str(), "%d:%u:%d", &k, &n, &pin) != 3 || k < 1 || n < 1) {
      fprintf(stderr, "policy_bench: bad cell '%s' (K:N:pin)\n", one.c_str());
      exit(2);
    }
    out.push_back({k, n, pin != 0});
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

int run(int argc, char **argv) {
  int reps = 5;
  double window_s = 0.4;
  const char *dat = nullptr;
  const char *shape = "both";
  std::vector<Cell> cells;
  int only = -1;
  static const option opts[] = {{"reps", required_argument, nullptr, 'r'},
                                {"window", required_argument, nullptr, 'w'},
                                {"dat", required_argument, nullptr, 'd'},
                                {"shape", required_argument, nullptr, 's'},
                                {"cells", required_argument, nullptr, 'c'},
                                {"only", required_argument, nullptr, 'o'},
                                {"gap", required_argument, nullptr, 'g'},
                                {nullptr, 0, nullptr, 0}};
  for (int o; (o = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
    switch (o) {
      case 'r':
        reps = atoi(optarg);
        break;
      case 'w':
        window_s = atof(optarg);
        break;
      case 'd':
        dat = optarg;
        break;
      case 's':
        shape = optarg;
        break;
      case 'c':
        cells = parse_cells(optarg);
        break;
      case 'g':
        g_gap_ns = strtoull(optarg, nullptr, 10);
        break;
      case 'o':
        for (int j = 0; j < kContenders; j++)
          if (strcmp(optarg, kShort[j]) == 0) only = j;
        if (only < 0) {
          fprintf(stderr, "policy_bench: --only: unknown '%s'\n", optarg);
          return 2;
        }
        break;
      default:
        fprintf(stderr,
                "usage: %s [--reps R] [--window S] [--dat FILE] "
                "[--shape 1clk|2clk|both] [--cells K:N:pin,...] "
                "[--only sem_t|ticket|fifo|bounded] [--gap NS]\n",
                argv[0]);
        return 2;
    }
  }
  if (reps < 1 || window_s <= 0) return 2;
  if (cells.empty())
    for (int pin = 0; pin < 2; pin++)
      for (Cell c : {Cell{2, 1, false}, Cell{4, 1, false}, Cell{8, 1, false},
                     Cell{8, 4, false}}) {
        c.pin = pin != 0;
        cells.push_back(c);
      }
  std::vector<bool> shapes;  // one_clock
  if (strcmp(shape, "2clk") != 0) shapes.push_back(true);
  if (strcmp(shape, "1clk") != 0) shapes.push_back(false);
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) {
    fprintf(stderr, "policy_bench: no CPU in the affinity mask\n");
    return 1;
  }
  const uint64_t window_ns = uint64_t(window_s * 1e9);
  spin_ns(0);  // calibrate before forking: every child inherits the rate
  Control *ctl = shared_new<Control>();
  const size_t per_bytes = sizeof(PerProcess) * 64;
  auto *per = static_cast<PerProcess *>(shared_alloc(per_bytes));
  FILE *df = dat ? fopen(dat, "w") : nullptr;
  if (dat && !df) {
    fprintf(stderr, "policy_bench: %s: %s\n", dat, strerror(errno));
    return 1;
  }
  if (df)
    fprintf(df,
            "# K N pin shape contender median_Mops min_Mops max_Mops "
            "p99_us max_us jain per_sem_t per_floor sleeps_per_op "
            "cpu_us_per_op sys_share p999_us waits_over_5ms acquisitions\n");
  printf("# %d reps x %.2f s per contender and cell, interleaved; %zu CPUs\n",
         reps, window_s, cpus.size());
  printf(
      "| K | N | pin | loop | contender | M ops/s median (min-max) | p99 "
      "wait | worst wait | Jain | /sem_t | /floor | sleeps/op | CPU us/op "
      "(sys) | p99.9 wait | waits > 5 ms |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int failures = 0;
  for (bool one_clock : shapes) {
    for (const Cell &c : cells) {
      if (c.k > 64) return 2;
      std::vector<Window> w[kContenders];
      for (int r = 0; r < reps; r++)
        for (int j = 0; j < kContenders; j++) {
          int who = (r + j) % kContenders;
          if (only >= 0 && who != only) continue;
          Window x = run_one(who, c, one_clock, window_ns, cpus, ctl, per);
          if (!x.ok) failures++;
          w[who].push_back(x);
        }
      // Ratios per repetition, then their median.
      auto ratio = [&](int num, int den) {
        std::vector<double> v;
        for (int r = 0; r < reps; r++)
          if (size_t(r) < w[num].size() && size_t(r) < w[den].size() &&
              w[num][size_t(r)].ok && w[den][size_t(r)].ok &&
              w[den][size_t(r)].ops_per_s > 0)
            v.push_back(w[num][size_t(r)].ops_per_s /
                        w[den][size_t(r)].ops_per_s);
        return median(v);
      };
      for (int who = 0; who < kContenders; who++) {
        std::vector<double> ops, jain;
        Histogram all{};
        uint64_t worst = 0;
        double n_ops = 0, sleeps = 0, user_s = 0, sys_s = 0, long_waits = 0;
        for (const Window &x : w[who]) {
          if (!x.ok) continue;
          n_ops += double(x.ops);
          sleeps += x.sleeps;
          long_waits += double(x.long_waits);
          user_s += x.user_s;
          sys_s += x.sys_s;
          ops.push_back(x.ops_per_s / 1e6);
          jain.push_back(x.jain);
          all.merge(x.all);
          worst = std::max(worst, x.max_wait);
        }
        if (ops.empty()) continue;
        double med = median(ops);
        double lo = *std::min_element(ops.begin(), ops.end());
        double hi = *std::max_element(ops.begin(), ops.end());
        uint64_t p99 = all.quantile(0.99), p999 = all.quantile(0.999);
        // Per acquisition, over all windows: sleeps (voluntary context
        // switches) and CPU time, with the kernel's share.
        const double sleeps_op = n_ops > 0 ? sleeps / n_ops : 0;
        const double cpu_us_op = n_ops > 0 ? (user_s + sys_s) * 1e6 / n_ops : 0;
        const double sys_frac =
            user_s + sys_s > 0 ? sys_s / (user_s + sys_s) : 0;
        std::string r_sem = "", r_floor = "";
        double rs = 0, rf = 0;
        if (who == kFifo || who == kBounded) {
          char b[32];
          rs = ratio(who, kSem);
          rf = ratio(who, kTicket);
          snprintf(b, sizeof b, rs > 0 ? "%.2fx" : "-", rs);
          r_sem = b;
          snprintf(b, sizeof b, rf > 0 ? "%.2fx" : "-", rf);
          r_floor = b;
        }
        printf(
            "| %d | %u | %d | %s | %s | %.3f (%.3f-%.3f) | %s | %s | %.2f "
            "| %s | %s | %.4f | %.2f (%.0f%%) | %s | %.0f |\n",
            c.k, c.n, int(c.pin), one_clock ? "1clk" : "2clk", kNames[who], med,
            lo, hi, fmt_ns(p99).c_str(), fmt_ns(worst).c_str(), median(jain),
            r_sem.c_str(), r_floor.c_str(), sleeps_op, cpu_us_op,
            sys_frac * 100, fmt_ns(p999).c_str(), long_waits);
        if (df) {
          // Every window, for the spread (a comment line to gnuplot).
          for (size_t r = 0; r < w[who].size(); r++)
            fprintf(df, "# w %d %u %d %s %s rep %zu %.4f M/s max %.1f us\n",
                    c.k, c.n, int(c.pin), one_clock ? "1clk" : "2clk",
                    kShort[who], r, w[who][r].ops_per_s / 1e6,
                    double(w[who][r].max_wait) / 1e3);
          fprintf(df,
                  "%d %u %d %s %s %.4f %.4f %.4f %.1f %.1f %.3f %.3f %.3f "
                  "%.4f %.3f %.3f %.1f %.0f %.0f\n",
                  c.k, c.n, int(c.pin), one_clock ? "1clk" : "2clk",
                  kShort[who], med, lo, hi, double(p99) / 1e3,
                  double(worst) / 1e3, median(jain), rs, rf, sleeps_op,
                  cpu_us_op, sys_frac, double(p999) / 1e3, long_waits, n_ops);
        }
      }
      fflush(stdout);
    }
  }
  if (df) fclose(df);
  shared_free(per, per_bytes);
  shared_delete(ctl);
  return failures ? 1 : 0;
}

}  // namespace
}  // namespace bench

int main(int argc, char **argv) { return bench::run(argc, argv); }
