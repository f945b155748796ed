// A lease owns one permit: copying it would release that permit twice.
// std: c++20
// expect: error
// reason: use of deleted function 'shmsem::lease::lease\(const
// shmsem::lease&\)' reason-clang: call to deleted constructor of
// 'shmsem::lease'
#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem) {
  shmsem::lease a = sem.acquire();
  shmsem::lease b = a;
  b.release();
}
