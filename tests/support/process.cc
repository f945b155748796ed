#include "support/process.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace shmsem::test {

int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      continue;
    }
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Children::~Children() {
  for (pid_t p : pids_) {
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
}

pid_t Children::spawn(const std::function<int()> &body) {
  pid_t pid = fork();
  if (pid == 0) {
    int code = body();
    _exit(code);
  }
  if (pid > 0) pids_.push_back(pid);
  return pid;
}

int Children::wait(pid_t pid, std::chrono::milliseconds timeout) {
  int r = wait_exit(pid, timeout);
  pids_.erase(std::remove(pids_.begin(), pids_.end(), pid), pids_.end());
  return r;
}

bool Children::wait_all_ok(std::chrono::milliseconds timeout) {
  bool ok = true;
  auto pids = pids_;
  for (pid_t p : pids) ok = (wait(p, timeout) == 0) && ok;
  return ok;
}

bool wait_until(const std::function<bool()> &pred,
                std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace shmsem::test
