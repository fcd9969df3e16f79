// Haproxy: runs the real HAProxy (`haproxy -db -f deploy/haproxy/haproxy.cfg`) as the
// ALPN-routing proxy in front of a live-patching backend and an apiserver backend, the way
// Envoy does in production. Addresses reach the config through environment variables, so
// tests run the exact file operators get.
//
//   HaproxyOptions options;
//   options.service_addr = LoopbackAddress(lps.port());
//   options.apiserver_addr = LoopbackAddress(apiserver.port());
//   Haproxy proxy(std::move(options));      // proxy.frontend_port() is listening now
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace hotfix::testsupport {

class Subprocess;

struct HaproxyOptions {
  // Backends, "host:port": LP_SERVICE_ADDR and LP_APISERVER_ADDR in the config.
  std::string service_addr;
  std::string apiserver_addr;
  // Frontend port on 127.0.0.1 (LP_FRONTEND_BIND); 0 picks a free one and retries with
  // another if HAProxy loses a bind race.
  uint16_t frontend_port = 0;
  // Empty: <source dir>/deploy/haproxy/haproxy.cfg, where the source dir is $LP_SOURCE_DIR
  // or the one this library was built from.
  std::filesystem::path config_path;
  // Empty: $LP_HAPROXY_BIN, else "haproxy" from PATH (Debian: /usr/sbin/haproxy).
  std::string binary;
  std::chrono::milliseconds start_timeout = std::chrono::seconds(15);
  // The config's send-proxy-v2 to the service (its --proxy-protocol). Off: the environment
  // sets LP_NO_PROXY_PROTOCOL, for backends that do not read the header.
  bool send_proxy_v2 = false;
};

// deploy/haproxy/haproxy.cfg routing ALPN aks-live-patching to 127.0.0.1:service_port and
// everything else to 127.0.0.1:apiserver_port.
HaproxyOptions AlpnRouteOptions(uint16_t service_port, uint16_t apiserver_port);

class Haproxy {
 public:
  // Starts HAProxy and returns once its frontend listens; throws std::runtime_error with
  // HAProxy's own output if it exits or never listens.
  explicit Haproxy(HaproxyOptions options);
  ~Haproxy();  // Stop()
  Haproxy(const Haproxy&) = delete;
  Haproxy& operator=(const Haproxy&) = delete;

  uint16_t frontend_port() const { return frontend_port_; }
  std::string frontend_address() const;  // "127.0.0.1:<port>"
  bool running() const;
  // Everything HAProxy printed: with `log stdout format raw`, one line per connection.
  std::string Log() const;
  // SIGTERM (HAProxy's hard stop), SIGKILL after a grace period. Idempotent.
  void Stop();

  // The config the default options use, for tests that lint it (`haproxy -c`).
  static std::filesystem::path DefaultConfigPath();
  static std::string DefaultBinary();

 private:
  bool TryStart(const HaproxyOptions& options, uint16_t port, std::string* failure);

  uint16_t frontend_port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace hotfix::testsupport
