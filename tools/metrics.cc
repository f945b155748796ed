// Prometheus metric families from shmsem readings (metrics.h). Naming
// follows the Prometheus conventions: the `shmsem_` prefix, base units
// (seconds), `_total` for counters, one `pool` label; docs/prometheus.md
// has the table.
#include "metrics.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "common.h"

namespace shmsem::cli {
namespace {

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

// The sample of one pool: its label, nothing else yet.
ClientMetric pool_sample(const Snapshot &r) {
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
             const Snapshot &r, double value) {
    ClientMetric m = pool_sample(r);
    m.gauge.value = value;
    family(name, MetricType::Gauge, help).metric.push_back(std::move(m));
  }

  void counter(const std::string &name, const std::string &help,
               const Snapshot &r, uint64_t value) {
    ClientMetric m = pool_sample(r);
    m.counter.value = double(value);
    family(name, MetricType::Counter, help).metric.push_back(std::move(m));
  }

  // A histogram from counts per `le` bound in ns (not cumulative); the
  // last bound is UINT64_MAX, printed as +Inf.
  void histogram(const std::string &name, const std::string &help,
                 const Snapshot &r, const std::vector<uint64_t> &bounds_ns,
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
uint64_t unix_ns_before(const Snapshot &r, uint64_t age_ns) {
  return r.unix_at_snapshot_ns > age_ns ? r.unix_at_snapshot_ns - age_ns : 0;
}

// The permits, the queue and the state, as gauges.
void add_state(Builder &b, const Snapshot &r) {
  const struct shmsem_stat &st = r.st;
  b.gauge("shmsem_permits", "Capacity: the permits the semaphore has now", r,
          st.permits);
  b.gauge("shmsem_max_permits",
          "The most permits the capacity may grow to (shmsem set)", r,
          st.max_permits);
  b.gauge("shmsem_available_permits", "Permits free to be acquired", r,
          st.available);
  b.gauge("shmsem_held_permits", "Permits held (a lease of n permits counts n)",
          r, st.held);
  b.gauge("shmsem_reserved_permits",
          "Permits granted or set aside for queued waiters not yet returned", r,
          st.reserved);
  b.gauge("shmsem_retiring_permits",
          "Permits held above a reduced capacity, retired as they come back", r,
          st.retiring);
  b.gauge("shmsem_waiters", "Acquires queued in the wait queue", r, st.waiting);
  b.gauge("shmsem_max_waiters", "Bound of the wait queue", r, st.max_waiters);
  b.gauge("shmsem_closed", "1 once the semaphore was shut down", r,
          st.closed ? 1 : 0);
}

// The policy (shmsem(7), Policies): bounded or not for every pool; the
// bound and the hand-off only for bounded ones (FIFO has neither: it always
// hands off in order), as the rate's tokens only with a rate.
void add_policy(Builder &b, const Snapshot &r) {
  const struct shmsem_stat &st = r.st;
  const bool bounded = st.policy == SHMSEM_POLICY_BOUNDED;
  b.gauge("shmsem_policy_bounded",
          "1 if created with the bounded policy (newcomers may pass the "
          "queue within a bound), 0 if FIFO",
          r, bounded ? 1 : 0);
  if (!bounded) return;
  b.gauge("shmsem_max_bypass_seconds",
          "Bounded policy: how long the head of the queue may wait while "
          "newcomers pass it",
          r, seconds(st.max_bypass_ns));
  b.gauge("shmsem_hand_off",
          "Bounded policy: 1 while the head has waited the bound or more "
          "and permits go to the queue in order, 0 while newcomers may pass",
          r, st.hand_off ? 1 : 0);
}

// Leases to look at: overdue ones and those of dead processes.
void add_leases(Builder &b, const Snapshot &r) {
  b.gauge("shmsem_overdue_leases",
          "Leases held longer than their holder declared "
          "(shmsem_declare_hold)",
          r, r.overdue);
  b.gauge("shmsem_overdue_permits", "Permits under overdue leases", r,
          r.overdue_permits);
  const DeadHolders dead = dead_holders(r);
  b.gauge("shmsem_dead_leases",
          "Leases held by processes that died, not yet reclaimed (shmsem "
          "recover NAME reclaims them now)",
          r, double(dead.leases));
  b.gauge("shmsem_dead_permits",
          "Permits under leases held by processes that died", r,
          double(dead.permits));
}

// The rate limit's bucket and the times: creation, the oldest waiter and
// lease.
void add_times(Builder &b, const Snapshot &r) {
  if (r.st.rate)
    b.gauge("shmsem_rate_tokens",
            "Tokens in the rate limit's bucket (0 to its burst)", r,
            r.st.rate_tokens);
  b.gauge("shmsem_created_timestamp_seconds",
          "When the semaphore was created (Unix time)", r,
          seconds(r.created_unix_ns));

  // Unix times of the oldest waiter and lease, from their monotonic times:
  // the age at the snapshot, by the snapshot's own clock reading, taken
  // from the realtime clock at the snapshot. No sample when there is none
  // (a 0 would read as "waiting since 1970" to `time() - x` alerts).
  if (r.oldest_wait_since_ns) {
    uint64_t age = r.now_ns > r.oldest_wait_since_ns
                       ? r.now_ns - r.oldest_wait_since_ns
                       : 0;
    b.gauge("shmsem_oldest_waiter_timestamp_seconds",
            "When the waiter at the head of the queue queued (Unix time); "
            "absent while nobody waits",
            r, seconds(unix_ns_before(r, age)));
  }
  if (r.oldest_lease_since_ns) {
    uint64_t age = r.now_coarse_ns > r.oldest_lease_since_ns
                       ? r.now_coarse_ns - r.oldest_lease_since_ns
                       : 0;
    b.gauge("shmsem_oldest_lease_timestamp_seconds",
            "When the oldest lease still held was granted (Unix time, "
            "coarse clock: a few ms); absent while none is held",
            r, seconds(unix_ns_before(r, age)));
  }
}

// A _total counter for every outcome.
void add_counters(Builder &b, const Snapshot &r) {
  const struct shmsem_stat &st = r.st;
  b.counter("shmsem_acquisitions_total", "Successful acquires", r,
            st.acquisitions);
  b.counter("shmsem_timeouts_total", "Acquires that timed out", r, st.timeouts);
  b.counter("shmsem_cancellations_total", "Acquires cancelled or interrupted",
            r, st.cancellations);
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
}

// Waits: the library's log-linear buckets folded into fixed bounds.
void add_wait_histogram(Builder &b, const Snapshot &r) {
  const struct shmsem_stat &st = r.st;
  const std::vector<uint64_t> &wait_bounds = wait_bounds_ns();
  std::vector<uint64_t> wait_counts(wait_bounds.size(), 0);
  for (unsigned i = 0; i < SHMSEM_HIST_BUCKETS; i++) {
    if (!st.wait_hist[i]) continue;
    // The bucket's largest value (integer ns, upper bound exclusive);
    // UINT64_MAX for the open-ended last bucket, which lands in +Inf.
    uint64_t upper = shmsem_hist_upper_ns(i);
    uint64_t largest = upper == UINT64_MAX ? upper : upper - 1;
    size_t at = size_t(
        std::lower_bound(wait_bounds.begin(), wait_bounds.end(), largest) -
        wait_bounds.begin());
    wait_counts[at] = add_saturated(wait_counts[at], st.wait_hist[i]);
  }
  b.histogram("shmsem_wait_seconds",
              "Time from queueing to the grant of successful acquires (0 for "
              "those that did not wait)",
              r, wait_bounds, wait_counts, st.wait_sum_ns);
}

// Holds: the library's own fixed buckets, which count bound(b-1) < h <=
// bound(b), exactly what `le` means.
void add_hold_histogram(Builder &b, const Snapshot &r) {
  const struct shmsem_stat &st = r.st;
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

void add_pool(Builder &b, const Snapshot &r) {
  b.gauge("shmsem_up",
          "1 if the semaphore could be read at this scrape, 0 if not (gone, "
          "no permission, damaged, another layout version)",
          r, r.error ? 0 : 1);
  if (r.error) return;
  add_state(b, r);
  add_policy(b, r);
  add_leases(b, r);
  add_times(b, r);
  add_counters(b, r);
  // A server keeps only the sums of the times, no buckets: a histogram of
  // zero counts beside a non-zero sum would be false.
  if (is_remote_name(r.name)) return;
  add_wait_histogram(b, r);
  add_hold_histogram(b, r);
}

}  // namespace

const std::vector<uint64_t> &wait_bounds_ns() {
  static const std::vector<uint64_t> bounds = {
      1'000,          10'000,          100'000,        1'000'000,
      5'000'000,      10'000'000,      25'000'000,     50'000'000,
      100'000'000,    250'000'000,     500'000'000,    1'000'000'000,
      2'500'000'000,  5'000'000'000,   10'000'000'000, 30'000'000'000,
      60'000'000'000, 300'000'000'000, UINT64_MAX};
  return bounds;
}

std::vector<MetricFamily> build_metrics(const std::vector<Snapshot> &readings) {
  Builder b;
  for (const Snapshot &r : readings) add_pool(b, r);
  return b.take();
}

std::string serialize_text(const std::vector<MetricFamily> &families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace shmsem::cli
