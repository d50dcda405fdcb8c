/* CollNet internals shared by collnet.c (set-up) and collnet_op.c (operations). */
#ifndef BRAID_COLLNET_INT_H
#define BRAID_COLLNET_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "assign.h"
#include "auth.h"
#include "clock.h"
#include "proto.h"
#include "stripe/telemetry.h"
#include "topo/devices.h" /* BRAID_MAX_RAILS, struct braid_iface */

/* Operations one head may have issued and not yet reported done; also the distance at which
 * rank 0's weights take effect (every head has received op seq's results before it may issue op
 * seq + PS_WINDOW).  The same on every head by construction. */
#define PS_WINDOW 32

enum part_state { PART_QUEUED, PART_PUSHED, PART_RESULT, PART_RELEASED };

struct ps_part {
  size_t off, len;
  int server;
  uint8_t state;
  uint8_t had_result;      /* a RESULT arrived once (from any server): this head holds it */
  uint8_t release_pending; /* RELEASE came while our re-sent PUSH was still being written */
};

/* A completed operation whose slot was reused: where its partitions ended up, so that after
 * losing a server this head can tell the replacement which of them it completed (GONE). */
struct ps_hist {
  uint64_t seq;
  uint32_t nparts, cap;
  int8_t *srv;
  int valid;
};

struct braid_collcomm;

struct ps_op {
  uint32_t magic;
  struct braid_collcomm *cc; /* owner */
  int used;        /* issued and not yet reported done by test() */
  int complete;    /* every partition released */
  int failed;      /* unrecoverable: test() reports an error */
  uint64_t seq;
  const char *send;
  char *recv;
  char *stage;     /* private copy of the input when send and recv overlap */
  size_t bytes;
  int dtype, op;
  uint32_t nparts, ndone;
  struct ps_part *parts;
  int parts_cap;
  uint8_t weights[PS_MAX_SERVERS];      /* used to assign this op's partitions */
  uint8_t attach[PS_MAX_SERVERS];       /* rank 0: its estimate, on every push of this op (re-sends
                                           too, so every RESULT of the op carries the same) */
  uint8_t next_weights[PS_MAX_SERVERS]; /* rank 0's, from this op's results: for seq + PS_WINDOW */
  /* The admission word (collnet_rejoin.c) that goes with the weights: the one this op was issued
   * under, rank 0's attached to its pushes, and rank 0's from its results. */
  uint8_t admit, attach_admit, next_admit;
  int have_next;
  uint64_t t_issue;
  void *out_mh;     /* the result's memory handle: copied out of its staging when complete */
  char *out_gpu;
};

/* One queued output frame: a header, then optionally len bytes at data (an op's input). */
struct ps_out {
  uint8_t hdr[PS_HDR_BYTES];
  const char *data;
  size_t len, done; /* bytes of header + data (+ tag) written so far */
  uint64_t seq;
  uint32_t part;
  int sealed;       /* started: its place in the stream (and its tag) is fixed */
  uint8_t tag[PS_TAG_BYTES];
};

struct ps_queue {
  struct ps_out *q;
  size_t cap, head, len;
};

struct ps_hs;
struct ps_rejoin;

struct ps_srv {
  int fd;
  int lost;
  char name[96];
  const char *host, *port; /* BRAID_PS_SERVERS' (kept for the life of the process) */
  struct sockaddr_storage addr; /* resolved once (addrlen 0: not yet) */
  socklen_t addrlen;
  int echo_admit;          /* its READY said it echoes the admission word (PS_FLAG_ECHO_ADMIT) */
  /* Re-admission after a loss (collnet_rejoin.c). */
  struct ps_rejoin *rj;    /* a handshake with a new session under way, or standing by */
  uint64_t rj_at, rj_wait; /* the next step or attempt, and the back-off */
  uint32_t gen;            /* the session generation this head joins next (0: the set-up's):
                              moved on whenever a session this head was in closes */
  int standby;             /* rj is READY: every head joined; waits for rank 0's admission */
  int announced;           /* rank 0: its admission is on its way (attached to pushes) */
  uint64_t admit_seq;      /* operations from this one on may use it (reroute targets) */
  uint64_t lost_seq, lost_ns, standby_seq, standby_ns; /* for the re-admission's log line */
  uint64_t rejoins;
  /* Control frames (DONE) go ahead of queued PUSHes at the next frame boundary, so an
   * operation's completion never waits behind later operations' data. */
  struct ps_queue data, ctl;
  /* input: a header, then a payload into `dst`, then (frame authentication) a tag */
  uint8_t ib[PS_HDR_BYTES];
  size_t igot;
  struct ps_hdr ih;
  char *dst;
  size_t pgot;
  uint8_t itag[PS_TAG_BYTES];
  size_t tgot;
  /* frame authentication (BRAID_PS_FRAME_AUTH): the connection's key, frame numbers */
  int auth;
  uint8_t key[PS_KEY_BYTES];
  uint64_t tx_seq, rx_seq;
  struct ps_mac rmac;
  char text[PS_MAX_TEXT + 1];
  uint64_t parts, bytes_out, bytes_in;
  struct braid_server_stats *stats; /* telemetry (NULL: not reported) */
};

#define COLL_MAGIC 0x43535042u /* "BPSC": a live braid_collcomm */

/* Registered buffers (collnet.c).  The address operations read p's len bytes from, or write
 * them to: p for host memory, its host copy for GPU memory, copied in first for an input.  NULL
 * (with a WARN) for an invalid handle, a range outside the registration or a failed copy. */
char *braid_coll_mr_host(void *mh, void *p, size_t len, int input);
/* Once an operation completed: its result copied from the host copy to GPU memory p (nothing to
 * do for host memory); 0, or -1 with a WARN. */
int braid_coll_mr_done(void *mh, void *p, size_t len);

struct braid_collcomm {
  uint32_t magic;
  pthread_mutex_t mu; /* NCCL's calls and the idle progress of braid_coll_idle_progress */
  int rank, nranks, nservers, dev;
  int hold;
  int equal_weights; /* BRAID_PS_WEIGHTING=equal */
  size_t part_bytes;
  uint8_t session[PS_SESSION_BYTES];
  struct ps_srv srv[PS_MAX_SERVERS];
  uint32_t lost;
  uint64_t seq;
  struct ps_op ops[PS_WINDOW];
  struct ps_hist hist[PS_WINDOW]; /* the PS_WINDOW operations before those in ops[] */
  struct ps_rate rate[PS_MAX_SERVERS]; /* each server's throughput as this head sees it */
  uint8_t my_weights[PS_MAX_SERVERS]; /* rank 0: its current estimate, attached to its pushes */
  uint8_t admit;                      /* the admission word of the operation issued last */
  uint8_t my_admit;                   /* rank 0: the admission word it attaches */
  const struct braid_iface *rails[BRAID_MAX_RAILS]; /* the device's, for new connections */
  int nrails;
  struct ps_piece *layout;            /* the layout of the op being issued (ps_layout) */
  uint32_t layout_cap;
  uint8_t logged_weights[PS_MAX_SERVERS];
  uint64_t last_weights_log_ns;
  int all_lost_warned;
  int poisoned, poison_warned; /* an op failed: no further ops (see op_fail) */
  uint64_t nops, reroutes, bytes;
  uint64_t t_open;
};

/* The job's token into buf (BRAID_PS_TOKEN_FILE's first line, else BRAID_PS_TOKEN): 1, 0 when
 * neither is set, -1 (WARN) when it cannot be read (collnet.c). */
int braid_coll_token(char *buf, size_t n);

/* ---- re-admission of lost servers (collnet_rejoin.c) ----
 *
 * A lost server is reconnected with back-off (100 ms doubling to 5 s) into a new session, whose
 * id is the set-up's with the server's generation mixed in (moved on whenever a session with it
 * closes, which every member sees), so that a server that stayed up (a network cut) takes the
 * heads back too.  The server answers READY once every head joined; the server then stands by.
 * Rank 0 alone decides when a standing-by server is used again: it attaches an admission word
 * ((generation mod 16) << 4 | server) to its pushes, which the servers echo on every RESULT with
 * the weights; every head issues operation seq under the word of operation seq - PS_WINDOW, as it
 * does the weights, and where the word changes admits the server if it stands by in that very
 * generation's session.  So every head that uses it again does so from the same operation, one
 * that cannot closes its connection to that session (the server then closes it for all, and they
 * lose it again alike), and every head reroutes the partitions of earlier operations as if it
 * were still lost. */

/* Sets up h for a handshake with server i of cc for the given session. */
void ps_client_hs_init(struct braid_collcomm *cc, struct ps_hs *h, int i, const uint8_t session[PS_SESSION_BYTES]);
/* Takes over a READY handshake's connection as server i's. */
void ps_client_adopt(struct braid_collcomm *cc, int i, struct ps_hs *h);
/* Servers lost to operation seq: lost now, or re-admitted only at a later operation. */
uint32_t ps_client_lost_for(const struct braid_collcomm *cc, uint64_t seq);
/* Server i was lost: its re-admission starts (with back-off). */
void ps_rejoin_lost(struct braid_collcomm *cc, int i, uint64_t now);
/* Steps the handshakes of lost servers and watches the standing-by ones. */
void ps_rejoin_progress(struct braid_collcomm *cc, uint64_t now);
/* At the issue of operation seq under admission word `admit`: re-admits the server it names when
 * it changed. */
void ps_rejoin_admit(struct braid_collcomm *cc, uint64_t seq, uint8_t admit);
/* Rank 0: announces a standing-by server (the admission word it attaches from now on, when no
 * other admission is on its way and every server it holds echoes the word) and returns the
 * servers its weights may give work to although they are lost: the one announced. */
uint32_t ps_rejoin_standby(struct braid_collcomm *cc);
/* Frees what re-admission holds. */
void ps_rejoin_teardown(struct braid_collcomm *cc);

/* p as a live collComm, or NULL after a WARN naming the call (what). */
struct braid_collcomm *braid_collcomm_check(void *p, const char *what);
/* Marks server s lost (closes it) and re-routes or fails what it held. */
void ps_client_lose(struct braid_collcomm *cc, int s, const char *why);
/* Adds (on) or removes a collComm from the ones braid_coll_idle_progress() drives. */
void ps_client_register(struct braid_collcomm *cc, int on);
/* Frees every op and closes every server connection. */
void ps_client_teardown(struct braid_collcomm *cc);

#endif
