// shmsem create NAME --permits N [--max-permits M] [--rate R/UNIT]
//   [--burst B] [--max-waiters W] [--policy fifo|bounded[:DURATION]]
//   [--mode 0660] [--lease-ttl DURATION] [--exclusive]
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <memory>
#include <string>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"
#include "pool_view.h"

namespace shmsem::cli {
namespace {

struct CreateOptions {
  std::string name;
  uint32_t permits = 0;
  bool permits_given = false;
  uint32_t max_permits = 0;
  std::string rate;
  bool rate_given = false;
  uint32_t burst = 0;
  uint32_t max_waiters = 0;
  std::string mode;
  std::string lease_ttl;  // remote semaphores: a DURATION
  std::string policy;     // fifo, bounded or bounded:DURATION
  bool policy_given = false;
  bool exclusive = false;
  bool any_owner = false;
};

// "0660", "660" or "0o660" to permission bits; -1 if not octal read/write
// bits within 0666 (no execute, setuid, setgid or sticky bit).
long parse_mode(std::string text) {
  if (text.rfind("0o", 0) == 0) text = text.substr(2);
  if (text.empty() || text.size() > 5) return -1;
  char *end = nullptr;
  long v = strtol(text.c_str(), &end, 8);
  if (*end || v <= 0 || (v & ~0666L)) return -1;
  return v;
}

// shmsem_create(3): a full refill of the burst (burst times the interval
// between two acquisitions) takes at most 2^62 ns, about 146 years.
constexpr uint64_t kMaxRateWindowNs = 1ull << 62;
constexpr double kNsPerYear = 365.25 * 86'400e9;

// A mistake on the command line the parser cannot see (options that do not
// fit together): said as CLI11 says its own, exit status 2.
int create_usage(const CreateOptions &o, const std::string &what) {
  fprintf(stderr,
          "shmsem: create %s: %s\nRun 'shmsem create --help' for more "
          "information.\n",
          printable(o.name).c_str(), printable(what).c_str());
  return kExitUsage;
}

// The options the existing semaphore `name` was created with, as create
// takes them ("--permits 3 --max-waiters 16"), and its capacity if it has
// changed since; "" if it cannot be read. Its --policy shows when it is not
// the default or `asked` (the configuration refused) is not.
std::string existing_settings(const std::string &name,
                              const struct shmsem_config &asked) {
  Snapshot snap;
  if (read_pool(name, &snap) != 0) return "";
  const struct shmsem_stat &st = snap.st;
  std::string out;
  uint32_t default_max = snap.created_permits
                             ? snap.created_permits
                             : SHMSEM_DEFAULT_RATE_ONLY_PERMITS;
  if (snap.created_permits)
    out += " --permits " + std::to_string(snap.created_permits);
  if (st.max_permits != default_max)
    out += " --max-permits " + std::to_string(st.max_permits);
  if (st.rate)
    out += " --rate " + format_rate(st.rate, st.rate_period_ns) + " --burst " +
           std::to_string(st.burst);
  out += " --max-waiters " + std::to_string(st.max_waiters);
  if (st.policy != SHMSEM_POLICY_FIFO || asked.policy != SHMSEM_POLICY_FIFO)
    out += " --policy " + format_policy(st.policy, st.max_bypass_ns);
  if (snap.lease_ttl_ms)
    out += " --lease-ttl " + format_duration(snap.lease_ttl_ms * 1000000ull);
  uint32_t created_capacity =
      snap.created_permits ? snap.created_permits : st.max_permits;
  if (st.permits != created_capacity)
    out += " (capacity now " + std::to_string(st.permits) + ")";
  return out.substr(1);
}

// The settings as given on the command line ("--permits 3 --rate 1/s").
std::string given_settings(const CreateOptions &o,
                           const struct shmsem_config &cfg) {
  std::string out;
  if (o.permits_given) out += " --permits " + std::to_string(o.permits);
  if (o.max_permits) out += " --max-permits " + std::to_string(o.max_permits);
  if (o.rate_given) out += " --rate " + o.rate;
  if (o.burst) out += " --burst " + std::to_string(o.burst);
  if (o.max_waiters) out += " --max-waiters " + std::to_string(o.max_waiters);
  if (o.policy_given) out += " --policy " + o.policy;
  if (!o.lease_ttl.empty()) out += " --lease-ttl " + o.lease_ttl;
  if (cfg.mode) {
    char mode[24];
    (void)snprintf(mode, sizeof mode, " --mode 0%o",
                   cfg.mode);  // fits: 20 bytes at most
    out += mode;
  }
  return out.empty() ? out : out.substr(1);
}

// --lease-ttl: a remote semaphore's alone (shmsem(7), "Across hosts").
int lease_ttl_from(const CreateOptions &o, struct shmsem_config *cfg) {
  if (o.lease_ttl.empty()) return kExitOk;
  if (!is_remote_name(o.name))
    return create_usage(o,
                        "--lease-ttl is for semaphores on a server "
                        "(redis://...); a local lease is held until its "
                        "holder exits");
  uint64_t ns = 0;
  std::string why = parse_duration(o.lease_ttl, &ns);
  if (!why.empty()) return create_usage(o, why);
  if (ns < 100000000ull || ns > 86400000000000ull)
    return create_usage(o, "--lease-ttl must be 100ms to 24h");
  cfg->lease_ttl_ms = uint32_t(ns / 1000000);
  return kExitOk;
}

// The configuration the options ask for, checked as shmsem_create(3) will
// check it: kExitOk, or the usage status after saying what is wrong.
int config_from(const CreateOptions &o, struct shmsem_config *out) {
  *out = {};
  struct shmsem_config &cfg = *out;
  cfg.permits = o.permits;
  cfg.max_waiters = o.max_waiters;
  cfg.max_permits = o.max_permits;
  if (o.rate_given) {
    std::string why = parse_rate(o.rate, &cfg.rate, &cfg.rate_period_ns);
    if (!why.empty()) return create_usage(o, why);
    cfg.burst = o.burst;
    uint32_t burst = o.burst ? o.burst : 1;
    uint64_t interval = cfg.rate_period_ns / cfg.rate;  // >= 1: parse_rate
    if ((unsigned __int128)burst * interval > kMaxRateWindowNs) {
      char years[32];
      (void)snprintf(years, sizeof years, "%.0f",  // fits: below 10^12
                     double(burst) * double(interval) / kNsPerYear);
      return create_usage(
          o, "--burst " + std::to_string(burst) + " is too large for --rate " +
                 o.rate + ": refilling it takes about " + years +
                 " years, and a rate limit may take at most about 146 (2^62 "
                 "ns); give a smaller --burst or a faster --rate");
    }
  }
  if (!o.permits_given && !o.rate_given)
    return create_usage(o,
                        "--permits is required (or --rate, for a "
                        "semaphore limited by its rate alone)");
  if (o.permits_given && o.permits == 0 && !o.rate_given)
    return create_usage(o,
                        "--permits 0 needs --rate: a semaphore with "
                        "neither limit would limit nothing");
  if (o.max_permits && o.max_permits < o.permits)
    return create_usage(o, "--max-permits " + std::to_string(o.max_permits) +
                               " is below --permits " +
                               std::to_string(o.permits));
  if (!o.mode.empty()) {
    long m = parse_mode(o.mode);
    if (m < 0) {
      fprintf(stderr,
              "shmsem: create %s: invalid mode '%s': give octal read/write "
              "bits within 0666, such as 0660 or 0600\n",
              printable(o.name).c_str(), printable(o.mode).c_str());
      return kExitUsage;
    }
    cfg.mode = uint32_t(m);
  }
  if (o.policy_given) {
    std::string why = parse_policy(o.policy, &cfg.policy, &cfg.max_bypass_ns);
    if (!why.empty()) return create_usage(o, why);
  }
  return lease_ttl_from(o, &cfg);
}

int run_create(const CreateOptions &o) {
  struct shmsem_config cfg = {};
  int rc = config_from(o, &cfg);
  if (rc != kExitOk) return rc;
  Handle h;
  int flags = int((o.exclusive ? SHMSEM_EXCL : 0u) |
                  (o.any_owner ? SHMSEM_ANY_OWNER : 0u));
  int e = shmsem_create(o.name.c_str(), &cfg, flags, &h.s);
  if (e == -EPERM) {
    fprintf(stderr,
            "shmsem: create %s: semaphore exists and belongs to another "
            "user; check who created it ('ls -l /dev/shm%s'), and use "
            "--any-owner only if you trust that user\n",
            printable(o.name).c_str(), printable(o.name).c_str());
    return exit_code_for(e);
  }
  if (e == -EEXIST && !o.exclusive) {
    // Not exclusive, so it exists with other settings: say which.
    std::string was = existing_settings(o.name, cfg);
    if (!was.empty()) {
      fprintf(stderr,
              "shmsem: create %s: semaphore already exists with %s; remove "
              "it first with 'shmsem rm %s' to change them (the capacity "
              "alone changes with 'shmsem set')\n",
              printable(o.name).c_str(), was.c_str(),
              command_word(o.name).c_str());
      return kExitExists;
    }
  }
  if (e == -EOPNOTSUPP && cfg.policy == SHMSEM_POLICY_BOUNDED)
    return create_usage(o,
                        "--policy " + o.policy +
                            " is for local semaphores; a semaphore on a "
                            "server (redis://...) grants in FIFO order only");
  if (e == -EINVAL) {
    // Everything the library checks is checked above; should it still
    // refuse, name what it was given rather than its generic words.
    return create_usage(o, "shmsem_create(3) refused the settings " +
                               given_settings(o, cfg) +
                               " as invalid; see its limits there");
  }
  if (e) {
    report_error("create", o.name, e);
    return exit_code_for(e);
  }
  return kExitOk;
}

// The help's footer: how the limits and the policy work, and when an
// existing semaphore is used.
constexpr const char *kCreateFooter =
    "With --rate, each acquire also takes a token, in the same FIFO order "
    "(one token per acquire,\nwhatever its --weight): at most COUNT per "
    "UNIT, up to --burst at once. With both limits an acquire\nwaits for "
    "a permit and a token.\n"
    "--policy bounded trades order for throughput: while the head of the "
    "queue has waited less than\nDURATION, a newcomer may take a free "
    "permit past it (as sem_t lets anyone); once it has waited\nlonger, "
    "permits go to the queue in order, until a head has waited less or "
    "the queue is empty.\nChoose it when waiters outnumber CPUs and "
    "throughput matters more than order (shmsem(7), Policies).\n"
    "An existing semaphore is used only if it was created with the same "
    "--permits, --max-permits,\n--rate, --burst, --policy and, on a "
    "server, --lease-ttl (10s if left out)\n(and --max-waiters, if "
    "given).";

}  // namespace

Subcommand add_create(CLI::App &parent) {
  auto o = std::make_shared<CreateOptions>();
  CLI::App *sub = parent.add_subcommand(
      "create",
      "Create a semaphore (or open it if it exists with the same settings)");
  add_name_option(sub, &o->name);
  CLI::Option *permits =
      sub->add_option("-n,--permits", o->permits,
                      "Concurrency limit: permits out at once (0-1048576; "
                      "0 or left out with --rate: rate limit only)")
          ->option_text("N")
          ->transform(decimal(0, SHMSEM_MAX_PERMITS));
  sub->add_option("--max-permits", o->max_permits,
                  "Capacity 'shmsem set' may grow it to later (default: "
                  "--permits; 1024 with --rate alone)")
      ->option_text("M")
      ->transform(decimal(1, SHMSEM_MAX_PERMITS));
  CLI::Option *rate =
      sub->add_option("-r,--rate", o->rate,
                      "Rate limit: at most COUNT acquires per UNIT (ms, s, "
                      "min, h), e.g. 100/s, 5/min, 1/h, 3/10s; a plain "
                      "number is per second")
          ->option_text("COUNT/UNIT");
  sub->add_option("-b,--burst", o->burst,
                  "Acquires the rate allows at once after a quiet spell "
                  "(default 1)")
      ->option_text("B")
      ->transform(decimal(1, SHMSEM_MAX_BURST))
      ->needs(rate);
  sub->add_option("-w,--max-waiters", o->max_waiters,
                  "Wait-queue bound (default 1024)")
      ->option_text("W")
      ->transform(decimal(1, SHMSEM_MAX_WAITERS));
  CLI::Option *policy =
      sub->add_option("--policy", o->policy,
                      "Who gets a released permit: fifo (default): the queue, "
                      "in order; bounded[:DURATION]: whoever asks first, past "
                      "the queue, until its head has waited DURATION (default "
                      "1ms), then the queue in order")
          ->option_text("fifo|bounded[:DURATION]");
  sub->add_option("-m,--mode", o->mode,
                  "Read/write bits of /dev/shm/NAME in octal, within 0666 "
                  "(default 0600)")
      ->option_text("MODE");
  sub->add_option("--lease-ttl", o->lease_ttl,
                  "redis:// semaphores: a lease not renewed this long is "
                  "taken back (default 10s)")
      ->option_text("DURATION");
  sub->add_flag("--any-owner", o->any_owner,
                "Also use an existing semaphore another user owns");
  sub->add_flag("-x,--exclusive", o->exclusive,
                "Fail (exit 4) if it already exists");
  sub->footer(kCreateFooter);
  return {sub,
          [o, permits, rate, policy] {
            o->permits_given = permits->count() > 0;
            o->rate_given = rate->count() > 0;
            o->policy_given = policy->count() > 0;
            return run_create(*o);
          },
          "shmsem create NAME --permits N [--max-permits M] [--rate COUNT/UNIT "
          "[--burst B]] [--max-waiters W] [--policy fifo|bounded[:DURATION]] "
          "[--mode MODE] [--lease-ttl DURATION] [--exclusive] [--any-owner]"};
}

}  // namespace shmsem::cli
