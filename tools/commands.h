// One function per subcommand (one file each: cmd_<name>.cc). Each adds its
// subcommand, options and help to `parent` and returns the code that runs it
// after a successful parse; that code returns an exit code (exit_codes.h).
#ifndef SHMSEM_TOOLS_COMMANDS_H
#define SHMSEM_TOOLS_COMMANDS_H

#include <functional>

#include <CLI/CLI.hpp>

namespace shmsem::cli {

struct Subcommand {
  CLI::App *app;
  std::function<int()> run;
  const char *usage;  // the synopsis line --help prints after "Usage: "
};

Subcommand add_create(CLI::App &parent);
Subcommand add_set(CLI::App &parent);
Subcommand add_status(CLI::App &parent);
Subcommand add_list(CLI::App &parent);
Subcommand add_run(CLI::App &parent);
Subcommand add_recover(CLI::App &parent);
Subcommand add_shutdown(CLI::App &parent);
Subcommand add_rm(CLI::App &parent);
Subcommand add_top(CLI::App &parent);
Subcommand add_exporter(CLI::App &parent);

// The NAME positional every subcommand but `list` takes, validated with
// name_problem() (common.h).
CLI::Option *add_name_option(CLI::App *sub, std::string *name);

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_COMMANDS_H
