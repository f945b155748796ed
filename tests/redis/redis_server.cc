// The tests' redis-server (redis_server.h).
#include "redis_server.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#ifndef SHMSEM_REDIS_SERVER
#define SHMSEM_REDIS_SERVER "redis-server"
#endif

namespace shmsem::test {
namespace {

// A loopback port nobody listens on now (the kernel's choice).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

void flatten(const redisReply *r, std::vector<std::string> *out) {
  switch (r->type) {
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < r->elements; i++) flatten(r->element[i], out);
      break;
    case REDIS_REPLY_INTEGER:
      out->push_back(std::to_string(r->integer));
      break;
    case REDIS_REPLY_NIL:
      out->push_back("(nil)");
      break;
    default:
      out->push_back(std::string(r->str, r->len));
  }
}

}  // namespace

std::string unique_pool(const char *tag) {
  unsigned v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = unsigned(getpid());
  return std::string("t-") + tag + "-" + std::to_string(getpid()) + "-" +
         std::to_string(v);
}

RedisServer::RedisServer(bool fsync_always) : fsync_always_(fsync_always) {
  char tmpl[] = "/tmp/shmsem-redis-XXXXXX";
  if (mkdtemp(tmpl)) dir_ = tmpl;
  sock_ = dir_ + "/redis.sock";
  port_ = free_port();
}

RedisServer::~RedisServer() {
  if (pid_ > 0) {
    resume();
    stop();
  }
  if (!dir_.empty()) {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    if (system(cmd.c_str()) != 0) {
    }
  }
}

bool RedisServer::start() {
  if (dir_.empty() || port_ == 0) {
    error_ = "no temporary directory or port";
    return false;
  }
  const std::string port = std::to_string(port_);
  if (started_) restarted_ = true;
  started_ = true;
  pid_ = fork();
  if (pid_ == 0) {
    // A test killed by a signal must not leave its server behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const std::string log = dir_ + "/redis.log";
    execlp(SHMSEM_REDIS_SERVER, SHMSEM_REDIS_SERVER, "--port", port.c_str(),
           "--bind", "127.0.0.1", "--unixsocket", sock_.c_str(),
           "--unixsocketperm", "700", "--dir", dir_.c_str(), "--appendonly",
           "yes", "--appendfsync", fsync_always_ ? "always" : "everysec",
           "--save", "", "--daemonize", "no", "--logfile", log.c_str(),
           static_cast<char *>(nullptr));
    _exit(127);
  }
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    const std::vector<std::string> r = command({"PING"});
    if (!r.empty() && r[0] == "PONG") return true;
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      error_ = "redis-server exited (see its log in " + dir_ + ")";
      // The port may have been taken since it was free: another one, once
      // per try, unless a restart must keep its address.
      if (++tries_ > 3 || restarted_) return false;
      port_ = free_port();
      started_ = false;
      return start();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill9();
  error_ = "redis-server did not answer PING in 20 s";
  return false;
}

void RedisServer::kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisServer::resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

std::string RedisServer::tcp_name(const std::string &pool) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/" + pool;
}

std::string RedisServer::unix_name(const std::string &pool) const {
  return "redis+unix://" + sock_ + "?pool=" + pool;
}

std::vector<std::string> RedisServer::command(
    const std::vector<std::string> &args) const {
  std::vector<std::string> out;
  timeval tv{2, 0};
  redisContext *c = redisConnectUnixWithTimeout(sock_.c_str(), tv);
  if (!c || c->err) {
    if (c) redisFree(c);
    return out;
  }
  redisSetTimeout(c, tv);
  std::vector<const char *> argv;
  std::vector<size_t> lens;
  for (const std::string &a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto *r = static_cast<redisReply *>(
      redisCommandArgv(c, int(argv.size()), argv.data(), lens.data()));
  if (r) {
    flatten(r, &out);
    freeReplyObject(r);
  }
  redisFree(c);
  return out;
}

bool RedisServer::await_blocked(int n) const {
  const std::string want = "blocked_clients:" + std::to_string(n) + "\r";
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    const std::vector<std::string> r = command({"INFO", "clients"});
    if (!r.empty() && r[0].find(want) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

uint64_t RedisServer::unblock_calls() const {
  const std::vector<std::string> r = command({"INFO", "commandstats"});
  const std::string key = "cmdstat_client|unblock:calls=";
  const size_t at = r.empty() ? std::string::npos : r[0].find(key);
  return at == std::string::npos ? 0
                                 : std::stoull(r[0].substr(at + key.size()));
}

}  // namespace shmsem::test
