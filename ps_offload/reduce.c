/*
 * braid-ps reduction: dispatch, the portable kernels and the scalar fp16/bf16/fp8 conversions.
 * The rules every implementation follows are in reduce.h; reduce_x86.c has the SIMD kernels.
 *
 * Bitwise reproducibility of the portable path: each element is folded on its own, in input
 * order, with one IEEE operation per step (a + b or a * b, never a * b + c, so there is nothing
 * the compiler could contract into an FMA; C11 mode also sets -ffp-contract=off in GCC).  The
 * compiler may vectorize these loops across elements, which changes nothing in the results.
 * x86-64 evaluates float in float (FLT_EVAL_METHOD 0), so no excess precision either.
 */
#include "reduce.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "param.h"

/* ---- Bits <-> values ---------------------------------------------------------------------- */

static inline float f32_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* |x| < the target's smallest normal, given as fp32 bits `a` (sign clear): |x| in units of
 * 2^-scale (the target's smallest subnormal), rounded to nearest, ties to even. */
static uint32_t subnormal_rne(uint32_t a, int scale) {
  uint32_t e = a >> 23, m = a & 0x7fffffu;
  if (e != 0)
    m |= 0x800000u;
  else
    e = 1;
  /* |x| = m * 2^(e - 150) = m * 2^-shift units of 2^-scale */
  int shift = 150 - scale - (int)e;
  if (shift >= 32) return 0;
  uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

/* Normal range: rebias fp32 bits `a` by `rebias` exponent steps and keep the top bits after
 * dropping `drop` mantissa bits, rounded to nearest even (a carry may bump the exponent). */
static inline uint32_t normal_rne(uint32_t a, uint32_t rebias, int drop) {
  uint32_t r = a - (rebias << 23);
  return (r + ((1u << (drop - 1)) - 1) + ((r >> drop) & 1)) >> drop;
}

/* The decoders select with masks rather than branches, so that compilers vectorize them. */
static inline uint32_t mask_if(int cond) { return 0u - (uint32_t)(cond != 0); }

static inline float fp16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h & 0x7c00u, m = h & 0x3ffu;
  uint32_t normal = ((uint32_t)(h & 0x7fffu) << 13) + (112u << 23);
  uint32_t special = 0x7f800000u | (m << 13) | (mask_if(m) & 0x400000u); /* inf; NaN made quiet */
  /* subnormal: m * 2^-24, a normal fp32 (or 0): the exact (float)m with 24 off its exponent */
  uint32_t sub = bits_of((float)(int32_t)m) - (mask_if(m) & (24u << 23));
  uint32_t is_sub = mask_if(e == 0), is_special = mask_if(e == 0x7c00u);
  uint32_t r = (sub & is_sub) | (special & is_special) | (normal & ~(is_sub | is_special));
  return f32_of(sign | r);
}

static inline uint16_t f32_to_fp16(float f) {
  uint32_t u = bits_of(f), a = u & 0x7fffffffu;
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if (a > 0x7f800000u) return 0x7e00;
  if (a >= 0x477ff000u) /* >= 65520 rounds past 65504 */
    return sign | 0x7c00;
  if (a >= 0x38800000u) /* >= 2^-14 */
    return (uint16_t)(sign | normal_rne(a, 112, 13));
  return (uint16_t)(sign | subnormal_rne(a, 24));
}

static inline float bf16_to_f32(uint16_t h) { return f32_of((uint32_t)h << 16); }

static inline uint16_t f32_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static inline float e4m3_to_f32(uint8_t b) {
  uint32_t sign = (uint32_t)(b & 0x80u) << 24, mag = b & 0x7fu, m = b & 7u;
  uint32_t normal = (mag << 20) + (120u << 23);
  uint32_t sub = bits_of((float)(int32_t)m) - (mask_if(m) & (9u << 23)); /* m * 2^-9 */
  uint32_t is_sub = mask_if((mag & 0x78u) == 0), is_nan = mask_if(mag == 0x7f);
  uint32_t r = sign | (sub & is_sub) | (normal & ~is_sub);
  return f32_of((0x7fc00000u & is_nan) | (r & ~is_nan));
}

static inline uint8_t f32_to_e4m3(float f) {
  uint32_t u = bits_of(f), a = u & 0x7fffffffu;
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if (a > 0x7f800000u) return 0x7f;
  if (a >= 0x43e00000u) /* >= 448, infinity included: satfinite */
    return sign | 0x7e;
  if (a >= 0x3c800000u) /* >= 2^-6 */
    return (uint8_t)(sign | normal_rne(a, 120, 20));
  return (uint8_t)(sign | subnormal_rne(a, 9));
}

static inline float e5m2_to_f32(uint8_t b) { return fp16_to_f32((uint16_t)(b << 8)); }

static inline uint8_t f32_to_e5m2(float f) {
  uint32_t u = bits_of(f), a = u & 0x7fffffffu;
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if (a > 0x7f800000u) return 0x7e;
  if (a >= 0x47600000u) /* >= 57344, infinity included: satfinite */
    return sign | 0x7b;
  if (a >= 0x38800000u) /* >= 2^-14 */
    return (uint8_t)(sign | normal_rne(a, 112, 21));
  return (uint8_t)(sign | subnormal_rne(a, 16));
}

/* The public names of the conversions (inlined above in the kernels). */
float braid_fp16_to_f32(uint16_t h) { return fp16_to_f32(h); }
uint16_t braid_f32_to_fp16(float f) { return f32_to_fp16(f); }
float braid_bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }
uint16_t braid_f32_to_bf16(float f) { return f32_to_bf16(f); }
float braid_e4m3_to_f32(uint8_t b) { return e4m3_to_f32(b); }
uint8_t braid_f32_to_e4m3(float f) { return f32_to_e4m3(f); }
float braid_e5m2_to_f32(uint8_t b) { return e5m2_to_f32(b); }
uint8_t braid_f32_to_e5m2(float f) { return f32_to_e5m2(f); }

/* ---- Element loads and stores (any alignment) ---------------------------------------------- */

#define DEF_LDST(NAME, T)                    \
  static inline T ld_##NAME(const char *p) { \
    T v;                                     \
    memcpy(&v, p, sizeof v);                 \
    return v;                                \
  }                                          \
  static inline void st_##NAME(char *p, T v) { memcpy(p, &v, sizeof v); }
DEF_LDST(u8, uint8_t)
DEF_LDST(s8, int8_t)
DEF_LDST(u16, uint16_t)
DEF_LDST(u32, uint32_t)
DEF_LDST(s32, int32_t)
DEF_LDST(u64, uint64_t)
DEF_LDST(s64, int64_t)
DEF_LDST(f64, double)

static inline float ld_f32(const char *p) { return f32_of(ld_u32(p)); }
static inline void st_f32(char *p, float v) { st_u32(p, isnan(v) ? 0x7fc00000u : bits_of(v)); }
static inline void st_f64c(char *p, double v) {
  if (isnan(v))
    st_u64(p, 0x7ff8000000000000ull);
  else
    st_f64(p, v);
}
static inline float ld_fp16(const char *p) { return fp16_to_f32(ld_u16(p)); }
static inline void st_fp16(char *p, float v) { st_u16(p, f32_to_fp16(v)); }
static inline float ld_bf16(const char *p) { return bf16_to_f32(ld_u16(p)); }
static inline void st_bf16(char *p, float v) { st_u16(p, f32_to_bf16(v)); }
static inline float ld_e4m3(const char *p) { return e4m3_to_f32(ld_u8(p)); }
static inline void st_e4m3(char *p, float v) { st_u8(p, f32_to_e4m3(v)); }
static inline float ld_e5m2(const char *p) { return e5m2_to_f32(ld_u8(p)); }
static inline void st_e5m2(char *p, float v) { st_u8(p, f32_to_e5m2(v)); }

/* ---- Operators ----------------------------------------------------------------------------- */

#define OP_ADD(a, b) ((a) + (b))
#define OP_MUL(a, b) ((a) * (b))
#define OP_MAX(a, b) ((a) > (b) ? (a) : (b))
#define OP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define OP_FMAX(a, b) (isnan(a) ? (a) : OP_MAX(a, b))
#define OP_FMIN(a, b) (isnan(a) ? (a) : OP_MIN(a, b))

/* ---- Kernels ------------------------------------------------------------------------------- */

/* Elements are folded in blocks of CHUNK: each input is read once, dst written once, and the
 * fixed-length inner loops let the compiler vectorize them across elements. */
#define CHUNK 64

#define FOLD_BLOCK(A, ESZ, LD, OP, ST, M)                         \
  do {                                                            \
    for (size_t k = 0; k < (M); k++) acc[k] = LD(s0 + k * (ESZ)); \
    for (int j = 1; j < n; j++) {                                 \
      const char *s = (const char *)srcs[j] + i * (ESZ);          \
      for (size_t k = 0; k < (M); k++) {                          \
        A x = LD(s + k * (ESZ));                                  \
        acc[k] = OP(acc[k], x);                                   \
      }                                                           \
    }                                                             \
    for (size_t k = 0; k < (M); k++) ST(d + k * (ESZ), acc[k]);   \
  } while (0)

#define PORTABLE_KERNEL(NAME, A, ESZ, LD, OP, ST)                                         \
  static void NAME(void *dst, const void *const *srcs, int n, size_t begin, size_t end) { \
    A acc[CHUNK];                                                                         \
    for (size_t i = begin; i < end; i += CHUNK) {                                         \
      const char *s0 = (const char *)srcs[0] + i * (ESZ);                                 \
      char *d = (char *)dst + i * (ESZ);                                                  \
      if (end - i >= CHUNK) {                                                             \
        FOLD_BLOCK(A, ESZ, LD, OP, ST, CHUNK);                                            \
      } else {                                                                            \
        size_t m = end - i;                                                               \
        FOLD_BLOCK(A, ESZ, LD, OP, ST, m);                                                \
      }                                                                                   \
    }                                                                                     \
  }

/* Integers: sums and products on the unsigned type (wrapping, same bits for signed). */
#define INT_KERNELS(U, S, UT, ST_, ESZ)                          \
  PORTABLE_KERNEL(k_##U##_sum, UT, ESZ, ld_##U, OP_ADD, st_##U)  \
  PORTABLE_KERNEL(k_##U##_prod, UT, ESZ, ld_##U, OP_MUL, st_##U) \
  PORTABLE_KERNEL(k_##U##_max, UT, ESZ, ld_##U, OP_MAX, st_##U)  \
  PORTABLE_KERNEL(k_##U##_min, UT, ESZ, ld_##U, OP_MIN, st_##U)  \
  PORTABLE_KERNEL(k_##S##_max, ST_, ESZ, ld_##S, OP_MAX, st_##S) \
  PORTABLE_KERNEL(k_##S##_min, ST_, ESZ, ld_##S, OP_MIN, st_##S)
INT_KERNELS(u8, s8, uint8_t, int8_t, 1)
INT_KERNELS(u32, s32, uint32_t, int32_t, 4)
INT_KERNELS(u64, s64, uint64_t, int64_t, 8)

#define FLOAT_KERNELS(NAME, A, ESZ, LD, ST)                \
  PORTABLE_KERNEL(k_##NAME##_sum, A, ESZ, LD, OP_ADD, ST)  \
  PORTABLE_KERNEL(k_##NAME##_prod, A, ESZ, LD, OP_MUL, ST) \
  PORTABLE_KERNEL(k_##NAME##_max, A, ESZ, LD, OP_FMAX, ST) \
  PORTABLE_KERNEL(k_##NAME##_min, A, ESZ, LD, OP_FMIN, ST)
FLOAT_KERNELS(f32, float, 4, ld_f32, st_f32)
FLOAT_KERNELS(f64, double, 8, ld_f64, st_f64c)
FLOAT_KERNELS(fp16, float, 2, ld_fp16, st_fp16)
FLOAT_KERNELS(bf16, float, 2, ld_bf16, st_bf16)
FLOAT_KERNELS(e4m3, float, 1, ld_e4m3, st_e4m3)
FLOAT_KERNELS(e5m2, float, 1, ld_e5m2, st_e5m2)

#define ROW(SUM, PROD, MAX, MIN) \
  { k_##SUM##_sum, k_##PROD##_prod, k_##MAX##_max, k_##MIN##_min }
const braid_reduce_table braid_reduce_portable = {{
    [ncclInt8] = ROW(u8, u8, s8, s8),
    [ncclUint8] = ROW(u8, u8, u8, u8),
    [ncclInt32] = ROW(u32, u32, s32, s32),
    [ncclUint32] = ROW(u32, u32, u32, u32),
    [ncclInt64] = ROW(u64, u64, s64, s64),
    [ncclUint64] = ROW(u64, u64, u64, u64),
    [ncclFloat16] = ROW(fp16, fp16, fp16, fp16),
    [ncclFloat32] = ROW(f32, f32, f32, f32),
    [ncclFloat64] = ROW(f64, f64, f64, f64),
    [ncclBfloat16] = ROW(bf16, bf16, bf16, bf16),
    [ncclFloat8e4m3] = ROW(e4m3, e4m3, e4m3, e4m3),
    [ncclFloat8e5m2] = ROW(e5m2, e5m2, e5m2, e5m2),
}};

/* ---- Dispatch ------------------------------------------------------------------------------ */

enum { LEVEL_PORTABLE, LEVEL_AVX2, LEVEL_AVX512, NLEVELS };
static const char *const level_names[NLEVELS] = {"portable", "avx2", "avx512"};
static _Atomic int current_level = -1;

static int level_usable(int level) {
  switch (level) {
    case LEVEL_PORTABLE:
      return 1;
#if defined(__x86_64__)
    case LEVEL_AVX2:
      return braid_reduce_avx2_usable();
    case LEVEL_AVX512:
      return braid_reduce_avx512_usable();
#endif
    default:
      return 0;
  }
}

static const braid_reduce_table *level_table(int level) {
#if defined(__x86_64__)
  if (level == LEVEL_AVX512) return &braid_reduce_avx512;
  if (level == LEVEL_AVX2) return &braid_reduce_avx2;
#endif
  (void)level;
  return &braid_reduce_portable;
}

static int level_by_name(const char *name) {
  for (int l = 0; name && l < NLEVELS; l++)
    if (strcmp(name, level_names[l]) == 0) return l;
  return -1;
}

static int level_now(void) {
  int level = atomic_load_explicit(&current_level, memory_order_acquire);
  if (level >= 0) return level;
  int chosen = LEVEL_PORTABLE;
  for (int l = NLEVELS - 1; l > LEVEL_PORTABLE; l--)
    if (level_usable(l)) {
      chosen = l;
      break;
    }
  int asked = level_by_name(braid_param_env(BRAID_P_PS_SIMD));
  if (asked >= 0 && level_usable(asked)) chosen = asked;
  int expected = -1; /* a concurrent braid_reduce_force wins */
  atomic_compare_exchange_strong(&current_level, &expected, chosen);
  return atomic_load_explicit(&current_level, memory_order_acquire);
}

const char *braid_reduce_impl(void) { return level_names[level_now()]; }

int braid_reduce_force(const char *name) {
  int level = level_by_name(name);
  if (level < 0 || !level_usable(level)) return -1;
  atomic_store_explicit(&current_level, level, memory_order_release);
  return 0;
}

static const size_t type_sizes[BRAID_REDUCE_NTYPES] = {
    [ncclInt8] = 1,    [ncclUint8] = 1,    [ncclInt32] = 4,      [ncclUint32] = 4,
    [ncclInt64] = 8,   [ncclUint64] = 8,   [ncclFloat16] = 2,    [ncclFloat32] = 4,
    [ncclFloat64] = 8, [ncclBfloat16] = 2, [ncclFloat8e4m3] = 1, [ncclFloat8e5m2] = 1,
};

size_t braid_reduce_type_size(int dtype) {
  return dtype >= 0 && dtype < BRAID_REDUCE_NTYPES ? type_sizes[dtype] : 0;
}

int braid_reduce_supported(int dtype, int op) {
  return dtype >= 0 && dtype < BRAID_REDUCE_NTYPES && op >= 0 && op < BRAID_REDUCE_NOPS;
}

int braid_reduce(void *dst, const void *const *srcs, int n, size_t count, int dtype, int op) {
  if (!braid_reduce_supported(dtype, op) || n < 1) return -1;
  if (count == 0) return 0;
  level_table(level_now())->fn[dtype][op](dst, srcs, n, 0, count);
  return 0;
}
