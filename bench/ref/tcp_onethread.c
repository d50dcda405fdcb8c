/*
 * tcp_onethread.c - reference for both directions at once when ONE thread per process must
 * drive both, as NCCL's proxy thread drives a rank's send and receive connections.
 *
 * Two processes on loopback, two one-way TCP connections (one per direction, as NCCL's comms).
 * Each process's single thread loops over non-blocking send() of --block bytes and recv() of
 * whatever has arrived, busy-polling, until --bytes have gone each way; repeated --iters times.
 * Prints the per-direction rate:
 *   RESULT mode=onethread block=131072 gbps_mean=2.9
 *
 * Build: cc -O2 -std=c11 -Wall -Wextra -Werror tcp_onethread.c -o tcp_onethread
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static size_t opt_block = 131072, opt_bytes = 64u << 20;
static int opt_iters = 20;

static void die(const char *what) {
  fprintf(stderr, "tcp_onethread: %s: %s\n", what, strerror(errno));
  exit(1);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int listen_any(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 4) ||
      getsockname(fd, (struct sockaddr *)&a, &len))
    die("listen");
  *port = ntohs(a.sin_port);
  return fd;
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) die("connect");
  return fd;
}

/* One iteration: opt_bytes each way, one thread, non-blocking both ways. */
static void exchange(int out, int in, char *sb, char *rb) {
  size_t so = 0, ro = 0;
  while (so < opt_bytes || ro < opt_bytes) {
    if (so < opt_bytes) {
      size_t k = opt_bytes - so < opt_block ? opt_bytes - so : opt_block;
      ssize_t n = send(out, sb + so, k, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) so += (size_t)n;
      else if (n < 0 && errno != EAGAIN) die("send");
    }
    if (ro < opt_bytes) {
      ssize_t n = recv(in, rb + ro, opt_bytes - ro, MSG_DONTWAIT);
      if (n > 0) ro += (size_t)n;
      else if (n == 0 || (n < 0 && errno != EAGAIN)) die("recv");
    }
  }
}

int main(int argc, char **argv) {
  static const struct option lo[] = {{"block", required_argument, 0, 'b'},
                                     {"bytes", required_argument, 0, 'n'},
                                     {"iters", required_argument, 0, 'i'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    switch (c) {
      case 'b': opt_block = strtoul(optarg, NULL, 0); break;
      case 'n': opt_bytes = strtoul(optarg, NULL, 0); break;
      case 'i': opt_iters = atoi(optarg); break;
      case 'h':
        printf("usage: tcp_onethread [--block 131072] [--bytes 67108864] [--iters 20]\n"
               "Both directions at once on loopback, one non-blocking thread per process.\n");
        return 0;
      default: return 2;
    }
  }
  if (!opt_block || !opt_bytes || opt_iters < 1) return 2;
  int p1, p2, l1 = listen_any(&p1), l2 = listen_any(&p2);
  pid_t pid = fork();
  if (pid < 0) die("fork");
  int child = pid == 0, out, in;
  if (child) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    out = connect_to(p1);
    in = accept(l2, NULL, NULL);
  } else {
    in = accept(l1, NULL, NULL);
    out = connect_to(p2);
  }
  if (in < 0) die("accept");
  char *sb = malloc(opt_bytes), *rb = malloc(opt_bytes);
  if (!sb || !rb) die("malloc");
  memset(sb, 1, opt_bytes);
  memset(rb, 0, opt_bytes);
  exchange(out, in, sb, rb); /* warm-up */
  double t0 = now();
  for (int i = 0; i < opt_iters; i++) exchange(out, in, sb, rb);
  double gbps = (double)opt_bytes * opt_iters / (now() - t0) / 1e9;
  if (child) _exit(0);
  int st;
  waitpid(pid, &st, 0);
  printf("RESULT mode=onethread block=%zu gbps_mean=%.3f\n", opt_block, gbps);
  return 0;
}
