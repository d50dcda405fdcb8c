/* braid-perf: NCCL's three protocols as the network sees them.
 *
 * SIMPLE: data as is, in slots of NCCL_BUFFSIZE/8 (collectives) or NCCL_P2P_NET_CHUNKSIZE (p2p).
 * LL: 16-byte lines {data 4, flag 4, data 4, flag 4}: 8 data bytes per line; slots of
 *     NCCL_LL_BUFFSIZE/8 wire bytes.
 * LL128: 128-byte lines, 120 data bytes + an 8-byte flag; slots of NCCL_LL128_BUFFSIZE/8.
 * The flag is the message's sequence number on its connection plus one, so the receiver knows
 * when data has landed without trusting the plugin's completion (NCCL's optional completion). */
#ifndef PERF_PROTO_H
#define PERF_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "opts.h"

struct proto_cfg {
  enum perf_proto proto;
  size_t slot_wire;   /* wire bytes per slot */
  size_t step_data;   /* data bytes per message at most */
  int chunk_steps;    /* ring: messages per chunk (NCCL's ALLREDUCE/ALLGATHER_CHUNKSTEPS) */
};

/* The protocol NCCL would use for `bytes` (the op's whole buffer), honouring --proto/NCCL_PROTO. */
void proto_pick(const struct perf_opts *o, size_t bytes, struct proto_cfg *cfg);
/* The slots and steps of protocol p (not PERF_PROTO_AUTO) for the configured op. */
void proto_config(const struct perf_opts *o, enum perf_proto p, struct proto_cfg *cfg);

size_t proto_wire_len(enum perf_proto p, size_t data_len);
/* Encodes data_len bytes of src into the wire format at dst with flag (seq + 1). */
void proto_encode(enum perf_proto p, void *dst, const void *src, size_t data_len, uint64_t seq);
/* 1 when every line of a data_len message at src carries flag (seq + 1); then decodes to dst. */
int proto_decode(enum perf_proto p, void *dst, const void *src, size_t data_len, uint64_t seq);

#endif
