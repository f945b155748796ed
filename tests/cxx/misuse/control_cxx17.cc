// The control for C++17 users: the Lease tier compiles unchanged with
// -Wall -Wextra -pedantic -Werror.
// std: c++17
// expect: ok
#include <shmsem/shmsem.hpp>

int use(shmsem_t *s) {
  shmsem::Lease l;
  if (int e = shmsem::acquire(s, &l)) return e;
  shmsem::Lease moved = std::move(l);
  const int held =
      static_cast<bool>(moved) + static_cast<int>(moved.resource() != 0);
  shmsem_lease_t raw = moved.detach();
  shmsem::Lease again(s, raw);
  return again.release() + held;
}
