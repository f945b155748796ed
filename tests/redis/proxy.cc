// The loopback TCP proxy (proxy.h). One thread: poll() over a wake-up pipe,
// the listening socket and every connection's two sockets; what one side
// sends waits in that direction's queue, stamped with when it may pass
// (now + delay), and passes when that time has come and no partition
// holds it. The test's calls change the mode under the mutex, wake the
// thread and wait until it has acted, so that "drop()" has closed every
// connection when it returns.
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shmsem::test {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes read from one side, to be written to the other once `due`; an
// empty chunk with `eof` stands for the sender's end of stream.
struct Chunk {
  Clock::time_point due;
  std::string bytes;
  size_t off = 0;
  bool eof = false;
};

// One connection: fd[0] the client's, fd[1] the server's; q[d] holds what
// was read from fd[d], for fd[1 - d].
struct Link {
  int fd[2] = {-1, -1};
  std::deque<Chunk> q[2];
  bool eof[2] = {false, false};
  bool broken = false;
  ~Link() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
  bool done() const {
    return broken || (eof[0] && eof[1] && q[0].empty() && q[1].empty());
  }
};

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  return a;
}

// Read what fd[d] has into q[d].
void pump_in(Link &l, int d, std::chrono::milliseconds delay) {
  char buf[65536];
  for (;;) {
    const ssize_t n = read(l.fd[d], buf, sizeof buf);
    if (n > 0) {
      l.q[d].push_back(
          Chunk{Clock::now() + delay, std::string(buf, size_t(n))});
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    l.eof[d] = true;  // end of stream, or reset: the same to the other side
    l.q[d].push_back(Chunk{Clock::now() + delay, "", 0, true});
    return;
  }
}

// Write what q[d] has that is due into fd[1 - d].
void pump_out(Link &l, int d) {
  const int to = l.fd[1 - d];
  while (!l.q[d].empty() && l.q[d].front().due <= Clock::now()) {
    Chunk &c = l.q[d].front();
    if (c.eof) {
      shutdown(to, SHUT_WR);
      l.q[d].pop_front();
      continue;
    }
    const ssize_t n =
        send(to, c.bytes.data() + c.off, c.bytes.size() - c.off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n < 0) {
      l.broken = true;
      return;
    }
    c.off += size_t(n);
    if (c.off == c.bytes.size()) l.q[d].pop_front();
  }
}

// Close a connection at once, for every process that has a copy of it.
void cut(Link &l) {
  for (int f : l.fd)
    if (f >= 0) shutdown(f, SHUT_RDWR);
  l.broken = true;
}

}  // namespace

struct TcpProxy::State {
  int target = 0, port = 0, listen_fd = -1, wake[2] = {-1, -1};
  std::thread thread;
  std::mutex mu;
  std::condition_variable acted;
  uint64_t asked = 0, done = 0;  // requests made and acted upon
  bool stop = false, holding = false, drop_now = false;
  std::chrono::milliseconds delay{0};
  std::atomic<int> open{0}, accepted{0};
  std::vector<std::unique_ptr<Link>> links;  // the thread's alone

  void ask(const std::function<void()> &change);
  void run();
  void accept_one();
  void step(bool holding, std::chrono::milliseconds delay);
  int poll_once(bool holding);
};

void TcpProxy::State::ask(const std::function<void()> &change) {
  std::unique_lock<std::mutex> lock(mu);
  change();
  const uint64_t mine = ++asked;
  const char c = 'w';
  if (write(wake[1], &c, 1) != 1) return;
  acted.wait(lock, [&] { return done >= mine || !thread.joinable(); });
}

void TcpProxy::State::accept_one() {
  const int fd =
      accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  accepted++;
  auto l = std::make_unique<Link>();
  l->fd[0] = fd;
  l->fd[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in a = loopback(target);
  if (l->fd[1] < 0 || connect(l->fd[1], reinterpret_cast<const sockaddr *>(&a),
                              sizeof a) != 0) {
    cut(*l);
    return;  // the server is down: the client sees its connection close
  }
  set_nonblocking(l->fd[1]);
  links.push_back(std::move(l));
}

// Wait for the next event or the next due chunk (at most 20 ms).
int TcpProxy::State::poll_once(bool hold) {
  std::vector<pollfd> p{{wake[0], POLLIN, 0}, {listen_fd, POLLIN, 0}};
  int timeout = 20;
  for (auto &l : links)
    for (int d = 0; d < 2; d++) {
      p.push_back({l->fd[d], short(l->eof[d] ? 0 : POLLIN), 0});
      if (hold || l->q[1 - d].empty()) continue;
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
          l->q[1 - d].front().due - Clock::now());
      if (wait.count() <= 0)
        p.back().events |= POLLOUT;
      else if (wait.count() < timeout)
        timeout = int(wait.count());
    }
  const int r = poll(p.data(), p.size(), timeout);
  if (r > 0 && (p[0].revents & POLLIN)) {
    char buf[64];
    while (read(wake[0], buf, sizeof buf) > 0) {
    }
  }
  return r > 0 && (p[1].revents & POLLIN) ? 1 : 0;
}

void TcpProxy::State::step(bool hold, std::chrono::milliseconds d) {
  for (const auto &l : links)
    for (int side = 0; side < 2; side++) {
      if (!l->eof[side]) pump_in(*l, side, d);
      if (!hold) pump_out(*l, side);
    }
  size_t kept = 0;
  for (auto &l : links)
    if (!l->done()) links[kept++] = std::move(l);
  links.resize(kept);
}

void TcpProxy::State::run() {
  for (;;) {
    bool hold;
    std::chrono::milliseconds d;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) break;
      if (drop_now) {
        for (const auto &l : links) cut(*l);
        links.clear();
        drop_now = false;
      }
      hold = holding;
      d = delay;
      open = int(links.size());
      done = asked;
    }
    acted.notify_all();
    if (poll_once(hold)) accept_one();
    step(hold, d);
  }
  for (const auto &l : links) cut(*l);
  links.clear();
}

TcpProxy::TcpProxy(int target_port) : st_(new State) {
  st_->target = target_port;
}

TcpProxy::~TcpProxy() {
  if (st_->thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(st_->mu);
      st_->stop = true;
    }
    const char c = 's';
    if (write(st_->wake[1], &c, 1) != 1) {
    }
    st_->thread.join();
  }
  for (int f : {st_->listen_fd, st_->wake[0], st_->wake[1]})
    if (f >= 0) close(f);
}

bool TcpProxy::start() {
  if (pipe2(st_->wake, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  st_->listen_fd =
      socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (st_->listen_fd < 0) return false;
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  if (bind(st_->listen_fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      listen(st_->listen_fd, 64) != 0 ||
      getsockname(st_->listen_fd, reinterpret_cast<sockaddr *>(&a), &len) != 0)
    return false;
  st_->port = ntohs(a.sin_port);
  st_->thread = std::thread([s = st_.get()] { s->run(); });
  return true;
}

int TcpProxy::port() const { return st_->port; }

std::string TcpProxy::name(const std::string &pool) const {
  return "redis://127.0.0.1:" + std::to_string(st_->port) + "/" + pool;
}

void TcpProxy::delay(std::chrono::milliseconds d) {
  st_->ask([&] { st_->delay = d; });
}

void TcpProxy::blackhole() {
  st_->ask([&] { st_->holding = true; });
}

void TcpProxy::drop() {
  st_->ask([&] { st_->drop_now = true; });
}

void TcpProxy::restore() {
  st_->ask([&] {
    st_->delay = std::chrono::milliseconds(0);
    st_->holding = false;
  });
}

int TcpProxy::open_connections() const { return st_->open.load(); }

int TcpProxy::accepted() const { return st_->accepted.load(); }

}  // namespace shmsem::test
