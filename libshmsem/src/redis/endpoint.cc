// Parsing Redis names (endpoint.h): strict, so that a name either means one
// server and one pool or is -EINVAL.
#include "endpoint.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

namespace shmsem::detail {
namespace {

constexpr char kTcp[] = "redis://";
constexpr char kUnix[] = "redis+unix://";

bool pool_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

// "HOST[:PORT]" or "[V6][:PORT]".
int parse_host_port(const std::string &hp, Endpoint *out) {
  std::string host = hp, port;
  if (!hp.empty() && hp[0] == '[') {
    const size_t close = hp.find(']');
    if (close == std::string::npos) return -EINVAL;
    host = hp.substr(1, close - 1);
    const std::string rest = hp.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return -EINVAL;
      port = rest.substr(1);
    }
  } else {
    const size_t colon = hp.rfind(':');
    if (colon != std::string::npos) {
      host = hp.substr(0, colon);
      port = hp.substr(colon + 1);
      if (host.find(':') != std::string::npos) return -EINVAL;
    }
  }
  if (host.empty() || host.size() > 255) return -EINVAL;
  for (char c : host)
    if (c == '/' || c == '?' || c == '@' || c <= ' ') return -EINVAL;
  if (!port.empty() || hp.find(':') != std::string::npos) {
    if (port.empty() || port.size() > 5) return -EINVAL;
    int v = 0;
    for (char c : port) {
      if (c < '0' || c > '9') return -EINVAL;
      v = v * 10 + (c - '0');
    }
    if (v < 1 || v > 65535) return -EINVAL;
    out->port = v;
  }
  out->host = host;
  return 0;
}

// The unix form after the scheme: "/PATH[?pool=POOL]".
int parse_unix(const char *rest, bool want_pool, Endpoint *out) {
  std::string s = rest;
  const size_t q = s.find('?');
  std::string path = s.substr(0, q);
  if (path.empty() || path[0] != '/' || path.size() > 107) return -EINVAL;
  out->unix_path = path;
  if (!want_pool) return q == std::string::npos ? 0 : -EINVAL;
  if (q == std::string::npos) return -EINVAL;
  const std::string query = s.substr(q + 1);
  if (query.compare(0, 5, "pool=") != 0) return -EINVAL;
  out->pool = query.substr(5);
  return valid_pool(out->pool) ? 0 : -EINVAL;
}

int parse(const char *name, bool want_pool, Endpoint *out) {
  if (!name || !out) return -EINVAL;
  *out = Endpoint{};
  if (strncasecmp(name, kUnix, strlen(kUnix)) == 0)
    return parse_unix(name + strlen(kUnix), want_pool, out);
  if (strncasecmp(name, kTcp, strlen(kTcp)) != 0) return -EINVAL;
  const std::string s = name + strlen(kTcp);
  const size_t slash = s.find('/');
  if (!want_pool) {
    const std::string hp = s.substr(0, slash);
    if (slash != std::string::npos && slash + 1 != s.size()) return -EINVAL;
    return parse_host_port(hp, out);
  }
  if (slash == std::string::npos) return -EINVAL;
  const int r = parse_host_port(s.substr(0, slash), out);
  if (r < 0) return r;
  out->pool = s.substr(slash + 1);
  return valid_pool(out->pool) ? 0 : -EINVAL;
}

}  // namespace

bool valid_pool(const std::string &p) {
  if (p.empty() || p.size() > kMaxPool) return false;
  for (char c : p)
    if (!pool_char(c)) return false;
  return true;
}

int parse_endpoint(const char *name, Endpoint *out) {
  return parse(name, true, out);
}

int parse_server(const char *name, Endpoint *out) {
  return parse(name, false, out);
}

}  // namespace shmsem::detail
