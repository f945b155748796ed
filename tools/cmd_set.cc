// shmsem set NAME --permits N: change the capacity while the semaphore is in
// use (shmsem_set_permits). Growing hands the new permits to the waiters in
// FIFO order; shrinking takes free permits at once and retires held ones as
// they are released, never revoking a lease.
#include <errno.h>
#include <stdio.h>

#include <memory>
#include <string>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {
namespace {

struct SetOptions {
  std::string name;
  uint32_t permits = 0;
};

int above_max(const SetOptions &o, uint32_t max_permits) {
  fprintf(stderr,
          "shmsem: set %s: cannot set the capacity to %u: it may be at most "
          "%u, fixed when it was created ('shmsem create --max-permits'); "
          "remove it and create it again to go higher\n",
          printable(o.name).c_str(), o.permits, max_permits);
  return kExitUsage;
}

int run_set(const SetOptions &o) {
  Handle h;
  int e = shmsem_open(o.name.c_str(), 0, &h.s);
  if (e) {
    report_error("set", o.name, e);
    return exit_code_for(e);
  }
  struct shmsem_stat before;
  e = shmsem_stat(h.s, &before);
  if (e) {
    report_error("set", o.name, e);
    return exit_code_for(e);
  }
  // The maximum never changes, so this check cannot go stale.
  if (o.permits > before.max_permits) return above_max(o, before.max_permits);
  e = shmsem_set_permits(h.s, o.permits);
  if (e == -EINVAL) return above_max(o, before.max_permits);
  if (e) {
    report_error("set", o.name, e);
    return exit_code_for(e);
  }
  struct shmsem_stat after;
  if (shmsem_stat(h.s, &after) != 0) after = before;
  std::string line = printable(o.name) + ": capacity " +
                     std::to_string(o.permits) + " (was " +
                     std::to_string(before.permits) + ")";
  if (after.retiring)
    line += "; " + std::to_string(after.retiring) +
            (after.retiring == 1
                 ? " permit still held above it retires as it is released"
                 : " permits still held above it retire as they are "
                   "released");
  if (o.permits == 0) line += "; acquires wait until it grows again";
  printf("%s\n", line.c_str());
  // Any failed write fails the command.
  return fflush(stdout) == 0 && !ferror(stdout) ? kExitOk : kExitFailure;
}

}  // namespace

Subcommand add_set(CLI::App &parent) {
  auto o = std::make_shared<SetOptions>();
  CLI::App *sub = parent.add_subcommand(
      "set", "Change the capacity (permits) of a semaphore in use");
  add_name_option(sub, &o->name);
  sub->add_option("-n,--permits", o->permits,
                  "The new capacity, 0 to the semaphore's --max-permits")
      ->required()
      ->option_text("N")
      ->transform(decimal(0, SHMSEM_MAX_PERMITS));
  sub->footer(
      "Growing hands the new permits to the waiters in FIFO order. "
      "Shrinking takes free permits at once\nand retires held ones as "
      "they are released: no lease is revoked, and 'shmsem status' shows "
      "how\nmany are still held above the capacity. 0 drains the semaphore: "
      "acquires wait until it grows.\nNeeds read and write permission.");
  return {sub, [o] { return run_set(*o); }, "shmsem set NAME --permits N"};
}

}  // namespace shmsem::cli
