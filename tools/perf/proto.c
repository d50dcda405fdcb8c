/* braid-perf: protocol choice and the LL/LL128 wire formats. */
#include "proto.h"

#include <string.h>

#define LL_LINE 16
#define LL_DATA 8
#define LL128_LINE 128
#define LL128_DATA 120

/* NCCL's tuner picks LL for small, LL128 for medium and SIMPLE for large operations; these
 * thresholds approximate its choice for a few ranks over a network (p2p uses
 * NCCL_P2P_LL_THRESHOLD, then SIMPLE, as NCCL does). */
#define AUTO_LL_MAX (64 * 1024)
#define AUTO_LL128_MAX (1024 * 1024)

void proto_pick(const struct perf_opts *o, size_t bytes, struct proto_cfg *cfg) {
  enum perf_proto p = o->proto;
  if (p == PERF_PROTO_AUTO) {
    if (o->op == PERF_SENDRECV)
      p = bytes <= o->p2p_ll_threshold ? PERF_PROTO_LL : PERF_PROTO_SIMPLE;
    else
      p = bytes <= AUTO_LL_MAX ? PERF_PROTO_LL
          : bytes <= AUTO_LL128_MAX ? PERF_PROTO_LL128 : PERF_PROTO_SIMPLE;
  }
  proto_config(o, p, cfg);
}

void proto_config(const struct perf_opts *o, enum perf_proto p, struct proto_cfg *cfg) {
  cfg->proto = p;
  cfg->chunk_steps = 1;
  if (p == PERF_PROTO_LL) {
    cfg->slot_wire = o->ll_buffsize / 8;
    cfg->step_data = cfg->slot_wire / LL_LINE * LL_DATA;
  } else if (p == PERF_PROTO_LL128) {
    cfg->slot_wire = o->ll128_buffsize / 8 / LL128_LINE * LL128_LINE;
    cfg->step_data = cfg->slot_wire / LL128_LINE * LL128_DATA;
  } else {
    cfg->slot_wire = o->op == PERF_SENDRECV ? o->p2p_chunk : o->buffsize / 8;
    cfg->step_data = cfg->slot_wire;
    cfg->chunk_steps = o->op == PERF_SENDRECV ? 1 : 4;
  }
}

size_t proto_wire_len(enum perf_proto p, size_t n) {
  if (p == PERF_PROTO_LL) return (n + LL_DATA - 1) / LL_DATA * LL_LINE;
  if (p == PERF_PROTO_LL128) return (n + LL128_DATA - 1) / LL128_DATA * LL128_LINE;
  return n;
}

static void proto_encode_ll(uint32_t *dst, const char *src, size_t n, uint32_t flag) {
  for (size_t off = 0; off < n; off += LL_DATA, dst += 4) {
    uint32_t d[2] = {0, 0};
    memcpy(d, src + off, n - off < LL_DATA ? n - off : LL_DATA);
    dst[0] = d[0];
    dst[1] = flag;
    dst[2] = d[1];
    dst[3] = flag;
  }
}

static void proto_encode_ll128(char *dst, const char *src, size_t n, uint64_t flag) {
  for (size_t off = 0; off < n; off += LL128_DATA, dst += LL128_LINE) {
    size_t k = n - off < LL128_DATA ? n - off : LL128_DATA;
    memcpy(dst, src + off, k);
    memset(dst + k, 0, LL128_DATA - k);
    memcpy(dst + LL128_DATA, &flag, sizeof flag);
  }
}

void proto_encode(enum perf_proto p, void *dst, const void *src, size_t n, uint64_t seq) {
  if (p == PERF_PROTO_LL)
    proto_encode_ll(dst, src, n, (uint32_t)(seq + 1));
  else if (p == PERF_PROTO_LL128)
    proto_encode_ll128(dst, src, n, seq + 1);
  else
    memcpy(dst, src, n);
}

/* Flags are read with acquire loads: the data of a line is valid once its flag is. */
static int proto_decode_ll(char *dst, const uint32_t *src, size_t n, uint32_t flag) {
  for (size_t off = 0; off < n; off += LL_DATA, src += 4)
    if (__atomic_load_n(&src[1], __ATOMIC_ACQUIRE) != flag ||
        __atomic_load_n(&src[3], __ATOMIC_ACQUIRE) != flag)
      return 0;
  src -= 4 * ((n + LL_DATA - 1) / LL_DATA);
  for (size_t off = 0; off < n; off += LL_DATA, src += 4) {
    uint32_t d[2] = {src[0], src[2]};
    memcpy(dst + off, d, n - off < LL_DATA ? n - off : LL_DATA);
  }
  return 1;
}

static int proto_decode_ll128(char *dst, const char *src, size_t n, uint64_t flag) {
  for (size_t off = 0, l = 0; off < n; off += LL128_DATA, l++) {
    const uint64_t *f = (const uint64_t *)(src + l * LL128_LINE + LL128_DATA);
    if (__atomic_load_n(f, __ATOMIC_ACQUIRE) != flag) return 0;
  }
  for (size_t off = 0; off < n; off += LL128_DATA, src += LL128_LINE)
    memcpy(dst + off, src, n - off < LL128_DATA ? n - off : LL128_DATA);
  return 1;
}

int proto_decode(enum perf_proto p, void *dst, const void *src, size_t n, uint64_t seq) {
  if (p == PERF_PROTO_LL) return proto_decode_ll(dst, src, n, (uint32_t)(seq + 1));
  if (p == PERF_PROTO_LL128) return proto_decode_ll128(dst, src, n, seq + 1);
  memcpy(dst, src, n);
  return 1;
}
