// One function per subcommand (one file each: cmd_<name>.cc). Each adds its
// subcommand, options and help to `parent` and returns the code that runs it
// after a successful parse; that code returns an exit code (exit_codes.h).
#ifndef SHMSEM_TOOLS_COMMANDS_H
#define SHMSEM_TOOLS_COMMANDS_H

#include <stdint.h>

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

// The check of every numeric option CLI11 parses: parse_decimal(value, min,
// max) (common.h), whose problem CLI11 reports after the option's name
// ("--permits: '1e3' is not a number: ..."), with the value rewritten in
// plain decimal digits, so that CLI11's own conversion (strtoull with base
// 0, which reads a leading 0 as octal and 0x as hex) takes it as written.
// Give it to Option::transform(), not check(), which discards the rewrite.
CLI::Validator decimal(uint64_t min, uint64_t max);

}  // namespace shmsem::cli

#endif  // SHMSEM_TOOLS_COMMANDS_H
