// The control: correct use of the whole C++20 tier compiles with -Wall
// -Wextra -pedantic -Werror, so the misuse snippets fail for their reason.
// std: c++20
// expect: ok
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
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
  const std::uint32_t resource = moved.resource();
  moved.release();
  std::error_code ec;
  if (std::optional<shmsem::lease> b = sem.try_acquire()) b->release(ec);
  std::stop_source src;
  std::optional<shmsem::lease> c = sem.acquire(src.get_token());
  std::optional<shmsem::lease> d = sem.acquire_for(10ms);
  std::optional<shmsem::lease> e =
      sem.acquire_until(std::chrono::steady_clock::now() + 1s);
  std::optional<shmsem::lease> f =
      sem.acquire_until(std::chrono::system_clock::now() + 1s);
  std::optional<shmsem::lease> g = sem.acquire_for(1s, src.get_token());
  std::optional<shmsem::lease> h =
      sem.acquire_until(std::chrono::steady_clock::now() + 1s, src.get_token());
  shmsem_lease_t raw = moved.detach();
  shmsem::lease adopted(sem.native_handle(), raw);
  // Weighted leases (any integer count but bool and characters), the
  // capacity, and a rate-limited semaphore from shmsem::options.
  auto api = shmsem::semaphore::create(
      "/control-api",
      {.permits = 8, .max_permits = 16, .rate = 100, .per = 1s, .burst = 20});
  shmsem::lease w = api.acquire(3);
  const std::uint32_t weight = w.weight();
  shmsem::lease w2(api.native_handle(), w.detach(), weight);
  std::optional<shmsem::lease> i = api.try_acquire(std::size_t{2});
  std::optional<shmsem::lease> j = api.acquire_for(2u, 10ms);
  std::optional<shmsem::lease> k =
      api.acquire_until(2, std::chrono::steady_clock::now() + 1s);
  std::optional<shmsem::lease> m =
      api.acquire_until(2, std::chrono::system_clock::now() + 1s);
  std::optional<shmsem::lease> n = api.acquire(2, src.get_token());
  std::optional<shmsem::lease> o = api.acquire_for(2, 1s, src.get_token());
  std::optional<shmsem::lease> p = api.acquire_until(
      2, std::chrono::steady_clock::now() + 1s, src.get_token());
  api.set_permits(12);
  api.set_permits(std::uint64_t{4}, ec);
  shmsem_config raw_cfg{};
  raw_cfg.permits = 1;
  auto from_c = shmsem::semaphore::create(std::string("/control-c"), raw_cfg);
  const bool held = static_cast<bool>(adopted) && c && d && e && f && g && h &&
                    w2 && i && j && k && m && n && o && p && from_c;
  struct shmsem_stat st = sem.stat();
  sem.check();
  (void)sem.recover();
  (void)sem.shutdown();
  shmsem::semaphore::unlink("/control", ec);
  return held + int(st.held) + int(resource) +
             (ec == std::errc::no_such_file_or_directory) +
             shmsem::category().message(ETIMEDOUT).size() !=
         0;
}
