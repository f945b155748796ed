// A real redis-server for the Redis backend's tests: started in a
// temporary directory on a unix socket and a free loopback port, with an
// fsync'd append-only file (appendonly yes, appendfsync always, no RDB
// snapshots), stopped (and the directory removed) at the end. It can be
// killed with SIGKILL and restarted from its AOF on the same socket and
// port, and stopped (SIGSTOP) to play a server that does not answer.
#ifndef SHMSEM_TESTS_REDIS_REDIS_SERVER_H
#define SHMSEM_TESTS_REDIS_REDIS_SERVER_H

#include <sys/types.h>

#include <string>
#include <vector>

namespace shmsem::test {

class RedisServer {
 public:
  // fsync_always: appendfsync always (the safety envelope), else everysec.
  explicit RedisServer(bool fsync_always = true);
  ~RedisServer();
  RedisServer(const RedisServer &) = delete;
  RedisServer &operator=(const RedisServer &) = delete;

  // Start (again): false, with why in error(), if it does not answer PING
  // within 20 s.
  bool start();
  void kill9();   // SIGKILL and reap
  void stop();    // SIGTERM and reap
  void pause();   // SIGSTOP
  void resume();  // SIGCONT
  bool running() const { return pid_ > 0; }

  const std::string &error() const { return error_; }
  const std::string &socket_path() const { return sock_; }
  int port() const { return port_; }
  // Names of pool `pool` on this server, over TCP and over the socket.
  std::string tcp_name(const std::string &pool) const;
  std::string unix_name(const std::string &pool) const;
  // One command on a new connection over the socket, the reply flattened
  // to strings (integers in decimal, nil as "(nil)", an error as "ERR...").
  std::vector<std::string> command(const std::vector<std::string> &args) const;
  // Until the server shows exactly `n` clients blocked (waiters in their
  // BLPOP), for up to 20 s: false if it never did.
  bool await_blocked(int n) const;
  // How many CLIENT UNBLOCKs the server has run (INFO commandstats).
  uint64_t unblock_calls() const;

 private:
  std::string dir_, sock_, error_;
  int port_ = 0;
  pid_t pid_ = -1;
  int tries_ = 0;
  bool fsync_always_ = true;
  bool started_ = false, restarted_ = false;
};

// A pool name no other test (or run) uses.
std::string unique_pool(const char *tag);

}  // namespace shmsem::test

#endif  // SHMSEM_TESTS_REDIS_REDIS_SERVER_H
