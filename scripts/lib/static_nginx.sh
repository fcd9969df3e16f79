# shellcheck shell=bash
# Sourced by scripts/demo.sh and bench/fast_path_bench.sh: Debian's nginx serving a folder over
# plain HTTP on loopback, as the user running it, in the foreground, one process, everything it
# writes in its own folder (the configuration tests/support/static_http_server.cc writes for the
# tests).
#   static_nginx_conf DIR ROOT PORT   writes DIR/nginx.conf: ROOT served on 127.0.0.1:PORT, the
#                                     access log (method, URI, status, bytes, user agent) in
#                                     DIR/access.log
#   then: nginx -p DIR -c DIR/nginx.conf -e stderr &
static_nginx_conf() {
  local dir=$1 www=$2 port=$3
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<NGINX
master_process off;
daemon off;
pid $dir/nginx.pid;
error_log stderr notice;
events { worker_connections 256; }
http {
  default_type application/octet-stream;
  log_format repo '\$request_method \$request_uri \$status \$body_bytes_sent "\$http_user_agent"';
  access_log $dir/access.log repo;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  server_tokens off;
  sendfile on;
  keepalive_timeout 5s;
  server {
    listen 127.0.0.1:$port;
    root $www;
  }
}
NGINX
}
