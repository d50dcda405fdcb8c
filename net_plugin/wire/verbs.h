/* The verbs transport's wire: the rail addresses exchanged at set-up, the control messages of a
 * verbs connection (transport/verbs/verbs_conn.h) and the immediate data of its writes.
 *
 * Version: none of these records carries one of its own.  They flow only after the connection's
 * stream handshake (wire/hello.h, with BRAID_HELLO_VERBS) agreed on BRAID_WIRE_VERSION
 * (wire/handle.h): that is their version, and a change to any record below needs a new
 * BRAID_WIRE_VERSION.  The link message's magic marks where the protocol starts.
 *
 * Before this file the link message and the control messages were C structs sent as they lie in
 * memory (host byte order, the compiler's layout).  The layouts below are exactly the bytes an
 * x86-64 build sent (little-endian, no hidden padding), so builds before and after it still talk
 * to each other on x86-64; test/unit/wire_layout_test.cc pins them.  Integers are little-endian;
 * "zero" bytes are reserved, sent as zero and checked.
 *
 * 1. Link message: on stream 0's socket, each way, right after the handshake
 *    (BRAID_VLINK_BYTES(nrails) = 8 + 28 * nrails):
 *     0  magic   u32  0x41565242 ("BRVA")
 *     4  nrails  u32  1..BRAID_VWIRE_RAILS; the receiver also wants its own count
 *     8  nrails rail address records (BRAID_VADDR_BYTES = 28), rail 0 first:
 *          0  qpn   u32  the RC queue pair's number (24 bits)
 *          4  psn   u32  the first packet sequence number that side sends (24 bits)
 *          8  lid   u16  InfiniBand LID; 0 on RoCE
 *         10  link  u8   enum braid_link: 1 InfiniBand, 2 Ethernet
 *         11  mtu   u8   enum ibv_mtu of the port's active MTU: 1 (256) .. 5 (4096)
 *         12  gid   16   the port's GID, as the GID table holds it
 *
 * 2. Control messages: one per SEND on a rail's queue pair; byte 0 is the type, and each type
 *    has exactly one length (BRAID_VCTL_*_BYTES; at most BRAID_VCTL_MAX_BYTES).  Slots are
 *    receive slots (seq % BRAID_VWIRE_SLOTS), rails the connection's rail indices.
 *    CTS, receiver -> sender: a receive is posted (56 bytes)
 *      0 type u8 = 1 | 1 slot u8 (= seq % 8) | 2 nrails u8 (1..8) | 3 zero u8 | 4 seq u32 |
 *      8 addr u64 | 16 cap u64 | 24 rkey u32 x 8 (one per rail; from nrails on zero)
 *    FENCE, sender -> receiver: the sender failed this rail in generation gen (4 bytes)
 *      0 type u8 = 2 | 1 rail u8 (< 8) | 2 gen u8 | 3 zero u8
 *    FENCED, receiver -> sender: the rail is fenced and drained here (40 bytes)
 *      0 type u8 = 3 | 1 rail u8 (< 8) | 2 open u16 | 4 fin u16 | 6 posted u16 (a bit per slot:
 *      still open; completes on FIN only; ever posted; bits 8..15 zero) | 8 seq u32 x 8 (per slot)
 *    FIN, sender -> receiver: every chunk of message seq is acknowledged (8 bytes)
 *      0 type u8 = 4 | 1 zero 3 | 4 seq u32
 *    AREA, receiver -> sender: the scratch area for probes (56 bytes)
 *      0 type u8 = 5 | 1 nrails u8 (1..8) | 2 zero 6 | 8 addr u64 | 16 len u64 |
 *      24 rkey u32 x 8 (from nrails on zero)
 *    MISMATCH, sender -> receiver: send seq of size bytes does not fit its receive (24 bytes)
 *      0 type u8 = 6 | 1 zero 3 | 4 seq u32 | 8 size u64 | 16 cap u64
 *    REJOIN, sender -> receiver: a failed rail's port is up again; its new queue pair, for
 *      generation gen (the rail's generation counts its rejoins, mod 256) (32 bytes)
 *      0 type u8 = 7 | 1 rail u8 (< 8) | 2 gen u8 | 3 zero u8 | 4 address record (as in 1.)
 *    REJOIN_ACK, receiver -> sender: the answer (40 bytes)
 *      0 type u8 = 8 | 1 rail u8 (< 8) | 2 gen u8 | 3 status u8 (0 joined: this side's new queue
 *      pair, connected to the sender's, follows; 1 not now: this side's port is down or its fence
 *      not yet answered; the record zero) | 4 fenced u32 (FENCEDs this side has sent for the rail
 *      since the connection began) | 8 address record | 36 zero u32
 *    JOINED, sender -> receiver, the first message on the rail's new queue pair: both ends are
 *      connected; the receiver may post on it (4 bytes)
 *      0 type u8 = 9 | 1 rail u8 (< 8) | 2 gen u8 | 3 zero u8
 *
 * 3. Immediate data of every RDMA WRITE_WITH_IMM (a 32-bit value; verbs_ep.c hands it to the
 *    device in network order, as the verbs API wants):
 *     bits 28..31  slot: 0..7 the receive slot; 15 a probe into the scratch area (bits 0..27 zero)
 *     bits 14..27  the message's chunk count - 1 (1..BRAID_VWIRE_MAX_CHUNKS chunks)
 *     bits  0..13  the chunk's index, below the count */
#ifndef BRAID_WIRE_VERBS_H
#define BRAID_WIRE_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRAID_VWIRE_RAILS 8          /* rails a record names (rkeys per CTS / AREA) */
#define BRAID_VWIRE_SLOTS 8          /* receive slots (sequence numbers per FENCED) */
#define BRAID_VWIRE_MAX_CHUNKS 16384 /* chunks per message the immediate can name */

/* ---------- 1. the link message ---------- */

#define BRAID_VADDR_BYTES 28
#define BRAID_VLINK_HDR_BYTES 8
#define BRAID_VLINK_BYTES(n) (BRAID_VLINK_HDR_BYTES + (n) * BRAID_VADDR_BYTES)
#define BRAID_VLINK_MAX_BYTES BRAID_VLINK_BYTES(BRAID_VWIRE_RAILS)

#define BRAID_VADDR_LINK_IB 1  /* enum braid_link (transport/verbs/verbs_dev.h) */
#define BRAID_VADDR_LINK_ETH 2
#define BRAID_VADDR_MTU_MIN 1  /* enum ibv_mtu: IBV_MTU_256 */
#define BRAID_VADDR_MTU_MAX 5  /* IBV_MTU_4096 */

/* What a peer needs to connect to one rail's queue pair (verbs_ep.h). */
struct braid_verbs_ep_addr {
  uint32_t qpn;
  uint32_t psn;    /* 24 bits: the first PSN this side sends */
  uint16_t lid;    /* InfiniBand; 0 on RoCE */
  uint8_t link;    /* enum braid_link */
  uint8_t mtu;     /* enum ibv_mtu of the port's active MTU */
  uint8_t gid[16];
};

/* Writes the link message for n (1..BRAID_VWIRE_RAILS) rails; returns its length. */
size_t braid_vlink_encode(const struct braid_verbs_ep_addr *a, int n, uint8_t *out);
/* The first BRAID_VLINK_HDR_BYTES of a link message: its rail count (the whole message is
 * BRAID_VLINK_BYTES(count) long), or -1 with a reason (bad magic, a count out of range). */
int braid_vlink_rails(const uint8_t *hdr, char *err, size_t errlen);
/* A whole link message of len bytes into out[BRAID_VWIRE_RAILS]: the rail count, or -1 with a
 * reason (the header's, a wrong length, a record with an unknown link or MTU, a QPN or PSN
 * wider than 24 bits). */
int braid_vlink_decode(const uint8_t *in, size_t len, struct braid_verbs_ep_addr *out, char *err,
                       size_t errlen);

/* ---------- 2. control messages ---------- */

enum braid_vctl_type {
  BRAID_VCTL_CTS = 1,
  BRAID_VCTL_FENCE = 2,
  BRAID_VCTL_FENCED = 3,
  BRAID_VCTL_FIN = 4,
  BRAID_VCTL_AREA = 5,
  BRAID_VCTL_MISMATCH = 6,
  BRAID_VCTL_REJOIN = 7,
  BRAID_VCTL_REJOIN_ACK = 8,
  BRAID_VCTL_JOINED = 9,
};

#define BRAID_VCTL_CTS_BYTES 56
#define BRAID_VCTL_FENCE_BYTES 4
#define BRAID_VCTL_FENCED_BYTES 40
#define BRAID_VCTL_FIN_BYTES 8
#define BRAID_VCTL_AREA_BYTES 56
#define BRAID_VCTL_MISMATCH_BYTES 24
#define BRAID_VCTL_REJOIN_BYTES 32
#define BRAID_VCTL_REJOIN_ACK_BYTES 40
#define BRAID_VCTL_JOINED_BYTES 4
#define BRAID_VCTL_MAX_BYTES 56

struct braid_vctl_cts {
  uint8_t slot, nrails;
  uint32_t seq;
  uint64_t addr, cap;
  uint32_t rkey[BRAID_VWIRE_RAILS];
};
struct braid_vctl_fence {
  uint8_t rail, gen;
};
struct braid_vctl_fenced {
  uint8_t rail;
  uint16_t open, fin, posted; /* bit per slot: still open; completes on FIN only; ever posted */
  uint32_t seq[BRAID_VWIRE_SLOTS];
};
struct braid_vctl_fin {
  uint32_t seq;
};
struct braid_vctl_mismatch {
  uint32_t seq;
  uint64_t size, cap;
};
struct braid_vctl_area {
  uint8_t nrails;
  uint64_t addr, len;
  uint32_t rkey[BRAID_VWIRE_RAILS];
};

/* REJOIN (status unused), REJOIN_ACK, JOINED (rail and gen only). */
enum { BRAID_VREJOIN_JOINED = 0, BRAID_VREJOIN_NOT_NOW = 1 };
struct braid_vctl_rejoin {
  uint8_t rail, gen, status;
  uint32_t fenced;
  struct braid_verbs_ep_addr addr;
};

/* One control message: type says which member holds it. */
struct braid_vctl {
  uint8_t type; /* enum braid_vctl_type */
  union {
    struct braid_vctl_cts cts;
    struct braid_vctl_fence fence;
    struct braid_vctl_fenced fenced;
    struct braid_vctl_fin fin;
    struct braid_vctl_area area;
    struct braid_vctl_mismatch mismatch;
    struct braid_vctl_rejoin rejoin; /* REJOIN, REJOIN_ACK, JOINED */
  };
};

/* Writes m into out; returns its length (BRAID_VCTL_<type>_BYTES), 0 for an unknown type.  Every
 * field is written as it is: the caller leaves unused rkeys and mask bits zero. */
size_t braid_vctl_encode(const struct braid_vctl *m, uint8_t out[BRAID_VCTL_MAX_BYTES]);
/* Parses len bytes: 0, or -1 with a reason (an unknown type, a length not the type's, a nonzero
 * reserved byte, a slot, rail or rail count out of range, a CTS whose slot is not its seq's). */
int braid_vctl_decode(const uint8_t *in, size_t len, struct braid_vctl *m, char *err, size_t errlen);
/* "CTS", "FENCE", ...; "unknown" for any other value. */
const char *braid_vctl_name(int type);

/* ---------- 3. the immediate ---------- */

#define BRAID_VIMM_PROBE_SLOT 15

struct braid_vimm {
  bool probe;   /* a probe: the rest is zero */
  uint8_t slot; /* below BRAID_VWIRE_SLOTS */
  uint32_t nch; /* 1..BRAID_VWIRE_MAX_CHUNKS */
  uint32_t idx; /* below nch */
};

uint32_t braid_vimm_encode(const struct braid_vimm *w);
/* 0, or -1 with a reason (a slot that is neither a receive slot nor the probe's, an index not
 * below the count, a probe with other bits set). */
int braid_vimm_decode(uint32_t imm, struct braid_vimm *w, char *err, size_t errlen);

#endif
