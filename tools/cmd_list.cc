// shmsem list [--all] [--json]: every semaphore in /dev/shm, recognised by
// its header (each read as a SHMSEM_SNAPSHOT copy). Files that are not
// shmsem segments or that we cannot read are skipped; half-built ones
// (".shmsem-tmp-*", left by a create of an older version killed on the
// temporary-name route, see DESIGN.md section 3) are shown with --all only
// (shmsem_leftovers), with whether their creator may still be alive.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <shmsem/inspect.h>
#include <shmsem/shmsem.h>

#include "commands.h"
#include "common.h"
#include "exit_codes.h"

namespace shmsem::cli {
namespace {

using Json = nlohmann::ordered_json;

// Where glibc's shm_open() keeps the names.
constexpr char kShmDir[] = "/dev/shm";
// The names leftovers have (shmsem_leftovers(3)); not semaphores.
constexpr char kTmpPrefix[] = ".shmsem-tmp-";

using Leftover = struct shmsem_leftover;

struct ListOptions {
  bool json = false;
  bool all = false;
};

struct Entry {
  std::string name;
  struct shmsem_stat st;
  uid_t uid;  // owner of the file, from the descriptor that was read
};

// The user name of `uid`, or the number if it has none.
std::string owner_name(uid_t uid) {
  struct passwd pw, *res = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return pw.pw_name;
  return std::to_string(uid);
}

// "dead": kill(pid, 0) said ESRCH, so `shmsem recover --leftovers` removes
// it; "alive": a process with that PID exists (maybe not the creator, but
// it may be); "unknown": the name carries no PID.
const char *creator_state(const Leftover &l) {
  if (l.pid < 0) return "unknown";
  return l.creator_gone ? "dead" : "alive";
}

// Sorted by name (shmsem_leftovers sorts them). None if /dev/shm cannot be
// read: the semaphores above were listed from it, so that is a race.
std::vector<Leftover> find_leftovers() {
  std::vector<Leftover> out;
  int n = shmsem_leftovers(nullptr, 0);
  // More may appear between the count and the fill: ask again.
  while (n > 0 && size_t(n) > out.size()) {
    out.assign(size_t(n), Leftover{});
    n = shmsem_leftovers(out.data(), uint32_t(out.size()));
  }
  out.resize(n > 0 ? std::min(size_t(n), out.size()) : 0);
  return out;
}

// The state and the file's owner of the semaphore /dev/shm/<file>, from a
// private copy of it; false if it is not one we can show (not a
// semaphore, another layout version, no permission, another PID
// namespace, ...).
bool read_entry(const char *file, Entry *e) {
  e->name = std::string("/") + file;
  shmsem_t *s = nullptr;
  if (shmsem_open(e->name.c_str(), SHMSEM_SNAPSHOT, &s) != 0) return false;
  struct shmsem_inspection in;
  // No holders or waiters wanted: -ENOBUFS when there are some, with
  // everything else filled in. A damaged one (-EUCLEAN) is listed as read;
  // `status` says more.
  int r = shmsem_inspect(s, &in, nullptr, 0, nullptr, 0);
  shmsem_detach(s);
  if (r != 0 && r != -ENOBUFS && r != -EUCLEAN) return false;
  e->st = in.stat;
  e->uid = in.file_uid;
  return true;
}

void print_leftovers(const std::vector<Leftover> &leftovers) {
  printf("\nLeftover temporary files of killed creates: %zu\n",
         leftovers.size());
  if (leftovers.empty()) return;
  std::vector<std::vector<std::string>> rows;
  bool any_dead = false;
  for (const Leftover &l : leftovers) {
    rows.push_back({l.file, std::to_string(l.size),
                    l.pid < 0 ? "-" : std::to_string(l.pid), creator_state(l)});
    any_dead |= l.pid >= 0 && l.creator_gone;
  }
  print_table(stdout, {"FILE", "SIZE", "PID", "CREATOR"}, rows);
  if (any_dead)
    printf("Remove those whose creator is dead with 'shmsem recover "
           "--leftovers'.\n");
}

int run_list(const ListOptions &o) {
  DIR *dir = opendir(kShmDir);
  if (!dir) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): the command has one thread
    fprintf(stderr, "shmsem: list: cannot read %s: %s\n", kShmDir, strerror(errno));
    return kExitFailure;
  }
  std::vector<Entry> found;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): unsafe only on a shared DIR
  while (struct dirent *de = readdir(dir)) {
    const char *file = de->d_name;
    if (file[0] == '.' && (!strcmp(file, ".") || !strcmp(file, "..") ||
                           !strncmp(file, kTmpPrefix, sizeof kTmpPrefix - 1)))
      continue;
    Entry e;
    if (read_entry(file, &e)) found.push_back(e);
  }
  closedir(dir);
  std::sort(found.begin(), found.end(),
            [](const Entry &a, const Entry &b) { return a.name < b.name; });
  std::vector<Leftover> leftovers;
  if (o.all) leftovers = find_leftovers();

  if (o.json) {
    Json j;
    j["version"] = 1;
    j["semaphores"] = Json::array();
    for (const Entry &e : found)
      j["semaphores"].push_back({{"name", e.name},
                                 {"state", e.st.closed ? "closed" : "open"},
                                 {"capacity", e.st.permits},
                                 {"available", e.st.available},
                                 {"held", e.st.held},
                                 {"reserved", e.st.reserved},
                                 {"waiting", e.st.waiting},
                                 {"uid", e.uid}});
    if (o.all) {
      j["leftovers"] = Json::array();
      for (const Leftover &l : leftovers)
        j["leftovers"].push_back(
            {{"file", l.file},
             {"path", std::string(kShmDir) + "/" + l.file},
             {"pid", l.pid < 0 ? Json(nullptr) : Json(l.pid)},
             {"creator", creator_state(l)},
             {"size", l.size},
             {"uid", l.uid}});
    }
    // Names are bytes, not always UTF-8: print invalid ones as U+FFFD
    // (plain dump() throws on them).
    printf("%s\n", j.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else if (found.empty()) {
    printf("no semaphores in %s\n", kShmDir);
  } else {
    std::vector<std::vector<std::string>> rows;
    rows.reserve(found.size());
    for (const Entry &e : found)
      rows.push_back({e.name, std::to_string(e.st.permits),
                      std::to_string(e.st.available),
                      std::to_string(e.st.held + e.st.reserved),
                      std::to_string(e.st.waiting),
                      e.st.closed ? "closed" : "open", owner_name(e.uid)});
    print_table(stdout,
                {"NAME", "CAPACITY", "AVAILABLE", "HELD", "WAITING", "STATE",
                 "OWNER"},
                rows, "");
  }
  if (o.all && !o.json) print_leftovers(leftovers);
  // Any failed write, earlier or now, fails the command.
  return fflush(stdout) == 0 && !ferror(stdout) ? kExitOk : kExitFailure;
}

}  // namespace

Subcommand add_list(CLI::App &parent) {
  auto o = std::make_shared<ListOptions>();
  CLI::App *sub = parent.add_subcommand(
      "list", "List the semaphores in /dev/shm that you can read");
  sub->add_flag("-a,--all", o->all,
                "Also list leftover .shmsem-tmp-* files of killed creates");
  sub->add_flag("-j,--json", o->json, "Print one JSON document instead of text");
  sub->footer("OWNER owns the file: anyone with write access to a semaphore "
              "can disturb it (see shmsem(7)).\nHELD counts reserved permits too (granted to a waiter that has "
              "not yet returned).\n--all: CREATOR is dead (no process has "
              "its PID: 'shmsem recover --leftovers' removes it),\nalive "
              "(a process has its PID, maybe the creator) or unknown.");
  return {sub, [o] { return run_list(*o); },
          "shmsem list [--all] [--json]"};
}

}  // namespace shmsem::cli
