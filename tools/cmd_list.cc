// shmsem list [--all] [--json] [WHERE]: every semaphore in /dev/shm this
// user can read, or every pool of a server (WHERE "redis://HOST[:PORT]" or
// "redis+unix:///PATH"), as the data layer finds them (pool_view.h:
// shmsem_list_at, each file read as a SHMSEM_SNAPSHOT copy, each pool as
// shmsem_stat reads it). Files that are not shmsem segments or
// that we cannot read are not shown; half-built ones (".shmsem-tmp-*", left
// by a create of an older version killed on the temporary-name route, see
// DESIGN.md section 3) are shown with --all only (shmsem_leftovers), with
// whether their creator may still be alive.
#include <stdio.h>
#include <string.h>

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
#include "pool_view.h"

namespace shmsem::cli {
namespace {

using Json = nlohmann::ordered_json;

// Where glibc's shm_open() keeps the names.
constexpr char kShmDir[] = "/dev/shm";
using Leftover = struct shmsem_leftover;

struct ListOptions {
  bool json = false;
  bool all = false;
  std::string where = kShmDir;
};

std::string place_problem(const std::string &where) {
  if (is_place(where)) return "";
  return "not a place of semaphores: '" + printable(where) +
         "' (expected /dev/shm, redis://HOST[:PORT] or redis+unix:///PATH)";
}

// The user name of `uid`, or the number if it has none.
std::string owner_text(uid_t uid) {
  std::string name = user_name(uid);
  return name.empty() ? std::to_string(uid) : name;
}

// "dead": kill(pid, 0) said ESRCH, so `shmsem recover --leftovers` removes
// it; "alive": a process with that PID exists (maybe not the creator, but
// it may be); "unknown": the name carries no PID.
const char *creator_state(const Leftover &l) {
  if (l.pid < 0) return "unknown";
  return l.creator_gone ? "dead" : "alive";
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
    printf(
        "Remove those whose creator is dead with 'shmsem recover "
        "--leftovers'.\n");
}

void print_list_json(const std::vector<FoundPool> &found,
                     const std::vector<Leftover> *leftovers) {
  Json j;
  j["version"] = 1;
  j["semaphores"] = Json::array();
  for (const FoundPool &e : found)
    j["semaphores"].push_back(
        {{"name", e.name},
         {"state", e.st.closed ? "closed" : "open"},
         {"capacity", e.st.permits},
         {"available", e.st.available},
         {"held", e.st.held},
         {"reserved", e.st.reserved},
         {"waiting", e.st.waiting},
         {"uid", e.remote ? Json(nullptr) : Json(e.uid)}});
  if (leftovers) {
    j["leftovers"] = Json::array();
    for (const Leftover &l : *leftovers)
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
}

void print_list_text(const std::vector<FoundPool> &found,
                     const std::string &where) {
  if (found.empty()) {
    printf("no semaphores in %s\n", printable(where).c_str());
    return;
  }
  std::vector<std::vector<std::string>> rows;
  rows.reserve(found.size());
  for (const FoundPool &e : found)
    rows.push_back(
        {e.name, std::to_string(e.st.permits), std::to_string(e.st.available),
         std::to_string(e.st.held + e.st.reserved),
         std::to_string(e.st.waiting), e.st.closed ? "closed" : "open",
         e.remote ? "-" : owner_text(e.uid)});
  print_table(
      stdout,
      {"NAME", "CAPACITY", "AVAILABLE", "HELD", "WAITING", "STATE", "OWNER"},
      rows, "");
}

int run_list(const ListOptions &o) {
  std::vector<FoundPool> found;
  int e = find_pools(&found, o.where);
  if (e) {
    fprintf(stderr, "shmsem: list: cannot read %s: %s\n",
            printable(o.where).c_str(), shmsem_strerror(e));
    return kExitFailure;
  }
  // The semaphores this user can read, a damaged one as read (`status`
  // says more); nothing else: `list` has no room for errors.
  found.erase(
      std::remove_if(found.begin(), found.end(),
                     [](const FoundPool &p) { return !readable(p.error); }),
      found.end());
  // Leftovers are files of interrupted creates: /dev/shm has them alone.
  const bool leftovers_too = o.all && !is_remote_name(o.where);
  std::vector<Leftover> leftovers;
  if (leftovers_too) leftovers = find_leftovers();
  if (o.json) {
    print_list_json(found, leftovers_too ? &leftovers : nullptr);
  } else {
    print_list_text(found, o.where);
    if (leftovers_too) print_leftovers(leftovers);
  }
  // Any failed write, earlier or now, fails the command.
  return fflush(stdout) == 0 && !ferror(stdout) ? kExitOk : kExitFailure;
}

}  // namespace

Subcommand add_list(CLI::App &parent) {
  auto o = std::make_shared<ListOptions>();
  CLI::App *sub = parent.add_subcommand(
      "list",
      "List the semaphores in /dev/shm that you can read, or a server's pools");
  sub->add_option("WHERE", o->where,
                  "/dev/shm (the default), or a Redis server: "
                  "redis://HOST[:PORT], redis+unix:///PATH")
      ->option_text(" ")
      ->check(CLI::Validator(
          // cppcheck-suppress constParameter ; CLI11's validator signature
          [](std::string &value) { return place_problem(value); }, "", ""));
  sub->add_flag("-a,--all", o->all,
                "Also list leftover .shmsem-tmp-* files of killed creates "
                "(/dev/shm only)");
  sub->add_flag("-j,--json", o->json,
                "Print one JSON document instead of text");
  sub->footer(
      "OWNER owns the file: anyone with write access to a semaphore "
      "can disturb it (see shmsem(7)).\nHELD counts reserved permits too "
      "(granted to a waiter that has "
      "not yet returned).\n--all: CREATOR is dead (no process has "
      "its PID: 'shmsem recover --leftovers' removes it),\nalive "
      "(a process has its PID, maybe the creator) or unknown.\nA server's "
      "pools have no OWNER ('-'): its ACL decides who may use them.");
  return {sub, [o] { return run_list(*o); },
          "shmsem list [--all] [--json] [WHERE]"};
}

}  // namespace shmsem::cli
