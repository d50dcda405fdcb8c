/* verbs transport: a comm's data over one striped verbs connection (verbs_conn.h).
 *
 * The set-up is the socket transport's (handle, secret, hello, rail list; one stream per rail).
 * Then each end maps its rails (network interfaces) to RDMA ports (verbs_dev.h), opens the
 * connection's queue pairs and sends their addresses on stream 0's socket; the first data call
 * after the peer's addresses arrived connects the queue pairs.  The sockets stay open, silent:
 * stream 0's closing shows that the peer is gone. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "comm/comm.h"
#include "log.h"
#include "transport/socket/sock.h"
#include "param.h"
#include "transport/verbs/verbs_conn.h"
#include "transport/verbs/verbs_dev.h"
#include "wire/verbs.h"

#define VLINK_CHUNK (64u << 10) /* x BRAID_VC_MAX_CHUNKS = 1 GiB, maxP2pBytes */
#define VLINK_CHECK_NS 100000000ull

/* The address message is wire/verbs.h's link message. */
_Static_assert(BRAID_VC_MAX_RAILS <= BRAID_VWIRE_RAILS && BRAID_VLINK_MAX_BYTES <= BRAID_VLINK_MSG_MAX,
               "the address message fits its buffer");
_Static_assert(BRAID_LINK_IB == BRAID_VADDR_LINK_IB && BRAID_LINK_ETH == BRAID_VADDR_LINK_ETH,
               "the link layer's codes on the wire");

ncclResult_t braid_verbs_link_start(struct braid_comm *c) {
  if (c->nrails > BRAID_VC_MAX_RAILS)
    return braid_comm_fail(c, ncclInvalidUsage, "verbs: %d rails (at most %d)", c->nrails, BRAID_VC_MAX_RAILS);
  struct braid_verbs_rail rails[BRAID_VC_MAX_RAILS];
  for (int r = 0; r < c->nrails; r++) {
    char why[256];
    if (braid_verbs_rail_of_netdev(c->streams[r].rail_name, &rails[r], why, sizeof why))
      return braid_comm_fail(c, ncclSystemError, "verbs: rail %d: %s", r, why);
  }
  struct braid_vc_opts o = {.chunk = VLINK_CHUNK,
                            .equal = !strcmp(braid_param_str(BRAID_P_STRIPING), "equal")};
  if (braid_vc_open(rails, c->nrails, c->kind == BRAID_COMM_SEND, &o, &c->vc))
    return braid_comm_fail(c, ncclSystemError, "verbs: cannot open queue pairs on the rails (see the WARN above)");
  uint8_t msg[BRAID_VLINK_MSG_MAX];
  struct braid_verbs_ep_addr addrs[BRAID_VC_MAX_RAILS];
  braid_vc_addrs(c->vc, addrs);
  size_t len = braid_vlink_encode(addrs, c->nrails, msg);
  if (c->streams[0].fd < 0 || send(c->streams[0].fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
    return braid_comm_fail(c, ncclSystemError, "verbs: cannot send the queue pairs' addresses: %s",
                           c->streams[0].fd < 0 ? "stream 0 did not connect" : strerror(errno));
  for (int r = 0; r < c->nrails; r++)
    BRAID_INFO(NCCL_INIT | NCCL_NET, "verbs: rail %d is %s on %s:%d (%s)", r, c->streams[r].rail_name,
               rails[r].dev, rails[r].port, braid_verbs_link_name(rails[r].link));
  c->vcheck_ns = braid_now_ns();
  return ncclSuccess;
}

/* Reads what has arrived of the peer's addresses: 1 complete, 0 not yet, -1 broken (why). */
static int link_read(struct braid_comm *c, char *why, size_t whylen) {
  size_t need = BRAID_VLINK_HDR_BYTES;
  if (c->vaddr_got >= need) {
    char err[128];
    int n = braid_vlink_rails(c->vaddr, err, sizeof err);
    if (n < 0) return snprintf(why, whylen, "the peer's queue-pair addresses are garbled: %s", err), -1;
    if (n != c->nrails)
      return snprintf(why, whylen, "the peer's queue-pair addresses are for %d rails, this end has %d",
                      n, c->nrails), -1;
    need = BRAID_VLINK_BYTES((size_t)n);
  }
  ssize_t n = recv(c->streams[0].fd, c->vaddr + c->vaddr_got, need - c->vaddr_got, MSG_DONTWAIT);
  if (n == 0) return snprintf(why, whylen, "the peer closed the connection"), -1;
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    return snprintf(why, whylen, "receive failed: %s", strerror(errno)), -1;
  }
  c->vaddr_got += (size_t)n;
  if (c->vaddr_got == BRAID_VLINK_HDR_BYTES) return link_read(c, why, whylen);
  return c->vaddr_got == need && need > BRAID_VLINK_HDR_BYTES;
}

int braid_verbs_link_ready(struct braid_comm *c, char *why, size_t whylen) {
  uint64_t now = braid_now_ns();
  if (c->vlinked) {
    if (now - c->vcheck_ns < VLINK_CHECK_NS) return 1;
    c->vcheck_ns = now;
    return braid_sock_silent(c->streams[0].fd, why, whylen);
  }
  int rc = link_read(c, why, whylen);
  if (rc < 0) return -1;
  if (rc == 0) {
    if (now - c->vcheck_ns > c->timeout_ns)
      return snprintf(why, whylen, "the peer sent no queue-pair addresses in %llu ms (BRAID_TIMEOUT_MS)",
                      (unsigned long long)(c->timeout_ns / 1000000)), -1;
    return 0;
  }
  struct braid_verbs_ep_addr peer[BRAID_VWIRE_RAILS];
  char err[128];
  int npeer = braid_vlink_decode(c->vaddr, c->vaddr_got, peer, err, sizeof err);
  if (npeer < 0) return snprintf(why, whylen, "the peer's queue-pair addresses are garbled: %s", err), -1;
  if (braid_vc_connect(c->vc, peer, npeer))
    return snprintf(why, whylen, "connecting the queue pairs failed: %s", braid_vc_error(c->vc)), -1;
  c->vlinked = true;
  c->vcheck_ns = now;
  return 1;
}
