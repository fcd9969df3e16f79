#include "static_http_server.h"

#include <sstream>
#include <stdexcept>
#include <utility>

#include "nginx.h"
#include "ports.h"
#include "subprocess.h"
#include "text_util.h"

namespace hotfix::testsupport {
namespace {

constexpr int kStartAttempts = 3;  // another process may take the picked port

// nginx's quoted string: the paths are the tests' temp folders, never holding a quote.
std::string Quoted(const std::filesystem::path& path) {
  std::string text = path.string();
  if (text.find('"') != std::string::npos || text.find('\\') != std::string::npos) {
    throw std::runtime_error("StaticHttpServer: unsupported character in path " + text);
  }
  return "\"" + text + "\"";
}

std::vector<std::string> Split(const std::string& line, char separator) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, separator)) fields.push_back(field);
  if (!line.empty() && line.back() == separator) fields.emplace_back();
  return fields;
}

}  // namespace

StaticHttpServer::StaticHttpServer(const std::filesystem::path& root)
    : StaticHttpServer([&root] {
        StaticHttpServerOptions options;  // by assignment: GCC's -Wmissing-field-initializers
        options.root = root;
        return options;
      }()) {}

StaticHttpServer::StaticHttpServer(StaticHttpServerOptions options) : options_(std::move(options)) {
  if (options_.root.empty()) throw std::runtime_error("StaticHttpServer: no root folder");
  options_.root = std::filesystem::absolute(options_.root);
  std::string failure;
  int attempts = options_.port == 0 ? kStartAttempts : 1;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (TryStart(options_.port != 0 ? options_.port : PickFreePort(), &failure)) return;
    if (failure.find("Address already in use") == std::string::npos) break;
  }
  throw std::runtime_error("nginx (static HTTP) did not start: " + failure);
}

StaticHttpServer::~StaticHttpServer() { Stop(); }

bool StaticHttpServer::TryStart(uint16_t port, std::string* failure) {
  const std::filesystem::path& dir = dir_.path();
  const bool tls = !options_.tls_cert.empty() && !options_.tls_key.empty();
  std::ostringstream conf;
  // One process as the test's user (no worker switching to "nobody", which could not read a
  // 0700 temp folder), in the foreground, everything it writes in its own folder.
  conf << "master_process off;\n"
       << "daemon off;\n"
       << "pid " << Quoted(dir / "nginx.pid") << ";\n"
       << "error_log stderr notice;\n"
       << "events { worker_connections 512; }\n"
       << "http {\n"
       << "  default_type application/octet-stream;\n"
       << "  types {\n"
       << "    text/plain txt asc;\n"
       << "    application/xml xml;\n"
       << "    application/gzip gz;\n"
       << "    application/vnd.debian.binary-package deb;\n"
       << "    application/x-rpm rpm;\n"
       << "  }\n"
       << "  log_format lp_static "
          "\"$request_method\\t$request_uri\\t$status\\t$body_bytes_sent\\t$http_user_agent"
          "\\t$remote_addr\";\n"
       << "  access_log " << Quoted(dir / "access.log") << " lp_static;\n"
       << "  client_body_temp_path " << Quoted(dir / "body") << ";\n"
       << "  proxy_temp_path " << Quoted(dir / "proxy") << ";\n"
       << "  fastcgi_temp_path " << Quoted(dir / "fastcgi") << ";\n"
       << "  uwsgi_temp_path " << Quoted(dir / "uwsgi") << ";\n"
       << "  scgi_temp_path " << Quoted(dir / "scgi") << ";\n"
       << "  server_tokens off;\n"
       << "  sendfile on;\n"
       << "  keepalive_timeout 5s;\n"
       << "  server {\n"
       << "    listen " << options_.host << ":" << port << (tls ? " ssl" : "") << ";\n"
       << (tls ? "    ssl_certificate " + Quoted(options_.tls_cert) +
                     ";\n    ssl_certificate_key " + Quoted(options_.tls_key) + ";\n"
               : std::string())
       << "    root " << Quoted(options_.root) << ";\n"
       << "    location / { }\n"
       << "    " << options_.server_config << "\n"
       << "  }\n"
       << "}\n";
  dir_.Write("nginx.conf", conf.str());
  SpawnOptions spawn;
  spawn.argv = {Nginx::DefaultBinary(),        "-p", dir.string(), "-c",
                (dir / "nginx.conf").string(), "-e", "stderr"};
  process_ = std::make_unique<Subprocess>(std::move(spawn));
  if (WaitUntilListening(port, options_.start_timeout, [this] { return process_->running(); }) &&
      process_->running()) {
    port_ = port;
    return true;
  }
  *failure = process_->Stop().ToString() + ": " + process_->Stderr();
  process_.reset();
  return false;
}

std::string StaticHttpServer::address() const {
  // A wildcard bind is reached on loopback.
  std::string host = options_.host;
  if (host == "0.0.0.0") host = "127.0.0.1";
  if (host == "[::]") host = "[::1]";
  return host + ":" + std::to_string(port_);
}

std::string StaticHttpServer::Url(std::string_view path) const {
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  const bool tls = !options_.tls_cert.empty() && !options_.tls_key.empty();
  return (tls ? "https://" : "http://") + address() + "/" + std::string(path);
}

std::string StaticHttpServer::AccessLog() const { return ReadFile(dir_.File("access.log")); }

std::string StaticHttpServer::ErrorLog() const { return process_ ? process_->Stderr() : ""; }

std::vector<AccessLogEntry> StaticHttpServer::Requests() const {
  std::vector<AccessLogEntry> entries;
  std::istringstream in(AccessLog());
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields = Split(line, '\t');
    if (fields.size() != 6) continue;  // a line still being written
    AccessLogEntry entry;
    entry.method = fields[0];
    entry.path = fields[1];
    entry.status = std::stoi(fields[2]);
    entry.body_bytes = std::stoull(fields[3]);
    entry.user_agent = fields[4];
    entry.remote_addr = fields[5];
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::vector<std::string> StaticHttpServer::RequestedPaths() const {
  std::vector<std::string> paths;
  for (const AccessLogEntry& entry : Requests()) paths.push_back(entry.path);
  return paths;
}

int StaticHttpServer::CountRequests(std::string_view path) const {
  int count = 0;
  for (const AccessLogEntry& entry : Requests()) count += entry.path == path ? 1 : 0;
  return count;
}

void StaticHttpServer::ClearAccessLog() {
  std::error_code ignored;
  std::filesystem::resize_file(dir_.File("access.log"), 0, ignored);
}

bool StaticHttpServer::running() const { return process_ && process_->running(); }

void StaticHttpServer::Stop() {
  if (process_) process_->Stop();
}

}  // namespace hotfix::testsupport
