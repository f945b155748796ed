// lease-guard: hold a permit of a shmsem semaphore for the life of a C++
// scope, with shmsem::Lease (<shmsem/shmsem.hpp>), waiting at most 2 s.
//
//   lease-guard /name [PERMITS]
//
// Creates /name if needed (PERMITS, default 2), takes a permit, reports the
// state while holding it; the Lease returns the permit when it goes out of
// scope, also if the work throws.
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <shmsem/shmsem.h>
#include <shmsem/shmsem.hpp>

namespace {

// A failure from the C API, carrying its negative errno.
struct Error : std::runtime_error {
  int code;
  Error(const std::string &what, int err)
      : std::runtime_error(what + ": " + shmsem_strerror(err)), code(err) {}
};

// Owns an open semaphore (shmsem_create opens it if it already exists).
class Semaphore {
 public:
  Semaphore(const char *name, uint32_t permits) {
    shmsem_config cfg{};
    cfg.permits = permits;
    if (int e = shmsem_create(name, &cfg, 0, &s_)) throw Error(name, e);
  }
  Semaphore(const Semaphore &) = delete;
  Semaphore &operator=(const Semaphore &) = delete;
  ~Semaphore() { shmsem_detach(s_); }
  shmsem_t *get() const { return s_; }

  struct shmsem_stat stat() const {
    struct shmsem_stat st {};
    if (int e = shmsem_stat(s_, &st)) throw Error("stat", e);
    return st;
  }

 private:
  shmsem_t *s_ = nullptr;
};

timespec seconds_from_now(long s) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += s;
  return t;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s /name [PERMITS]\n", argv[0]);
    return 2;
  }
  uint32_t permits =
      argc == 3 ? uint32_t(std::strtoul(argv[2], nullptr, 10)) : 2;
  try {
    Semaphore sem(argv[1], permits);
    {
      shmsem::Lease lease;
      timespec deadline = seconds_from_now(2);
      if (int e = shmsem::acquire(sem.get(), &lease, &deadline))
        throw Error("acquire", e);
      struct shmsem_stat st = sem.stat();
      std::printf(
          "shmsem %s: holding resource %u of %s (%u of %u permits held)\n",
          SHMSEM_VERSION_STRING, lease.resource(), argv[1], st.held,
          st.permits);
    }  // the Lease releases the permit here
    struct shmsem_stat st = sem.stat();
    std::printf("released: %u of %u permits available\n", st.available,
                st.permits);
    return 0;
  } catch (const Error &e) {
    std::fprintf(stderr, "lease-guard: %s\n", e.what());
    return e.code == -ETIMEDOUT ? 124 : 1;
  }
}
