// The Redis backend's entries on a handle other than acquiring (ops.h):
// each one function call, its reply checked before use.
#include <errno.h>
#include <string.h>

#include "clock.h"
#include "ops.h"
#include "pool.h"

namespace shmsem::detail {
namespace {

constexpr uint64_t kMs = 1000000;

// A lease of this pool, well-formed: -EINVAL otherwise.
int check_lease(const Pool *p, const shmsem_lease_t *lease) {
  if (!lease || lease->sem != p->sem || lease->__reserved != 0 ||
      lease->gen == 0 || lease->index >= p->max_permits)
    return -EINVAL;
  return 0;
}

std::vector<std::string> lease_args(const shmsem_lease_t *lease) {
  return {std::to_string(lease->index), std::to_string(lease->gen)};
}

// A call whose reply is only a status word (and maybe a count at 1).
int simple(shmsem_t *s, const char *fn, const std::vector<std::string> &args,
           bool writes, int64_t *count = nullptr) {
  if (!s) return -EINVAL;
  Pool *p = pool_of(s);
  pool_enter(p);
  if (writes && p->rdonly) return -EBADF;
  Reply r;
  int e = pool_call(p, fn, args, &r);
  if (e < 0) return e;
  e = status_errno(r.status());
  if (e < 0 || !count) return e;
  return r.num(1, 0, INT32_MAX, count) ? 0 : kBadReply;
}

}  // namespace

int redis_release(shmsem_t *s, shmsem_lease_t *lease) {
  if (!s) return -EINVAL;
  Pool *p = pool_of(s);
  pool_enter(p);
  if (p->rdonly) return -EBADF;
  int e = check_lease(p, lease);
  if (e < 0) return e;
  e = simple(s, "shmsem_release", lease_args(lease), true);
  if (e == 0 || e == -EKEYEXPIRED || e == -EALREADY)
    keepalive_remove(p, lease->index, lease->gen);
  return e;
}

int redis_lease_renew(shmsem_t *s, const shmsem_lease_t *lease) {
  if (!s) return -EINVAL;
  Pool *p = pool_of(s);
  pool_enter(p);
  if (p->rdonly) return -EBADF;
  int e = check_lease(p, lease);
  if (e < 0) return e;
  Reply r;
  e = pool_call(p, "shmsem_renew", lease_args(lease), &r);
  if (e < 0) return e;
  std::string st;
  if (r.status() != "ok") return status_errno(r.status());
  if (r.size() != 3 || !r.str(1, &st)) return kBadReply;
  return status_errno(st);
}

int redis_lease_sequence(shmsem_t *s, const shmsem_lease_t *lease,
                         uint64_t *seq) {
  if (!s || !seq) return -EINVAL;
  Pool *p = pool_of(s);
  pool_enter(p);
  int e = check_lease(p, lease);
  if (e < 0) return e;
  if (keepalive_remove(p, lease->index, lease->gen, seq)) return 0;
  Reply r;
  e = pool_call(p, "shmsem_lease", lease_args(lease), &r);
  if (e < 0) return e;
  e = status_errno(r.status());
  if (e < 0) return e;
  int64_t v;
  if (!r.num(1, 1, INT64_MAX, &v)) return kBadReply;
  *seq = uint64_t(v);
  return 0;
}

int redis_set_permits(shmsem_t *s, uint32_t permits) {
  return simple(s, "shmsem_set_permits", {std::to_string(permits)}, true);
}

int redis_shutdown(shmsem_t *s) {
  int64_t n = 0;
  const int e = simple(s, "shmsem_shutdown", {}, true, &n);
  return e < 0 ? e : int(n);
}

int redis_recover(shmsem_t *s) {
  int64_t n = 0;
  const int e = simple(s, "shmsem_recover", {}, true, &n);
  return e < 0 ? e : int(n);
}

int redis_check(shmsem_t *s) { return simple(s, "shmsem_check", {}, false); }

int redis_declare_hold(shmsem_t *s, const shmsem_lease_t *lease,
                       uint64_t hold_ns) {
  if (!s) return -EINVAL;
  Pool *p = pool_of(s);
  pool_enter(p);
  if (p->rdonly) return -EBADF;
  int e = check_lease(p, lease);
  if (e < 0) return e;
  if (hold_ns > SHMSEM_MAX_DECLARED_NS) return -EINVAL;
  std::vector<std::string> args = lease_args(lease);
  args.push_back(std::to_string((hold_ns + kMs - 1) / kMs));
  return simple(s, "shmsem_declare", args, true);
}

}  // namespace shmsem::detail
