// Likewise the weighted acquires (templates: the attribute must be on them
// too): a dropped lease of n releases all n at once.
// std: c++20
// expect: error
// reason: ignoring return value of 'shmsem::lease
// shmsem::semaphore::acquire\(N\) \[with N = int\]', declared with attribute
// 'nodiscard' reason-clang: ignoring return value of function declared with
// 'nodiscard' attribute
#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem) { sem.acquire(3); }
