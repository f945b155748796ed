// shmsem rm [--force] NAME...: remove names (shmsem_unlink). Processes that
// have the semaphore open keep using it; new opens fail. Without --force,
// only shmsem semaphores (as a SHMSEM_SNAPSHOT open tells) are removed:
// /dev/shm is shared with every other POSIX shm user, and a typo must not
// delete their data.
#include <errno.h>
#include <stdio.h>

#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {
namespace {

// 0 if /dev/shm<name> is a shmsem semaphore of any layout version,
// -EBADMSG if it is not (a symbolic link, a FIFO, another program's
// memory, or a semaphore file someone truncated or overwrote), or why we
// cannot tell (-ENOENT, -EACCES, ...). A SHMSEM_SNAPSHOT open needs only
// read permission, never blocks on a FIFO and never follows a link. Besides
// 0, these say "a semaphore" too: -EPROTO (another layout version), -EXDEV
// (created in another PID namespace), -EIO (it shrank while being read:
// its header was a semaphore's).
int check_is_semaphore(const std::string &name) {
  shmsem_t *s = nullptr;
  int e = shmsem_open(name.c_str(), SHMSEM_SNAPSHOT, &s);
  shmsem_detach(s);
  if (e == -EPROTO || e == -EXDEV || e == -EIO) return 0;
  return e;
}

int run_rm(const std::vector<std::string> &names, bool force) {
  int rc = kExitOk;
  for (const std::string &name : names) {
    if (!force) {
      int c = check_is_semaphore(name);
      if (c == -EBADMSG || c == -EACCES) {
        fprintf(stderr,
                "shmsem: rm %s: %s; not removed (use --force to remove it "
                "anyway)\n",
                printable(name).c_str(),
                c == -EBADMSG
                    ? "not a shmsem semaphore"
                    : "cannot read it to check that it is a semaphore");
        if (rc == kExitOk) rc = kExitFailure;
        continue;
      }
      // Other errors (ENOENT above all): let the unlink report them.
    }
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
  sub->add_flag("-f,--force", *force,
                "Ignore names that do not exist, and remove files that are "
                "not shmsem semaphores too");
  sub->footer(
      "Without --force, only shmsem semaphores (of any version) are "
      "removed: not other files, nor\na semaphore file someone truncated or "
      "overwrote. Processes that have a local semaphore open keep using it\n"
      "until they detach; it does not close it (see 'shmsem shutdown').\n"
      "A remote semaphore (redis://...) ends for everyone at once: every "
      "lease on it is lost and\n'shmsem run' kills its command (exit 137). "
      "Run 'shmsem shutdown' first and wait until\n'shmsem status' shows "
      "nothing held to let commands finish.");
  return {sub, [names, force] { return run_rm(*names, *force); },
          "shmsem rm [--force] NAME..."};
}

}  // namespace shmsem::cli
