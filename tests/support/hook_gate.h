// Pause a thread exactly at a hook point. Threads are told apart by a tag
// they set themselves (tag_this_thread) before calling into the library, so
// a pause can be armed before the thread starts.
//
//   HookGate gate;
//   int p = gate.arm(HookPoint::WAIT_TIMEOUT_FIRED, /*tag=*/1);
//   std::thread t([&] { HookGate::tag_this_thread(1); acquire_until(...); });
//   ASSERT_TRUE(gate.wait_arrived(p));   // t is now parked at the hook
//   ... release, check invariants ...
//   gate.resume(p);
#ifndef SHMSEM_TESTS_SUPPORT_HOOK_GATE_H
#define SHMSEM_TESTS_SUPPORT_HOOK_GATE_H

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "testing.h"

namespace shmsem::test {

using testing::HookPoint;

class HookGate {
 public:
  HookGate();
  ~HookGate();  // resumes everything and uninstalls the hook

  static void tag_this_thread(int tag);
  static int this_thread_tag();

  // The first thread with `tag` (any thread if tag == 0) that reaches `p`
  // parks there until resume(). Returns the pause id.
  int arm(HookPoint p, int tag = 0);
  bool wait_arrived(
      int id, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  void resume(int id);
  // Also call fn at every hook point (from the reaching thread).
  void on_every(std::function<void(HookPoint)> fn);

 private:
  struct Pause {
    HookPoint point;
    int tag;
    bool arrived = false, released = false, taken = false;
  };
  static void trampoline(HookPoint p, void *ctx);
  void reached(HookPoint p);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pause> pauses_;
  std::function<void(HookPoint)> every_;
};

}  // namespace shmsem::test

#endif  // SHMSEM_TESTS_SUPPORT_HOOK_GATE_H
