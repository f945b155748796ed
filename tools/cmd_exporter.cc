// shmsem exporter --listen ADDRESS:PORT [NAME...]: serve Prometheus metrics
// (metrics.h) on http://ADDRESS:PORT/metrics. Each scrape reads the
// semaphores anew, through the data layer (pool_view.h), in prometheus-cpp's
// HTTP server threads (civetweb); the main thread only waits for SIGINT or
// SIGTERM.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"
#include "metrics.h"

namespace shmsem::cli {
namespace {

struct ExporterOptions {
  std::string listen;
  std::vector<std::string> names;
};

// A --listen address, parsed and checked before civetweb sees it.
struct ListenAddress {
  struct sockaddr_storage sa = {};
  socklen_t len = 0;
  std::string host;  // as civetweb and URLs want it: 127.0.0.1 or [::1]
  unsigned port = 0;
};

// "" and *out, or what is wrong with `text`. Accepts IPV4:PORT,
// [IPV6]:PORT and localhost:PORT (127.0.0.1); PORT 0 picks a free port.
std::string parse_listen(const std::string &text, ListenAddress *out) {
  std::string expected =  // not const: returned, moved
      "invalid --listen '" + printable(text) +
      "': expected ADDRESS:PORT with a numeric IPv4 address, [IPv6] or "
      "localhost, and a port 0-65535, e.g. 127.0.0.1:9100 or [::1]:9100";
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return expected;
  std::string host = text.substr(0, colon), port = text.substr(colon + 1);
  uint64_t p = 0;  // decimal, as every number the command reads
  std::string why = parse_decimal(port, 0, 65535, &p);
  if (!why.empty()) return expected + "; port " + printable(why);
  out->port = unsigned(p);
  if (host == "localhost") host = "127.0.0.1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    auto *a = reinterpret_cast<struct sockaddr_in6 *>(&out->sa);
    if (inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(),
                  &a->sin6_addr) != 1)
      return expected;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(uint16_t(p));
    out->len = sizeof *a;
  } else {
    auto *a = reinterpret_cast<struct sockaddr_in *>(&out->sa);
    if (inet_pton(AF_INET, host.c_str(), &a->sin_addr) != 1) return expected;
    a->sin_family = AF_INET;
    a->sin_port = htons(uint16_t(p));
    out->len = sizeof *a;
  }
  out->host = host;
  return "";
}

// Bind a socket to `a` and close it again, to word the usual failures
// plainly before civetweb (which only says that it could not start) tries
// the same. Returns "" or the message.
std::string try_bind(const ListenAddress &a) {
  int fd = socket(a.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    return e == EAFNOSUPPORT
               ? "this host has no IPv6"
               : std::string(strerror(e));  // NOLINT(concurrency-mt-unsafe)
  }
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
                   sizeof one);  // as civetweb
  int rc = bind(fd, reinterpret_cast<const struct sockaddr *>(&a.sa), a.len);
  int e = errno;
  close(fd);
  if (rc == 0) return "";
  switch (e) {
    case EADDRINUSE:
      return "the port is already in use (another exporter?); choose "
             "another with --listen";
    case EADDRNOTAVAIL:
      return "no interface of this host has that address";
    case EACCES:
      return "ports below 1024 need privileges (CAP_NET_BIND_SERVICE)";
    default:
      return strerror(e);  // NOLINT(concurrency-mt-unsafe): one thread yet
  }
}

// The places `names` lists semaphores of, for messages: "/dev/shm" for
// none named, else the places among them, comma-separated ("" if none).
std::string places_text(const std::vector<std::string> &names) {
  if (names.empty()) return "/dev/shm";
  std::string out;
  for (const std::string &n : names)
    if (is_place(n)) out += (out.empty() ? "" : ", ") + printable(n);
  return out;
}

// Reads the semaphores at every scrape. Collect() runs on the server's
// threads, possibly two at once: the readings share nothing, and the
// log of which semaphores could not be read is under a mutex.
class PoolCollector : public prometheus::Collectable {
 public:
  explicit PoolCollector(std::vector<std::string> names)
      : names_(std::move(names)), places_(places_text(names_)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    try {
      std::vector<Snapshot> readings;
      int e = read_pools(names_, false, &readings);
      log_changes(e, readings);
      return build_metrics(readings);
    } catch (const std::exception &e) {  // out of memory: an empty scrape
      fprintf(stderr, "shmsem: exporter: %s\n", e.what());
      return {};
    }
  }

 private:
  // One line on stderr when a semaphore becomes unreadable or readable
  // again (not one per scrape).
  void log_changes(int dir_error, const std::vector<Snapshot> &readings) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (dir_error != last_dir_error_ && dir_error)
      fprintf(stderr, "shmsem: exporter: cannot list %s: %s\n", places_.c_str(),
              shmsem_strerror(dir_error));
    last_dir_error_ = dir_error;
    std::map<std::string, int> now;
    for (const Snapshot &r : readings) {
      now[r.name] = r.error;
      auto was = last_error_.find(r.name);
      int before = was == last_error_.end() ? 0 : was->second;
      if (r.error && r.error != before)
        fprintf(stderr, "shmsem: exporter: cannot read %s: %s (shmsem_up 0)\n",
                printable(r.name).c_str(), shmsem_strerror(r.error));
      else if (!r.error && before)
        fprintf(stderr, "shmsem: exporter: %s can be read again\n",
                printable(r.name).c_str());
    }
    last_error_ = std::move(now);
  }

  std::vector<std::string> names_;
  std::string places_;  // for the log: the places it lists
  mutable std::mutex mu_;
  mutable int last_dir_error_ = 0;
  mutable std::map<std::string, int> last_error_;
};

// What the exporter serves, for its first message.
std::string exported_text(const std::vector<std::string> &names) {
  size_t named = 0;
  for (const std::string &n : names) named += is_place(n) ? 0 : 1;
  const std::string places = places_text(names);
  std::string out;
  if (named)
    out = std::to_string(named) + (named == 1 ? " semaphore" : " semaphores");
  if (!places.empty())
    out += (out.empty() ? "" : " and ") + std::string("every semaphore in ") +
           places;
  return out;
}

// Server threads (concurrent connections), and how long one waits for a
// client's request (ms): well below Prometheus's default scrape timeout
// (10 s), so that stalled connections delay a scrape, not fail it.
constexpr int kThreads = 8;
constexpr int kRequestTimeoutMs = 2000;

int run_exporter(const ExporterOptions &o) {
  ListenAddress addr;
  std::string problem = parse_listen(o.listen, &addr);
  if (!problem.empty()) {
    fprintf(stderr, "shmsem: exporter: %s\n", problem.c_str());
    return kExitUsage;
  }
  const std::string where = addr.host + ":" + std::to_string(addr.port);
  problem = try_bind(addr);
  if (!problem.empty()) {
    fprintf(stderr, "shmsem: exporter: cannot listen on %s: %s\n",
            printable(where).c_str(), problem.c_str());
    return kExitFailure;
  }

  // Block the signals that stop us before the server starts its threads
  // (they inherit the mask), then take them synchronously below. An
  // ignored signal is discarded even while blocked, and a shell starts a
  // background job with SIGINT ignored: take the default back first, as
  // Go's signal.Notify does for node_exporter.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGINT, &dfl, nullptr);
  sigaction(SIGTERM, &dfl, nullptr);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  auto collector = std::make_shared<PoolCollector>(o.names);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb serves one connection per thread, and a thread waits up to
    // request_timeout_ms (default 30 s) for a request that never comes: two
    // idle connections (a port scanner, a client that connects and stalls)
    // held both threads and every scrape timed out. More threads, and a
    // stalled client dropped after kRequestTimeoutMs.
    exposer = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", where, "num_threads", std::to_string(kThreads),
        "request_timeout_ms", std::to_string(kRequestTimeoutMs)});
  } catch (const std::exception &e) {
    fprintf(stderr, "shmsem: exporter: cannot listen on %s: %s\n",
            printable(where).c_str(), e.what());
    return kExitFailure;
  }
  exposer->RegisterCollectable(collector);
  std::vector<int> ports = exposer->GetListeningPorts();
  fprintf(stderr, "shmsem: exporter: serving http://%s:%d/metrics for %s\n",
          addr.host.c_str(), ports.empty() ? int(addr.port) : ports.front(),
          exported_text(o.names).c_str());
  (void)fflush(stderr);

  int sig = 0;
  while (sigwait(&stop, &sig) != 0) {
  }
  exposer.reset();  // stops the server: waits for scrapes in progress
  return kExitOk;
}

}  // namespace

Subcommand add_exporter(CLI::App &parent) {
  auto o = std::make_shared<ExporterOptions>();
  CLI::App *sub = parent.add_subcommand(
      "exporter", "Serve Prometheus metrics over HTTP (read-only)");
  sub->add_option("-l,--listen", o->listen,
                  "Address and port to serve /metrics on: 127.0.0.1:9100, "
                  "[::1]:9100, localhost:9100 (port 0: any free port)")
      ->required()
      ->option_text("ADDRESS:PORT");
  sub->add_option("NAME", o->names,
                  "Semaphores to export (default: every semaphore in "
                  "/dev/shm, found anew at each scrape); a server, "
                  "redis://HOST[:PORT], exports all its pools")
      ->option_text(" ")
      ->check(CLI::Validator(
          // cppcheck-suppress constParameter ; CLI11's validator signature
          [](std::string &value) { return name_or_place_problem(value); }, "",
          ""));
  sub->footer(
      "Each scrape of http://ADDRESS:PORT/metrics reads the semaphores then "
      "(read permission is enough;\nnothing is written) and answers in the "
      "Prometheus text format: the same metrics as\n'shmsem status "
      "--prometheus'. A semaphore that cannot be read shows as "
      "shmsem_up{pool=\"NAME\"} 0.\nThe address it serves on is printed on "
      "stderr; SIGINT or SIGTERM stops it (exit status 0).\n"
      "No TLS and no authentication: listen on loopback, or put a proxy in "
      "front. See docs/prometheus.md.");
  return {sub, [o] { return run_exporter(*o); },
          "shmsem exporter --listen ADDRESS:PORT [NAME|SERVER ...]"};
}

}  // namespace shmsem::cli
