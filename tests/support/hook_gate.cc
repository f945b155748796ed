#include "support/hook_gate.h"

namespace shmsem::test {
namespace {
thread_local int t_tag = 0;
}

HookGate::HookGate() { testing::set_hook(&HookGate::trampoline, this); }

HookGate::~HookGate() {
  {
    std::lock_guard<std::mutex> g(mu_);
    for (Pause &p : pauses_) p.released = true;
  }
  cv_.notify_all();
  testing::set_hook(nullptr, nullptr);
}

void HookGate::tag_this_thread(int tag) { t_tag = tag; }
int HookGate::this_thread_tag() { return t_tag; }

int HookGate::arm(HookPoint p, int tag) {
  std::lock_guard<std::mutex> g(mu_);
  pauses_.push_back(Pause{p, tag});
  return int(pauses_.size()) - 1;
}

bool HookGate::wait_arrived(int id, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> g(mu_);
  return cv_.wait_for(g, timeout, [&] { return pauses_[size_t(id)].arrived; });
}

void HookGate::resume(int id) {
  {
    std::lock_guard<std::mutex> g(mu_);
    pauses_[size_t(id)].released = true;
  }
  cv_.notify_all();
}

void HookGate::on_every(std::function<void(HookPoint)> fn) {
  std::lock_guard<std::mutex> g(mu_);
  every_ = std::move(fn);
}

void HookGate::trampoline(HookPoint p, void *ctx) {
  static_cast<HookGate *>(ctx)->reached(p);
}

void HookGate::reached(HookPoint p) {
  std::function<void(HookPoint)> every;
  std::unique_lock<std::mutex> g(mu_);
  every = every_;
  for (Pause &pz : pauses_) {
    if (pz.taken || pz.point != p || (pz.tag != 0 && pz.tag != t_tag)) continue;
    pz.taken = pz.arrived = true;
    cv_.notify_all();
    cv_.wait(g, [&] { return pz.released; });
    break;
  }
  g.unlock();
  if (every) every(p);
}

}  // namespace shmsem::test
