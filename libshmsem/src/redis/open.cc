// Creating, opening, unlinking and detaching Redis pools (pool.h): a name
// parsed (endpoint.h), a connection, the functions library checked or
// loaded, then one call (shmsem_create or shmsem_open) that stores or
// reads the configuration.
#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <unistd.h>

#include <new>

#include "async.h"
#include "ops.h"
#include "pool.h"
#include "rate.h"

namespace shmsem::detail {
namespace {

constexpr int kConnectTimeoutMs = 2000;
constexpr uint32_t kMinTtlMs = 100;
constexpr uint32_t kMaxTtlMs = 86400000;  // a day
constexpr uint32_t kMaxWaiterTtlMs = 2000;
// A remote pool's capacity: create writes one free index per permit and a
// lease of n permits pops, records and frees n, each in one function run
// that must answer within a call's timeout (1 s at the least). 2^16 took
// about 0.25 s each on a loaded 2-CPU VM; 2^18 already missed the
// timeout (-ECOMM for a create the server made) and 2^20
// (SHMSEM_MAX_PERMITS) kept the server busy for seconds.
constexpr uint32_t kMaxRemotePermits = 1u << 16;

// 16 hex digits, never all zero: the pool's identity, and as a number
// every lease's `sem`.
bool new_id(std::string *id) {
  uint64_t v = 0;
  while (v == 0)
    if (getrandom(&v, sizeof v, 0) != sizeof v) return false;
  static const char kHex[] = "0123456789abcdef";
  id->assign(16, '0');
  for (int i = 15; i >= 0; i--, v >>= 4) (*id)[size_t(i)] = kHex[v & 15];
  return true;
}

bool id_value(const std::string &id, uint64_t *v) {
  if (id.size() != 16) return false;
  uint64_t x = 0;
  for (char c : id) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      return false;
    x = x << 4 | uint64_t(d);
  }
  *v = x;
  return x != 0;
}

// The configuration reply (shmsem.lua's config_reply) into `p`.
int read_config(Pool *p, const Reply &r) {
  int64_t v[6];
  std::string id;
  if (r.size() != 8 || !r.str(1, &id) || !id_value(id, &p->sem))
    return kBadReply;
  for (int i = 0; i < 6; i++)
    if (!r.num(size_t(i) + 2, 0, UINT32_MAX, &v[i])) return kBadReply;
  if (v[1] < 1 || v[1] > SHMSEM_MAX_PERMITS || v[0] > v[1] ||
      v[3] < kMinTtlMs || v[3] > kMaxTtlMs || v[4] < 1)
    return kBadReply;
  p->id = id;
  p->max_permits = uint32_t(v[1]);
  p->ttl_ms = uint32_t(v[3]);
  p->wttl_ms = uint32_t(v[4]);
  return 0;
}

}  // namespace

int pool_load_config(Pool *p) {
  Reply r;
  int e = pool_call(p, "shmsem_open", {}, &r);
  if (e == 0) e = status_errno(r.status());
  if (e == 0) e = read_config(p, r);
  return e;
}

namespace {

// A new pool object for `name`, connected, with the library in place.
int connect_pool(const char *name, Pool **out) {
  Pool *p = new (std::nothrow) Pool;
  if (!p) return -ENOMEM;
  int e = parse_endpoint(name, &p->ep);
  if (e == 0) {
    p->base = p->ep.base_key();
    p->pid.store(getpid());
    e = p->main.connect(p->ep, kConnectTimeoutMs);
  }
  if (e == 0) e = ensure_library(&p->main, kConnectTimeoutMs);
  if (e < 0) {
    delete p;
    return e;
  }
  *out = p;
  return 0;
}

int finish(Pool *p, int e, shmsem_t **out) {
  if (e < 0) {
    delete p;
    return e;
  }
  auto *h = new (std::nothrow) RedisHandle;
  if (!h) {
    delete p;
    return -ENOMEM;
  }
  h->pool = p;
  *out = reinterpret_cast<shmsem_t *>(h);
  return 0;
}

// The create arguments after the defaults (shmsem.h): -EINVAL for what a
// remote pool cannot be. As for a local semaphore, permits 0 with a rate
// is no concurrency limit below max_permits (default
// SHMSEM_DEFAULT_RATE_ONLY_PERMITS).
int create_args(const shmsem_config *cfg, int flags,
                std::vector<std::string> *args) {
  if (!cfg || (flags & ~int(SHMSEM_EXCL | SHMSEM_ANY_OWNER))) return -EINVAL;
  if (cfg->policy == SHMSEM_POLICY_BOUNDED) return -EOPNOTSUPP;
  if (cfg->policy != SHMSEM_POLICY_FIFO || cfg->max_bypass_ns) return -EINVAL;
  RateConfig rate;
  if (rate_config(cfg, &rate) < 0) return -EINVAL;
  if (cfg->mode & ~0666u) return -EINVAL;
  const uint32_t maxp = cfg->max_permits ? cfg->max_permits
                        : cfg->permits   ? cfg->permits
                                         : SHMSEM_DEFAULT_RATE_ONLY_PERMITS;
  if ((cfg->permits == 0 && !rate.rate) || maxp < cfg->permits ||
      maxp > kMaxRemotePermits || cfg->max_waiters > SHMSEM_MAX_WAITERS)
    return -EINVAL;
  const uint32_t ttl =
      cfg->lease_ttl_ms ? cfg->lease_ttl_ms : SHMSEM_DEFAULT_LEASE_TTL_MS;
  if (ttl < kMinTtlMs || ttl > kMaxTtlMs) return -EINVAL;
  const uint32_t wttl = ttl < kMaxWaiterTtlMs ? ttl : kMaxWaiterTtlMs;
  *args = {std::to_string(cfg->permits),
           std::to_string(maxp),
           std::to_string(cfg->max_waiters),
           std::to_string(ttl),
           std::to_string(wttl),
           (flags & SHMSEM_EXCL) ? "1" : "0",
           std::to_string(rate.rate),
           std::to_string(rate.burst),
           std::to_string(rate.period_ns),
           std::to_string(rate.interval_ns)};
  return 0;
}

}  // namespace

int redis_create(const char *name, const shmsem_config *cfg, int flags,
                 shmsem_t **out) {
  if (!out) return -EINVAL;
  *out = nullptr;
  std::vector<std::string> args;
  int e = create_args(cfg, flags, &args);
  if (e < 0) return e;
  Pool *p = nullptr;
  e = connect_pool(name, &p);
  if (e < 0) return e;
  if (!new_id(&p->id)) return finish(p, -ENOMEM, out);
  Reply r;
  e = pool_call(p, "shmsem_create", args, &r);
  if (e == 0) e = status_errno(r.status());
  if (e == 0) e = read_config(p, r);
  return finish(p, e, out);
}

int redis_open(const char *name, int flags, shmsem_t **out) {
  if (!out) return -EINVAL;
  *out = nullptr;
  if (flags & ~int(SHMSEM_RDONLY | SHMSEM_SNAPSHOT)) return -EINVAL;
  Pool *p = nullptr;
  int e = connect_pool(name, &p);
  if (e < 0) return e;
  p->rdonly = flags != 0;
  return finish(p, pool_load_config(p), out);
}

int redis_unlink(const char *name) {
  Pool *p = nullptr;
  int e = connect_pool(name, &p);
  if (e < 0) return e;
  Reply r;
  e = pool_call(p, "shmsem_unlink", {}, &r);
  if (e == 0) e = status_errno(r.status());
  delete p;
  return e;
}

// Leases still held through the handle are no longer renewed: they
// expire within a TTL (docs/REDIS.md). Waiters still queued are cancelled
// first (their threads use the pool).
void redis_detach(shmsem_t *s) {
  Pool *p = pool_of(s);
  pool_enter(p);
  async_detach(s);
  keepalive_stop(p);
  for (Conn *c : p->idle) delete c;
  p->idle.clear();
  delete p;
  delete reinterpret_cast<RedisHandle *>(s);
}

}  // namespace shmsem::detail
