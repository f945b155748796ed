// shmsem status NAME [--json]: a Snapshot (pool_view.h) rendered as text or
// as one JSON document. Needs only read permission on /dev/shm/NAME.
// shmsem status --prometheus [NAME...]: the metrics of metrics.h (any number
// of semaphores, or all of them) in the Prometheus text format.
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <algorithm>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"
#include "metrics.h"
#include "pool_view.h"

namespace shmsem::cli {
namespace {

using Json = nlohmann::ordered_json;  // keys in insertion order: stable output

// The version of the JSON document below; bump it when a field changes
// meaning or disappears (adding fields does not bump it).
constexpr int kStatusJsonVersion = 1;

struct StatusOptions {
  std::string name;
  std::vector<std::string> names;  // as given; one unless --prometheus
  bool json = false;
  bool prometheus = false;
};

std::string octal_mode(uint32_t mode) {
  char buf[16];
  (void)snprintf(buf, sizeof buf, "%04o", mode);  // at most 11 digits
  return buf;
}

std::string format_time(uint64_t unix_ns, bool utc_iso) {
  time_t t = time_t(unix_ns / 1'000'000'000ull);
  struct tm tm;
  char buf[64];
  size_t n;  // 0 if it did not fit (buf is then undefined)
  if (utc_iso) {
    gmtime_r(&t, &tm);
    n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  } else {
    localtime_r(&t, &tm);
    n = strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", &tm);
  }
  return std::string(buf, n);
}

std::string or_dash(const std::string &s) { return s.empty() ? "-" : s; }

// How long after the snapshot the rate limit's next token is there; 0 if
// one is there now.
uint64_t next_token_in(const Snapshot &s) {
  return token_due_in(s.st, s.now_ns);
}

// "1 permit", "3 permits"
std::string permits_text(uint64_t n) {
  return std::to_string(n) + (n == 1 ? " permit" : " permits");
}

// "4 permits (shrinking: 2 still held above it), max 8, up to 1024 waiters"
std::string capacity_text(const Snapshot &s) {
  const struct shmsem_stat &st = s.st;
  std::string out =
      std::to_string(st.permits) + (st.permits == 1 ? " permit" : " permits");
  if (st.retiring)
    out +=
        " (shrinking: " + std::to_string(st.retiring) + " still held above it)";
  else if (s.created_permits == 0 && st.permits == st.max_permits)
    out += " (rate only: no other concurrency limit)";
  if (st.max_permits != st.permits)
    out += ", max " + std::to_string(st.max_permits);
  return out + ", up to " + std::to_string(st.max_waiters) + " waiters";
}

// "100/s, burst 20, tokens 7, next token now" (or "in 12ms")
std::string rate_text(const Snapshot &s) {
  const struct shmsem_stat &st = s.st;
  uint64_t in = next_token_in(s);
  return format_rate(st.rate, st.rate_period_ns) + ", burst " +
         std::to_string(st.burst) + ", tokens " +
         std::to_string(st.rate_tokens) + ", next token " +
         (in ? "in " + format_duration(in) : std::string("now"));
}

// "fifo (permits go to the queue in order)", "bounded:1ms, newcomers
// may pass (...)" or "bounded:1ms, handing off in order (...)".
std::string policy_text(const struct shmsem_stat &st) {
  std::string name = format_policy(st.policy, st.max_bypass_ns);
  if (st.policy == SHMSEM_POLICY_FIFO)
    return name + " (permits go to the queue in order)";
  if (st.policy != SHMSEM_POLICY_BOUNDED) return name;
  std::string bound = format_duration(st.max_bypass_ns);
  return st.hand_off ? name + ", handing off in order (the head has waited " +
                           bound + " or more)"
                     : name + ", newcomers may pass (nobody waits, or the " +
                           "head has waited less than " + bound + ")";
}

// The policy's members: its name as --policy takes it without the bound
// ("fifo", "bounded"), the bound and the hand-off (null under FIFO).
void policy_json(const struct shmsem_stat &st, Json *j) {
  const bool bounded = st.policy == SHMSEM_POLICY_BOUNDED;
  (*j)["policy"] = bounded ? "bounded"
                   : st.policy == SHMSEM_POLICY_FIFO
                       ? "fifo"
                       : "policy " + std::to_string(st.policy);
  (*j)["max_bypass_ns"] = bounded ? Json(st.max_bypass_ns) : Json(nullptr);
  (*j)["hand_off"] = bounded ? Json(st.hand_off != 0) : Json(nullptr);
}

// "1 lease (2 permits) held longer than declared"
std::string overdue_text(const Snapshot &s) {
  std::string out =
      std::to_string(s.overdue) + (s.overdue == 1 ? " lease" : " leases");
  out += " (" + std::to_string(s.overdue_permits) +
         (s.overdue_permits == 1 ? " permit)" : " permits)");
  return out + " held longer than declared";
}

// A holder's DECLARED cell: "-", "5s", or "5s OVERDUE".
std::string declared_text(const Holder &h) {
  if (!h.declared_ns) return "-";
  return format_duration(h.declared_ns) + (h.overdue ? " OVERDUE" : "");
}

Json process_json(const ProcessInfo &p) {
  Json j;
  j["pid"] = p.pid;
  j["comm"] = p.comm.empty() ? Json(nullptr) : Json(p.comm);
  j["cmdline"] = p.cmdline.empty() ? Json(nullptr) : Json(p.cmdline);
  j["alive"] = p.alive;
  j["liveness"] = p.liveness;
  return j;
}

Json holder_json(const Holder &h) {
  Json e;
  e["lease"] = std::to_string(h.index) + ":" + std::to_string(h.gen);
  e["index"] = h.index;
  e["gen"] = h.gen;
  e["state"] = h.reserved ? "reserved" : "held";
  e["weight"] = h.weight;
  e.update(process_json(h.owner));
  e["held_ns"] = h.held_ns;
  e["declared_ns"] = h.declared_ns ? Json(h.declared_ns) : Json(nullptr);
  e["overdue"] = h.overdue;
  return e;
}

Json waiter_json(const Waiter &w) {
  Json e;
  e["position"] = w.position;
  e["ticket"] = w.ticket;
  e["slot"] = w.slot;
  e["weight"] = w.weight;
  e["reserved"] = w.reserved;
  e.update(process_json(w.owner));
  e["waiting_ns"] = w.waiting_ns;
  return e;
}

Json to_json(const Snapshot &s) {
  const struct shmsem_stat &st = s.st;
  Json j;
  j["version"] = kStatusJsonVersion;
  j["name"] = s.name;
  j["state"] = st.closed ? "closed" : "open";
  j["capacity"] = st.permits;
  j["max_permits"] = st.max_permits;
  j["created_permits"] = s.created_permits;
  j["retiring"] = st.retiring;
  j["max_waiters"] = st.max_waiters;
  j["available"] = st.available;
  j["held"] = st.held;
  j["reserved"] = st.reserved;
  j["waiting"] = st.waiting;
  if (st.rate) {
    j["rate"] = {{"limit", format_rate(st.rate, st.rate_period_ns)},
                 {"count", st.rate},
                 {"period_ns", st.rate_period_ns},
                 {"burst", st.burst},
                 {"tokens", st.rate_tokens},
                 {"next_token_in_ns", next_token_in(s)}};
  } else {
    j["rate"] = nullptr;
  }
  policy_json(st, &j);
  j["file"] = {{"path", "/dev/shm" + s.name},
               {"mode", octal_mode(s.mode)},
               {"uid", s.uid},
               {"user", s.user.empty() ? Json(nullptr) : Json(s.user)},
               {"gid", s.gid},
               {"group", s.group.empty() ? Json(nullptr) : Json(s.group)}};
  if (is_remote_name(s.name)) j["file"] = nullptr;  // on a server: no file
  // A remote semaphore's lease TTL (null: a local one's leases never expire).
  j["lease_ttl_ns"] = s.lease_ttl_ms
                          ? Json(uint64_t(s.lease_ttl_ms) * 1000000ull)
                          : Json(nullptr);
  j["created"] = format_time(s.created_unix_ns, true);
  j["holders"] = Json::array();
  for (const Holder &h : s.holders) j["holders"].push_back(holder_json(h));
  j["waiters"] = Json::array();
  for (const Waiter &w : s.waiters) j["waiters"].push_back(waiter_json(w));
  j["queue_rebuilt"] = s.queue_rebuilt;
  j["counters"] = {{"acquisitions", st.acquisitions},
                   {"timeouts", st.timeouts},
                   {"cancellations", st.cancellations},
                   {"queue_full", st.queue_full},
                   {"shutdown_failures", st.shutdown_failures},
                   {"reclaimed_holders", st.reclaimed_holders},
                   {"reclaimed_waiters", st.reclaimed_waiters},
                   {"repairs", st.repairs}};
  j["wait_ns"] = {
      {"p50", s.wait.p50}, {"p90", s.wait.p90}, {"p99", s.wait.p99}};
  // Bucket bounds (1ms ... 1h); null: above the last one, an hour.
  auto bound = [](uint64_t ns) {
    return ns == UINT64_MAX ? Json(nullptr) : Json(ns);
  };
  j["hold_ns"] = {{"p50", bound(s.hold.p50)},
                  {"p90", bound(s.hold.p90)},
                  {"p99", bound(s.hold.p99)}};
  if (is_remote_name(s.name)) {  // a server keeps sums, no histograms
    j["wait_ns"] = nullptr;
    j["hold_ns"] = nullptr;
  }
  j["overdue"] = s.overdue;
  j["overdue_permits"] = s.overdue_permits;
  j["damaged"] = s.damaged;
  return j;
}

// The state, one "key value" line each: capacity, counts, file.
void render_summary(const Snapshot &s, FILE *f) {
  const struct shmsem_stat &st = s.st;
  std::string owner = or_dash(s.user.empty() ? std::to_string(s.uid) : s.user) +
                      ":" + (s.group.empty() ? std::to_string(s.gid) : s.group);
  std::vector<std::vector<std::string>> kv = {
      {"semaphore", s.name},
      {"state", st.closed ? "closed (shut down: new acquires fail)" : "open"},
      {"capacity", capacity_text(s)},
      {"available", std::to_string(st.available)},
      {"held", std::to_string(st.held)},
      {"reserved", std::to_string(st.reserved)},
      {"waiting", std::to_string(st.waiting)},
      {"file", "/dev/shm" + s.name + ", mode " + octal_mode(s.mode) +
                   ", owner " + owner},
      {"created", format_time(s.created_unix_ns, false)},
  };
  if (is_remote_name(s.name))  // on a server: no file to show
    kv.erase(std::remove_if(kv.begin(), kv.end(),
                            [](const auto &row) { return row[0] == "file"; }),
             kv.end());
  if (s.lease_ttl_ms)  // after "waiting": how long an unrenewed lease lasts
    kv.insert(kv.begin() + 7,
              {"lease ttl", format_duration(s.lease_ttl_ms * 1000000ull)});
  kv.insert(kv.begin() + 3, {"policy", policy_text(st)});
  if (st.rate) kv.insert(kv.begin() + 3, {"rate", rate_text(s)});
  if (s.overdue) {
    // After "held": leases held longer than their holders declared.
    auto held = std::find_if(kv.begin(), kv.end(),
                             [](const auto &row) { return row[0] == "held"; });
    kv.insert(held + 1, {"overdue", overdue_text(s)});
  }
  if (s.damaged)
    kv.insert(kv.begin() + 1, {"warning",
                               "DAMAGED: its counters contradict its size "
                               "(see the message below)"});
  for (const auto &row : kv)
    fprintf(f, "%-10s %s\n", row[0].c_str(), printable(row[1]).c_str());
}

// The holders' table, and what frees the leases of processes that died.
void render_holders(const Snapshot &s, FILE *f) {
  uint64_t permits = 0;
  for (const Holder &h : s.holders) permits += h.weight;
  fprintf(f, "\nHolders: %zu", s.holders.size());
  if (permits != s.holders.size())
    fprintf(f, " (%llu permits)", (unsigned long long)permits);
  fprintf(f, "\n");
  if (!s.holders.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const Holder &h : s.holders)
      rows.push_back({std::to_string(h.index) + ":" + std::to_string(h.gen),
                      h.reserved ? "reserved" : "held",
                      std::to_string(h.weight), std::to_string(h.owner.pid),
                      or_dash(h.owner.comm), h.owner.liveness,
                      format_duration(h.held_ns), declared_text(h),
                      or_dash(h.owner.cmdline)});
    print_table(f,
                {"LEASE", "STATE", "WEIGHT", "PID", "COMMAND", "ALIVE",
                 "HELD FOR", "DECLARED", "ARGS"},
                rows);
  }
  // Leases of processes proven dead stay out until something reclaims
  // them: say what does, now.
  const DeadHolders dead = dead_holders(s);
  if (dead.leases)
    fprintf(f,
            "  %llu %s (%s) %s by %s that died: run 'shmsem recover %s' "
            "to free %s now\n",
            (unsigned long long)dead.leases,
            dead.leases == 1 ? "lease" : "leases",
            permits_text(dead.permits).c_str(),
            dead.leases == 1 ? "is held" : "are held",
            dead.leases == 1 ? "a process" : "processes",
            command_word(s.name).c_str(), dead.leases == 1 ? "it" : "them");
}

// The queue's table, and when a rate-limited head gets its token.
void render_waiters(const Snapshot &s, FILE *f) {
  fprintf(f, "\nWaiters (queue order): %zu%s\n", s.waiters.size(),
          s.queue_rebuilt ? " (queue changed while reading; ordered by ticket)"
                          : "");
  if (s.waiters.empty()) return;
  std::vector<std::vector<std::string>> rows;
  for (const Waiter &w : s.waiters)
    rows.push_back({std::to_string(w.position), std::to_string(w.ticket),
                    std::to_string(w.weight), std::to_string(w.reserved),
                    std::to_string(w.owner.pid), or_dash(w.owner.comm),
                    w.owner.liveness, format_duration(w.waiting_ns),
                    or_dash(w.owner.cmdline)});
  print_table(f,
              {"POS", "TICKET", "WEIGHT", "RESERVED", "PID", "COMMAND", "ALIVE",
               "WAITING FOR", "ARGS"},
              rows);
  // A rate-limited head that has its permits waits for a token: its
  // RESERVED alone would read as stuck.
  const Waiter &head = s.waiters.front();
  if (waits_for_token(s.st, head.position, head.weight, head.reserved)) {
    uint64_t due = next_token_in(s);
    std::string when = due ? "in " + format_duration(due) : "now";
    fprintf(f,
            "  The head of the queue has its %s reserved and is waiting "
            "for a token, due %s\n",
            permits_text(head.weight).c_str(), when.c_str());
  }
}

// A remote semaphore's percentiles (shmsem(7), "Not offered remotely").
constexpr const char *kNoRemoteHistograms =
    "not kept for a remote semaphore (no histograms on the server)";

// The counters and the wait and hold quantiles.
void render_counters(const Snapshot &s, FILE *f) {
  const struct shmsem_stat &st = s.st;
  fprintf(f, "\nCounters:\n");
  std::vector<std::vector<std::string>> counters = {
      {"acquisitions", std::to_string(st.acquisitions)},
      {"timeouts", std::to_string(st.timeouts)},
      {"cancellations", std::to_string(st.cancellations)},
      {"queue full", std::to_string(st.queue_full)},
      {"shutdown failures", std::to_string(st.shutdown_failures)},
      {"reclaimed holders", std::to_string(st.reclaimed_holders)},
      {"reclaimed waiters", std::to_string(st.reclaimed_waiters)},
      {"repairs", std::to_string(st.repairs)},
  };
  for (const auto &row : counters)
    fprintf(f, "  %-18s %s\n", row[0].c_str(), row[1].c_str());
  if (is_remote_name(s.name)) {
    // The server keeps only sums of the times: percentiles would read 0.
    fprintf(f, "  %-18s %s\n", "wait time", kNoRemoteHistograms);
    fprintf(f, "  %-18s %s\n", "hold time", kNoRemoteHistograms);
    return;
  }
  if (st.acquisitions == 0 && s.wait.p99 == 0) {
    fprintf(f, "  %-18s %s\n", "wait time", "no waits recorded");
  } else {
    fprintf(f, "  %-18s p50 <= %s, p90 <= %s, p99 <= %s\n", "wait time",
            format_duration(s.wait.p50).c_str(),
            format_duration(s.wait.p90).c_str(),
            format_duration(s.wait.p99).c_str());
  }
  // Released leases only (one still held is not counted), in the fixed
  // buckets of shmsem_hold_bound_ns: "<= 5ms", or "> 1h00m" past the last.
  auto bound = [](uint64_t ns) {
    return ns == UINT64_MAX ? "> " + format_duration(shmsem_hold_bound_ns(
                                         SHMSEM_HOLD_BUCKETS - 2))
                            : "<= " + format_duration(ns);
  };
  if (s.hold.p99 == 0) {
    fprintf(f, "  %-18s %s\n", "hold time", "no releases recorded");
  } else {
    fprintf(f, "  %-18s p50 %s, p90 %s, p99 %s\n", "hold time",
            bound(s.hold.p50).c_str(), bound(s.hold.p90).c_str(),
            bound(s.hold.p99).c_str());
  }
}

void render_text(const Snapshot &s, FILE *f) {
  render_summary(s, f);
  render_holders(s, f);
  render_waiters(s, f);
  render_counters(s, f);
}

// The damaged segment's message, after what was read: what it means and
// what to do, in the commands that exist. (No command repairs counters:
// shmsem_recover reclaims dead owners' permits but keeps the counters it
// finds, so the way out is a new semaphore.)
void warn_damaged(const std::string &name) {
  std::string n = printable(name);
  fprintf(stderr,
          "shmsem: status %s: warning: the semaphore is damaged: its counters "
          "contradict its size, so someone with write access wrote into "
          "/dev/shm%s; what could be read is shown above and may be wrong, "
          "and its users may be refused permits or given too many.\n"
          "Check who may write to it ('shmsem list' shows its owner); then "
          "stop its users, remove it with 'shmsem rm %s' and create it "
          "again with 'shmsem create %s'.\n",
          n.c_str(), n.c_str(), n.c_str(), n.c_str());
}

// --prometheus: every semaphore named (none: all in /dev/shm). One that
// cannot be read is shmsem_up 0 and a line on stderr, and the status stays
// 0, so a textfile collector's file is still written (docs/prometheus.md).
int run_prometheus(const StatusOptions &o) {
  std::vector<Snapshot> readings;
  int e = read_pools(o.names, false, &readings);
  if (e) {
    fprintf(stderr, "shmsem: status: cannot read /dev/shm: %s\n",
            shmsem_strerror(e));
    return kExitFailure;
  }
  for (const Snapshot &r : readings)
    if (r.error) report_error("status", r.name, r.error);
  std::string text = serialize_text(build_metrics(readings));
  (void)fwrite(text.data(), 1, text.size(), stdout);  // ferror() below
  return fflush(stdout) == 0 && !ferror(stdout) ? kExitOk : kExitFailure;
}

// NAME takes several values only with --prometheus, so it is checked here,
// after the parse, in the words CLI11 uses for the other subcommands'
// single NAME. "" if the names are fine.
std::string names_problem(const StatusOptions &o) {
  if (o.names.empty()) return o.prometheus ? "" : "NAME is required";
  std::string problem = name_problem(o.names.front());
  if (!problem.empty() || o.prometheus) {
    for (size_t i = 1; i < o.names.size() && problem.empty(); i++)
      problem = name_problem(o.names[i]);
    return problem;
  }
  if (o.names.size() == 1) return "";
  std::string extra;
  for (size_t i = 1; i < o.names.size(); i++)
    extra += " " + printable(o.names[i]);
  return (o.names.size() == 2 ? "The following argument was not expected:"
                              : "The following arguments were not expected:") +
         extra + " (several NAMEs only with --prometheus)";
}

int run_status(StatusOptions o) {
  std::string problem = names_problem(o);
  if (!problem.empty()) {
    fprintf(stderr,
            "shmsem: status: %s\nRun 'shmsem status --help' for more "
            "information.\n",
            problem.c_str());
    return kExitUsage;
  }
  if (o.prometheus) return run_prometheus(o);
  o.name = o.names.front();
  Snapshot snap;
  int e = read_pool(o.name, &snap);
  if (e && !snap.damaged) {
    report_error("status", o.name, e);
    return exit_code_for(e);
  }
  name_owners(&snap);
  // Command lines and names are bytes, not always UTF-8: dump() would throw
  // on them; invalid bytes print as U+FFFD instead.
  if (o.json)
    printf("%s\n", to_json(snap)
                       .dump(2, ' ', false, Json::error_handler_t::replace)
                       .c_str());
  else
    render_text(snap, stdout);
  // Any failed write, earlier or now, fails the command.
  bool written = fflush(stdout) == 0 && !ferror(stdout);
  if (snap.damaged) {
    warn_damaged(o.name);
    return kExitFailure;
  }
  return written ? kExitOk : kExitFailure;
}

}  // namespace

Subcommand add_status(CLI::App &parent) {
  auto o = std::make_shared<StatusOptions>();
  CLI::App *sub = parent.add_subcommand(
      "status",
      "Show permits, holders, the wait queue and counters (read-only)");
  sub->add_option("NAME", o->names,
                  "Semaphore name: '/' and 1-255 characters, e.g. /pool, "
                  "or redis://HOST[:PORT]/POOL, "
                  "'redis+unix:///SOCKET?pool=POOL' (--prometheus: any number; "
                  "none: every semaphore)")
      ->option_text(" ");  // checked by names_problem()
  auto *json = sub->add_flag("-j,--json", o->json,
                             "Print one JSON document instead of text");
  sub->add_flag("--prometheus", o->prometheus,
                "Print Prometheus metrics (text format) instead, for "
                "node_exporter's textfile collector")
      ->excludes(json);
  sub->footer(
      "Reads /dev/shm/NAME once into private memory: read permission is "
      "enough and nothing is written.\nThe figures are read without the "
      "lock, so on a busy semaphore they may be a moment apart.\n"
      "A lease of several permits (run --weight) is one holder row with its "
      "WEIGHT; a waiter's RESERVED\ncounts the permits set aside for it "
      "while it gathers its WEIGHT at the head of the queue. With a\nrate "
      "limit, a head that has all of them waits for a token: a line under the "
      "queue says when it is due.\nA holder whose process died (ALIVE dead) "
      "keeps its permits until reclaimed: 'shmsem recover NAME'\nreclaims "
      "them now (an acquire that would wait does it too).\n"
      "After a shrink (shmsem set), 'capacity' shows how many permits are "
      "still held above it.\n"
      "'policy' is create's --policy; a bounded one also says whether "
      "newcomers may pass the queue now\nor permits go to it in order (its "
      "head has waited the bound or more).\n"
      "DECLARED is how long a holder said it would hold its lease (run "
      "--expect); OVERDUE marks one\nheld longer, and 'overdue' counts them. "
      "Nothing is taken from an overdue holder.\n"
      "--prometheus prints shmsem_* metrics (docs/prometheus.md); a semaphore "
      "that cannot be read\nshows as shmsem_up 0 and does not fail the "
      "command.");
  return {sub, [o] { return run_status(*o); },
          "shmsem status NAME [--json]\n       shmsem status --prometheus "
          "[NAME ...]"};
}

}  // namespace shmsem::cli
