// A dropped acquire() result releases the permit at once: always a bug.
// std: c++20
// expect: error
// reason: ignoring return value of 'shmsem::lease
// shmsem::semaphore::acquire\(\)', declared with attribute 'nodiscard'
// reason-clang: ignoring return value of function declared with 'nodiscard'
// attribute
#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem) { sem.acquire(); }
