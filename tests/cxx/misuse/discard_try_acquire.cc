// Likewise try_acquire(): the optional lease is the only trace of the permit.
// std: c++20
// expect: error
// reason: ignoring return value of 'std::optional<shmsem::lease>
// shmsem::semaphore::try_acquire\(\)', declared with attribute 'nodiscard'
// reason-clang: ignoring return value of function declared with 'nodiscard'
// attribute
#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem) { sem.try_acquire(); }
