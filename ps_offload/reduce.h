/*
 * braid-ps: the reduction kernels (element-wise sum/prod/max/min of n input buffers).
 *
 * Semantics, identical bit for bit in every implementation (portable C, AVX2, AVX-512):
 *
 *  - Fold order.  dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], folded strictly
 *    left to right in index order, one element at a time.  The SIMD paths vectorize across
 *    elements, never across inputs, and never fuse or reassociate, so the result of a given
 *    srcs[] array is the same whatever implementation runs it; and because the server puts
 *    each peer's buffer at that peer's fixed index, the result does not depend on the order in
 *    which the inputs arrived either.  (The fold is not commutative in general: float sums
 *    round at every step, so a different index order may give a different result.)
 *  - fp32, fp64: accumulate in the type itself.
 *  - fp16, bf16, fp8 (e4m3, e5m2): decode to fp32 exactly, accumulate in fp32 over all n
 *    inputs, round ONCE at the end to nearest-even.  fp16 and bf16 overflow to +-inf; fp8
 *    saturates as OCP "satfinite": e4m3 to +-448, e5m2 to +-57344 (infinities included).
 *  - NaN: any float result that is NaN is written as the type's canonical quiet NaN with the
 *    sign bit clear (fp32 0x7fc00000, fp64 0x7ff8000000000000, fp16 0x7e00, bf16 0x7fc0,
 *    e4m3 0x7f, e5m2 0x7e); NaN payloads are not propagated.
 *  - max/min on floats: NaN propagates (a NaN among the inputs gives NaN).  Otherwise
 *    acc = (acc > x) ? acc : x for max, (acc < x) ? acc : x for min: on equal values (+0 vs
 *    -0) the later input wins.
 *  - Integers wrap: sums and products in unsigned arithmetic of the element's width (the same
 *    bits for signed types); max/min compare signed or unsigned as the type says.
 *  - Buffers need no alignment at all (any byte address).  dst may alias srcs[0] exactly and
 *    nothing else may overlap.
 */
#ifndef BRAID_PS_REDUCE_H
#define BRAID_PS_REDUCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl_plugin/common.h" /* ncclDataType_t, ncclRedOp_t */

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per element of an NCCL dtype, 0 if unsupported. */
size_t braid_reduce_type_size(int dtype);

/* 1 if braid_reduce handles (dtype, op): every dtype 0..11 with op 0..3; 0 otherwise. */
int braid_reduce_supported(int dtype, int op);

/* dst[i] = srcs[0][i] op ... op srcs[n-1][i] for i < count (see the rules above).  n >= 1.
 * Returns 0, or -1 for an unsupported dtype/op or n < 1 (nothing written). */
int braid_reduce(void *dst, const void *const *srcs, int n, size_t count, int dtype, int op);

/* The implementation braid_reduce uses now: "avx512", "avx2" or "portable".  Chosen once, at
 * the first call, as the best this CPU has, unless BRAID_PS_SIMD=portable|avx2|avx512
 * names another level that it has (an unknown or unavailable name is ignored). */
const char *braid_reduce_impl(void);

/* Switch to a level by name (tests, benchmarks).  0, or -1 if unknown or not on this CPU. */
int braid_reduce_force(const char *name);

/* braid-ps --bench-reduce: sums of `ninputs` buffers of `bytes` bytes each in fp32, bf16,
 * fp16, int32, fp64 with every implementation this CPU has, against memcpy's bandwidth
 * measured in the same run; prints a table to `out`.  0 (or less) for a default: 64 MiB,
 * 8 inputs, 1 s per case.  Returns 0, or -1 if the buffers cannot be allocated. */
int braid_reduce_bench(FILE *out, size_t bytes, int ninputs, int seconds_per_case);

/* ---- Scalar conversions (exact decode; encode rounds to nearest-even, rules above). ---- */
float braid_fp16_to_f32(uint16_t h);
uint16_t braid_f32_to_fp16(float f);
float braid_bf16_to_f32(uint16_t h);
uint16_t braid_f32_to_bf16(float f);
float braid_e4m3_to_f32(uint8_t b);
uint8_t braid_f32_to_e4m3(float f);
float braid_e5m2_to_f32(uint8_t b);
uint8_t braid_f32_to_e5m2(float f);

/* ---- Internal: shared by reduce.c and reduce_x86.c. ---- */
#define BRAID_REDUCE_NTYPES 12
#define BRAID_REDUCE_NOPS 4

/* Reduces elements [begin, end) of every buffer; no argument checks. */
typedef void (*braid_reduce_kernel_fn)(void *dst, const void *const *srcs, int n, size_t begin,
                                       size_t end);
typedef struct {
  braid_reduce_kernel_fn fn[BRAID_REDUCE_NTYPES][BRAID_REDUCE_NOPS];
} braid_reduce_table;

extern const braid_reduce_table braid_reduce_portable;

/* x86-64 only (reduce_x86.c): the AVX2 and AVX-512 kernels, and whether this CPU (and OS)
 * can run them.  Every entry is filled. */
#if defined(__x86_64__)
extern const braid_reduce_table braid_reduce_avx2;
extern const braid_reduce_table braid_reduce_avx512;
int braid_reduce_avx2_usable(void);
int braid_reduce_avx512_usable(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* BRAID_PS_REDUCE_H */
