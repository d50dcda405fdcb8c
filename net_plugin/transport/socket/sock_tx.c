/* The socket stream transport's send side: a stream's batch written with sendmsg, a frame counted
 * written once its last byte is in the socket; acknowledgements read back from the same socket. */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "comm/comm.h"
#include "transport/socket/sock.h"
#include "transport/socket/sock_helper.h"
#include "transport/socket/sock_stream.h"

/* left bytes of s's batch went out: the frames finished are reported, the head's progress kept. */
static void tx_account(struct braid_comm *c, struct braid_stream *s, size_t left) {
  while (left > 0) {
    struct braid_txframe *f = &s->tx[s->tx_head];
    if (s->tx_done == 0) s->frames_started++; /* its first byte goes out now */
    size_t rest = BRAID_FRAME_HDR_BYTES + f->len - s->tx_done;
    if (left < rest) {
      s->tx_done += left;
      break;
    }
    left -= rest;
    s->tx_done = 0;
    braid_tx_written(c, f->req, f->len);
    s->tx_head = (s->tx_head + 1) % BRAID_SEND_BATCH;
    s->tx_count--;
  }
}

void braid_sock_tx_settle(struct braid_comm *c, struct braid_stream *s) {
  struct braid_sock_stream *ss = s->tp;
  braid_sock_quiet(s);
  if (!ss->io_pending) return;
  ss->io_pending = false;
  if (ss->io_n > 0) tx_account(c, s, (size_t)ss->io_n);
}

/* A batch this small, on a stream whose helper is idle, is written by the caller itself (NCCL's
 * proxy posting a small message): waking the helper would cost more than the write. */
#define TX_INLINE_BYTES 65536

static size_t tx_batch_bytes(const struct braid_stream *s) {
  size_t b = 0;
  for (int i = 0; i < s->tx_count; i++) b += s->tx[(s->tx_head + i) % BRAID_SEND_BATCH].len;
  return b;
}

/* Writes as much of s's batch as the socket takes.  0, or an errno after a hard error.  With
 * helpers s's own writes (sock_helper.h); another caller writes a small batch itself when the
 * helper is idle (no system call of its under way, none waiting for room), else wakes it. */
int braid_sock_tx_write(struct braid_comm *c, struct braid_stream *s) {
  struct braid_sock_stream *ss = s->tp;
  if (!braid_sock_mine(s)) {
    if (ss->tx_blocked) return 0; /* it waits for room and will write the rest */
    if (atomic_load_explicit(&ss->busy, memory_order_acquire) || tx_batch_bytes(s) > TX_INLINE_BYTES) {
      braid_sock_wake(s);
      return 0;
    }
    braid_sock_tx_settle(c, s); /* its last write, counted */
  }
  ss->tx_blocked = false;
  while (s->tx_count > 0) {
    struct iovec iov[2 * BRAID_SEND_BATCH];
    int niov = 0;
    size_t total = 0, skip = s->tx_done;
    for (int i = 0; i < s->tx_count; i++) {
      struct braid_txframe *f = &s->tx[(s->tx_head + i) % BRAID_SEND_BATCH];
      const char *parts[2] = {(const char *)f->hdr, f->payload};
      size_t lens[2] = {BRAID_FRAME_HDR_BYTES, f->len};
      for (int k = 0; k < 2; k++) {
        size_t off = skip < lens[k] ? skip : lens[k];
        skip -= off;
        if (lens[k] == off) continue;
        iov[niov].iov_base = (void *)(parts[k] + off);
        iov[niov].iov_len = lens[k] - off;
        total += iov[niov++].iov_len;
      }
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
    braid_sock_io_enter(c, s);
    ssize_t n = sendmsg(s->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    int err = errno;
    ss->io_n = n;
    ss->io_pending = true;
    braid_sock_io_leave(c, s);
    if (!ss->io_pending) return 0; /* counted meanwhile by a thread that changed the batch */
    ss->io_pending = false;
    if (n < 0) {
      if (err == EINTR) continue;
      if (err != EAGAIN && err != EWOULDBLOCK) return err;
      ss->tx_blocked = true;
      braid_sock_wake(s); /* (a caller writing inline: the helper finishes) */
      return 0;
    }
    tx_account(c, s, (size_t)n);
    if ((size_t)n < total) { /* socket full */
      ss->tx_blocked = true;
      braid_sock_wake(s);
      return 0;
    }
  }
  return 0;
}

/* A half-written frame is finished later from a copy if the rail comes back (the receiver then
 * drops it as a duplicate), so the stream's framing survives. */
int braid_sock_tx_failed(struct braid_comm *c, struct braid_stream *s) {
  struct braid_sock_stream *ss = s->tp;
  braid_sock_tx_settle(c, s); /* the batch as it is on the wire */
  if (s->tx_count && s->tx_done && !s->tx[s->tx_head].chunk) {
    return 1; /* already finishing from its rescue copy */
  } else if (s->tx_count && s->tx_done) {
    struct braid_txframe *f = &s->tx[s->tx_head];
    size_t sent_payload = s->tx_done > BRAID_FRAME_HDR_BYTES ? s->tx_done - BRAID_FRAME_HDR_BYTES : 0;
    free(ss->rescue);
    ss->rescue = malloc(f->len ? f->len : 1);
    if (ss->rescue && f->len) memcpy(ss->rescue + sent_payload, f->payload + sent_payload, f->len - sent_payload);
    if (!ss->rescue) s->dead = true; /* cannot finish the frame: never write here again */
    f->payload = ss->rescue;
    f->chunk = NULL;
    return 1;
  }
  return 0;
}

int braid_sock_tx_read_ack(struct braid_comm *c, struct braid_stream *s,
                           uint8_t hdr[BRAID_FRAME_HDR_BYTES], char *why, size_t whylen) {
  (void)c;
  struct braid_sock_stream *ss = s->tp;
  if (!braid_sock_mine(s)) return 0; /* its owner reads them */
  for (;;) {
    /* (a few bytes: read holding the lock) */
    ssize_t n = recv(s->fd, ss->ack + ss->ack_got, sizeof ss->ack - ss->ack_got, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      return snprintf(why, whylen, "%s", n == 0 ? "peer closed it" : strerror(errno)), -1;
    if (n < 0) return 0;
    ss->ack_got += (size_t)n;
    if (ss->ack_got < sizeof ss->ack) continue;
    ss->ack_got = 0;
    memcpy(hdr, ss->ack, sizeof ss->ack);
    return 1;
  }
}

/* The data socket's own retransmissions show a dead path (braid_sock_tx_path_dead): nothing to
 * poke. */
int braid_sock_tx_poke(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                       size_t whylen) {
  (void)c, (void)s, (void)now, (void)why, (void)whylen;
  return 0;
}

/* Data the peer's kernel has not acknowledged and the retransmission timer firing (on an
 * overloaded host that can be spurious: then a rail flaps, but the last live one is never failed
 * this way, tx.c).  A peer whose application is merely slow (not posting receives: a straggler, a
 * checkpoint) still has its kernel acknowledge, or advertise a full window, and is never failed
 * for it. */
bool braid_sock_tx_path_dead(struct braid_comm *c, struct braid_stream *s, uint64_t now) {
  (void)c, (void)now;
  return s->fd >= 0 && braid_sock_retransmitting(s->fd);
}
