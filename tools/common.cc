#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "exit_codes.h"

namespace shmsem::cli {

// A remote name (redis://HOST[:PORT]/POOL, redis+unix:///SOCKET?pool=POOL,
// shmsem(7) "Across hosts"): the library checks the rest of it.
bool is_remote_name(const std::string &name) {
  return strncasecmp(name.c_str(), "redis://", 8) == 0 ||
         strncasecmp(name.c_str(), "redis+unix://", 13) == 0;
}

namespace {

// The pool of a remote name, or "" if it has none the CLI can find (the
// library then judges the rest of the name).
std::string pool_of(const std::string &name) {
  if (strncasecmp(name.c_str(), "redis+unix://", 13) == 0) {
    const size_t q = name.find("?pool=");
    return q == std::string::npos ? "" : name.substr(q + 6);
  }
  const size_t slash = name.find('/', 8);
  return slash == std::string::npos ? "" : name.substr(slash + 1);
}

// The rule of libshmsem/src/redis/endpoint.cc (valid_pool): the pool is the
// hash tag of its keys on the server, so no braces or colons.
constexpr size_t kMaxPool = 200;
bool valid_pool(const std::string &pool) {
  if (pool.empty() || pool.size() > kMaxPool) return false;
  for (char c : pool)
    if (!isalnum((unsigned char)c) && c != '_' && c != '.' && c != '-')
      return false;
  return true;
}

// A remote name's problem the CLI can say in plain words: a server given
// where a pool belongs, or a pool name the library would refuse as EINVAL.
std::string remote_name_problem(const std::string &name) {
  if (is_place(name))
    return "'" + printable(name) +
           "' is a server, not a semaphore: name one of its pools with " +
           (strncasecmp(name.c_str(), "redis+unix://", 13) == 0 ? "?pool=POOL"
                                                                : "/POOL") +
           "; 'shmsem list " + printable(name) + "' lists them";
  const std::string pool = pool_of(name);
  if (!pool.empty() && !valid_pool(pool))
    return "invalid pool name '" + printable(pool) + "' in '" +
           printable(name) + "': a pool is 1-200 characters of A-Z a-z 0-9 " +
           "_ . - (no ':', braces or '/')";
  return "";
}

}  // namespace

std::string name_problem(const std::string &name) {
  if (is_remote_name(name)) return remote_name_problem(name);
  const std::string rule = "must be '/' followed by 1-" +
                           std::to_string(NAME_MAX) + " characters without '/'";
  std::string head = "invalid semaphore name '" + printable(name) + "': ";
  if (name.empty() || name[0] != '/') {
    std::string msg = head + rule;
    if (!name.empty() && name.find('/') == std::string::npos &&
        name.size() <= NAME_MAX)
      msg += " (did you mean '/" + printable(name) + "'?)";
    return msg;
  }
  size_t len = name.size() - 1;
  if (len == 0 || len > NAME_MAX || name.find('/', 1) != std::string::npos)
    return head + rule;
  if (name == "/." || name == "/..")
    return head + "'.' and '..' are not allowed";
  if (name.find('\0') != std::string::npos) return head + rule;
  return "";
}

bool is_place(const std::string &arg) {
  if (arg == kShmPlace || arg == std::string(kShmPlace) + "/") return true;
  if (strncasecmp(arg.c_str(), "redis+unix://", 13) == 0)
    return arg.find('?') == std::string::npos;
  if (strncasecmp(arg.c_str(), "redis://", 8) != 0) return false;
  const size_t slash = arg.find('/', 8);
  return slash == std::string::npos || slash + 1 == arg.size();
}

std::string name_or_place_problem(const std::string &arg) {
  return is_place(arg) ? "" : name_problem(arg);
}

namespace {

// Length of the valid UTF-8 sequence at s[i] that is not a control
// character, or 0.
size_t printable_utf8_at(const std::string &s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c >= 0x20 && c < 0x7f) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else
    return 0;  // ASCII control, DEL, continuation or invalid lead byte
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; k++) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  // Overlong forms, surrogates, beyond U+10FFFF, the C1 controls, and the
  // bidirectional controls (U+061C, U+200E-F, U+202A-E, U+2066-9), which
  // reorder what a terminal shows after them.
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f) ||
      cp == 0x61c || cp == 0x200e || cp == 0x200f ||
      (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
    return 0;
  return n;
}

}  // namespace

std::string command_word(const std::string &name) {
  std::string p = printable(name);
  const bool plain =
      !p.empty() && p.find_first_not_of(
                        "abcdefghijklmnopqrstuvwxyz"
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789/_.:+=@%,-") == std::string::npos;
  if (plain) return p;
  std::string out = "\"";
  for (char c : p) {
    if (c == '\\' || c == '"' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string printable(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t n = text[i] == '\\' ? 0 : printable_utf8_at(text, i);
    if (n) {
      out.append(text, i, n);
      i += n;
      continue;
    }
    if (text[i] == '\\') {
      out += "\\\\";
    } else {
      char buf[8];
      (void)snprintf(buf, sizeof buf, "\\x%02x",  // fits: 5 bytes
                     static_cast<unsigned char>(text[i]));
      out += buf;
    }
    i++;
  }
  return out;
}

std::string parse_decimal(const std::string &text, uint64_t min, uint64_t max,
                          uint64_t *out) {
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  bool negative = !text.empty() && text[0] == '-';
  size_t start = negative ? 1 : 0;
  if (text.size() == start ||
      text.find_first_not_of("0123456789", start) != std::string::npos)
    return "'" + text +
           "' is not a number: give a whole number in decimal digits, " + range;
  // A number: too many digits for 64 bits is out of range, not an error of
  // another kind.
  uint64_t v = 0;
  bool huge = false;
  for (size_t i = start; i < text.size() && !huge; i++) {
    auto digit = unsigned(text[i] - '0');
    if (v > (UINT64_MAX - digit) / 10)
      huge = true;
    else
      v = v * 10 + digit;
  }
  if (negative && v == 0 && !huge) negative = false;  // "-0" is 0
  if (negative || huge || v < min || v > max)
    return text + " is out of range: give " + range;
  *out = v;
  return "";
}

std::string parse_duration(const std::string &text, uint64_t *ns) {
  std::string bad = "invalid duration '" + text +
                    "': use a number with an optional unit ms, s, m, "
                    "h or d, as in 500ms, 5s, 2m (plain numbers are "
                    "seconds)";
  // Digits, optionally a fraction, then an optional unit.
  size_t i = 0;
  unsigned long long whole = 0;
  bool digits = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (whole > 10'000'000ull) return bad;  // far beyond any sane wait
    whole = whole * 10 + unsigned(text[i] - '0');
    digits = true;
    i++;
  }
  uint64_t frac_num = 0, frac_den = 1;  // fraction of one unit
  if (i < text.size() && text[i] == '.') {
    i++;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (frac_den < 1'000'000'000ull) {
        frac_num = frac_num * 10 + unsigned(text[i] - '0');
        frac_den *= 10;
      }
      digits = true;
      i++;
    }
  }
  if (!digits) return bad;
  std::string unit = text.substr(i);
  uint64_t scale;
  if (unit == "ms")
    scale = 1'000'000ull;
  else if (unit.empty() || unit == "s")
    scale = 1'000'000'000ull;
  else if (unit == "m")
    scale = 60'000'000'000ull;
  else if (unit == "h")
    scale = 3'600'000'000'000ull;
  else if (unit == "d")
    scale = 86'400'000'000'000ull;  // as durations print
  else
    return bad;
  unsigned __int128 total = (unsigned __int128)whole * scale +
                            (unsigned __int128)frac_num * scale / frac_den;
  // 10^7 hours is far more than enough and still fits in 64 bits of ns.
  if (total > (unsigned __int128)(UINT64_MAX / 2)) return bad;
  *ns = uint64_t(total);
  return "";
}

std::string format_duration(uint64_t ns) {
  char buf[64];  // holds the longest form below: cannot truncate
  if (ns < 1'000ull) {
    (void)snprintf(buf, sizeof buf, "%lluns", (unsigned long long)ns);
  } else if (ns < 1'000'000ull) {
    (void)snprintf(buf, sizeof buf, "%.3gµs", double(ns) / 1e3);
  } else if (ns < 1'000'000'000ull) {
    (void)snprintf(buf, sizeof buf, "%.3gms", double(ns) / 1e6);
  } else if (ns < 60'000'000'000ull) {
    (void)snprintf(buf, sizeof buf, "%.3gs", double(ns) / 1e9);
  } else {
    uint64_t s = ns / 1'000'000'000ull;
    if (s < 3600)
      (void)snprintf(buf, sizeof buf, "%llum%02llus",
                     (unsigned long long)(s / 60),
                     (unsigned long long)(s % 60));
    else if (s < 86400)
      (void)snprintf(buf, sizeof buf, "%lluh%02llum",
                     (unsigned long long)(s / 3600),
                     (unsigned long long)(s % 3600 / 60));
    else
      (void)snprintf(buf, sizeof buf, "%llud%02lluh",
                     (unsigned long long)(s / 86400),
                     (unsigned long long)(s % 86400 / 3600));
  }
  return buf;
}

namespace {

// The units of a rate's period. "m" is not one: in a rate it reads as
// milli as easily as minutes.
struct RateUnit {
  const char *name;
  uint64_t ns;
};
constexpr RateUnit kRateUnits[] = {
    {"h", 3'600'000'000'000ull},
    {"min", 60'000'000'000ull},
    {"s", 1'000'000'000ull},
    {"ms", 1'000'000ull},
};
// shmsem_create(3): the interval between two acquisitions (period / count)
// is at most a day.
constexpr uint64_t kMaxRateIntervalNs = 86'400'000'000'000ull;

}  // namespace

std::string parse_rate(const std::string &text, uint32_t *count,
                       uint64_t *period_ns) {
  const std::string quoted = "'" + text + "'";
  std::string bad = "invalid rate " + quoted +
                    ": give COUNT/UNIT with UNIT ms, s, min or h, as in "
                    "100/s, 5/min, 1/h or 3/10s (a plain number is per "
                    "second)";
  // Digits only, below `limit`; false if none or too many.
  auto number = [&text](size_t *i, uint64_t limit, uint64_t *out) {
    uint64_t v = 0;
    size_t start = *i;
    while (*i < text.size() && text[*i] >= '0' && text[*i] <= '9') {
      v = v * 10 + unsigned(text[*i] - '0');
      if (v > limit) return false;
      ++*i;
    }
    *out = v;
    return *i > start;
  };
  size_t i = 0;
  uint64_t n = 0;
  if (!number(&i, UINT32_MAX, &n)) return bad;
  uint64_t period = 1'000'000'000ull;  // plain number: per second
  if (i < text.size()) {
    if (text[i] != '/') return bad;
    i++;
    uint64_t k = 1;
    if (i < text.size() && text[i] >= '0' && text[i] <= '9' &&
        (!number(&i, 1'000'000, &k) || k == 0))
      return bad;
    std::string unit = text.substr(i);
    const RateUnit *u = nullptr;
    for (const RateUnit &r : kRateUnits)
      if (unit == r.name) u = &r;
    if (!u) {
      if (unit == "m")
        return "invalid rate " + quoted +
               ": write 'min' for minutes or 'ms' for milliseconds";
      return bad;
    }
    period = k * u->ns;  // at most 10^6 h: fits
  }
  if (n == 0)
    return "invalid rate " + quoted + ": the count must be at least 1";
  uint64_t interval = period / n;
  if (interval < 1)
    return "rate " + quoted +
           " is too fast: at most one acquisition per nanosecond";
  if (interval > kMaxRateIntervalNs)
    return "rate " + quoted + " is too slow: at least one acquisition a day";
  *count = uint32_t(n);
  *period_ns = period;
  return "";
}

std::string format_rate(uint32_t count, uint64_t period_ns) {
  std::string out = std::to_string(count) + "/";
  for (const RateUnit &u : kRateUnits) {
    if (period_ns == 0 || period_ns % u.ns) continue;
    uint64_t k = period_ns / u.ns;
    return out + (k == 1 ? "" : std::to_string(k)) + u.name;
  }
  return out + std::to_string(period_ns) + "ns";
}

namespace {

// A bound as parse_duration() reads it: the largest unit it divides
// exactly, else ms with up to six decimals ("1.5ms", "0.000001ms").
std::string bound_text(uint64_t ns) {
  static constexpr RateUnit kUnits[] = {
      {"d", 86'400'000'000'000ull}, {"h", 3'600'000'000'000ull},
      {"m", 60'000'000'000ull},     {"s", 1'000'000'000ull},
      {"ms", 1'000'000ull},
  };
  for (const RateUnit &u : kUnits)
    if (ns && ns % u.ns == 0) return std::to_string(ns / u.ns) + u.name;
  std::string frac = std::to_string(1'000'000 + ns % 1'000'000).substr(1);
  while (frac.back() == '0') frac.pop_back();  // ns % 10^6 != 0: one stays
  return std::to_string(ns / 1'000'000) + "." + frac + "ms";
}

}  // namespace

std::string parse_policy(const std::string &text, uint32_t *policy,
                         uint64_t *max_bypass_ns) {
  const std::string invalid = "invalid --policy '" + text + "': ";
  const std::string word = text.substr(0, text.find(':'));
  const bool has_bound = text.find(':') != std::string::npos;
  if (word == "fifo" && !has_bound) {
    *policy = SHMSEM_POLICY_FIFO;
    *max_bypass_ns = 0;
    return "";
  }
  if (word == "fifo")
    return invalid +
           "fifo takes no duration (it never lets a permit past the "
           "queue); give bounded:DURATION for a bounded policy";
  if (word != "bounded")
    return invalid +
           "give fifo, bounded or bounded:DURATION (for example "
           "bounded:2ms)";
  uint64_t ns = SHMSEM_DEFAULT_MAX_BYPASS_NS;
  if (has_bound) {
    const std::string bound = text.substr(word.size() + 1);
    if (bound.empty())
      return invalid +
             "give a duration after 'bounded:', as in bounded:2ms (or "
             "'bounded' alone for " +
             bound_text(SHMSEM_DEFAULT_MAX_BYPASS_NS) + ")";
    if (!parse_duration(bound, &ns).empty())
      return invalid + "'" + bound +
             "' is not a duration: give a number with an optional unit "
             "ms, s, m, h or d after 'bounded:', as in bounded:2ms or "
             "bounded:0.5s (a plain number is seconds)";
    if (ns == 0)
      return invalid + "the bound must be more than 0 ('bounded' alone is " +
             bound_text(SHMSEM_DEFAULT_MAX_BYPASS_NS) + ")";
    if (ns > SHMSEM_MAX_BYPASS_NS)
      return invalid + "the bound may be at most " +
             bound_text(SHMSEM_MAX_BYPASS_NS) + " (24h)";
  }
  *policy = SHMSEM_POLICY_BOUNDED;
  *max_bypass_ns = ns;
  return "";
}

std::string format_policy(uint32_t policy, uint64_t max_bypass_ns) {
  if (policy == SHMSEM_POLICY_FIFO) return "fifo";
  if (policy == SHMSEM_POLICY_BOUNDED)
    return "bounded:" + bound_text(max_bypass_ns);
  return "policy " + std::to_string(policy);  // a newer library's
}

namespace {

// What to do about an error of `verb`, in the user's terms; "" if nothing
// useful.
std::string hint_for(int err, const std::string &name,
                     const std::string &verb) {
  // A path for the eye, and a word for a command line to copy.
  const std::string shown = printable(name), word = command_word(name);
  switch (-err) {
    case ENOENT:
      // Removing or closing what is not there is no reason to create it.
      if (verb == "rm") return "";
      if (verb == "recover" || verb == "shutdown") return "see 'shmsem list'";
      return "create it with 'shmsem create " + word +
             " --permits N', or see 'shmsem list'";
    case EACCES:
      return "check the owner and mode of /dev/shm" + shown +
             " ('shmsem create --mode' sets them)";
    case ESHUTDOWN:
      return "it was shut down; remove it with 'shmsem rm " + word +
             "' and create it again";
    case EBUSY:
      return "too many processes are queued; create it with a larger "
             "--max-waiters";
    case EBADMSG:
      return "it is not a shmsem semaphore (or is damaged); check /dev/shm" +
             shown;
    case EPROTO:
      return "it was created by another, incompatible version of shmsem";
    case EXDEV:
      return "use it from the PID namespace (container) that created it";
    case EEXIST:
      return "use the existing one, or remove it first with 'shmsem rm " +
             word + "'";
    case EIO:
      return "the file shrank while it was being read: someone truncated "
             "it, and every process using it may crash with SIGBUS";
    case EUCLEAN:
      return "run 'shmsem status " + word + "' and report this as a bug";
    default:
      return "";
  }
}

}  // namespace

void report_error(const char *verb, const std::string &name, int err) {
  std::string hint = hint_for(err, name, verb);
  fprintf(stderr, "shmsem: %s %s: %s%s%s\n", verb, printable(name).c_str(),
          shmsem_strerror(err), hint.empty() ? "" : "; ", hint.c_str());
}

int exit_code_for(int err) {
  switch (-err) {
    case 0:
      return kExitOk;
    case ENOENT:
      return kExitNoSuchSemaphore;
    case EEXIST:
      return kExitExists;
    case EINVAL:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

namespace {

std::string read_small_file(const std::string &path, size_t max) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[512];
  while (out.size() < max) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  close(fd);
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace

std::string proc_comm(pid_t pid) {
  std::string s = read_small_file("/proc/" + std::to_string(pid) + "/comm", 64);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string proc_cmdline(pid_t pid, size_t max) {
  std::string s =
      read_small_file("/proc/" + std::to_string(pid) + "/cmdline", max);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  for (char &c : s)
    if (c == '\0' || c == '\n' || c == '\t') c = ' ';
  return s;
}

namespace {

size_t display_width(const std::string &s) {
  size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xc0) != 0x80) w++;
  return w;
}

}  // namespace

void print_table(FILE *f, const std::vector<std::string> &header,
                 const std::vector<std::vector<std::string>> &rows,
                 const char *indent) {
  std::vector<std::vector<std::string>> safe;
  safe.reserve(rows.size());
  for (const auto &r : rows) {
    safe.emplace_back();
    for (const std::string &cell : r) safe.back().push_back(printable(cell));
  }
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string> &row) {
    for (size_t i = 0; i < row.size() && i < width.size(); i++)
      width[i] = std::max(width[i], display_width(row[i]));
  };
  measure(header);
  for (const auto &r : safe) measure(r);
  auto print = [&](const std::vector<std::string> &row) {
    std::string line = indent;  // cells are printable() already
    for (size_t i = 0; i < row.size(); i++) {
      line += row[i];
      if (i + 1 < row.size())
        line += std::string(width[i] - display_width(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fprintf(f, "%s\n", line.c_str());
  };
  print(header);
  for (const auto &r : safe) print(r);
}

uint64_t now_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

}  // namespace shmsem::cli
