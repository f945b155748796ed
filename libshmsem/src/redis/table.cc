// The Redis backend's table (backend.h): names "redis://HOST[:PORT]/POOL"
// and "redis+unix:///PATH?pool=POOL" (endpoint.h). docs/REDIS.md.
#include <errno.h>

#include <type_traits>

#include "ops.h"
#include "pool.h"

namespace shmsem::detail {

static_assert(std::is_standard_layout_v<RedisHandle>);
static_assert(offsetof(RedisHandle, backend) == 0);

namespace {

const char *const kRedisSchemes[] = {"redis", "redis+unix", nullptr};

// Waiting without a thread (shmsem_waiter_*) is not offered by this
// backend yet: -EOPNOTSUPP at start, so no waiter is ever queued by it
// and owns_waiter claims none.
int no_waiter_start(shmsem_t *, shmsem_waiter_t *, uint32_t, const timespec *,
                    shmsem_lease_t *) {
  return -EOPNOTSUPP;
}
bool owns_no_waiter(const shmsem_waiter_t *) { return false; }

constexpr Backend redis_table() {
  Backend b{};
  b.name = "redis";
  b.schemes = kRedisSchemes;
  b.create = redis_create;
  b.open = redis_open;
  b.unlink = redis_unlink;
  b.detach = redis_detach;
  b.acquire = redis_acquire;
  b.try_acquire = redis_try_acquire;
  b.release = redis_release;
  b.set_permits = redis_set_permits;
  b.shutdown = redis_shutdown;
  b.recover = redis_recover;
  b.check = redis_check;
  b.stat = redis_stat;
  b.inspect = redis_inspect;
  b.declare_hold = redis_declare_hold;
  b.waiter_start = no_waiter_start;
  b.owns_waiter = owns_no_waiter;
  b.lease_renew = redis_lease_renew;
  b.lease_sequence = redis_lease_sequence;
  b.list = redis_list;
  return b;
}

}  // namespace

const Backend kRedisBackend = redis_table();

}  // namespace shmsem::detail
