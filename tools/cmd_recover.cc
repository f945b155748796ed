// shmsem recover NAME: run a reclamation pass now (shmsem_recover) and say
// how many permits and queue places of dead processes it freed.
#include <stdio.h>

#include <memory>
#include <string>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {
namespace {

int run_recover(const std::string &name) {
  Handle h;
  int e = shmsem_open(name.c_str(), 0, &h.s);
  if (e) {
    report_error("recover", name, e);
    return exit_code_for(e);
  }
  int n = shmsem_recover(h.s);
  if (n < 0) {
    report_error("recover", name, n);
    return exit_code_for(n);
  }
  printf("%s: reclaimed %d %s of dead processes\n", name.c_str(), n,
         n == 1 ? "lease or waiter slot" : "leases and waiter slots");
  return kExitOk;
}

}  // namespace

Subcommand add_recover(CLI::App &parent) {
  auto name = std::make_shared<std::string>();
  CLI::App *sub = parent.add_subcommand(
      "recover",
      "Reclaim permits and queue places of processes that died");
  add_name_option(sub, name.get());
  sub->footer(
      "The library also does this by itself when a caller would otherwise "
      "wait; this runs it now.\nNeeds read and write permission.");
  return {sub, [name] { return run_recover(*name); },
          "shmsem recover NAME"};
}

}  // namespace shmsem::cli
