// A blocking acquire in a thread of its own, tagged for HookGate, whose
// result and lease the test reads after join().
#ifndef SHMSEM_TESTS_SUPPORT_WAITER_THREAD_H
#define SHMSEM_TESTS_SUPPORT_WAITER_THREAD_H

#include <shmsem/shmsem.h>

#include <atomic>
#include <thread>

#include "support/hook_gate.h"

namespace shmsem::test {

struct WaiterThread {
  int result = 1;
  shmsem_lease_t lease{};
  std::atomic<bool> done{false};
  std::thread t;

  // Runs fn(&lease) (an acquire of the caller's choosing) in the thread;
  // its return value lands in result.
  template <typename F>
  void start(int tag, F fn) {
    t = std::thread([this, tag, fn] {
      HookGate::tag_this_thread(tag);
      result = fn(&lease);
      done = true;
    });
  }
  void join() { t.join(); }
};

}  // namespace shmsem::test

#endif  // SHMSEM_TESTS_SUPPORT_WAITER_THREAD_H
