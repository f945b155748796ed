// Likewise the stop_token acquire.
// std: c++20
// expect: error
// reason: ignoring return value of 'std::optional<shmsem::lease>
// shmsem::semaphore::acquire\(const std::stop_token&\)', declared with
// attribute 'nodiscard' reason-clang: ignoring return value of function
// declared with 'nodiscard' attribute
#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem, std::stop_token st) { sem.acquire(st); }
