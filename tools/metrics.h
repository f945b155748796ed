// Prometheus metrics for shmsem semaphores: what `shmsem status
// --prometheus` prints and what `shmsem exporter` serves on /metrics.
// Readings come from the public API only (shmsem_open with SHMSEM_SNAPSHOT,
// then shmsem_inspect); the families are prometheus-cpp's data model, printed
// by its TextSerializer. docs/prometheus.md lists every metric.
#ifndef SHMSEM_TOOLS_METRICS_H
#define SHMSEM_TOOLS_METRICS_H

#include <stdint.h>

#include <string>
#include <vector>

#include <prometheus/metric_family.h>
#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

namespace shmsem::cli {

// One semaphore at one moment, or why it could not be read.
struct PoolReading {
  std::string name;  // "/pool", as named or as found in /dev/shm
  int error = 0;     // 0, or the negative errno of shmsem_open/shmsem_inspect
  struct shmsem_inspection in = {};
  // CLOCK_REALTIME at in.now_ns (derived: the realtime and monotonic clocks
  // read together just after the snapshot), to turn the monotonic
  // oldest_*_since_ns times into Unix times.
  uint64_t realtime_at_snapshot_ns = 0;
  // Leases held by processes proven dead (SHMSEM_OWNER_DEAD), not yet
  // reclaimed, and the permits under them.
  uint32_t dead_leases = 0;
  uint64_t dead_permits = 0;
};

// Read `name` now: a private copy of its segment (shmsem_open with
// SHMSEM_SNAPSHOT: read permission is enough, nothing is written), then
// shmsem_inspect with the holders (for their owners' liveness) but not the
// waiters. Never fails: a semaphore that cannot be read (gone, no
// permission, not a semaphore, damaged) is a reading with `error` set.
PoolReading read_pool(const std::string &name);

// Read the semaphores in `names` (duplicates once), or, if `names` is empty,
// every semaphore in /dev/shm, sorted by name. Files there that are not
// semaphores, or that this user cannot read (so cannot tell), are left out,
// as `shmsem list` leaves them out; a file that is a semaphore but cannot be
// inspected (another layout version, damaged) is kept, with its error.
// Returns 0, or a negative errno if /dev/shm itself cannot be read.
int read_pools(const std::vector<std::string> &names,
               std::vector<PoolReading> *out);

// The fixed `le` bounds of shmsem_wait_seconds in ns, the last UINT64_MAX
// (+Inf). The library's wait histogram is log-linear, not decimal: a library
// bucket is counted under the smallest bound not below its largest value,
// so `le` = x counts exactly the waits below the largest library bucket
// bound not above x + 1 ns (between 0.875x and x; docs/prometheus.md lists
// them). shmsem_hold_seconds uses the library's own hold buckets
// (shmsem_hold_bound_ns), which are exact.
const std::vector<uint64_t> &wait_bounds_ns();

// The metric families for `readings`: every family has one sample per
// readable semaphore, labelled pool="<name>", and shmsem_up has one per
// reading (0 for those with an error). Families without samples are left
// out.
std::vector<prometheus::MetricFamily> build_metrics(
    const std::vector<PoolReading> &readings);

// The text exposition format (version 0.0.4) of `families`.
std::string serialize_text(const std::vector<prometheus::MetricFamily> &families);

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_METRICS_H
