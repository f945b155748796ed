// operator bool is explicit: a lease is not a number or a flag to pass on.
// std: c++20
// expect: error
// reason: cannot convert 'shmsem::lease' to 'bool'
// reason-clang: no viable conversion from 'shmsem::lease' to 'bool'
#include <shmsem/shmsem.hpp>

bool misuse(shmsem::lease &l) {
  bool held = l;
  return held;
}
