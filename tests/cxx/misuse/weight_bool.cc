// A count of permits is an integer, not a flag: `acquire(done)` would take
// one permit where the caller meant something else entirely.
// std: c++20
// expect: error
// reason: '!\(same_as<T, bool>\) \[with T = bool\]' evaluated to 'false'
// reason-clang: 'bool' does not satisfy 'permit_count'
#include <shmsem/shmsem.hpp>

void misuse(shmsem::semaphore &sem, bool done) {
  shmsem::lease l = sem.acquire(done);
  l.release();
}
