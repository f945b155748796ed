// The segment lock: a process-shared robust pthread mutex. If its owner dies
// the kernel marks it and the next locker receives EOWNERDEAD; lock() then
// runs repair() (recovery.cc) before anyone else sees the state.
#ifndef SHMSEM_SRC_LOCK_H
#define SHMSEM_SRC_LOCK_H

#include "handle.h"

namespace shmsem::detail {

int init_lock(pthread_mutex_t *m);
void lock(shmsem_t *s);
void unlock(shmsem_t *s);

class LockGuard {
 public:
  explicit LockGuard(shmsem_t *s) : s_(s) { lock(s_); }
  ~LockGuard() { unlock(s_); }
  LockGuard(const LockGuard &) = delete;
  LockGuard &operator=(const LockGuard &) = delete;

 private:
  shmsem_t *s_;
};

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_LOCK_H
