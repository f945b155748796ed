// A loopback TCP proxy between the library and the test's redis-server,
// which the test drives to play a bad network: every byte is delayed, or
// held (a partition: connections stay open, nothing passes, and what was
// sent meanwhile arrives when it heals, as TCP retransmits it), or every
// connection is closed (a drop: what was in flight or held is lost; a
// partition ended by a drop is one whose connections timed out). One thread
// runs a poll() loop over the listening socket, a wake-up pipe and both sockets
// of every connection.
//
// Forked children (holders in other processes) inherit copies of the
// proxy's sockets; a drop therefore shuts them down (shutdown(2) acts on
// the connection, not on this process's descriptor) before closing them.
// A child never uses the proxy object itself.
#ifndef SHMSEM_TESTS_REDIS_PROXY_H
#define SHMSEM_TESTS_REDIS_PROXY_H

#include <chrono>
#include <memory>
#include <string>

namespace shmsem::test {

class TcpProxy {
 public:
  // Forwards to 127.0.0.1:`target_port`.
  explicit TcpProxy(int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy &) = delete;
  TcpProxy &operator=(const TcpProxy &) = delete;

  // Listen on a free loopback port and start the thread. false on failure.
  bool start();
  int port() const;
  // "redis://127.0.0.1:PORT/POOL": a pool's name through the proxy.
  std::string name(const std::string &pool) const;

  // Every chunk passes `d` after it was read (each way: a round trip
  // gains 2d). Applies to bytes read from now on.
  void delay(std::chrono::milliseconds d);
  // A partition: nothing passes either way; bytes are held, in order,
  // and pass on restore(). New connections are accepted (the kernel
  // completes the handshake anyway) and held too.
  void blackhole();
  // Close every connection now (what they held is lost); new ones are
  // served as the mode says.
  void drop();
  // No delay, no partition: held bytes pass now.
  void restore();

  // Connections open now, and ever accepted.
  int open_connections() const;
  int accepted() const;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace shmsem::test

#endif  // SHMSEM_TESTS_REDIS_PROXY_H
