// Real processes for multi-process tests: fork a child that runs a body and
// _exits with its result, wait with a timeout (SIGKILL on expiry), and never
// leave a child behind (Children's destructor kills and reaps the rest).
#ifndef SHMSEM_TESTS_SUPPORT_PROCESS_H
#define SHMSEM_TESTS_SUPPORT_PROCESS_H

#include <sys/mman.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <new>
#include <vector>

namespace shmsem::test {

// Exit status as a number: code for a normal exit, 128 + signal if killed,
// -1 if it did not end within the timeout (it is then killed and reaped).
int wait_exit(pid_t pid, std::chrono::milliseconds timeout);

class Children {
 public:
  ~Children();
  // Runs body() in a child process; the child _exits with its return value.
  pid_t spawn(const std::function<int()> &body);
  int wait(pid_t pid,
           std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Wait for all; true if every child exited with 0.
  bool wait_all_ok(
      std::chrono::milliseconds timeout = std::chrono::seconds(60));
  const std::vector<pid_t> &pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
};

// Memory shared with forked children (MAP_SHARED | MAP_ANONYMOUS).
template <typename T>
class Shared {
 public:
  Shared() {
    void *p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    p_ = new (p) T();
  }
  // One owner: a copy would destroy and unmap the object a second time.
  Shared(const Shared &) = delete;
  Shared &operator=(const Shared &) = delete;
  ~Shared() {
    p_->~T();
    munmap(p_, sizeof(T));
  }
  T *operator->() const { return p_; }
  T &operator*() const { return *p_; }

 private:
  T *p_;
};

// Poll pred() (every 200 us) until it holds or the timeout passes. For
// waiting on an observable state, never for ordering a race.
bool wait_until(const std::function<bool()> &pred,
                std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace shmsem::test

#endif  // SHMSEM_TESTS_SUPPORT_PROCESS_H
