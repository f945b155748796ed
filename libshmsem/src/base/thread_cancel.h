// Thread cancellation around the library's own work. Nothing the library
// does while holding shared state may be cut short by pthread_cancel: a
// NoCancel scope disables it (the reclamation pass reads /proc and polls
// pidfds, which are cancellation points). The blocking acquires are
// cancellation points only while asleep (acquire.cc).
#ifndef SHMSEM_SRC_THREAD_CANCEL_H
#define SHMSEM_SRC_THREAD_CANCEL_H

#include <pthread.h>

namespace shmsem::detail {

class NoCancel {
 public:
  NoCancel() { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_); }
  ~NoCancel() { pthread_setcancelstate(old_, nullptr); }
  NoCancel(const NoCancel &) = delete;
  NoCancel &operator=(const NoCancel &) = delete;
  // The state the caller had: PTHREAD_CANCEL_ENABLE or _DISABLE.
  int caller_state() const { return old_; }

 private:
  int old_;
};

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_THREAD_CANCEL_H
