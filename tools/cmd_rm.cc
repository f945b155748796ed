// shmsem rm NAME...: remove names (shmsem_unlink). Processes that have the
// semaphore open keep using it; new opens fail.
#include <errno.h>

#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {
namespace {

int run_rm(const std::vector<std::string> &names, bool force) {
  int rc = kExitOk;
  for (const std::string &name : names) {
    int e = shmsem_unlink(name.c_str());
    if (e == 0 || (force && e == -ENOENT)) continue;
    report_error("rm", name, e);
    if (rc == kExitOk) rc = exit_code_for(e);
  }
  return rc;
}

}  // namespace

Subcommand add_rm(CLI::App &parent) {
  auto names = std::make_shared<std::vector<std::string>>();
  auto force = std::make_shared<bool>(false);
  CLI::App *sub = parent.add_subcommand("rm", "Remove semaphore names");
  sub->add_option("NAME", *names, "Semaphore names, e.g. /pool")
      ->required()
      ->option_text(" ")
      ->check(CLI::Validator(
          // cppcheck-suppress constParameter ; CLI11's validator signature
          [](std::string &value) { return name_problem(value); }, "", ""));
  sub->add_flag("-f,--force", *force, "Ignore names that do not exist");
  sub->footer(
      "Processes that have it open keep using it until they detach; it does "
      "not close it\n(see 'shmsem shutdown').");
  return {sub, [names, force] { return run_rm(*names, *force); },
          "shmsem rm [--force] NAME..."};
}

}  // namespace shmsem::cli
