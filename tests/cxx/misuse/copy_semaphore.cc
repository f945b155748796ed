// A semaphore owns its handle: a copy would shmsem_detach it twice.
// std: c++20
// expect: error
// reason: use of deleted function 'shmsem::semaphore::semaphore\(const
// shmsem::semaphore&\)' reason-clang: call to deleted constructor of
// 'shmsem::semaphore'
#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem) {
  shmsem::semaphore copy = sem;
  (void)copy;
}
