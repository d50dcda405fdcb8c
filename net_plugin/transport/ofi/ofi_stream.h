/* The ofi stream transport (transport/stream.h): each stream's frames on its own libfabric
 * endpoint (ofi.h: a header message, then the payload as a tagged message whose tag is the
 * frame's number on the stream); the stream's socket, after carrying the endpoint addresses at
 * set-up, stays open and silent to show that the peer is there.
 * ofi_stream.c: the table and each stream's state; ofi_link.c: the endpoint and the address
 * exchange; ofi_tx.c: the send side; ofi_rx.c: the receive side. */
#ifndef BRAID_OFI_STREAM_H
#define BRAID_OFI_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "link/startup.h"
#include "transport/ofi/ofi.h"
#include "transport/stream.h"

#define BRAID_OFI_RX_DEPTH 8 /* payload receives posted ahead per stream */
/* A one-stream connection whose peer closed its end keeps collecting what the peer sent before
 * until nothing more has come for this long: the provider's own connection, not the set-up socket
 * that shows the closing, carries the data, and its last bytes can still be on their way. */
#define BRAID_OFI_CLOSE_DRAIN_NS 1000000000ull

extern const struct braid_stream_ops braid_ofi_stream_ops;

/* rx: one frame whose payload is being received (ofi_rx.c). */
struct braid_ofi_rx {
  struct braid_rx_frame fr; /* fr.msg NULL when discarded */
  uint8_t state;           /* BRAID_OFI_RX_TAKEN, _POSTED, _DONE; before its header _PRE, _EARLY */
  bool preposted;          /* its receive was posted before its header came (full capacity) */
  uint64_t tag;
  char *bounce;            /* bounced: where the payload lands before being copied */
  size_t bounce_cap;
  struct braid_ofi_done early; /* _EARLY: the completion that came before the header */
};
enum { BRAID_OFI_RX_TAKEN, BRAID_OFI_RX_POSTED, BRAID_OFI_RX_DONE, BRAID_OFI_RX_PRE, BRAID_OFI_RX_EARLY };

/* A stream's ofi state (s->tp): its endpoint; the socket only carries the endpoint names at
 * set-up and shows, by closing, that the peer is gone. */
struct braid_ofi_stream {
  struct braid_ofi_ep *ep;   /* NULL once closed (under c->ofi_lock) */
  struct braid_link_startup link; /* the endpoint addresses, exchanged on the stream's socket;
                                     link.linked once connected to the peer's */
  uint64_t tag;              /* payload tag: frames sent (tx) or headers taken (rx) */
  /* ofi_rxm: frames the sender may start (tx: granted so far; rx: granted in the last credit
   * sent), i.e. the first frame number whose payload receive is not posted (ofi_rx.c) */
  uint64_t credit;
  uint64_t poke_ns;          /* tx: when the set-up socket's last poke went (0: never) */
  uint64_t closed_ns;        /* when the set-up socket showed the peer's closing (0: not yet) */
  uint64_t active_ns;        /* when a completion or a frame last came (the drain, see above) */
  char closed_why[48];       /* how it closed: "the peer closed (reset) the connection" */
  /* rx: frames whose headers were taken, oldest first, each with its payload receive posted
   * (several at once, so the provider never holds a payload that has nowhere to go); over ofi_rxm
   * followed by rx_pre receives posted ahead for the next frames (ofi_rx.c) */
  struct braid_ofi_rx rx[BRAID_OFI_RX_DEPTH];
  int rx_head, rx_count;
  int rx_pre; /* receives posted ahead, after the taken ones: tags tag, tag + 1, ... */
};

/* ofi_link.c.  Opens every stream's endpoint and sends its address on the stream's socket (at
 * set-up). */
ncclResult_t braid_ofi_link_start(struct braid_comm *c);
/* 1 when s can carry data (the peer's address arrived); 0 not yet; -1 when the stream broke
 * (the peer closed its socket, or no address in BRAID_TIMEOUT_MS): why says how. */
int braid_ofi_link_ready(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                         size_t whylen);
/* After s's completions were collected: 1 while the peer is there; BRAID_LINK_CLOSED once the
 * set-up socket showed that it closed its end (from then on without looking again: closed_ns,
 * closed_why); -1 when the socket failed otherwise (why). */
int braid_ofi_link_watch(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                         size_t whylen);
/* The peer closed and nothing has come from it for BRAID_OFI_CLOSE_DRAIN_NS: nothing more will. */
bool braid_ofi_link_drained(const struct braid_ofi_stream *st, uint64_t now);
/* Rejoin (stream.h renew, relink): the old endpoint closed and the stream's state as at set-up;
 * then, on the new socket, a new endpoint whose address goes to the peer (0, or -1 with a WARN). */
void braid_ofi_link_renew(struct braid_comm *c, struct braid_stream *s);
int braid_ofi_link_relink(struct braid_comm *c, struct braid_stream *s);
/* Closes s's endpoint (the fence: nothing it posted lands after this) and shuts its socket
 * down, so the peer sees the stream gone too. */
void braid_ofi_link_close(struct braid_comm *c, struct braid_stream *s);
/* Memory being released (deregMr): the comm's endpoints drop their registrations of it. */
void braid_ofi_link_forget(struct braid_comm *c, const void *addr, size_t len);

/* ofi_tx.c: the send side's operations. */
int braid_ofi_tx_poll(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                      size_t whylen);
int braid_ofi_tx_write(struct braid_comm *c, struct braid_stream *s);
int braid_ofi_tx_failed(struct braid_comm *c, struct braid_stream *s);
int braid_ofi_tx_read_ack(struct braid_comm *c, struct braid_stream *s,
                          uint8_t hdr[BRAID_FRAME_HDR_BYTES], char *why, size_t whylen);
int braid_ofi_tx_poke(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                      size_t whylen);
bool braid_ofi_tx_path_dead(struct braid_comm *c, struct braid_stream *s, uint64_t now);

/* ofi_rx.c: the receive side's operations. */
void braid_ofi_rx(struct braid_comm *c, struct braid_stream *s, bool read);
struct braid_rx_frame *braid_ofi_rx_frame(struct braid_stream *s, int k);
bool braid_ofi_rx_ack_ready(struct braid_comm *c, struct braid_stream *s, bool idle,
                            uint64_t deadline_ns);
bool braid_ofi_rx_ack_send(struct braid_comm *c, struct braid_stream *s,
                           const uint8_t hdr[BRAID_FRAME_HDR_BYTES], bool idle,
                           uint64_t deadline_ns);
void braid_ofi_rx_describe(const struct braid_stream *s, char *buf, size_t len);

#endif
