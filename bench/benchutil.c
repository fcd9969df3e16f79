// benchutil: the two small things bench/client_bench.sh needs that the shell cannot do well.
//
//   benchutil run [--stdout FILE] [--stderr FILE] -- PROG ARGS...
//     Runs PROG once and prints "<wall_us> <maxrss_kb> <exit>" on stdout.
//     wall: CLOCK_MONOTONIC around posix_spawn .. wait4, so it covers exec, dynamic linking,
//     the run and exit (microseconds; `date +%s%N` in bash would add a fork of date).
//     maxrss: ru_maxrss of the child from wait4 (kB), i.e. its peak resident set. The floor
//     is this helper's own few hundred kB (the spawned child starts from our image).
//     exit: the exit code, or 128+signal.
//
//   benchutil silent HOST PORT
//     A "silent peer": listens, accepts every connection, reads and discards what arrives
//     and never writes a byte. Closes a connection when the peer does. Runs until killed.
//
// Build: cc -O2 -o benchutil bench/benchutil.c
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static int usage(void) {
  fprintf(stderr,
          "usage: benchutil run [--stdout FILE] [--stderr FILE] -- PROG ARGS...\n"
          "       benchutil silent HOST PORT\n");
  return 2;
}

static int run(int argc, char** argv) {
  const char* out = "/dev/null";
  const char* err = "/dev/null";
  int i = 0;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    }
    if (i + 1 < argc && strcmp(argv[i], "--stdout") == 0) {
      out = argv[++i];
      continue;
    }
    if (i + 1 < argc && strcmp(argv[i], "--stderr") == 0) {
      err = argv[++i];
      continue;
    }
    return usage();
  }
  if (i >= argc) return usage();

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

  struct timespec t0, t1;
  pid_t pid;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = posix_spawnp(&pid, argv[i], &fa, NULL, &argv[i], environ);
  if (rc != 0) {
    fprintf(stderr, "benchutil: spawn %s: %s\n", argv[i], strerror(rc));
    return 127;
  }
  int status = 0;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) {
      perror("benchutil: wait4");
      return 127;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  posix_spawn_file_actions_destroy(&fa);

  long long us = (long long)(t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  printf("%lld %ld %d\n", us, ru.ru_maxrss, code);
  return 0;
}

static int silent(const char* host, const char* port) {
  signal(SIGPIPE, SIG_IGN);
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(port))};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    fprintf(stderr, "bad host %s\n", host);
    return 2;
  }
  if (bind(ls, (struct sockaddr*)&a, sizeof a) < 0 || listen(ls, 128) < 0) {
    perror("benchutil silent: bind/listen");
    return 1;
  }
  enum { kMax = 256 };
  struct pollfd fds[kMax] = {{.fd = ls, .events = POLLIN}};
  int n = 1;
  char buf[4096];
  for (;;) {
    if (poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      perror("benchutil silent: poll");
      return 1;
    }
    for (int k = n - 1; k >= 1; k--) {
      if (!fds[k].revents) continue;
      ssize_t r = read(fds[k].fd, buf, sizeof buf);  // swallow the ClientHello / request
      if (r <= 0) {
        close(fds[k].fd);
        fds[k] = fds[--n];
      }
    }
    if (fds[0].revents & POLLIN) {
      int c = accept(ls, NULL, NULL);
      if (c >= 0 && n < kMax)
        fds[n++] = (struct pollfd){.fd = c, .events = POLLIN};
      else if (c >= 0)
        close(c);
    }
  }
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "run") == 0) return run(argc - 2, argv + 2);
  if (argc == 4 && strcmp(argv[1], "silent") == 0) return silent(argv[2], argv[3]);
  return usage();
}
