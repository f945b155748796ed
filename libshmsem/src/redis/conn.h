// One connection to a Redis server (hiredis, blocking, with a socket
// timeout per call) and the checked reading of replies: the server is
// input like shared memory is, so every reply is checked for its type and
// range before use, and a reply of the wrong shape is an error
// (kBadReply), never a crash.
#ifndef SHMSEM_SRC_REDIS_CONN_H
#define SHMSEM_SRC_REDIS_CONN_H

#include <errno.h>
#include <stdint.h>

#include <functional>
#include <string>
#include <vector>

#include "endpoint.h"

struct redisContext;
struct redisReply;

namespace shmsem::detail {

// A reply, owned (freeReplyObject on destruction).
class Reply {
 public:
  Reply() = default;
  ~Reply();
  Reply(const Reply &) = delete;
  Reply &operator=(const Reply &) = delete;
  void reset(redisReply *r);
  const redisReply *get() const { return r_; }

  bool is_nil() const;
  bool is_error() const;
  // An error reply whose text contains `what`.
  bool error_says(const char *what) const;
  // An array reply's size (0 for any other type).
  size_t size() const;
  // Element i of an array as a string (a bulk or status string), or false.
  bool str(size_t i, std::string *out) const;
  // Element i of an array as an integer in [lo, hi] (an integer reply, or
  // a string of decimal digits), or false.
  bool num(size_t i, int64_t lo, int64_t hi, int64_t *out) const;
  // The first element of an array reply: the function's status word; ""
  // for anything else.
  std::string status() const;

 private:
  redisReply *r_ = nullptr;
};

class Conn {
 public:
  Conn() = default;
  ~Conn();
  Conn(const Conn &) = delete;
  Conn &operator=(const Conn &) = delete;

  // Connect (close-on-exec), within timeout_ms. 0, or -ECOMM.
  int connect(const Endpoint &ep, int timeout_ms);
  bool connected() const { return c_ != nullptr; }
  // An idle connection the server has closed (restarted, CLIENT KILL,
  // timeout): an end of file or anything else waiting to be read. Such a
  // connection is reconnected before a call, never retried after one (a
  // request that reached the server must not run twice).
  bool stale() const;
  void close();
  // Forget the connection without a word to the server: in a fork child,
  // whose parent still uses the same socket (the descriptor is closed, the
  // socket stays the parent's).
  void abandon();
  // Run one command within timeout_ms (the socket's send and receive
  // timeout). 0 with *out; -ECOMM if the server did not answer in time or
  // the connection broke (the connection is then closed: a late answer
  // must never be read as the next one's). An error reply is 0 with
  // out->is_error(). With `wake`, the wait for the reply is woken by
  // wake->fd turning readable (drained then) or, if wake->on_signal, by a
  // signal handler that ran (poll's EINTR); then wake->end(signalled) runs,
  // and again every 10 ms until it returns true, and the reply is still
  // awaited (`signalled`: a signal was among the wake-ups). A
  // cancelled or interrupted BLPOP is so ended through another connection
  // (acquire.cc).
  struct Wake {
    int fd = -1;
    bool on_signal = false;
    std::function<bool(bool signalled)> end;
  };
  int call(const std::vector<std::string> &args, int timeout_ms, Reply *out,
           const Wake *wake = nullptr);

 private:
  redisContext *c_ = nullptr;
  int timeout_ms_ = 0;  // the socket's timeouts now (0: not set)
};

// Exactly `n` decimal numbers (at most 18 digits each) separated by single
// spaces, the whole of `text`: the fields of a record the library's
// functions build (shmsem.lua). false for anything else.
bool parse_numbers(const std::string &text, uint64_t *out, size_t n);

// A reply this client does not understand: for the caller, like a server
// that does not answer (-ECOMM; shmsem(7), "Across hosts").
inline constexpr int kBadReply = -ECOMM;

// The version of the functions library (shmsem.lua's LIBRARY_VERSION).
inline constexpr int64_t kLibraryVersion = 3;
// The library's source, embedded at build time (library.cc, generated).
extern const char kLibrarySource[];

// Make sure the server has our library: load it if missing, replace an
// older one. 0; -EPROTO a newer library than this client knows; -ECOMM.
int ensure_library(Conn *c, int timeout_ms);

}  // namespace shmsem::detail

#endif  // SHMSEM_SRC_REDIS_CONN_H
