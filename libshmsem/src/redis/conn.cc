// Connections and replies (conn.h).
#include "conn.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <hiredis/hiredis.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace shmsem::detail {
namespace {

timeval tv_of(int ms) {
  if (ms < 1) ms = 1;
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = suseconds_t(ms % 1000) * 1000;
  return tv;
}

constexpr uint64_t kWakeRetryNs = 10000000;

// Read what an eventfd (or a pipe) holds, so it polls quiet again.
void drain(int fd) {
  uint64_t buf[8];
  while (read(fd, buf, sizeof buf) > 0) {
  }
}

bool is_string(const redisReply *e) {
  return e &&
         (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) &&
         e->str;
}

// All of `buf` on the socket. send(MSG_NOSIGNAL), not hiredis's write(2):
// a write to a connection the server closed must fail with EPIPE, never
// raise SIGPIPE, whose default action kills the caller. A send timeout
// (SO_SNDTIMEO, set per call) fails it too. 0, or -1.
int send_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    const ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    buf += n;
    len -= size_t(n);
  }
  return 0;
}

// The reply to the request just sent, within timeout_ms of now: 0 with
// *out, or -1 (no reply in time, a broken connection, a protocol error).
// Not redisGetReply: it retries a recv that a signal interrupted (EINTR),
// and SO_RCVTIMEO starts again with each retry, so a process that takes
// signals often (a profiler, a timer) would wait for a silent server for
// as long as they come. Here the time left is counted on the monotonic
// clock, and only a readable socket is read (SO_RCVTIMEO stays as a bound
// on that one read). With `wake` (Conn::call), a wake-up calls wake->end
// until it says it is done (at most every kWakeRetryNs), and the reply is
// still awaited.
int read_reply(redisContext *c, int timeout_ms, void **out,
               const Conn::Wake *wake) {
  if (timeout_ms < 1) timeout_ms = 1;  // as tv_of
  const uint64_t end = real_mono_ns() + uint64_t(timeout_ms) * 1000000;
  bool pending = false, ended = false;  // woken; wake->end done
  bool signalled = false;
  pollfd p[2] = {{c->fd, POLLIN, 0}, {wake ? wake->fd : -1, POLLIN, 0}};
  for (;;) {
    if (redisGetReplyFromReader(c, out) != REDIS_OK) return -1;
    if (*out) return 0;
    if (pending && wake && wake->end(signalled)) {
      pending = false;
      ended = true;
    }
    const uint64_t now = real_mono_ns();
    if (now >= end) return -1;
    uint64_t wait = end - now;
    if (pending && wait > kWakeRetryNs) wait = kWakeRetryNs;
    const int n = poll(p, p[1].fd >= 0 ? 2 : 1, int((wait + 999999) / 1000000));
    if (n < 0 && errno == EINTR) {  // the time left is recounted
      if (wake && wake->on_signal && !ended) pending = signalled = true;
      continue;
    }
    if (n < 0) return -1;
    if (p[1].fd >= 0 && p[1].revents) {
      drain(p[1].fd);
      p[1].fd = -1;  // once is enough
      if (!ended) pending = true;
    }
    if (!(p[0].revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL))) continue;
    if (redisBufferRead(c) != REDIS_OK) return -1;
  }
}

}  // namespace

bool parse_numbers(const std::string &text, uint64_t *out, size_t n) {
  size_t at = 0;
  for (size_t k = 0; k < n; k++) {
    if (k > 0 && (at >= text.size() || text[at++] != ' ')) return false;
    const size_t start = at;
    uint64_t v = 0;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9')
      v = v * 10 + uint64_t(text[at++] - '0');
    if (at == start || at - start > 18) return false;
    out[k] = v;
  }
  return at == text.size();
}

Reply::~Reply() { reset(nullptr); }

void Reply::reset(redisReply *r) {
  if (r_) freeReplyObject(r_);
  r_ = r;
}

bool Reply::is_nil() const { return r_ && r_->type == REDIS_REPLY_NIL; }
bool Reply::is_error() const { return r_ && r_->type == REDIS_REPLY_ERROR; }

bool Reply::error_says(const char *what) const {
  return is_error() && r_->str && strstr(r_->str, what) != nullptr;
}

size_t Reply::size() const {
  return r_ && r_->type == REDIS_REPLY_ARRAY && r_->element ? r_->elements : 0;
}

bool Reply::str(size_t i, std::string *out) const {
  if (i >= size() || !is_string(r_->element[i])) return false;
  out->assign(r_->element[i]->str, r_->element[i]->len);
  return true;
}

bool Reply::num(size_t i, int64_t lo, int64_t hi, int64_t *out) const {
  if (i >= size() || !r_->element[i]) return false;
  const redisReply *e = r_->element[i];
  int64_t v = 0;
  if (e->type == REDIS_REPLY_INTEGER) {
    v = e->integer;
  } else if (is_string(e)) {
    if (e->len == 0 || e->len > 18) return false;
    for (size_t k = 0; k < e->len; k++) {
      if (e->str[k] < '0' || e->str[k] > '9') return false;
      v = v * 10 + (e->str[k] - '0');
    }
  } else {
    return false;
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::string Reply::status() const {
  std::string s;
  if (!str(0, &s)) return "";
  return s;
}

Conn::~Conn() { close(); }

bool Conn::stale() const {
  if (!c_) return false;
  pollfd p{c_->fd, POLLIN | POLLRDHUP, 0};
  return poll(&p, 1, 0) != 0;
}

void Conn::close() {
  if (c_) redisFree(c_);
  c_ = nullptr;
  timeout_ms_ = 0;
}

void Conn::abandon() {
  // redisFree only closes our descriptor and frees our memory; it sends
  // nothing, so the parent's use of the socket is untouched.
  close();
}

int Conn::connect(const Endpoint &ep, int timeout_ms) {
  close();
  const timeval tv = tv_of(timeout_ms);
  redisContext *c = ep.unix_path.empty()
                        ? redisConnectWithTimeout(ep.host.c_str(), ep.port, tv)
                        : redisConnectUnixWithTimeout(ep.unix_path.c_str(), tv);
  if (!c) return -ECOMM;
  if (c->err || c->fd < 0) {
    redisFree(c);
    return -ECOMM;
  }
  // The socket must not leak into programs the caller executes.
  const int fl = fcntl(c->fd, F_GETFD);
  if (fl >= 0) fcntl(c->fd, F_SETFD, fl | FD_CLOEXEC);
  if (ep.unix_path.empty()) redisEnableKeepAlive(c);
  c_ = c;
  return 0;
}

int Conn::call(const std::vector<std::string> &args, int timeout_ms, Reply *out,
               const Wake *wake) {
  out->reset(nullptr);
  if (!c_) return -ECOMM;
  // Two setsockopt calls: only when the timeout changes.
  if (timeout_ms != timeout_ms_) {
    if (redisSetTimeout(c_, tv_of(timeout_ms)) != REDIS_OK) {
      close();
      return -ECOMM;
    }
    timeout_ms_ = timeout_ms;
  }
  std::vector<const char *> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const std::string &a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  // The request formatted and sent here; hiredis only reads the reply
  // (its output buffer stays empty, so redisGetReply writes nothing).
  char *req = nullptr;
  const int len =
      redisFormatCommandArgv(&req, int(argv.size()), argv.data(), lens.data());
  if (len < 0 || !req) {
    close();
    return -ECOMM;
  }
  const int sent = send_all(c_->fd, req, size_t(len));
  redisFreeCommand(req);
  void *r = nullptr;
  if (sent != 0 || read_reply(c_, timeout_ms, &r, wake) != 0 || !r || c_->err) {
    if (r) freeReplyObject(r);
    close();
    return -ECOMM;
  }
  out->reset(static_cast<redisReply *>(r));
  return 0;
}

int ensure_library(Conn *c, int timeout_ms) {
  Reply r;
  int e = c->call({"FCALL", "shmsem_version", "0"}, timeout_ms, &r);
  if (e < 0) return e;
  if (r.get() && r.get()->type == REDIS_REPLY_INTEGER) {
    const int64_t have = r.get()->integer;
    if (have == kLibraryVersion) return 0;
    if (have > kLibraryVersion) return -EPROTO;
  } else if (!r.is_error()) {
    return kBadReply;
  }
  // None, or an older one: load ours (REPLACE: an older one goes; two
  // clients doing this at once load the same text).
  e = c->call({"FUNCTION", "LOAD", "REPLACE", kLibrarySource}, timeout_ms, &r);
  if (e < 0) return e;
  if (r.is_error() || !r.get() || r.get()->type != REDIS_REPLY_STRING)
    return kBadReply;
  return 0;
}

}  // namespace shmsem::detail
