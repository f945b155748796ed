// Prometheus metric families from shmsem readings (metrics.h). Naming
// follows the Prometheus conventions: the `shmsem_` prefix, base units
// (seconds), `_total` for counters, one `pool` label; docs/prometheus.md
// has the table.
#include "metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "common.h"

namespace shmsem::cli {
namespace {

constexpr const char *kShmDirectory = "/dev/shm";

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr double kNsPerSecond = 1e9;

double seconds(uint64_t ns) { return double(ns) / kNsPerSecond; }

// Counts read from the segment may be anything a writer put there (and the
// library adds the lanes' counts without saturating): add without wrapping,
// so that cumulative buckets never decrease.
uint64_t add_saturated(uint64_t a, uint64_t b) {
  return b > ~a ? ~uint64_t{0} : a + b;
}

// Errors of shmsem_open that, for a file found in /dev/shm (not named by
// the user), mean "not a semaphore we can show": not a shmsem segment, or
// unreadable so we cannot tell, or gone since readdir. `shmsem list` skips
// the same files.
bool skip_when_found(int err) {
  return err == -EBADMSG || err == -EACCES || err == -EPERM ||
         err == -ENOENT || err == -EINVAL;
}

// The sample of one pool: its label, nothing else yet.
ClientMetric pool_sample(const PoolReading &r) {
  ClientMetric m;
  // Label values must be UTF-8: printable() keeps valid UTF-8 and escapes
  // anything else (and control bytes) as \xNN.
  m.label.push_back({"pool", printable(r.name)});
  return m;
}

// The families in the order they are printed, built up pool by pool.
class Builder {
 public:
  MetricFamily &family(const std::string &name, MetricType type,
                       const std::string &help) {
    for (MetricFamily &f : families_)
      if (f.name == name) return f;
    families_.push_back({name, help, type, {}});
    return families_.back();
  }

  void gauge(const std::string &name, const std::string &help,
             const PoolReading &r, double value) {
    ClientMetric m = pool_sample(r);
    m.gauge.value = value;
    family(name, MetricType::Gauge, help).metric.push_back(std::move(m));
  }

  void counter(const std::string &name, const std::string &help,
               const PoolReading &r, uint64_t value) {
    ClientMetric m = pool_sample(r);
    m.counter.value = double(value);
    family(name, MetricType::Counter, help).metric.push_back(std::move(m));
  }

  // A histogram from counts per `le` bound in ns (not cumulative); the
  // last bound is UINT64_MAX, printed as +Inf.
  void histogram(const std::string &name, const std::string &help,
                 const PoolReading &r, const std::vector<uint64_t> &bounds_ns,
                 const std::vector<uint64_t> &counts, uint64_t sum_ns) {
    ClientMetric m = pool_sample(r);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_ns.size(); i++) {
      cumulative = add_saturated(cumulative, counts[i]);
      m.histogram.bucket.push_back(
          {cumulative, bounds_ns[i] == UINT64_MAX
                           ? std::numeric_limits<double>::infinity()
                           : seconds(bounds_ns[i])});
    }
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = seconds(sum_ns);
    family(name, MetricType::Histogram, help).metric.push_back(std::move(m));
  }

  std::vector<MetricFamily> take() {
    std::vector<MetricFamily> out;
    for (MetricFamily &f : families_)
      if (!f.metric.empty()) out.push_back(std::move(f));
    return out;
  }

 private:
  std::vector<MetricFamily> families_;
};

// The Unix time `age_ns` before the snapshot.
uint64_t unix_ns_before(const PoolReading &r, uint64_t age_ns) {
  return r.realtime_at_snapshot_ns > age_ns ? r.realtime_at_snapshot_ns - age_ns
                                            : 0;
}

void add_pool(Builder &b, const PoolReading &r) {
  b.gauge("shmsem_up",
          "1 if the semaphore could be read at this scrape, 0 if not (gone, "
          "no permission, damaged, another layout version)",
          r, r.error ? 0 : 1);
  if (r.error) return;
  const struct shmsem_inspection &in = r.in;
  const struct shmsem_stat &st = in.stat;

  b.gauge("shmsem_permits", "Capacity: the permits the semaphore has now", r,
          st.permits);
  b.gauge("shmsem_max_permits",
          "The most permits the capacity may grow to (shmsem set)", r,
          st.max_permits);
  b.gauge("shmsem_available_permits", "Permits free to be acquired", r,
          st.available);
  b.gauge("shmsem_held_permits",
          "Permits held (a lease of n permits counts n)", r, st.held);
  b.gauge("shmsem_reserved_permits",
          "Permits granted or set aside for queued waiters not yet returned",
          r, st.reserved);
  b.gauge("shmsem_retiring_permits",
          "Permits held above a reduced capacity, retired as they come back",
          r, st.retiring);
  b.gauge("shmsem_waiters", "Acquires queued in the wait queue", r,
          st.waiting);
  b.gauge("shmsem_max_waiters", "Bound of the wait queue", r, st.max_waiters);
  b.gauge("shmsem_closed", "1 once the semaphore was shut down", r,
          st.closed ? 1 : 0);
  b.gauge("shmsem_overdue_leases",
          "Leases held longer than their holder declared "
          "(shmsem_declare_hold)",
          r, in.overdue);
  b.gauge("shmsem_overdue_permits", "Permits under overdue leases", r,
          in.overdue_permits);
  b.gauge("shmsem_dead_leases",
          "Leases held by processes that died, not yet reclaimed (shmsem "
          "recover NAME reclaims them now)",
          r, r.dead_leases);
  b.gauge("shmsem_dead_permits",
          "Permits under leases held by processes that died", r,
          double(r.dead_permits));
  if (st.rate)
    b.gauge("shmsem_rate_tokens",
            "Tokens in the rate limit's bucket (0 to its burst)", r,
            st.rate_tokens);
  b.gauge("shmsem_created_timestamp_seconds",
          "When the semaphore was created (Unix time)", r,
          seconds(in.created_realtime_ns));

  // Unix times of the oldest waiter and lease, from their monotonic times:
  // the age at the snapshot, by the snapshot's own clock reading, taken
  // from the realtime clock at the snapshot. No sample when there is none
  // (a 0 would read as "waiting since 1970" to `time() - x` alerts).
  if (in.oldest_wait_since_ns) {
    uint64_t age = in.now_ns > in.oldest_wait_since_ns
                       ? in.now_ns - in.oldest_wait_since_ns
                       : 0;
    b.gauge("shmsem_oldest_waiter_timestamp_seconds",
            "When the waiter at the head of the queue queued (Unix time); "
            "absent while nobody waits",
            r, seconds(unix_ns_before(r, age)));
  }
  if (in.oldest_lease_since_ns) {
    uint64_t age = in.now_coarse_ns > in.oldest_lease_since_ns
                       ? in.now_coarse_ns - in.oldest_lease_since_ns
                       : 0;
    b.gauge("shmsem_oldest_lease_timestamp_seconds",
            "When the oldest lease still held was granted (Unix time, "
            "coarse clock: a few ms); absent while none is held",
            r, seconds(unix_ns_before(r, age)));
  }

  b.counter("shmsem_acquisitions_total", "Successful acquires", r,
            st.acquisitions);
  b.counter("shmsem_timeouts_total", "Acquires that timed out", r,
            st.timeouts);
  b.counter("shmsem_cancellations_total",
            "Acquires cancelled or interrupted", r, st.cancellations);
  b.counter("shmsem_queue_full_total",
            "Acquires refused because the wait queue was full", r,
            st.queue_full);
  b.counter("shmsem_shutdown_failures_total",
            "Queued acquires failed by shutdown", r, st.shutdown_failures);
  b.counter("shmsem_reclaimed_holders_total",
            "Permits reclaimed from processes that died holding them", r,
            st.reclaimed_holders);
  b.counter("shmsem_reclaimed_waiters_total",
            "Queue places reclaimed from processes that died waiting", r,
            st.reclaimed_waiters);
  b.counter("shmsem_repairs_total",
            "Times the state was rebuilt after a process died holding the "
            "internal lock",
            r, st.repairs);

  // Waits: the library's log-linear buckets folded into fixed bounds.
  const std::vector<uint64_t> &wait_bounds = wait_bounds_ns();
  std::vector<uint64_t> wait_counts(wait_bounds.size(), 0);
  for (unsigned i = 0; i < SHMSEM_HIST_BUCKETS; i++) {
    if (!st.wait_hist[i]) continue;
    // The bucket's largest value (integer ns, upper bound exclusive);
    // UINT64_MAX for the open-ended last bucket, which lands in +Inf.
    uint64_t upper = shmsem_hist_upper_ns(i);
    uint64_t largest = upper == UINT64_MAX ? upper : upper - 1;
    size_t at = size_t(std::lower_bound(wait_bounds.begin(), wait_bounds.end(),
                                        largest) -
                       wait_bounds.begin());
    wait_counts[at] = add_saturated(wait_counts[at], st.wait_hist[i]);
  }
  b.histogram("shmsem_wait_seconds",
              "Time from queueing to the grant of successful acquires (0 for "
              "those that did not wait)",
              r, wait_bounds, wait_counts, st.wait_sum_ns);

  // Holds: the library's own fixed buckets, which count bound(b-1) < h <=
  // bound(b), exactly what `le` means.
  std::vector<uint64_t> hold_bounds, hold_counts;
  for (unsigned i = 0; i < SHMSEM_HOLD_BUCKETS; i++) {
    hold_bounds.push_back(shmsem_hold_bound_ns(i));
    hold_counts.push_back(st.hold_hist[i]);
  }
  if (hold_bounds.back() != UINT64_MAX) {  // never: the last is the rest
    hold_bounds.push_back(UINT64_MAX);
    hold_counts.push_back(0);
  }
  b.histogram("shmsem_hold_seconds",
              "Time from grant to release of released leases, one per lease "
              "(coarse clock: a few ms resolution; reclaimed leases not "
              "counted)",
              r, hold_bounds, hold_counts, st.hold_sum_ns);
}

}  // namespace

const std::vector<uint64_t> &wait_bounds_ns() {
  static const std::vector<uint64_t> bounds = {
      1'000,          10'000,         100'000,         1'000'000,
      5'000'000,      10'000'000,     25'000'000,      50'000'000,
      100'000'000,    250'000'000,    500'000'000,     1'000'000'000,
      2'500'000'000,  5'000'000'000,  10'000'000'000,  30'000'000'000,
      60'000'000'000, 300'000'000'000, UINT64_MAX};
  return bounds;
}

PoolReading read_pool(const std::string &name) {
  PoolReading r;
  r.name = name;
  shmsem_t *s = nullptr;
  r.error = shmsem_open(name.c_str(), SHMSEM_SNAPSHOT, &s);
  if (r.error) return r;
  // Count first, then the holders: the copy does not change between the
  // two calls. -ENOBUFS only says that a list not asked for (the waiters)
  // did not fit: the counts and the holders asked for are there.
  int e = shmsem_inspect(s, &r.in, nullptr, 0, nullptr, 0);
  std::vector<struct shmsem_holder> holders;
  if ((e == 0 || e == -ENOBUFS) && r.in.nholders) {
    holders.resize(std::min(r.in.nholders, r.in.stat.max_permits));
    e = shmsem_inspect(s, &r.in, holders.data(), uint32_t(holders.size()),
                       nullptr, 0);
    holders.resize(std::min<size_t>(holders.size(), r.in.nholders));
  }
  shmsem_detach(s);
  r.error = e == -ENOBUFS ? 0 : e;
  for (const struct shmsem_holder &h : holders)
    if (h.liveness == SHMSEM_OWNER_DEAD) {
      r.dead_leases++;
      r.dead_permits += h.weight;
    }
  uint64_t mono = now_ns(CLOCK_MONOTONIC);
  uint64_t real = now_ns(CLOCK_REALTIME);
  uint64_t since = mono > r.in.now_ns ? mono - r.in.now_ns : 0;
  r.realtime_at_snapshot_ns = real - since;
  return r;
}

int read_pools(const std::vector<std::string> &names,
               std::vector<PoolReading> *out) {
  out->clear();
  if (!names.empty()) {
    std::set<std::string> seen;
    for (const std::string &n : names)
      if (seen.insert(n).second) out->push_back(read_pool(n));
    return 0;
  }
  DIR *dir = opendir(kShmDirectory);
  if (!dir) return -errno;
  std::vector<std::string> found;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): unsafe only on a shared DIR
  while (struct dirent *de = readdir(dir)) {
    if (de->d_name[0] == '.') continue;  // ., .., and leftovers of creates
    struct stat sb;
    if (fstatat(dirfd(dir), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(sb.st_mode))
      continue;
    std::string name = std::string("/") + de->d_name;
    if (name_problem(name).empty()) found.push_back(name);
  }
  closedir(dir);
  std::sort(found.begin(), found.end());
  for (const std::string &n : found) {
    PoolReading r = read_pool(n);
    if (r.error && skip_when_found(r.error)) continue;
    out->push_back(std::move(r));
  }
  return 0;
}

std::vector<MetricFamily> build_metrics(const std::vector<PoolReading> &readings) {
  Builder b;
  for (const PoolReading &r : readings) add_pool(b, r);
  return b.take();
}

std::string serialize_text(const std::vector<MetricFamily> &families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace shmsem::cli
