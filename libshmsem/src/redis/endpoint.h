// A Redis name parsed: where the server is and which pool. Two forms
// (docs/REDIS.md, shmsem(7) "Across hosts"):
//   redis://HOST[:PORT]/POOL              TCP; PORT 6379 by default; HOST a
//                                         name, an IPv4 address or [IPv6]
//   redis+unix:///PATH/TO/SOCKET?pool=POOL  a unix socket
// POOL: 1 to kMaxPool characters of [A-Za-z0-9_.-] (it sits inside the
// hash tag "{POOL}" of every key of the pool, so no braces, no colons).
#ifndef SHMSEM_SRC_REDIS_ENDPOINT_H
#define SHMSEM_SRC_REDIS_ENDPOINT_H

#include <string>

namespace shmsem::detail {

inline constexpr size_t kMaxPool = 200;

struct Endpoint {
  std::string host;  // TCP: host name or address (no brackets)
  int port = 6379;
  std::string unix_path;  // the unix form: the socket's path
  std::string pool;
  // The pool's base key: "shmsem:{POOL}" (shmsem.lua, "Keys").
  std::string base_key() const { return "shmsem:{" + pool + "}"; }
};

// A pool name as above (1 to kMaxPool characters of [A-Za-z0-9_.-]).
bool valid_pool(const std::string &pool);

// 0 and *out, or -EINVAL for a name that is not one of the forms above.
int parse_endpoint(const char *name, Endpoint *out);

// The server part alone ("redis://HOST[:PORT]" or
// "redis+unix:///PATH"), for `shmsem list`: 0, or -EINVAL.
int parse_server(const char *name, Endpoint *out);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_REDIS_ENDPOINT_H
