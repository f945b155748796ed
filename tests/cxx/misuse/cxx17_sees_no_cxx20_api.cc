// The C++20 tier is invisible to C++17 code (which keeps shmsem::Lease).
// std: c++17
// expect: error
// reason: 'semaphore' in namespace 'shmsem' does not name a type
// reason-clang: no type named 'semaphore' in namespace 'shmsem'
#include <shmsem/shmsem.hpp>

shmsem::semaphore *misuse();
