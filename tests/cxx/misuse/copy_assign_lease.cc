// Copy assignment of a lease is deleted too (move assignment is the way).
// std: c++20
// expect: error
// reason: use of deleted function 'shmsem::lease&
// shmsem::lease::operator=\(const shmsem::lease&\)' reason-clang: overload
// resolution selected deleted operator '='
#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem) {
  shmsem::lease a = sem.acquire();
  shmsem::lease b;
  b = a;
}
