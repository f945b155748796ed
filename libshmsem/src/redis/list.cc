// shmsem_list_at for a Redis server (backend.h's `list`): the server's
// pools, found with the library's function shmsem_list (one SCAN step per
// call; the client loops until the cursor comes back to 0), sorted by
// name, then the first `max` each read as shmsem_stat reads it, all over
// one connection. The names come from the server, so they are input: a
// key that only looks like a pool's base key is skipped, a name SCAN
// returns twice (it may, while keys change) is listed once, and the
// number of names and of steps is bounded.
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ops.h"
#include "pool.h"

namespace shmsem::detail {
namespace {

constexpr int kTimeoutMs = 2000;
// More pools, or more SCAN steps (each covers about 256 keys), than this
// is a server this client does not trust: -ECOMM, as for a bad reply.
constexpr size_t kMaxPools = size_t(1) << 20;
constexpr size_t kMaxSteps = size_t(1) << 22;

bool is_cursor(const std::string &c) {
  if (c.empty() || c.size() > 20) return false;
  for (char ch : c)
    if (ch < '0' || ch > '9') return false;
  return true;
}

// Every pool's name on the server behind p's connection, sorted, once.
int scan_pools(Pool *p, std::vector<std::string> *names) {
  std::string cursor = "0";
  size_t steps = 0;
  do {
    if (++steps > kMaxSteps) return kBadReply;
    Reply r;
    // No key: the function reads the keyspace, not one pool.
    const int e =
        p->main.call({"FCALL", "shmsem_list", "0", cursor}, kTimeoutMs, &r);
    if (e < 0) return e;
    if (r.status() != "ok" || r.size() < 2 || !r.str(1, &cursor) ||
        !is_cursor(cursor))
      return kBadReply;
    for (size_t i = 2; i < r.size(); i++) {
      std::string name;
      if (!r.str(i, &name)) return kBadReply;
      if (valid_pool(name)) names->push_back(std::move(name));
    }
    if (names->size() > kMaxPools) return kBadReply;
  } while (cursor != "0");
  std::sort(names->begin(), names->end());
  names->erase(std::unique(names->begin(), names->end()), names->end());
  return 0;
}

// The name shmsem_open takes for `pool` on the server `where` names.
std::string full_name(const char *where, const Endpoint &ep,
                      const std::string &pool) {
  std::string w = where;
  if (!ep.unix_path.empty()) return w + "?pool=" + pool;
  if (!w.empty() && w.back() == '/') w.pop_back();
  return w + "/" + pool;
}

// One entry: its name, and the pool read over p's connection. 0, or
// -ECOMM if the server stopped answering (the rest would wait in vain).
int read_entry(Pool *p, const std::string &name, const std::string &pool,
               struct shmsem_list_entry *e) {
  memset(e, 0, sizeof *e);
  memcpy(e->name, name.data(), std::min(name.size(), sizeof e->name - 1));
  if (name.size() > sizeof e->name - 1) {
    e->error = -ENAMETOOLONG;
    return 0;
  }
  p->ep.pool = pool;
  p->base = p->ep.base_key();
  p->id.clear();
  int r = pool_load_config(p);
  if (r == 0) {
    RedisHandle h;
    h.pool = p;
    r = redis_stat(reinterpret_cast<shmsem_t *>(&h), &e->stat);
  }
  // A call that broke the connection: the server, not this pool.
  if (r == -ECOMM && !p->main.connected()) return r;
  // A pool whose data this client cannot read: as a file that is not a
  // semaphore is to shmsem_list.
  e->error = r == kBadReply ? -EBADMSG : r;
  if (e->error) memset(&e->stat, 0, sizeof e->stat);
  return 0;
}

}  // namespace

int redis_list(const char *where, struct shmsem_list_entry *out, uint32_t max) {
  Pool p;
  int e = parse_server(where, &p.ep);
  if (e < 0) return e;
  p.pid.store(getpid());
  e = p.main.connect(p.ep, kTimeoutMs);
  if (e == 0) e = ensure_library(&p.main, kTimeoutMs);
  std::vector<std::string> names;
  if (e == 0) e = scan_pools(&p, &names);
  if (e < 0) return e;
  const Endpoint server = p.ep;
  for (size_t i = 0; i < names.size() && i < max; i++) {
    e = read_entry(&p, full_name(where, server, names[i]), names[i], &out[i]);
    if (e < 0) return e;
  }
  return int(std::min<size_t>(names.size(), INT_MAX));
}

}  // namespace shmsem::detail
