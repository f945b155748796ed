// Choosing a backend by name (backend.h): a name with a URL scheme
// ("redis://host:port/pool") goes to the backend that lists the scheme, a
// name without one ("/pool") to the shared-memory backend.
#include "backend.h"

#include <string.h>

namespace shmsem::detail {
namespace {

// The characters of a scheme (RFC 3986, section 3.1), without the locale's
// say: a letter first, then letters, digits, "+", "-" and ".".
bool scheme_first(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool scheme_char(char c) {
  return scheme_first(c) || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
         c == '.';
}

// The length of `name`'s scheme if "://" follows it, else 0. A shm name
// starts with "/", so no name the shm backend takes has one.
size_t scheme_length(const char *name) {
  if (!scheme_first(name[0])) return 0;
  size_t n = 1;
  while (scheme_char(name[n])) n++;
  return strncmp(name + n, "://", 3) == 0 ? n : 0;
}

char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
}

// `scheme` (lower case, as the backends list theirs) is the first `len`
// characters of `name`, in any case (RFC 3986: schemes are
// case-insensitive).
bool scheme_is(const char *scheme, const char *name, size_t len) {
  if (strlen(scheme) != len) return false;
  for (size_t i = 0; i < len; i++)
    if (ascii_lower(name[i]) != scheme[i]) return false;
  return true;
}

}  // namespace

#ifdef SHMSEM_TESTING
std::atomic<const Backend *> g_test_backend{nullptr};
#endif

const Backend *backend_for_name(const char *name) {
  const size_t len = name ? scheme_length(name) : 0;
  if (len == 0) return &kShmBackend;
  return other_backend([name, len](const Backend *b) {
    for (const char *const *scheme = b->schemes; *scheme; scheme++)
      if (scheme_is(*scheme, name, len)) return true;
    return false;
  });
}

}  // namespace shmsem::detail
