/* The objects behind NCCL's opaque listen/send/recv comms and requests. */
#ifndef BRAID_COMM_H
#define BRAID_COMM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "nccl_plugin/common.h"
#include "wire.h"

#define BRAID_RECV_REQS 32            /* NCCL_NET_MAX_REQUESTS */
#define BRAID_MAX_RECVS 8             /* largest grouped receive */
#define BRAID_SEND_REQS (BRAID_RECV_REQS * BRAID_MAX_RECVS)
#define BRAID_MSG_WINDOW 1024         /* receive-side messages tracked at once (power of 2) */
#define BRAID_STAGE_BYTES 4096        /* receive staging: headers and small payloads */
#define BRAID_SEND_BATCH 16           /* frames written by one writev */

enum braid_comm_kind { BRAID_COMM_LISTEN = 0x4C, BRAID_COMM_SEND = 0x53, BRAID_COMM_RECV = 0x52 };
enum braid_req_kind { BRAID_REQ_FREE = 0, BRAID_REQ_SEND, BRAID_REQ_RECV };

struct braid_comm;

struct braid_recv_slot {
  char *buf;
  size_t cap;
  int tag;
  int64_t msg;   /* matched message sequence, -1 while unmatched */
  size_t size;   /* bytes the matched send carries */
  bool done;
};

struct braid_req {
  enum braid_req_kind kind;
  struct braid_comm *comm;
  int index; /* in the comm's pool */
  bool done;
  /* send */
  const char *data;
  size_t size, queued, sent; /* bytes cut into frames, bytes written */
  int frames_out;            /* frames cut but not yet fully written */
  bool all_queued;
  int tag;
  uint64_t seq;
  /* recv */
  int n, ndone;
  struct braid_recv_slot slot[BRAID_MAX_RECVS];
};

/* A send-side frame being written: header then payload. */
struct braid_txframe {
  struct braid_req *req;
  uint8_t hdr[BRAID_FRAME_HDR_BYTES];
  const char *payload;
  size_t len;
};

/* A message known to the receiver (matched to a slot, or unexpected and buffered). */
struct braid_rxmsg {
  int64_t seq; /* -1 when the entry is unused */
  size_t size, got;
  int tag;
  char *dest;              /* slot buffer, or the unexpected buffer */
  struct braid_req *req;   /* NULL while unexpected */
  int slot;
  char *unexpected;        /* owned copy buffer of an unexpected message */
};

struct braid_stream {
  int fd;
  /* send side */
  struct braid_txframe tx[BRAID_SEND_BATCH];
  int tx_head, tx_count;
  size_t tx_done; /* bytes of tx[tx_head] (header + payload) already written */
  /* receive side */
  uint8_t stage[BRAID_STAGE_BYTES];
  size_t stage_off, stage_len;
  bool in_frame;
  struct braid_frame frame;
  char *frame_dest;
  size_t frame_left;
  struct braid_rxmsg *frame_msg;
  uint64_t stall_since_ns; /* when bytes in flight stopped moving, 0 when moving */
  bool eof;                /* the peer closed this stream */
};

struct braid_comm {
  uint8_t kind;
  int dev;
  ncclResult_t err; /* sticky: once set, every call on the comm fails with it */
  char peer[64];    /* peer address for logs */
  int nrails;   /* rails in use; stream s runs on rail s % nrails */
  int nstreams;
  struct braid_stream *streams;
  struct braid_req *reqs;
  int nreqs;
  int *free_reqs, nfree;
  uint64_t timeout_ns;
  /* send side */
  uint64_t next_seq;
  struct braid_req **pending; /* sends not yet fully queued, FIFO ring */
  int pend_head, pend_count;
  size_t chunk;
  /* receive side */
  uint64_t next_match;           /* lowest sequence not yet matched or buffered */
  struct braid_rxmsg *msgs;      /* BRAID_MSG_WINDOW entries, by seq */
  struct braid_req *posted[BRAID_RECV_REQS]; /* receives with unmatched slots, posting order */
  int nposted;
  size_t unexpected_bytes, unexpected_max;
  int nunexpected; /* buffered messages not yet matched to a receive */
};

/* Allocation and teardown shared by setup and data path. */
struct braid_comm *braid_comm_new(enum braid_comm_kind kind, int dev, int nstreams);
void braid_comm_free(struct braid_comm *c);
/* Marks the comm failed (first cause wins) and logs one WARN naming the peer. */
ncclResult_t braid_comm_fail(struct braid_comm *c, ncclResult_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

uint64_t braid_now_ns(void);

/* Data path (xfer.c). */
ncclResult_t braid_xfer_isend(struct braid_comm *c, void *data, size_t size, int tag,
                              void **request);
ncclResult_t braid_xfer_irecv(struct braid_comm *c, int n, void **data, const size_t *sizes,
                              const int *tags, void **request);
ncclResult_t braid_xfer_test(void *request, int *done, int *sizes);

#endif
