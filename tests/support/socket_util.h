// Internal to tests/support: a loopback TCP accept loop that runs one handler thread per
// connection and can always be stopped, plus the small socket helpers the relays need.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace hotfix::testsupport::net {

// Listens on host:port (0 = any free port) and calls handler(fd) on a fresh thread for each
// accepted connection. The server owns and closes fd after the handler returns. Stop()
// (and the destructor) shuts every open connection down, which wakes handlers blocked in
// read/poll/SSL_*, then joins all threads: nothing outlives the object.
class ConnectionServer {
 public:
  using Handler = std::function<void(int fd)>;
  ConnectionServer(const std::string& host, uint16_t port, Handler handler);
  ~ConnectionServer();
  ConnectionServer(const ConnectionServer&) = delete;
  ConnectionServer& operator=(const ConnectionServer&) = delete;

  uint16_t port() const { return port_; }
  const std::atomic<bool>& stopping() const { return stopping_; }
  size_t accepted_count() const { return accepted_.load(); }
  void Stop();

 private:
  void AcceptLoop();
  void Serve(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that ends AcceptLoop's poll
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> accepted_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::set<int> open_fds_;
  std::vector<std::thread> workers_;
};

// Sets SIGPIPE to SIG_IGN for the whole process, once. OpenSSL writes with write(), not
// send(MSG_NOSIGNAL), so a TLS write to a peer that hung up would otherwise kill the test.
void IgnoreSigpipe();

// Connects to host:port (numeric IPv4/IPv6); -1 and errno on failure.
int ConnectTcp(const std::string& host, uint16_t port);
// Writes everything (MSG_NOSIGNAL: a reset peer must not kill the test with SIGPIPE).
bool SendAll(int fd, const char* data, size_t size);
// Waits for readability; false on timeout.
bool WaitReadable(int fd, std::chrono::milliseconds timeout);
// Copies bytes both ways until both directions ended (forwarding half-closes), either side
// reset, or `stop` became true (checked every 100 ms).
void Relay(int a, int b, const std::atomic<bool>& stop);

}  // namespace hotfix::testsupport::net
