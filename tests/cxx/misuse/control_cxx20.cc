// The control: correct use of the whole C++20 tier compiles with -Wall
// -Wextra -pedantic -Werror, so the misuse snippets fail for their reason.
// std: c++20
// expect: ok
#include <chrono>
#include <optional>
#include <stop_token>
#include <system_error>
#include <utility>

#include <shmsem/shmsem.hpp>

int use() {
  using namespace std::chrono_literals;
  shmsem_config cfg{};
  cfg.permits = 2;
  auto sem = shmsem::semaphore::create("/control", cfg, SHMSEM_EXCL);
  shmsem::lease a = sem.acquire();
  shmsem::lease moved = std::move(a);
  moved.release();
  std::error_code ec;
  if (std::optional<shmsem::lease> b = sem.try_acquire()) b->release(ec);
  std::stop_source src;
  std::optional<shmsem::lease> c = sem.acquire(src.get_token());
  std::optional<shmsem::lease> d = sem.acquire_for(10ms);
  std::optional<shmsem::lease> e = sem.acquire_until(std::chrono::steady_clock::now() + 1s);
  std::optional<shmsem::lease> f = sem.acquire_until(std::chrono::system_clock::now() + 1s);
  std::optional<shmsem::lease> g = sem.acquire_for(1s, src.get_token());
  std::optional<shmsem::lease> h =
      sem.acquire_until(std::chrono::steady_clock::now() + 1s, src.get_token());
  shmsem_lease_t raw = moved.detach();
  shmsem::lease adopted(sem.native_handle(), raw);
  const bool held = static_cast<bool>(adopted) && c && d && e && f && g && h;
  struct shmsem_stat st = sem.stat();
  sem.check();
  (void)sem.recover();
  (void)sem.shutdown();
  shmsem::semaphore::unlink("/control", ec);
  return held + int(st.held) + (ec == std::errc::no_such_file_or_directory) +
         shmsem::category().message(ETIMEDOUT).size() != 0;
}
