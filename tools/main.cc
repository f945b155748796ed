// shmsem: inspect and use shmsem semaphores from the shell. A thin front end
// over the public C API (<shmsem/shmsem.h>, <shmsem/inspect.h>; nothing of
// libshmsem/src/): each subcommand lives in its own cmd_<name>.cc; the
// read-only views (`status`, `list`, `top`, the exporter) read through one
// data layer (pool_view.h: shmsem_list, then a Snapshot built with
// shmsem_inspect from a private copy of each file) and only render it.
#include <stdio.h>
#include <string.h>

#include <exception>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <shmsem/shmsem.h>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {

CLI::Option *add_name_option(CLI::App *sub, std::string *name) {
  return sub
      ->add_option("NAME", *name,
                   "Semaphore name: '/' and 1-255 characters, e.g. /pool; or "
                   "redis://HOST[:PORT]/POOL, "
                   "'redis+unix:///SOCKET?pool=POOL'")
      ->required()
      ->option_text(" ")
      ->check(CLI::Validator(
          // cppcheck-suppress constParameter ; CLI11's validator signature
          [](std::string &value) { return name_problem(value); }, "", ""));
}

CLI::Validator decimal(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string &value) {
        uint64_t v = 0;
        std::string problem = parse_decimal(value, min, max, &v);
        if (problem.empty()) value = std::to_string(v);
        return problem;
      },
      "", "");
}

namespace {

// CLI11 derives "Usage:" from the options; ours are written out by hand
// (Subcommand::usage) so they match shmsem(1).
class Formatter : public CLI::Formatter {
 public:
  std::string main_usage;
  std::vector<std::pair<const CLI::App *, std::string>> usages;

  std::string make_usage(const CLI::App *app, std::string) const override {
    for (const auto &u : usages)
      if (u.first == app) return "Usage: " + u.second + "\n";
    return "Usage: " + main_usage + "\n";
  }
};

// "shmsem: run: NAME is required" plus where to read more, naming the
// subcommand that was being parsed.
std::string failure_message(const CLI::App *app, const CLI::Error &e) {
  std::string where = "shmsem";
  for (const CLI::App *sub : app->get_subcommands())
    where += " " + sub->get_name();
  std::string what = e.what();
  if (what.rfind("NAME: ", 0) == 0)
    what = what.substr(6);  // our validator says it
  return "shmsem: " + (where == "shmsem" ? "" : where.substr(7) + ": ") + what +
         "\nRun '" + where + " --help' for more information.\n";
}

// Each line of `text` through printable(), the line breaks kept.
void print_escaped_lines(FILE *f, const std::string &text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    bool nl = end != std::string::npos;
    if (!nl) end = text.size();
    fprintf(f, "%s%s", printable(text.substr(start, end - start)).c_str(),
            nl ? "\n" : "");
    start = end + 1;
  }
}

int main_impl(int argc, char **argv) {
  CLI::App app{
      "shmsem: create, inspect and use FIFO-fair, crash-aware counting "
      "semaphores in POSIX shared memory.",
      "shmsem"};
  auto fmt = std::make_shared<Formatter>();
  fmt->main_usage =
      "shmsem [--version] [--help] SUBCOMMAND [OPTIONS] [NAME] ...";
  fmt->column_width(26);
  app.formatter(fmt);  // before the subcommands, which inherit it
  app.failure_message(failure_message);
  app.set_version_flag("--version", SHMSEM_VERSION_STRING,
                       "Print the version and exit");
  app.require_subcommand(1, 1);
  app.footer(
      "Names look like /pool (a file in /dev/shm). Durations: 500ms, 5s, 2m, "
      "1h or plain seconds.\n"
      "Numbers are whole and decimal (010 is ten; 0x10 and 1e3 are refused); "
      "only create --mode is octal.\n"
      "Rates (create --rate): 100/s, 5/min, 1/h, 250/ms, 3/10s or a plain "
      "number per second.\n"
      "Exit status: 0 ok, 1 failed, 2 bad usage, 3 no such semaphore, 4 "
      "already exists;\n"
      "`run` exits with the command's status (124 timed out, 125 shmsem "
      "failed, 126/127 cannot run).\n"
      "See shmsem(1) and shmsem(7).");

  std::vector<Subcommand> subs = {
      add_create(app),   add_set(app),     add_status(app),   add_list(app),
      add_run(app),      add_recover(app), add_shutdown(app), add_rm(app),
      add_exporter(app), add_top(app),
  };
  for (const Subcommand &s : subs) fmt->usages.emplace_back(s.app, s.usage);

  // Two mistakes CLI11 words poorly: no subcommand, and an unknown one.
  std::string known;
  bool found = false;
  for (const Subcommand &s : subs) {
    known += (known.empty() ? "" : ", ") + s.app->get_name();
    found |= argc >= 2 && s.app->get_name() == argv[1];
  }
  if (argc < 2 || (argv[1][0] != '-' && !found)) {
    if (argc < 2)
      fprintf(stderr, "shmsem: no subcommand given (one of %s)\n",
              known.c_str());
    else
      fprintf(stderr, "shmsem: unknown subcommand '%s' (one of %s)\n",
              printable(argv[1]).c_str(), known.c_str());
    fprintf(stderr, "Run 'shmsem --help' for more information.\n");
    return kExitUsage;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    // CLI11 words the problem (quoting arguments as given: escape them);
    // we choose the code. `run` reports its own failures as 125 so they
    // never pass for the command's exit status.
    std::ostringstream out, err;
    app.exit(e, out, err);
    print_escaped_lines(stdout, out.str());
    print_escaped_lines(stderr, err.str());
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

// An exception nothing below caught (out of memory, a library error nobody
// foresaw) ends the command with a message and a failure status, not with
// std::terminate()'s abort and core dump.
int main(int argc, char **argv) {
  try {
    return shmsem::cli::main_impl(argc, argv);
  } catch (const std::exception &e) {
    fprintf(stderr, "shmsem: %s\n", e.what());
  } catch (...) {
    fprintf(stderr, "shmsem: unexpected error\n");
  }
  // `run` reports its own failures as 125 (exit_codes.h).
  return argc >= 2 && strcmp(argv[1], "run") == 0 ? shmsem::cli::kExitRunFailed
                                                  : shmsem::cli::kExitFailure;
}
