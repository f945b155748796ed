// Prometheus metrics for shmsem semaphores: what `shmsem status
// --prometheus` prints and what `shmsem exporter` serves on /metrics.
// Readings are Snapshots of the data layer (pool_view.h: read_pools, the
// owners not named); the families are prometheus-cpp's data model, printed
// by its TextSerializer. docs/prometheus.md lists every metric.
#ifndef SHMSEM_TOOLS_METRICS_H
#define SHMSEM_TOOLS_METRICS_H

#include <stdint.h>

#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "pool_view.h"

namespace shmsem::cli {

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
// reading (0 for those with an error, a damaged one's included). Families
// without samples are left out.
std::vector<prometheus::MetricFamily> build_metrics(
    const std::vector<Snapshot> &readings);

// The text exposition format (version 0.0.4) of `families`.
std::string serialize_text(
    const std::vector<prometheus::MetricFamily> &families);

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_METRICS_H
