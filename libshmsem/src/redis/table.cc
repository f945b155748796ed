// The Redis backend's table (backend.h): names "redis://HOST[:PORT]/POOL"
// and "redis+unix:///PATH?pool=POOL" (endpoint.h). docs/REDIS.md.
#include <type_traits>

#include "async.h"
#include "ops.h"
#include "pool.h"

namespace shmsem::detail {

static_assert(std::is_standard_layout_v<RedisHandle>);
static_assert(offsetof(RedisHandle, backend) == 0);

namespace {

const char *const kRedisSchemes[] = {"redis", "redis+unix", nullptr};

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
  b.waiter_start = redis_waiter_start;
  b.owns_waiter = redis_owns_waiter;
  b.waiter_futex = redis_waiter_futex;
  b.waiter_wake_by = redis_waiter_wake_by;
  b.waiter_poll = redis_waiter_poll;
  b.waiter_cancel = redis_waiter_cancel;
  b.lease_renew = redis_lease_renew;
  b.lease_sequence = redis_lease_sequence;
  b.list = redis_list;
  return b;
}

}  // namespace

const Backend kRedisBackend = redis_table();

}  // namespace shmsem::detail
