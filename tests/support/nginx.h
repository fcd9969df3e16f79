// Nginx: runs real nginx (stream + ssl_preread) in the foreground with deploy/nginx/nginx.conf
// copied unchanged into a prefix folder, as the ALPN-routing proxy for clusters that front the
// apiserver with nginx instead of Envoy. Only the files the config includes (listen address,
// upstreams, the apiserver hop's listen, the PROXY header switch) are the test's.
//
//   Nginx nginx(LoopbackAddress(lps.port()), LoopbackAddress(apiserver.port()));
//   ... connect to 127.0.0.1:nginx.port() ...   nginx.Log()
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace hotfix::testsupport {

class Subprocess;

class Nginx {
 public:
  // Listening when this returns (a free port, retried if another process takes it); throws
  // std::runtime_error with nginx's own output if it does not start.
  // send_proxy_protocol: the shipped files' PROXY header to the service (--proxy-protocol);
  // off, for backends that do not read one.
  Nginx(const std::string& service_addr, const std::string& apiserver_addr,
        bool send_proxy_protocol = false);
  ~Nginx();
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;

  uint16_t port() const { return port_; }
  // The access log (stdout) and nginx's own messages (stderr).
  std::string Log() const;
  // argv for nginx on this prefix; `extra` goes first (e.g. "-t").
  std::vector<std::string> Argv(const std::vector<std::string>& extra = {}) const;

  // $LP_NGINX_BIN, else /usr/sbin/nginx if it exists, else "nginx" from PATH.
  static std::string DefaultBinary();
  // <source dir>/deploy/nginx/nginx.conf, the source dir being $LP_SOURCE_DIR or the one this
  // library was built from.
  static std::filesystem::path ReferenceConfig();

 private:
  bool TryStart(uint16_t port, std::string* failure);

  std::string service_addr_;
  std::string apiserver_addr_;
  bool send_proxy_protocol_ = false;

  TempDir dir_{"lp-nginx"};
  uint16_t port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace hotfix::testsupport
