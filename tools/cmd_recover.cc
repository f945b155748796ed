// shmsem recover NAME: run a reclamation pass now (shmsem_recover) and say
// how many permits and queue places of dead processes it freed.
// shmsem recover --leftovers: remove the temporary files (".shmsem-tmp-*")
// that creates killed on the temporary-name route left in /dev/shm, when
// their creator provably no longer exists.
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <memory>
#include <string>
#include <vector>

#include <shmsem/inspect.h>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {
namespace {

using Leftover = struct shmsem_leftover;

struct RecoverOptions {
  std::string name;
  bool leftovers = false;
};

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
  printf("%s: reclaimed %d %s of dead processes\n", printable(name).c_str(), n,
         n == 1 ? "lease or waiter slot" : "leases and waiter slots");
  return kExitOk;
}

struct Tally {
  int removed = 0, kept = 0, failed = 0;
};

// Called for every ".shmsem-tmp-*" file. shmsem_remove_leftover checks the
// creator again right before unlinking; one that may be alive is never
// touched.
void recover_one(const Leftover &l, Tally *t) {
  int e = shmsem_remove_leftover(l.file);
  if (e == 0) {
    printf("removed /dev/shm/%s (its creator, PID %d, is gone)\n",
           printable(l.file).c_str(), int(l.pid));
    t->removed++;
  } else if (e == -EBUSY) {
    if (l.pid < 0)
      printf("kept /dev/shm/%s: its name carries no creator PID\n",
             printable(l.file).c_str());
    else
      printf("kept /dev/shm/%s: a process with its creator's PID %d exists\n",
             printable(l.file).c_str(), int(l.pid));
    t->kept++;
  } else if (e != -ENOENT) {  // ENOENT: someone else removed it meanwhile
    fprintf(
        stderr,
        "shmsem: recover --leftovers: cannot remove /dev/shm/%s: %s%s\n",
        printable(l.file).c_str(),
        strerror(-e),  // NOLINT(concurrency-mt-unsafe): one thread
        e == -EPERM || e == -EACCES
            ? "; it belongs to another user: run this as that user or as root"
            : "");
    t->failed++;
  }
}

int run_leftovers() {
  Tally t;
  std::vector<Leftover> found;
  int n = shmsem_leftovers(nullptr, 0);
  // More may appear between the count and the fill: ask again.
  while (n > 0 && size_t(n) > found.size()) {
    found.assign(size_t(n), Leftover{});
    n = shmsem_leftovers(found.data(), uint32_t(found.size()));
  }
  if (n < 0) {
    fprintf(stderr, "shmsem: recover --leftovers: cannot read /dev/shm: %s\n",
            strerror(-n));  // NOLINT(concurrency-mt-unsafe): one thread
    return kExitFailure;
  }
  found.resize(size_t(n) < found.size() ? size_t(n) : found.size());
  for (const Leftover &l : found) recover_one(l, &t);
  printf(
      "removed %d leftover temporary %s; kept %d whose creator may be "
      "alive\n",
      t.removed, t.removed == 1 ? "file" : "files", t.kept);
  return t.failed ? kExitFailure : kExitOk;
}

int run(const RecoverOptions &o) {
  if (o.name.empty() && !o.leftovers) {
    fprintf(stderr,
            "shmsem: recover: NAME is required (or --leftovers)\n"
            "Run 'shmsem recover --help' for more information.\n");
    return kExitUsage;
  }
  int rc = kExitOk;
  if (o.leftovers) rc = run_leftovers();
  if (!o.name.empty()) {
    int r = run_recover(o.name);
    if (r != kExitOk) rc = r;
  }
  return rc;
}

}  // namespace

Subcommand add_recover(CLI::App &parent) {
  auto o = std::make_shared<RecoverOptions>();
  CLI::App *sub = parent.add_subcommand(
      "recover", "Reclaim permits and queue places of processes that died");
  add_name_option(sub, &o->name)->required(false);
  sub->add_flag("-l,--leftovers", o->leftovers,
                "Remove leftover .shmsem-tmp-* files whose creator is gone");
  sub->footer(
      "The library also does this by itself when a caller would otherwise "
      "wait; this runs it now.\nNeeds read and write permission.\n"
      "--leftovers removes the files a killed create left in /dev/shm "
      "(see 'shmsem list --all'), but\nnever one whose creator's PID "
      "exists in this PID namespace.");
  return {sub, [o] { return run(*o); },
          "shmsem recover NAME\n       shmsem recover --leftovers"};
}

}  // namespace shmsem::cli
