// shmsem create NAME --permits N [--max-waiters M] [--mode 0660] [--exclusive]
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <memory>
#include <string>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {
namespace {

struct CreateOptions {
  std::string name;
  uint32_t permits = 0;
  uint32_t max_waiters = 0;
  std::string mode;
  bool exclusive = false;
  bool any_owner = false;
};

// "0660", "660" or "0o660" to permission bits; -1 if not octal read/write
// bits within 0666 (no execute, setuid, setgid or sticky bit).
long parse_mode(std::string text) {
  if (text.rfind("0o", 0) == 0) text = text.substr(2);
  if (text.empty() || text.size() > 5) return -1;
  char *end = nullptr;
  long v = strtol(text.c_str(), &end, 8);
  if (*end || v <= 0 || (v & ~0666L)) return -1;
  return v;
}

int run_create(const CreateOptions &o) {
  struct shmsem_config cfg = {};
  cfg.permits = o.permits;
  cfg.max_waiters = o.max_waiters;
  if (!o.mode.empty()) {
    long m = parse_mode(o.mode);
    if (m < 0) {
      fprintf(stderr,
              "shmsem: create %s: invalid mode '%s': give octal read/write "
              "bits within 0666, such as 0660 or 0600\n",
              printable(o.name).c_str(), printable(o.mode).c_str());
      return kExitUsage;
    }
    cfg.mode = uint32_t(m);
  }
  Handle h;
  int flags = int((o.exclusive ? SHMSEM_EXCL : 0u) |
                  (o.any_owner ? SHMSEM_ANY_OWNER : 0u));
  int e = shmsem_create(o.name.c_str(), &cfg, flags, &h.s);
  if (e == -EPERM) {
    fprintf(stderr,
            "shmsem: create %s: semaphore exists and belongs to another "
            "user; check who created it ('ls -l /dev/shm%s'), and use "
            "--any-owner only if you trust that user\n",
            printable(o.name).c_str(), printable(o.name).c_str());
    return exit_code_for(e);
  }
  if (e == -EEXIST && !o.exclusive) {
    // Not exclusive, so it exists with other settings: say which.
    Handle other;
    struct shmsem_stat st;
    if (shmsem_open(o.name.c_str(), SHMSEM_RDONLY, &other.s) == 0 &&
        shmsem_stat(other.s, &st) == 0) {
      fprintf(stderr,
              "shmsem: create %s: semaphore already exists with "
              "--permits %u --max-waiters %u; remove it first with "
              "'shmsem rm %s' to change them\n",
              printable(o.name).c_str(), st.permits, st.max_waiters,
              printable(o.name).c_str());
      return kExitExists;
    }
  }
  if (e) {
    report_error("create", o.name, e);
    return exit_code_for(e);
  }
  return kExitOk;
}

}  // namespace

Subcommand add_create(CLI::App &parent) {
  auto o = std::make_shared<CreateOptions>();
  CLI::App *sub = parent.add_subcommand(
      "create",
      "Create a semaphore (or open it if it exists with the same settings)");
  add_name_option(sub, &o->name);
  sub->add_option("-n,--permits", o->permits, "Number of permits (1-1048576)")
      ->required()
      ->option_text("N")
      ->check(CLI::Range(1u, uint32_t(SHMSEM_MAX_PERMITS)));
  sub->add_option("-w,--max-waiters", o->max_waiters,
                  "Wait-queue bound (default 1024)")
      ->option_text("M")
      ->check(CLI::Range(1u, uint32_t(SHMSEM_MAX_WAITERS)));
  sub->add_option("-m,--mode", o->mode,
                  "Read/write bits of /dev/shm/NAME in octal, within 0666 "
                  "(default 0600)")
      ->option_text("MODE");
  sub->add_flag("--any-owner", o->any_owner,
                "Also use an existing semaphore another user owns");
  sub->add_flag("-x,--exclusive", o->exclusive,
                "Fail (exit 4) if it already exists");
  return {sub, [o] { return run_create(*o); },
          "shmsem create NAME --permits N [--max-waiters M] [--mode MODE] [--exclusive] [--any-owner]"};
}

}  // namespace shmsem::cli
