#include "nginx.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "ports.h"
#include "subprocess.h"

#ifndef LP_DEFAULT_SOURCE_DIR
#define LP_DEFAULT_SOURCE_DIR "."
#endif

namespace hotfix::testsupport {
namespace {

constexpr int kStartAttempts = 3;  // another process may take the picked port
constexpr auto kStartTimeout = std::chrono::seconds(15);

}  // namespace

std::string Nginx::DefaultBinary() {
  const char* bin = std::getenv("LP_NGINX_BIN");
  if (bin != nullptr && *bin != '\0') return bin;
  return std::filesystem::exists("/usr/sbin/nginx") ? "/usr/sbin/nginx" : "nginx";
}

std::filesystem::path Nginx::ReferenceConfig() {
  const char* dir = std::getenv("LP_SOURCE_DIR");
  std::filesystem::path source = dir != nullptr && *dir != '\0' ? dir : LP_DEFAULT_SOURCE_DIR;
  return source / "deploy" / "nginx" / "nginx.conf";
}

Nginx::Nginx(const std::string& service_addr, const std::string& apiserver_addr,
             bool send_proxy_protocol)
    : service_addr_(service_addr),
      apiserver_addr_(apiserver_addr),
      send_proxy_protocol_(send_proxy_protocol) {
  std::filesystem::copy_file(ReferenceConfig(), dir_.File("nginx.conf"));
  dir_.Write("lp-proxy-protocol.conf",
             send_proxy_protocol ? "proxy_protocol on;\n" : "proxy_protocol off;\n");
  std::string failure;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    if (TryStart(PickFreePort(), &failure)) return;
  }
  throw std::runtime_error("nginx did not start: " + failure);
}

Nginx::~Nginx() = default;

std::string Nginx::Log() const { return process_ ? process_->Stdout() + process_->Stderr() : ""; }

std::vector<std::string> Nginx::Argv(const std::vector<std::string>& extra) const {
  std::vector<std::string> argv = {DefaultBinary()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::vector<std::string> rest = {
      "-p", dir_.path().string(),
      "-c", dir_.File("nginx.conf").string(),
      "-e", "stderr",
      "-g", "daemon off; pid " + dir_.File("nginx.pid").string() + ";"};
  argv.insert(argv.end(), rest.begin(), rest.end());
  return argv;
}

bool Nginx::TryStart(uint16_t port, std::string* failure) {
  dir_.Write("lp-listen.conf", "listen 127.0.0.1:" + std::to_string(port) + ";\n");
  const std::string hop = "127.0.0.1:" + std::to_string(PickFreePort());
  dir_.Write("lp-upstreams.conf", "upstream live_patching { server " + service_addr_ +
                                      "; }\nupstream apiserver { server " + apiserver_addr_ +
                                      "; }\nupstream apiserver_hop { server " + hop + "; }\n");
  dir_.Write("lp-apiserver-hop.conf",
             "listen " + hop + (send_proxy_protocol_ ? " proxy_protocol;\n" : ";\n"));
  SpawnOptions spawn;
  spawn.argv = Argv();
  process_ = std::make_unique<Subprocess>(std::move(spawn));
  if (WaitUntilListening(port, kStartTimeout, [this] { return process_->running(); }) &&
      process_->running()) {
    port_ = port;
    return true;
  }
  *failure = process_->Stop().ToString() + ": " + process_->Stderr();
  process_.reset();
  return false;
}

}  // namespace hotfix::testsupport
