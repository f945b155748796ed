// shmsem_create builds its segment where nobody can see it and names it in
// one step: a creator killed at any step leaves no file behind, or, once
// linked, a complete semaphore. Both routes are proven: the unnamed file
// (O_TMPFILE + linkat) and the temporary-name fallback, whose killed
// creators leave ".shmsem-tmp-<pid>-..." behind (why the unnamed route is
// preferred) for remove_leftover to clean up once their PID is free.
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <shmsem/shmsem.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>

#include "support/process.h"
#include "support/segment.h"
#include "testing.h"

namespace shmsem::test {
namespace {

using testing::HookPoint;
using testing::PublishRoute;

constexpr HookPoint kCreateSteps[] = {
    HookPoint::CREATE_OPENED, HookPoint::CREATE_SIZED,
    HookPoint::CREATE_INITIALISED, HookPoint::CREATE_LINKED};
constexpr char kShmDir[] = "/dev/shm";
constexpr uid_t kNobody = 65534;

const char *route_name(PublishRoute r) {
  switch (r) {
    case PublishRoute::kNone:
      return "none";
    case PublishRoute::kUnnamed:
      return "unnamed (not linked)";
    case PublishRoute::kEmptyPath:
      return "O_TMPFILE + linkat(AT_EMPTY_PATH)";
    case PublishRoute::kProcFd:
      return "O_TMPFILE + linkat(/proc/self/fd)";
    case PublishRoute::kNamedTmp:
      return "temporary name + link()";
  }
  return "?";
}

std::set<std::string> listing() {
  std::set<std::string> out;
  if (DIR *d = opendir(kShmDir)) {
    while (struct dirent *de = readdir(d)) out.insert(de->d_name);
    closedir(d);
  }
  return out;
}

std::string tmp_prefix(pid_t pid) {
  return ".shmsem-tmp-" + std::to_string(pid) + "-";
}

// The entries of a listing a case may have made: its semaphore's file and
// the temporary names of process `pid` (none if pid <= 0).
std::set<std::string> files_of(const std::set<std::string> &all,
                               const std::string &name, pid_t pid) {
  std::set<std::string> out;
  for (const std::string &f : all)
    if (f == name.substr(1) || (pid > 0 && f.rfind(tmp_prefix(pid), 0) == 0))
      out.insert(f);
  return out;
}

// Removes a case's files at scope exit, pass or fail.
struct Cleanup {
  std::string name;
  pid_t pid = -1;
  ~Cleanup() {
    for (const std::string &f : files_of(listing(), name, pid))
      unlink((std::string(kShmDir) + "/" + f).c_str());
  }
};

// What a test makes shmsem_create do instead of its own choice of route.
enum class Forced { kNothing, kProcFdLink, kNamedTmp };

const char *forced_name(Forced f) {
  switch (f) {
    case Forced::kNothing:
      return "unnamed route";
    case Forced::kProcFdLink:
      return "unnamed route linked through /proc";
    case Forced::kNamedTmp:
      return "temporary-name route";
  }
  return "?";
}

void force(Forced f) {
  testing::force_named_tmp_create(f == Forced::kNamedTmp);
  testing::force_proc_fd_link(f == Forced::kProcFdLink);
}

// The route an ordinary create takes on this machine.
PublishRoute route_here() {
  Segment probe(1, 1, "probe");
  return testing::last_create_route();
}

// Waits (polling, at most 20 s) until `pid` has ended, but leaves it a
// zombie: its PID stays taken, so nothing may yet judge its files
// abandoned. *status as wait_exit reports it.
bool wait_ended_unreaped(pid_t pid, int *status) {
  siginfo_t si{};
  bool ended = wait_until([&] {
    si = siginfo_t{};
    return waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid == pid;
  });
  if (ended)
    *status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
  return ended;
}

// The child's kill switch and what it saw there.
struct Board {
  std::atomic<int> route{-1};  // last_create_route() at the kill point
};
int g_kill_point = -1;
Board *g_board = nullptr;

void kill_at(HookPoint p, void *) {
  if (int(p) != g_kill_point) return;
  g_board->route = int(testing::last_create_route());
  raise(SIGKILL);
}

// A child runs shmsem_create and SIGKILLs itself at `step`; then /dev/shm
// must hold nothing of it but, once linked, the complete semaphore, and on
// the temporary-name route the child's temporary name.
void kill_during_create(HookPoint step, Forced forced) {
  SCOPED_TRACE(std::string("killed at ") + testing::hook_name(step) + " (" +
               forced_name(forced) + ")");
  const bool named = forced == Forced::kNamedTmp;
  const std::string name = unique_name("killed");
  Cleanup clean{name};
  const std::set<std::string> before = listing();
  Shared<Board> board;
  Children kids;
  pid_t child = kids.spawn([&] {
    force(forced);
    g_kill_point = int(step);
    g_board = &*board;
    testing::set_hook(kill_at, nullptr);
    shmsem_config cfg{};
    cfg.permits = 3;
    cfg.max_waiters = 8;
    cfg.mode = 0640;
    shmsem_t *s = nullptr;
    shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s);
    return 10;  // not killed at the step
  });
  ASSERT_GT(child, 0);
  clean.pid = child;
  int status = -1;
  ASSERT_TRUE(wait_ended_unreaped(child, &status)) << "the child hangs";
  ASSERT_EQ(status, 128 + SIGKILL) << "the child did not reach the step";
  ASSERT_EQ(files_of(before, name, child), std::set<std::string>{});

  auto route = PublishRoute(board->route.load());
  if (named)
    EXPECT_EQ(route, PublishRoute::kNamedTmp) << route_name(route);
  else if (step == HookPoint::CREATE_LINKED && forced == Forced::kProcFdLink)
    EXPECT_EQ(route, PublishRoute::kProcFd) << route_name(route);
  else if (step == HookPoint::CREATE_LINKED)
    EXPECT_TRUE(route == PublishRoute::kEmptyPath ||
                route == PublishRoute::kProcFd)
        << route_name(route);
  else
    EXPECT_EQ(route, PublishRoute::kUnnamed) << route_name(route);

  std::set<std::string> left = files_of(listing(), name, child);
  std::set<std::string> expected;
  if (step == HookPoint::CREATE_LINKED) expected.insert(name.substr(1));
  std::string tmp;
  for (const std::string &f : left)
    if (f.rfind(tmp_prefix(child), 0) == 0) tmp = f;
  if (named) {
    EXPECT_FALSE(tmp.empty()) << "the killed creator's temporary name stays";
    if (!tmp.empty()) expected.insert(tmp);
  }
  EXPECT_EQ(left, expected);

  if (!tmp.empty()) {
    // While the dead creator's PID is taken (a zombie), its file stays...
    EXPECT_EQ(detail::remove_leftover(tmp.c_str()), -EBUSY);
    EXPECT_TRUE(listing().count(tmp));
    // ...once it is free, the cleanup removes it.
    EXPECT_EQ(kids.wait(child), 128 + SIGKILL);
    EXPECT_EQ(detail::remove_leftover(tmp.c_str()), 0);
    EXPECT_FALSE(listing().count(tmp));
  }

  if (step == HookPoint::CREATE_LINKED) {
    shmsem_t *s = nullptr;
    ASSERT_EQ(shmsem_open(name.c_str(), 0, &s), 0);
    EXPECT_EQ(shmsem_check(s), 0);
    EXPECT_INVARIANTS(s);
    EXPECT_COUNTS(s, 3, 0, 0, 0);
    shmsem_detach(s);
    struct stat st;
    ASSERT_EQ(stat((kShmDir + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
  }
}

TEST(Create, KilledAtEveryStepLeavesNoFile) {
  PublishRoute here = route_here();
  if (here == PublishRoute::kNamedTmp)
    GTEST_SKIP() << "creates here take the temporary-name route (no O_TMPFILE "
                    "on /dev/shm, or no linkat route for an unnamed file)";
  for (Forced forced : {Forced::kNothing, Forced::kProcFdLink})
    for (HookPoint step : kCreateSteps) kill_during_create(step, forced);
}

TEST(Create, KilledOnTemporaryNameRouteLeavesOnlyItsTemporaryName) {
  for (HookPoint step : kCreateSteps)
    kill_during_create(step, Forced::kNamedTmp);
}

TEST(Create, AnotherUserCreatesWithExactlyTheRequestedMode) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch to uid " << kNobody;
  const std::string name = unique_name("nobody");
  Cleanup clean{name};
  struct Result {
    std::atomic<int> err{1};
    std::atomic<int> route{-1};
  };
  Shared<Result> result;
  Children kids;
  pid_t child = kids.spawn([&] {
    if (setgroups(0, nullptr) != 0 ||
        setresgid(kNobody, kNobody, kNobody) != 0 ||
        setresuid(kNobody, kNobody, kNobody) != 0)
      return 10;
    umask(077);
    shmsem_config cfg{};
    cfg.permits = 2;
    cfg.mode = 0664;
    shmsem_t *s = nullptr;
    result->err = shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s);
    result->route = int(testing::last_create_route());
    shmsem_detach(s);
    return 0;
  });
  ASSERT_EQ(kids.wait(child, std::chrono::seconds(20)), 0)
      << "could not become uid " << kNobody;
  ASSERT_EQ(result->err.load(), 0) << shmsem_strerror(result->err.load());
  auto route = PublishRoute(result->route.load());
  ::testing::Test::RecordProperty("route", route_name(route));
  printf("uid %u created through: %s\n", unsigned(kNobody), route_name(route));
  EXPECT_NE(route, PublishRoute::kUnnamed);

  struct stat st;
  ASSERT_EQ(stat((kShmDir + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_gid, gid_t(kNobody));
  EXPECT_EQ(st.st_mode & 07777, 0664u);
  EXPECT_EQ(files_of(listing(), name, child),
            std::set<std::string>{name.substr(1)})
      << "no temporary name left";
  shmsem_t *s = nullptr;
  ASSERT_EQ(shmsem_open(name.c_str(), 0, &s), 0);
  EXPECT_EQ(shmsem_check(s), 0);
  EXPECT_COUNTS(s, 2, 0, 0, 0);
  shmsem_detach(s);
}

TEST(Create, ModeIsExactWhateverTheUmask) {
  struct UmaskGuard {
    mode_t old = umask(0);
    ~UmaskGuard() {
      umask(old);
      force(Forced::kNothing);
    }
  } guard;
  const bool unnamed_here = route_here() != PublishRoute::kNamedTmp;
  for (Forced forced :
       {Forced::kNothing, Forced::kProcFdLink, Forced::kNamedTmp})
    for (mode_t mask : {0000, 0022, 0077, 0777})
      for (mode_t mode : {0600, 0640, 0604, 0666}) {
        char what[64];
        snprintf(what, sizeof what, "%s, umask %04o, mode %04o",
                 forced_name(forced), unsigned(mask), unsigned(mode));
        SCOPED_TRACE(what);
        force(forced);
        umask(mask);
        const std::string name = unique_name("mode");
        Cleanup clean{name, getpid()};
        shmsem_config cfg{};
        cfg.permits = 1;
        cfg.mode = mode;
        shmsem_t *s = nullptr;
        ASSERT_EQ(shmsem_create(name.c_str(), &cfg, SHMSEM_EXCL, &s), 0);
        PublishRoute route = testing::last_create_route();
        if (forced == Forced::kNamedTmp || !unnamed_here)
          EXPECT_EQ(route, PublishRoute::kNamedTmp) << route_name(route);
        else if (forced == Forced::kProcFdLink)
          EXPECT_EQ(route, PublishRoute::kProcFd) << route_name(route);
        else
          EXPECT_NE(route, PublishRoute::kNamedTmp) << route_name(route);
        struct stat st;
        ASSERT_EQ(stat((kShmDir + name).c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 07777, mode);
        EXPECT_EQ(files_of(listing(), name, getpid()),
                  std::set<std::string>{name.substr(1)})
            << "no temporary name left";
        shmsem_detach(s);
      }
}

}  // namespace
}  // namespace shmsem::test
