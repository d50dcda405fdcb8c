/* braid-ps: the summation server daemon: options, token, signals (the server is server.c). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "param.h"
#include "reduce.h"
#include "secret.h"
#include "server.h"

#define TOKEN_MAX PS_TOKEN_MAX

static const char usage[] =
    "usage: braid-ps --listen ADDR:PORT [--threads N] [--token-file FILE] [--max-memory BYTES]\n"
    "                [--join-timeout S] [--handshake-timeout S] [--max-pending N]\n"
    "                [--require-frame-auth] [--verbose]\n"
    "       braid-ps --bench-reduce [--bytes N] [--inputs K]\n"
    "\n"
    "braid-ps is a summation server for braid's CollNet (the BytePS architecture inside NCCL):\n"
    "the CollNet heads of a job (one per node) each push their part of an allreduce, cut into\n"
    "partitions; the server adds up every head's copy of a partition on its CPUs, in rank\n"
    "order (so the result is bitwise the same whatever order the inputs arrive in), and sends\n"
    "the result back to every head.  Run one or more per job, on hosts with spare CPU and\n"
    "network bandwidth; the heads spread the partitions over the servers by measured speed.\n"
    "\n"
    "Options:\n"
    "  --listen ADDR:PORT   address to listen on: an IPv4 address, [IPv6] or '*' (every\n"
    "                       address, IPv4 and IPv6); port 0 picks a free port.  Required.\n"
    "  --threads N          worker threads (default: min(4, online CPUs)); each owns the\n"
    "                       connections it is given, reductions run on them too.\n"
    "  --token-file FILE    file holding the job's secret token (trailing newline ignored);\n"
    "                       otherwise the environment variable BRAID_PS_TOKEN.  Required.\n"
    "  --max-memory BYTES   partition buffers of all sessions together (default 4G; suffixes\n"
    "                       K, M, G, T are powers of 1024).  A push that would go over it\n"
    "                       fails its session (ERROR, then closed); other sessions go on.\n"
    "  --join-timeout S     a session whose heads have not all joined within S seconds is\n"
    "                       closed (default 60).\n"
    "  --handshake-timeout S  a connection that has not proven the token within S seconds\n"
    "                       is dropped (default 5).\n"
    "  --max-pending N      at most N connections that have not proven the token yet\n"
    "                       (default 128); more are refused at once.\n"
    "  --require-frame-auth refuse heads that do not authenticate their frames\n"
    "                       (BRAID_PS_FRAME_AUTH=0 on the nodes).\n"
    "  -v, --verbose        also log every connection, join and close.\n"
    "  --bench-reduce       measure the reduction kernels on this CPU (and what frame\n"
    "                       authentication's tags cost next to them) and exit\n"
    "                       (--bytes N per input, default 64M; --inputs K, default 8).\n"
    "  -h, --help           this text.\n"
    "\n"
    "Token: the heads and the servers of a job share a secret token (the plugin reads it from\n"
    "BRAID_PS_TOKEN_FILE, else BRAID_PS_TOKEN).  It never crosses the network: the head proves\n"
    "it knows the token first (HMAC-SHA256 over both sides' fresh nonces and the HELLO), then\n"
    "the server; with frame authentication (the heads' BRAID_PS_FRAME_AUTH, on by default)\n"
    "every later frame carries a Poly1305 tag under a key of that connection.  Use a long\n"
    "random string, e.g. `openssl rand -hex 32`, and keep the token file readable by the\n"
    "server's user only.  Run braid-ps as a user of its own: it needs no privilege.\n"
    "\n"
    "What a client (CollNet head) must do, per connection (the protocol is ps_offload/proto.h):\n"
    "  1. send HELLO {version 2, session id, rank, nranks, nonce}; header flag bit 0 set when\n"
    "     the heads use hold-back completion (every head of a session must agree), bit 1 for\n"
    "     frame authentication;\n"
    "  2. answer CHALLENGE {nonce} with AUTH {proof} (connection to AUTH within 5 s), then\n"
    "     check the server's PROOF; with frame authentication, tag every later frame and\n"
    "     check the server's tags;\n"
    "  3. wait for READY, sent once all nranks heads of the session have authenticated\n"
    "     (REFUSE {reason} and a close instead when something is wrong);\n"
    "  4. per partition: PUSH {seq, part, dtype, op, rank} + data; RESULT comes back once every\n"
    "     rank pushed it; with hold-back, answer DONE and wait for RELEASE.\n"
    "Anything out of place, a head that disconnects, or a memory limit hit closes every\n"
    "connection of that session at once (ERROR first, when possible); the heads then re-route\n"
    "to the other servers.  Other sessions are not affected.\n"
    "\n"
    "Logs go to stderr; one line per session close with its statistics.  SIGINT or SIGTERM:\n"
    "close every session and exit 0.\n";

/* "4G", "512M", "1048576" -> bytes; -1 when it does not parse. */
static int parse_bytes(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno || s[0] == '-') return -1;
  unsigned shift = 0;
  if (*end) {
    switch (*end) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: return -1;
    }
    end++;
    if (!strcasecmp(end, "ib") || !strcasecmp(end, "b")) end += strlen(end);
    if (*end) return -1;
  }
  if (shift && v > (UINT64_MAX >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

/* The token from --token-file or BRAID_PS_TOKEN into buf; -1 with a message printed. */
static int load_token(const char *file, char *buf, size_t n) {
  if (file) {
    FILE *f = fopen(file, "r");
    if (!f) {
      fprintf(stderr, "braid-ps: cannot read the token file %s: %s\n", file, strerror(errno));
      return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
      fprintf(stderr, "braid-ps: warning: token file %s is readable by other users (chmod 600)\n",
              file);
    size_t got = fread(buf, 1, n - 1, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    if (more) {
      fprintf(stderr, "braid-ps: token file %s is longer than %zu bytes\n", file, n - 1);
      return -1;
    }
    buf[got] = 0;
    if (strlen(buf) != got) {
      fprintf(stderr, "braid-ps: token file %s contains a NUL byte\n", file);
      return -1;
    }
  } else {
    const char *env = braid_param_env(BRAID_P_PS_TOKEN);
    if (!env || !*env) {
      fprintf(stderr, "braid-ps: no token: give --token-file FILE or set BRAID_PS_TOKEN (the job's "
                      "secret, the same one the heads have in BRAID_PS_TOKEN)\n");
      return -1;
    }
    if (strlen(env) >= n) {
      fprintf(stderr, "braid-ps: BRAID_PS_TOKEN is longer than %zu bytes\n", n - 1);
      return -1;
    }
    snprintf(buf, n, "%s", env);
  }
  size_t len = strlen(buf);
  while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) buf[--len] = 0;
  if (!len) {
    fprintf(stderr, "braid-ps: the token is empty\n");
    return -1;
  }
  if (len < 16) fprintf(stderr, "braid-ps: warning: the token is short (%zu bytes); use 32+ random bytes\n", len);
  return 0;
}

enum { OPT_LISTEN = 1, OPT_THREADS, OPT_TOKEN_FILE, OPT_MAX_MEMORY, OPT_JOIN_TIMEOUT, OPT_VERBOSE,
       OPT_BENCH, OPT_BYTES, OPT_INPUTS, OPT_HELP, OPT_HS_TIMEOUT, OPT_MAX_PENDING, OPT_REQ_AUTH };

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"listen", required_argument, NULL, OPT_LISTEN},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
      {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
      {"join-timeout", required_argument, NULL, OPT_JOIN_TIMEOUT},
      {"handshake-timeout", required_argument, NULL, OPT_HS_TIMEOUT},
      {"max-pending", required_argument, NULL, OPT_MAX_PENDING},
      {"require-frame-auth", no_argument, NULL, OPT_REQ_AUTH},
      {"verbose", no_argument, NULL, OPT_VERBOSE},
      {"bench-reduce", no_argument, NULL, OPT_BENCH},
      {"bytes", required_argument, NULL, OPT_BYTES},
      {"inputs", required_argument, NULL, OPT_INPUTS},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0},
  };
  struct ps_server_opts o = {0};
  const char *token_file = NULL;
  int bench = 0;
  uint64_t bench_bytes = 0;
  long bench_inputs = 0, threads = 0, max_pending = 0;
  int opt;
  while ((opt = getopt_long(argc, argv, "hv", longopts, NULL)) != -1) {
    switch (opt) {
    case OPT_LISTEN: o.listen = optarg; break;
    case OPT_THREADS:
      if (parse_int(optarg, 1, 256, &threads) != 0) {
        fprintf(stderr, "braid-ps: --threads %s: expected 1..256\n", optarg);
        return 2;
      }
      o.threads = (int)threads;
      break;
    case OPT_TOKEN_FILE: token_file = optarg; break;
    case OPT_MAX_MEMORY:
      if (parse_bytes(optarg, &o.max_memory) != 0 || o.max_memory < (1u << 20)) {
        fprintf(stderr, "braid-ps: --max-memory %s: expected bytes (at least 1M; K/M/G/T suffix)\n", optarg);
        return 2;
      }
      break;
    case OPT_JOIN_TIMEOUT: {
      char *end;
      o.join_timeout_s = strtod(optarg, &end);
      if (end == optarg || *end || !(o.join_timeout_s > 0) || o.join_timeout_s > 86400) {
        fprintf(stderr, "braid-ps: --join-timeout %s: expected seconds (0 < S <= 86400)\n", optarg);
        return 2;
      }
      break;
    }
    case OPT_HS_TIMEOUT: {
      char *end;
      o.handshake_timeout_s = strtod(optarg, &end);
      if (end == optarg || *end || !(o.handshake_timeout_s > 0) || o.handshake_timeout_s > 3600) {
        fprintf(stderr, "braid-ps: --handshake-timeout %s: expected seconds (0 < S <= 3600)\n", optarg);
        return 2;
      }
      break;
    }
    case OPT_MAX_PENDING:
      if (parse_int(optarg, 1, 1000000, &max_pending) != 0) {
        fprintf(stderr, "braid-ps: --max-pending %s: expected 1..1000000\n", optarg);
        return 2;
      }
      o.max_pending = (int)max_pending;
      break;
    case OPT_REQ_AUTH: o.require_frame_auth = 1; break;
    case 'v':
    case OPT_VERBOSE: o.verbose = 1; break;
    case OPT_BENCH: bench = 1; break;
    case OPT_BYTES:
      if (parse_bytes(optarg, &bench_bytes) != 0 || bench_bytes == 0) {
        fprintf(stderr, "braid-ps: --bytes %s: expected a positive size\n", optarg);
        return 2;
      }
      break;
    case OPT_INPUTS:
      if (parse_int(optarg, 1, 4096, &bench_inputs) != 0) {
        fprintf(stderr, "braid-ps: --inputs %s: expected 1..4096\n", optarg);
        return 2;
      }
      break;
    case 'h':
    case OPT_HELP: fputs(usage, stdout); return 0;
    default: fputs(usage, stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "braid-ps: unexpected argument '%s' (see --help)\n", argv[optind]);
    return 2;
  }
  if (bench) return braid_reduce_bench(stdout, bench_bytes, (int)bench_inputs, 0) == 0 ? 0 : 1;
  if (!o.listen) {
    fprintf(stderr, "braid-ps: --listen ADDR:PORT is required (see --help)\n");
    return 2;
  }
  if (geteuid() == 0)
    fprintf(stderr, "braid-ps: warning: running as root; braid-ps needs no privilege at all: run it as a "
                    "user of its own (the Debian package's service does; docs/braid-ps.md)\n");
  char *token = braid_secret_alloc(TOKEN_MAX + 1); /* out of core dumps and swap */
  if (!token) {
    fprintf(stderr, "braid-ps: no memory for the token\n");
    return 1;
  }
  if (load_token(token_file, token, TOKEN_MAX + 1) != 0) return braid_secret_free(token, TOKEN_MAX + 1), 2;
  o.token = token;

  /* Every thread inherits the mask; this one waits for the signals. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  char err[256];
  struct ps_server *s = ps_server_start(&o, err, sizeof err);
  if (!s) {
    fprintf(stderr, "braid-ps: %s\n", err);
    return 1;
  }
  const char *addr = ps_server_address(s);
  int v6 = strchr(addr, ':') != NULL;
  uint64_t mem = o.max_memory ? o.max_memory : 4ull << 30;
  printf("braid-ps listening on %s%s%s:%d (%d threads, reduction %s, max memory %.1f GiB, join "
         "timeout %g s)\n",
         v6 ? "[" : "", addr, v6 ? "]" : "", ps_server_port(s), ps_server_threads(s),
         braid_reduce_impl(), (double)mem / (1ull << 30), o.join_timeout_s > 0 ? o.join_timeout_s : 60.0);
  fflush(stdout);

  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  ps_log_stderr(NULL, PS_LOG_INFO, sig == SIGINT ? "SIGINT: shutting down" : "SIGTERM: shutting down");
  ps_server_stop(s);
  braid_secret_free(token, TOKEN_MAX + 1);
  return 0;
}
