// A fractional count of permits is refused at compile time, not truncated
// (1.5 would take one permit).
// std: c++20
// expect: error
// reason: 'is_integral_v<_Tp> \[with _Tp = double\]' evaluated to 'false'
// reason-clang: 'double' does not satisfy 'permit_count'
#include <chrono>

#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem) {
  if (auto l = sem.acquire_for(1.5, std::chrono::milliseconds(10)))
    l->release();
}
