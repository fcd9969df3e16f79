// StaticHttpServer: real nginx (Debian's nginx-light) serving a folder over plain HTTP/1.1,
// e.g. a signed repository from signed_repo.h, with an access log the test reads to see
// which files a client fetched. One process in the foreground (master_process off), as the
// test's own user, so it reads the test's private temp folders; stopped with the object.
//
//   StaticHttpServer server(repo_dir);          // listening on 127.0.0.1:<free port> now
//   curl(server.Url("dists/jammy/InRelease"));  // "http://127.0.0.1:<port>/dists/..."
//   server.RequestedPaths()                     // {"/dists/jammy/InRelease"}
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "temp_dir.h"

namespace hotfix::testsupport {

class Subprocess;

struct StaticHttpServerOptions {
  std::filesystem::path root;  // the folder served at "/"
  // The address to bind: an IPv4 literal ("127.0.0.1", "127.0.0.2", "0.0.0.0") or an IPv6
  // one in brackets ("[::1]").
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: a free one, another if nginx loses the bind race
  // Directives added inside the server block, e.g. a fault for one path:
  //   "location = /dists/jammy/InRelease { return 503; }"
  //   "location /old/ { return 302 /new/; }"
  std::string server_config;
  // HTTPS with this certificate chain and key (PEM files) when both are set.
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
  std::chrono::milliseconds start_timeout = std::chrono::seconds(15);
};

// One line of the access log.
struct AccessLogEntry {
  std::string method;       // "GET"
  std::string path;         // "/dists/jammy/InRelease" (the request URI, query included)
  int status = 0;           // 200, 404, ...
  uint64_t body_bytes = 0;  // bytes of the body sent
  std::string user_agent;   // as nginx escapes it ("-" when absent)
  std::string remote_addr;  // "127.0.0.1"
};

class StaticHttpServer {
 public:
  // Listening when this returns; throws std::runtime_error with nginx's own output if it
  // does not start.
  explicit StaticHttpServer(StaticHttpServerOptions options);
  explicit StaticHttpServer(const std::filesystem::path& root);
  ~StaticHttpServer();  // Stop()
  StaticHttpServer(const StaticHttpServer&) = delete;
  StaticHttpServer& operator=(const StaticHttpServer&) = delete;

  uint16_t port() const { return port_; }
  const std::string& host() const { return options_.host; }
  std::string address() const;  // "127.0.0.1:<port>", "[::1]:<port>"
  // "http://<address>/" (https with TLS) + path (a leading '/' in path is dropped).
  std::string Url(std::string_view path = {}) const;

  // The access log: every request so far, in order (nginx writes each line as the request
  // ends, so a response the client has fully read is there).
  std::vector<AccessLogEntry> Requests() const;
  // Their paths.
  std::vector<std::string> RequestedPaths() const;
  // How many requests asked for exactly this path.
  int CountRequests(std::string_view path) const;
  // Empties the access log (between a test's phases).
  void ClearAccessLog();
  // The raw access log and nginx's own messages (stderr).
  std::string AccessLog() const;
  std::string ErrorLog() const;

  bool running() const;
  // SIGTERM (nginx's fast shutdown), SIGKILL after a grace period. Idempotent.
  void Stop();

 private:
  bool TryStart(uint16_t port, std::string* failure);

  StaticHttpServerOptions options_;
  TempDir dir_{"lp-static-http"};
  uint16_t port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace hotfix::testsupport
