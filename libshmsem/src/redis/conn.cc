// Connections and replies (conn.h).
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <hiredis/hiredis.h>
#include <string.h>
#include <sys/time.h>

namespace shmsem::detail {
namespace {

timeval tv_of(int ms) {
  if (ms < 1) ms = 1;
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = suseconds_t(ms % 1000) * 1000;
  return tv;
}

bool is_string(const redisReply *e) {
  return e &&
         (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) &&
         e->str;
}

// A write to a connection the server closed raises SIGPIPE (hiredis writes
// with write(2), not send(MSG_NOSIGNAL)): the library must not kill its
// caller with it. SIGPIPE is blocked in the calling thread around a call,
// and one it raised is taken off the thread's pending set (unless one was
// already pending before: that one is the caller's), as libcurl does.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    if (!was_pending_) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe &) = delete;
  NoSigpipe &operator=(const NoSigpipe &) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

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

int Conn::call(const std::vector<std::string> &args, int timeout_ms,
               Reply *out) {
  out->reset(nullptr);
  if (!c_) return -ECOMM;
  NoSigpipe no_sigpipe;
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
  void *r = redisCommandArgv(c_, int(argv.size()), argv.data(), lens.data());
  if (!r || c_->err) {
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
