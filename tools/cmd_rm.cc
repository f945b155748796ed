// shmsem rm [--force] NAME...: remove names (shmsem_unlink). Processes that
// have the semaphore open keep using it; new opens fail. Without --force,
// only files that carry the shmsem header are removed: /dev/shm is shared
// with every other POSIX shm user, and a typo must not delete their data.
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"
#include "layout.h"

namespace shmsem::cli {
namespace {

// 0 if /dev/shm<name> starts with the shmsem magic (any layout version),
// -EBADMSG if it does not, or why we cannot tell (-ENOENT, -EACCES, ...).
int check_is_semaphore(const std::string &name) {
  std::string path = "/dev/shm" + name;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return -errno;
  if (!S_ISREG(st.st_mode)) return -EBADMSG;
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno == ELOOP ? -EBADMSG : -errno;
  uint64_t magic = 0;
  ssize_t n = pread(fd, &magic, sizeof magic, 0);
  int e = n < 0 ? -errno : 0;
  close(fd);
  if (e) return e;
  return n == ssize_t(sizeof magic) && magic == shmsem::detail::kMagic
             ? 0
             : -EBADMSG;
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
      "Without --force, only files that start with the shmsem header are "
      "removed. Processes that have\nit open keep using it until they "
      "detach; it does not close it (see 'shmsem shutdown').");
  return {sub, [names, force] { return run_rm(*names, *force); },
          "shmsem rm [--force] NAME..."};
}

}  // namespace shmsem::cli
