// detach() hands over the only token of a permit that stays held: dropping
// it leaks the permit until the process exits.
// std: c++20
// expect: error
// reason: ignoring return value of 'shmsem_lease_t shmsem::lease::detach\(\)',
// declared with attribute 'nodiscard' reason-clang: ignoring return value of
// function declared with 'nodiscard' attribute
#include <shmsem/shmsem.hpp>

void misuse(shmsem::lease &l) { l.detach(); }
