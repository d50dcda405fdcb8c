/* braid-ps: the server: a listening socket, an acceptor thread and N epoll worker threads that
 * run the protocol of session.h over TCP.  Usable in-process (the unit tests do).
 *
 * Threads: the acceptor hands each new connection to the workers in turn (round robin); a
 * worker owns its connections (reads them, writes what other threads left queued when they
 * become writable, runs their timeouts).  A session's partitions are shared by the workers of its
 * members under the session's own mutex; the reduction runs on the worker that received the
 * last input, outside any lock. */
#ifndef BRAID_PS_SERVER_H
#define BRAID_PS_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "session.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ps_server_opts {
  const char *listen;         /* "ADDR:PORT", "[IPv6]:PORT" or "*:PORT"; port 0 picks one */
  int threads;                /* workers (0: min(4, online CPUs)) */
  const char *token;          /* required */
  uint64_t max_memory;        /* 0: 4 GiB */
  double join_timeout_s;      /* 0: 60 s */
  double handshake_timeout_s; /* a connection must prove the token within this (0: 5 s) */
  int max_pending;            /* connections that have not proven the token yet, at most this
                                 many; more are refused at once (0: 128) */
  int require_frame_auth;     /* refuse heads without frame authentication */
  double linger_s;            /* 0: 1 s */
  int verbose;                /* log per-connection events */
  int quiet;                  /* log nothing */
};

struct ps_server;

/* Listening and running when it returns; NULL with a message in err otherwise. */
struct ps_server *ps_server_start(const struct ps_server_opts *o, char *err, size_t errlen);
int ps_server_port(const struct ps_server *s);
/* The bound address, numeric ("127.0.0.1", "::"). */
const char *ps_server_address(const struct ps_server *s);
int ps_server_threads(const struct ps_server *s);
/* Partition bytes (and records) allocated now, sessions open now, connections that have not
 * proven the token (yet). */
uint64_t ps_server_memory(struct ps_server *s);
int ps_server_sessions(struct ps_server *s);
int ps_server_pending(struct ps_server *s);
/* Closes every session and connection, stops the threads, frees everything. */
void ps_server_stop(struct ps_server *s);

/* The daemon's logger: one timestamped line on stderr. */
void ps_log_stderr(void *arg, int level, const char *msg);

#ifdef __cplusplus
}
#endif

#endif
