// Likewise the timed acquires (templates: the attribute must be on them too).
// std: c++20
// expect: error
// reason: ignoring return value of 'std::optional<shmsem::lease>
// shmsem::semaphore::acquire_for\(.*', declared with attribute 'nodiscard'
// reason-clang: ignoring return value of function declared with 'nodiscard'
// attribute
#include <chrono>

#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem) {
  sem.acquire_for(std::chrono::milliseconds(10));
}
