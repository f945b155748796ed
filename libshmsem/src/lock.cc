#include "lock.h"

#include <errno.h>
#include <stdlib.h>

#include "recovery.h"

namespace shmsem::detail {

int init_lock(pthread_mutex_t *m) {
  pthread_mutexattr_t a;
  int e = pthread_mutexattr_init(&a);
  if (e) return -e;
  e = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  if (!e) e = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  if (!e) e = pthread_mutex_init(m, &a);
  pthread_mutexattr_destroy(&a);
  return -e;
}

void lock(shmsem_t *s) {
  int e = pthread_mutex_lock(&s->core->lock);
  if (e == EOWNERDEAD) {
    // The previous owner died inside a critical section: rebuild the
    // derived state from the record states, then mark the lock usable.
    repair(s);
    pthread_mutex_consistent(&s->core->lock);
  } else if (e != 0) {
    // ENOTRECOVERABLE cannot happen (every EOWNERDEAD path above calls
    // pthread_mutex_consistent); anything else is memory corruption.
    abort();
  }
}

void unlock(shmsem_t *s) { pthread_mutex_unlock(&s->core->lock); }

}  // namespace shmsem::detail
