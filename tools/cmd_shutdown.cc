// shmsem shutdown NAME: close the semaphore for everyone (shmsem_shutdown).
#include <stdio.h>

#include <memory>
#include <string>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {
namespace {

int run_shutdown(const std::string &name) {
  Handle h;
  int e = shmsem_open(name.c_str(), 0, &h.s);
  if (e) {
    report_error("shutdown", name, e);
    return exit_code_for(e);
  }
  int n = shmsem_shutdown(h.s);
  if (n < 0) {
    report_error("shutdown", name, n);
    return exit_code_for(n);
  }
  printf("%s: closed; %d %s failed\n", printable(name).c_str(), n,
         n == 1 ? "waiter" : "waiters");
  return kExitOk;
}

}  // namespace

Subcommand add_shutdown(CLI::App &parent) {
  auto name = std::make_shared<std::string>();
  CLI::App *sub = parent.add_subcommand(
      "shutdown", "Close the semaphore: waiters and new acquires fail");
  add_name_option(sub, name.get());
  sub->footer(
      "Holders keep their permits and may still release them. A closed "
      "semaphore stays closed;\nremove it with 'shmsem rm' and create it "
      "again to reopen. Needs read and write permission.");
  return {sub, [name] { return run_shutdown(*name); }, "shmsem shutdown NAME"};
}

}  // namespace shmsem::cli
