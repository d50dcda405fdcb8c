/* braid-perf: element types, reduction ops, deterministic inputs and result checks.
 *
 * Inputs are small integers (a function of rank, element index and an iteration seed) so every
 * sum, product, min and max is exact in every type and the check is an exact comparison. */
#ifndef PERF_DTYPE_H
#define PERF_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_plugin/common.h"

/* 0 when the type is not supported by braid-perf. */
size_t dt_size(ncclDataType_t dt);
const char *dt_name(ncclDataType_t dt);
const char *dt_op_name(ncclRedOp_t op);
int dt_parse(const char *s, ncclDataType_t *dt);
int dt_op_parse(const char *s, ncclRedOp_t *op);

/* dst[i] = a[i] op b[i] (dst may alias a or b). */
void dt_reduce(ncclDataType_t dt, ncclRedOp_t op, void *dst, const void *a, const void *b,
               size_t count);

/* buf[i] = input of `rank`, element first+i. */
void dt_fill(ncclDataType_t dt, ncclRedOp_t op, void *buf, size_t count, int rank,
             uint32_t seed, size_t first);
/* Wrong elements of buf against the input of src_rank (elements first..). */
size_t dt_check_copy(ncclDataType_t dt, ncclRedOp_t op, const void *buf, size_t count,
                     int src_rank, uint32_t seed, size_t first);
/* Wrong elements of buf against op folded over the inputs of ranks 0..nranks-1. */
size_t dt_check_reduce(ncclDataType_t dt, ncclRedOp_t op, const void *buf, size_t count,
                       int nranks, uint32_t seed, size_t first);

/* Send/recv payload (any byte count): a position hash of (rank, seed, byte index). */
void dt_fill_bytes(void *buf, size_t n, int rank, uint32_t seed, size_t first);
size_t dt_check_bytes(const void *buf, size_t n, int rank, uint32_t seed, size_t first);

#endif
