// connhold: holds thousands of idle and slow TLS connections open against a server (or the
// ALPN proxy in front of it) from one small process, for bench/soak.sh. One openssl s_client
// per connection would cost more memory than the server under test.
//
//   connhold HOST PORT SNI [--idle N] [--silent N] [--slow N] [--hello N]
//            [--interval-ms MS] [--report-s S]
//
//   --idle N    TLS (ALPN aks-live-patching,h2), then the HTTP/2 client preface and an empty
//               SETTINGS frame, then nothing: a well-formed connection that never calls.
//   --silent N  TLS, then nothing at all (no preface).
//   --slow N    TLS, then the HTTP/2 preface one byte every --interval-ms (slowloris).
//   --hello N   no handshake: a real TLS ClientHello sent one byte every --interval-ms.
//   --interval-ms  default 5000. --report-s: a status line every S seconds (default 10).
//
// Prints "open <total>" once every connection is up, then status lines
// "held idle=... silent=... slow=... hello=... closed_by_peer=... reopened=..." and the same
// line with "final" when stdin reaches EOF (the caller closes its end to stop it) or on
// SIGTERM. A connection the peer closes is counted and opened again, so the pressure holds.
//
// Build: cc -O2 -o connhold bench/connhold.c -lssl -lcrypto
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum kind { IDLE, SILENT, SLOW, HELLO, KINDS };
static const char* kKindNames[KINDS] = {"idle", "silent", "slow", "hello"};
static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
static const unsigned char kSettings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
static const unsigned char kAlpn[] = {17,  'a', 'k', 's', '-', 'l', 'i', 'v', 'e', '-', 'p',
                                      'a', 't', 'c', 'h', 'i', 'n', 'g', 2,   'h', '2'};

struct conn {
  int fd;
  SSL* ssl;
  enum kind kind;
  size_t sent;  // bytes of the dribbled message sent so far
};

static struct sockaddr_in g_addr;
static const char* g_sni;
static SSL_CTX* g_ctx;
static unsigned char* g_hello;  // a ClientHello, for --hello
static size_t g_hello_len;
static volatile sig_atomic_t g_stop;
static long g_closed, g_reopened, g_failed_opens;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int tcp_connect(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct timeval tv = {10, 0};  // blocking handshakes, but never forever
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr*)&g_addr, sizeof g_addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void drop(struct conn* c) {
  if (c->ssl) SSL_free(c->ssl);
  if (c->fd >= 0) close(c->fd);
  c->ssl = NULL;
  c->fd = -1;
}

// Opens c as its kind says; 0 on success.
static int open_conn(struct conn* c) {
  c->sent = 0;
  c->fd = tcp_connect();
  if (c->fd < 0) return -1;
  if (c->kind == HELLO) return 0;
  c->ssl = SSL_new(g_ctx);
  SSL_set_fd(c->ssl, c->fd);
  SSL_set_tlsext_host_name(c->ssl, g_sni);
  if (SSL_connect(c->ssl) != 1) {
    ERR_clear_error();
    drop(c);
    return -1;
  }
  if (c->kind == IDLE) {
    if (SSL_write(c->ssl, kPreface, (int)strlen(kPreface)) <= 0 ||
        SSL_write(c->ssl, kSettings, sizeof kSettings) <= 0) {
      drop(c);
      return -1;
    }
  }
  // Reads are polled from here on; the peer's SETTINGS and pings are read and discarded.
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  return 0;
}

// One more byte of the slow message; 0 while the connection lives.
static int dribble(struct conn* c) {
  if (c->kind == SLOW && c->sent < strlen(kPreface)) {
    if (SSL_write(c->ssl, kPreface + c->sent, 1) <= 0) return -1;
    c->sent++;
  } else if (c->kind == HELLO && c->sent < g_hello_len) {
    if (send(c->fd, g_hello + c->sent, 1, MSG_NOSIGNAL) != 1) return -1;
    c->sent++;
  }
  return 0;
}

// Reads what arrived; -1 when the peer closed or reset the connection.
static int drain(struct conn* c) {
  char buf[4096];
  if (c->ssl) {
    for (;;) {
      int n = SSL_read(c->ssl, buf, sizeof buf);
      if (n > 0) continue;
      int e = SSL_get_error(c->ssl, n);
      ERR_clear_error();
      return (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) ? 0 : -1;
    }
  }
  for (;;) {
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
}

static void make_hello(void) {
  SSL* ssl = SSL_new(g_ctx);
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, rbio, wbio);
  SSL_set_tlsext_host_name(ssl, g_sni);
  SSL_connect(ssl);  // wants to read the ServerHello; the ClientHello is in wbio
  char* data = NULL;
  long n = BIO_get_mem_data(wbio, &data);
  g_hello = malloc((size_t)n);
  memcpy(g_hello, data, (size_t)n);
  g_hello_len = (size_t)n;
  SSL_free(ssl);
  ERR_clear_error();
}

static void report(const char* what, struct conn* conns, int total) {
  int held[KINDS] = {0};
  for (int i = 0; i < total; i++) {
    if (conns[i].fd >= 0) held[conns[i].kind]++;
  }
  printf("%s idle=%d silent=%d slow=%d hello=%d closed_by_peer=%ld reopened=%ld failed_opens=%ld\n",
         what, held[IDLE], held[SILENT], held[SLOW], held[HELLO], g_closed, g_reopened,
         g_failed_opens);
  fflush(stdout);
}

static void on_term(int sig) {
  (void)sig;
  g_stop = 1;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr,
            "usage: connhold HOST PORT SNI [--idle N] [--silent N] [--slow N] "
            "[--hello N] [--interval-ms MS] [--report-s S]\n");
    return 2;
  }
  int want[KINDS] = {0};
  long interval_ms = 5000, report_s = 10;
  for (int i = 4; i + 1 < argc; i += 2) {
    long v = atol(argv[i + 1]);
    if (strcmp(argv[i], "--idle") == 0)
      want[IDLE] = (int)v;
    else if (strcmp(argv[i], "--silent") == 0)
      want[SILENT] = (int)v;
    else if (strcmp(argv[i], "--slow") == 0)
      want[SLOW] = (int)v;
    else if (strcmp(argv[i], "--hello") == 0)
      want[HELLO] = (int)v;
    else if (strcmp(argv[i], "--interval-ms") == 0)
      interval_ms = v;
    else if (strcmp(argv[i], "--report-s") == 0)
      report_s = v;
    else {
      fprintf(stderr, "connhold: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  memset(&g_addr, 0, sizeof g_addr);
  g_addr.sin_family = AF_INET;
  g_addr.sin_port = htons((unsigned short)atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &g_addr.sin_addr) != 1) {
    fprintf(stderr, "connhold: HOST must be a numeric IPv4 address\n");
    return 2;
  }
  g_sni = argv[3];
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);

  g_ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(g_ctx, SSL_VERIFY_NONE, NULL);  // holding connections, not trusting them
  SSL_CTX_set_alpn_protos(g_ctx, kAlpn, sizeof kAlpn);
  make_hello();

  int total = want[IDLE] + want[SILENT] + want[SLOW] + want[HELLO];
  struct conn* conns = calloc((size_t)total + 1, sizeof *conns);
  struct pollfd* pfds = calloc((size_t)total + 1, sizeof *pfds);
  int n = 0;
  for (int k = 0; k < KINDS; k++) {
    for (int i = 0; i < want[k]; i++, n++) {
      conns[n].kind = (enum kind)k;
      conns[n].fd = -1;
      if (open_conn(&conns[n]) != 0) {
        fprintf(stderr, "connhold: could not open %s connection %d: %s\n", kKindNames[k], i,
                strerror(errno));
        return 1;
      }
    }
  }
  printf("open %d\n", total);
  fflush(stdout);

  double next_dribble = now_s() + (double)interval_ms / 1000.0;
  double next_report = now_s() + (double)report_s;
  while (!g_stop) {
    for (int i = 0; i < total; i++) {
      pfds[i].fd = conns[i].fd;
      pfds[i].events = POLLIN;
      pfds[i].revents = 0;
    }
    pfds[total].fd = 0;  // stdin: EOF means stop
    pfds[total].events = POLLIN;
    pfds[total].revents = 0;
    if (poll(pfds, (nfds_t)total + 1, 200) < 0 && errno != EINTR) break;
    if (pfds[total].revents) {
      char b[64];
      if (read(0, b, sizeof b) <= 0) break;
    }
    int tick = now_s() >= next_dribble;
    if (tick) next_dribble += (double)interval_ms / 1000.0;
    for (int i = 0; i < total; i++) {
      struct conn* c = &conns[i];
      int dead = c->fd < 0;
      if (!dead && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) dead = drain(c) != 0;
      if (!dead && tick) dead = dribble(c) != 0;
      if (!dead) continue;
      if (c->fd >= 0) g_closed++;
      drop(c);
      if (open_conn(c) == 0) {
        g_reopened++;
      } else {
        g_failed_opens++;
      }
    }
    if (now_s() >= next_report) {
      next_report += (double)report_s;
      report("held", conns, total);
    }
  }
  report("final", conns, total);
  return 0;
}
