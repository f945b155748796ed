// The screen of `shmsem top`: samples of semaphores (Snapshots of the data
// layer, pool_view.h, with rates) and the plain-text screen rendered from
// them.
// Rendering is a pure function of its inputs (no clock, no terminal), so the
// same lines go to a terminal, a pipe or a test; cmd_top.cc owns the loop,
// the terminal and the signals.
#ifndef SHMSEM_TOOLS_TOP_VIEW_H
#define SHMSEM_TOOLS_TOP_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "pool_view.h"

namespace shmsem::cli {

// One sample of a semaphore: what the data layer read (its owners named),
// and the rates since the sample before.
struct PoolSample {
  Snapshot snap;  // snap.error: it could not be read (only the header shows)
  // Acquisitions and timeouts per second since the previous sample of the
  // same name (counter delta over the now_ns delta). Unknown on the first
  // sample, after an error, or if the counters went backwards (the name
  // now holds another semaphore).
  bool rates_known = false;
  double acquisitions_per_s = 0, timeouts_per_s = 0;
};

// Fill cur's rates from `prev` (the previous sample of the same name, or
// nullptr).
void compute_rates(const PoolSample *prev, PoolSample *cur);

struct TopLayout {
  size_t width = 0;   // display columns per line; 0: no limit
  size_t height = 0;  // lines per screen; 0: no limit
  std::string clock;  // wall time of the samples, e.g. "12:34:56"
  std::string delay;  // "2s"
  std::string place;  // where the pools were found ("/dev/shm"), or "": named
  bool interactive = false;  // the title says "q quits"
};

// The screen: a title line, a blank line, then per semaphore its header
// line, its holders and its waiters. With a height, lists are cut evenly
// to fit ("... N more holders"); with a width, each line is cut to it. All
// text from the segment or /proc goes through printable().
std::vector<std::string> render_top(const std::vector<PoolSample> &pools,
                                    const TopLayout &layout);

// `line` cut to `width` display columns (UTF-8 continuation bytes take
// none); 0: unchanged.
std::string fit_width(const std::string &line, size_t width);

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_TOP_VIEW_H
