// shmsem: inspect and use shmsem semaphores from the shell. A thin front end
// over the C API: each subcommand lives in its own cmd_<name>.cc; `status`
// builds a Snapshot (snapshot.h) from a read-only mapping and renders it.
#include <stdio.h>

#include <vector>

#include <CLI/CLI.hpp>
#include <shmsem/shmsem.h>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {

CLI::Validator semaphore_name_validator() {
  return CLI::Validator(
      [](std::string &name) {
        return name_problem(name);
      },
      "NAME", "semaphore name");
}

namespace {

int main_impl(int argc, char **argv) {
  CLI::App app{
      "shmsem: create, inspect and use FIFO-fair, crash-aware counting "
      "semaphores in POSIX shared memory.",
      "shmsem"};
  app.set_version_flag("--version", SHMSEM_VERSION_STRING,
                       "Print the version and exit");
  app.require_subcommand(1, 1);
  app.get_formatter()->column_width(34);
  app.footer(
      "Names look like /pool (a file in /dev/shm). Durations: 500ms, 5s, 2m, "
      "1h or plain seconds.\n"
      "Exit status: 0 ok, 1 failed, 2 bad usage, 3 no such semaphore, 4 "
      "already exists;\n"
      "`run` exits with the command's status (124 timed out, 125 shmsem "
      "failed, 126/127 cannot run).\n"
      "See shmsem(1) and shmsem(7).");

  std::vector<Subcommand> subs = {
      add_create(app),  add_status(app),   add_list(app), add_run(app),
      add_recover(app), add_shutdown(app), add_rm(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    // CLI11 prints the problem; we choose the code. `run` reports its own
    // failures as 125 so they never pass for the command's exit status.
    app.exit(e);
    for (const Subcommand &s : subs)
      if (s.app->parsed() && s.app->get_name() == "run") return kExitRunFailed;
    return kExitUsage;
  }
  for (const Subcommand &s : subs)
    if (s.app->parsed()) return s.run();
  return kExitUsage;  // unreachable: require_subcommand(1, 1)
}

}  // namespace
}  // namespace shmsem::cli

int main(int argc, char **argv) { return shmsem::cli::main_impl(argc, argv); }
