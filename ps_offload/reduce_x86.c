/*
 * braid-ps reduction: the AVX2 and AVX-512 kernels (x86-64 only; elsewhere this file is empty).
 *
 * Same rules as the portable kernels in reduce.c, bit for bit: vectors run across elements,
 * every input is folded into the accumulator in index order with one IEEE operation (never an
 * FMA: the target attributes below do not enable it), conversions are exact or round to
 * nearest-even with explicit rounding immediates (not MXCSR's mode), and every float result
 * that is NaN is replaced by the canonical NaN before it is stored.  Each kernel reads every
 * input once and writes dst once; the ragged tail goes to the portable kernel.
 *
 * Function attributes select the instruction sets, so this file needs no special compiler
 * flags; reduce.c only calls these kernels after braid_reduce_*_usable() said yes.
 */
#include "reduce.h"

#if defined(__x86_64__)

#include <cpuid.h>
#include <immintrin.h>

/* ---- Kernel skeleton ----------------------------------------------------------------------- */

/* 4 vectors of STEP elements per input per iteration, then single vectors, then the portable
 * kernel for the last < STEP elements.  dst == srcs[0] is fine: a block of dst is written only
 * after every input's block was read. */
#define X86_KERNEL(NAME, TGT, V, ESZ, STEP, LD, OP, ST, DT, OPC)                                   \
  TGT static void NAME(void *dst, const void *const *srcs, int n, size_t i, size_t end) {          \
    char *d = (char *)dst;                                                                         \
    const char *s0 = (const char *)srcs[0];                                                        \
    const size_t vb = (size_t)(STEP) * (ESZ);                                                      \
    for (; end - i >= 4 * (size_t)(STEP); i += 4 * (size_t)(STEP)) {                               \
      size_t o = i * (ESZ);                                                                        \
      V a0 = LD(s0 + o), a1 = LD(s0 + o + vb), a2 = LD(s0 + o + 2 * vb), a3 = LD(s0 + o + 3 * vb); \
      for (int j = 1; j < n; j++) {                                                                \
        const char *s = (const char *)srcs[j] + o;                                                 \
        a0 = OP(a0, LD(s));                                                                        \
        a1 = OP(a1, LD(s + vb));                                                                   \
        a2 = OP(a2, LD(s + 2 * vb));                                                               \
        a3 = OP(a3, LD(s + 3 * vb));                                                               \
      }                                                                                            \
      ST(d + o, a0);                                                                               \
      ST(d + o + vb, a1);                                                                          \
      ST(d + o + 2 * vb, a2);                                                                      \
      ST(d + o + 3 * vb, a3);                                                                      \
    }                                                                                              \
    for (; end - i >= (size_t)(STEP); i += (STEP)) {                                               \
      size_t o = i * (ESZ);                                                                        \
      V a0 = LD(s0 + o);                                                                           \
      for (int j = 1; j < n; j++) a0 = OP(a0, LD((const char *)srcs[j] + o));                      \
      ST(d + o, a0);                                                                               \
    }                                                                                              \
    if (i < end) braid_reduce_portable.fn[DT][OPC](dst, srcs, n, i, end);                          \
  }

/* The four ops of one float dtype; P is the ISA prefix, T the type's load/store suffix,
 * F the accumulator's op suffix (ps or pd). */
#define FLOAT_KERNELS(P, TGT, V, ESZ, STEP, T, F, DT)                                              \
  X86_KERNEL(P##_##T##_sum, TGT, V, ESZ, STEP, P##_ld_##T, P##_add_##F, P##_st_##T, DT, ncclSum)   \
  X86_KERNEL(P##_##T##_prod, TGT, V, ESZ, STEP, P##_ld_##T, P##_mul_##F, P##_st_##T, DT, ncclProd) \
  X86_KERNEL(P##_##T##_max, TGT, V, ESZ, STEP, P##_ld_##T, P##_max_##F, P##_st_##T, DT, ncclMax)   \
  X86_KERNEL(P##_##T##_min, TGT, V, ESZ, STEP, P##_ld_##T, P##_min_##F, P##_st_##T, DT, ncclMin)

/* Integers: sum/prod on the unsigned type; max/min signed (S) and unsigned (U). */
#define INT_KERNELS(P, TGT, V, ESZ, STEP, W, DT_S, DT_U)                                          \
  X86_KERNEL(P##_s##W##_sum, TGT, V, ESZ, STEP, P##_ld_i, P##_add_##W, P##_st_i, DT_S, ncclSum)   \
  X86_KERNEL(P##_s##W##_prod, TGT, V, ESZ, STEP, P##_ld_i, P##_mul_##W, P##_st_i, DT_S, ncclProd) \
  X86_KERNEL(P##_s##W##_max, TGT, V, ESZ, STEP, P##_ld_i, P##_smax_##W, P##_st_i, DT_S, ncclMax)  \
  X86_KERNEL(P##_s##W##_min, TGT, V, ESZ, STEP, P##_ld_i, P##_smin_##W, P##_st_i, DT_S, ncclMin)  \
  X86_KERNEL(P##_u##W##_sum, TGT, V, ESZ, STEP, P##_ld_i, P##_add_##W, P##_st_i, DT_U, ncclSum)   \
  X86_KERNEL(P##_u##W##_prod, TGT, V, ESZ, STEP, P##_ld_i, P##_mul_##W, P##_st_i, DT_U, ncclProd) \
  X86_KERNEL(P##_u##W##_max, TGT, V, ESZ, STEP, P##_ld_i, P##_umax_##W, P##_st_i, DT_U, ncclMax)  \
  X86_KERNEL(P##_u##W##_min, TGT, V, ESZ, STEP, P##_ld_i, P##_umin_##W, P##_st_i, DT_U, ncclMin)

/* clang-format off */
#define ROW(P, T) {P##_##T##_sum, P##_##T##_prod, P##_##T##_max, P##_##T##_min}
#define TABLE(P)                                                                                   \
  {{                                                                                               \
      [ncclInt8] = ROW(P, s8),         [ncclUint8] = ROW(P, u8),                                   \
      [ncclInt32] = ROW(P, s32),       [ncclUint32] = ROW(P, u32),                                 \
      [ncclInt64] = ROW(P, s64),       [ncclUint64] = ROW(P, u64),                                 \
      [ncclFloat16] = ROW(P, fp16),    [ncclFloat32] = ROW(P, f32),                                \
      [ncclFloat64] = ROW(P, f64),     [ncclBfloat16] = ROW(P, bf16),                              \
      [ncclFloat8e4m3] = ROW(P, e4m3), [ncclFloat8e5m2] = ROW(P, e5m2),                            \
  }}
/* clang-format on */

/* fp32 bits of the fp8 formats' limits (see braid_f32_to_e4m3/e5m2 in reduce.c). */
#define E4M3_NAN 0x7f
#define E4M3_SAT_A 0x43e00000 /* 448 */
#define E4M3_SAT 0x7e
#define E4M3_MIN_NORMAL_A 0x3c800000 /* 2^-6 */
#define E5M2_NAN 0x7e
#define E5M2_SAT_A 0x47600000 /* 57344 */
#define E5M2_SAT 0x7b
#define E5M2_MIN_NORMAL_A 0x38800000 /* 2^-14 */

/* ================================ AVX2 (+F16C) ================================================ */

#define TY __attribute__((target("avx2,f16c")))
#define YI static inline TY

/* -- fp32 accumulators */
YI __m256 y_canon_ps(__m256 v) {
  return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)),
                          _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}
YI __m256 y_add_ps(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
YI __m256 y_mul_ps(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
/* isnan(a) ? a : (a > b ? a : b), as MAXPS(a, b) is exactly a > b ? a : b */
YI __m256 y_max_ps(__m256 a, __m256 b) {
  return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}
YI __m256 y_min_ps(__m256 a, __m256 b) {
  return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

YI __m256 y_ld_f32(const char *p) { return _mm256_loadu_ps((const float *)p); }
YI void y_st_f32(char *p, __m256 v) { _mm256_storeu_ps((float *)p, y_canon_ps(v)); }

/* bf16 in pairs of accumulators: a 32-byte load holds 16 values; the even ones become fp32 by
 * a shift, the odd ones by a mask, with no widening or packing.  Each element still has its own
 * accumulator lane, so the fold is unchanged. */
typedef struct {
  __m256 e, o;
} y_pair;
YI y_pair y_add_pair(y_pair a, y_pair b) {
  return (y_pair){y_add_ps(a.e, b.e), y_add_ps(a.o, b.o)};
}
YI y_pair y_mul_pair(y_pair a, y_pair b) {
  return (y_pair){y_mul_ps(a.e, b.e), y_mul_ps(a.o, b.o)};
}
YI y_pair y_max_pair(y_pair a, y_pair b) {
  return (y_pair){y_max_ps(a.e, b.e), y_max_ps(a.o, b.o)};
}
YI y_pair y_min_pair(y_pair a, y_pair b) {
  return (y_pair){y_min_ps(a.e, b.e), y_min_ps(a.o, b.o)};
}

YI y_pair y_ld_bf16(const char *p) {
  __m256i x = _mm256_loadu_si256((const __m256i *)p);
  return (y_pair){_mm256_castsi256_ps(_mm256_slli_epi32(x, 16)),
                  _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)))};
}
/* fp32 -> bf16 rounded to nearest even, left in the upper half of each lane */
YI __m256i y_bf16_hi(__m256 v) {
  __m256i u = _mm256_castps_si256(y_canon_ps(v));
  __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd);
}
YI void y_st_bf16(char *p, y_pair v) {
  __m256i e = _mm256_srli_epi32(y_bf16_hi(v.e), 16);
  __m256i o = _mm256_and_si256(y_bf16_hi(v.o), _mm256_set1_epi32((int)0xffff0000u));
  _mm256_storeu_si256((__m256i *)p, _mm256_or_si256(e, o));
}

/* fp16 in pairs too: a 32-byte load per pair, so that each input is read in long runs. */
YI y_pair y_ld_fp16(const char *p) {
  __m256i x = _mm256_loadu_si256((const __m256i *)p);
  return (y_pair){_mm256_cvtph_ps(_mm256_castsi256_si128(x)),
                  _mm256_cvtph_ps(_mm256_extracti128_si256(x, 1))};
}
YI void y_st_fp16(char *p, y_pair v) {
  __m128i lo = _mm256_cvtps_ph(y_canon_ps(v.e), _MM_FROUND_TO_NEAREST_INT);
  __m128i hi = _mm256_cvtps_ph(y_canon_ps(v.o), _MM_FROUND_TO_NEAREST_INT);
  _mm256_storeu_si256((__m256i *)p, _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* fp8: 8 bytes <-> 8 int32 lanes */
YI __m256i y_ld_bytes8(const char *p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}
YI void y_st_bytes8(char *p, __m256i r) {
  __m256i w = _mm256_packus_epi32(r, r);
  __m256i b = _mm256_packus_epi16(w, w);
  __m128i out = _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  _mm_storel_epi64((__m128i *)p, out);
}

YI __m256 y_ld_e4m3(const char *p) {
  __m256i b = y_ld_bytes8(p);
  __m256i mag = _mm256_and_si256(b, _mm256_set1_epi32(0x7f));
  __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
  __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23));
  __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(7))),
                             _mm256_set1_ps(0x1p-9f));
  __m256i is_sub =
      _mm256_cmpeq_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x78)), _mm256_setzero_si256());
  __m256i r = _mm256_blendv_epi8(normal, _mm256_castps_si256(sub), is_sub);
  r = _mm256_or_si256(r, sign);
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc00000),
                         _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7f)));
  return _mm256_castsi256_ps(r);
}

YI __m256 y_ld_e5m2(const char *p) {
  __m128i h = _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p)), 8);
  return _mm256_cvtph_ps(h);
}

/* fp32 -> fp8 code per int32 lane, as braid_f32_to_e4m3/e5m2.  `a` (sign cleared) is below
 * 2^31, so signed compares are fine. */
YI __m256i y_enc_fp8(__m256 v, int nan_code, int sat_a, int sat_code, int min_normal_a, int rebias,
                     int drop, float sub_scale) {
  __m256i u = _mm256_castps_si256(v);
  __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80));
  __m256i r = _mm256_sub_epi32(a, _mm256_set1_epi32(rebias << 23));
  __m256i odd = _mm256_and_si256(_mm256_srli_epi32(r, drop), _mm256_set1_epi32(1));
  __m256i normal =
      _mm256_add_epi32(_mm256_add_epi32(r, _mm256_set1_epi32((1 << (drop - 1)) - 1)), odd);
  normal = _mm256_srl_epi32(normal, _mm_cvtsi32_si128(drop));
  __m256 scaled = _mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(sub_scale));
  __m256i sub =
      _mm256_cvttps_epi32(_mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i code =
      _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(min_normal_a), a));
  code = _mm256_blendv_epi8(code, _mm256_set1_epi32(sat_code),
                            _mm256_cmpgt_epi32(a, _mm256_set1_epi32(sat_a - 1)));
  code = _mm256_or_si256(code, sign);
  return _mm256_blendv_epi8(code, _mm256_set1_epi32(nan_code),
                            _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)));
}
YI void y_st_e4m3(char *p, __m256 v) {
  y_st_bytes8(p, y_enc_fp8(v, E4M3_NAN, E4M3_SAT_A, E4M3_SAT, E4M3_MIN_NORMAL_A, 120, 20, 0x1p9f));
}
YI void y_st_e5m2(char *p, __m256 v) {
  y_st_bytes8(p, y_enc_fp8(v, E5M2_NAN, E5M2_SAT_A, E5M2_SAT, E5M2_MIN_NORMAL_A, 112, 21, 0x1p16f));
}

/* -- fp64 */
YI __m256d y_add_pd(__m256d a, __m256d b) { return _mm256_add_pd(a, b); }
YI __m256d y_mul_pd(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }
YI __m256d y_max_pd(__m256d a, __m256d b) {
  return _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}
YI __m256d y_min_pd(__m256d a, __m256d b) {
  return _mm256_blendv_pd(_mm256_min_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}
YI __m256d y_ld_f64(const char *p) { return _mm256_loadu_pd((const double *)p); }
YI void y_st_f64(char *p, __m256d v) {
  __m256d nan = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7ff8000000000000ll));
  _mm256_storeu_pd((double *)p, _mm256_blendv_pd(v, nan, _mm256_cmp_pd(v, v, _CMP_UNORD_Q)));
}

/* -- integers */
YI __m256i y_ld_i(const char *p) { return _mm256_loadu_si256((const __m256i *)p); }
YI void y_st_i(char *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }

YI __m256i y_add_8(__m256i a, __m256i b) { return _mm256_add_epi8(a, b); }
YI __m256i y_mul_8(__m256i a, __m256i b) /* low byte of 16-bit products, even and odd bytes */
{
  __m256i even = _mm256_and_si256(_mm256_mullo_epi16(a, b), _mm256_set1_epi16(0xff));
  __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
  return _mm256_or_si256(even, _mm256_slli_epi16(odd, 8));
}
YI __m256i y_smax_8(__m256i a, __m256i b) { return _mm256_max_epi8(a, b); }
YI __m256i y_smin_8(__m256i a, __m256i b) { return _mm256_min_epi8(a, b); }
YI __m256i y_umax_8(__m256i a, __m256i b) { return _mm256_max_epu8(a, b); }
YI __m256i y_umin_8(__m256i a, __m256i b) { return _mm256_min_epu8(a, b); }

YI __m256i y_add_32(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
YI __m256i y_mul_32(__m256i a, __m256i b) { return _mm256_mullo_epi32(a, b); }
YI __m256i y_smax_32(__m256i a, __m256i b) { return _mm256_max_epi32(a, b); }
YI __m256i y_smin_32(__m256i a, __m256i b) { return _mm256_min_epi32(a, b); }
YI __m256i y_umax_32(__m256i a, __m256i b) { return _mm256_max_epu32(a, b); }
YI __m256i y_umin_32(__m256i a, __m256i b) { return _mm256_min_epu32(a, b); }

YI __m256i y_add_64(__m256i a, __m256i b) { return _mm256_add_epi64(a, b); }
YI __m256i y_mul_64(__m256i a, __m256i b) /* lo*lo + ((hi*lo + lo*hi) << 32), mod 2^64 */
{
  __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                   _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
  return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}
YI __m256i y_smax_64(__m256i a, __m256i b) {
  return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b));
}
YI __m256i y_smin_64(__m256i a, __m256i b) {
  return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(b, a));
}
YI __m256i y_ugt_64(__m256i a, __m256i b) {
  __m256i bias = _mm256_set1_epi64x((long long)0x8000000000000000ull);
  return _mm256_cmpgt_epi64(_mm256_xor_si256(a, bias), _mm256_xor_si256(b, bias));
}
YI __m256i y_umax_64(__m256i a, __m256i b) { return _mm256_blendv_epi8(b, a, y_ugt_64(a, b)); }
YI __m256i y_umin_64(__m256i a, __m256i b) { return _mm256_blendv_epi8(b, a, y_ugt_64(b, a)); }

FLOAT_KERNELS(y, TY, __m256, 4, 8, f32, ps, ncclFloat32)
FLOAT_KERNELS(y, TY, y_pair, 2, 16, fp16, pair, ncclFloat16)
FLOAT_KERNELS(y, TY, y_pair, 2, 16, bf16, pair, ncclBfloat16)
FLOAT_KERNELS(y, TY, __m256, 1, 8, e4m3, ps, ncclFloat8e4m3)
FLOAT_KERNELS(y, TY, __m256, 1, 8, e5m2, ps, ncclFloat8e5m2)
FLOAT_KERNELS(y, TY, __m256d, 8, 4, f64, pd, ncclFloat64)
INT_KERNELS(y, TY, __m256i, 1, 32, 8, ncclInt8, ncclUint8)
INT_KERNELS(y, TY, __m256i, 4, 8, 32, ncclInt32, ncclUint32)
INT_KERNELS(y, TY, __m256i, 8, 4, 64, ncclInt64, ncclUint64)

const braid_reduce_table braid_reduce_avx2 = TABLE(y);

/* ========================= AVX-512 (F, BW, VL, DQ; with AVX2, F16C) =========================== */

#define TZ __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")))
#define ZI static inline TZ

/* -- fp32 accumulators */
ZI __m512 z_canon_ps(__m512 v) {
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                            _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
}
ZI __m512 z_add_ps(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
ZI __m512 z_mul_ps(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
/* isnan(a) ? a : (a > b ? a : b): the max only where a is ordered */
ZI __m512 z_max_ps(__m512 a, __m512 b) {
  return _mm512_mask_max_ps(a, _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), a, b);
}
ZI __m512 z_min_ps(__m512 a, __m512 b) {
  return _mm512_mask_min_ps(a, _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), a, b);
}

ZI __m512 z_ld_f32(const char *p) { return _mm512_loadu_ps(p); }
ZI void z_st_f32(char *p, __m512 v) { _mm512_storeu_ps(p, z_canon_ps(v)); }

/* bf16 in pairs of accumulators, as in the AVX2 kernels. */
typedef struct {
  __m512 e, o;
} z_pair;
ZI z_pair z_add_pair(z_pair a, z_pair b) {
  return (z_pair){z_add_ps(a.e, b.e), z_add_ps(a.o, b.o)};
}
ZI z_pair z_mul_pair(z_pair a, z_pair b) {
  return (z_pair){z_mul_ps(a.e, b.e), z_mul_ps(a.o, b.o)};
}
ZI z_pair z_max_pair(z_pair a, z_pair b) {
  return (z_pair){z_max_ps(a.e, b.e), z_max_ps(a.o, b.o)};
}
ZI z_pair z_min_pair(z_pair a, z_pair b) {
  return (z_pair){z_min_ps(a.e, b.e), z_min_ps(a.o, b.o)};
}

ZI z_pair z_ld_bf16(const char *p) {
  __m512i x = _mm512_loadu_si512(p);
  return (z_pair){_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)),
                  _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)))};
}
ZI __m512i z_bf16_hi(__m512 v) {
  __m512i u = _mm512_castps_si512(z_canon_ps(v));
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  return _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd);
}
ZI void z_st_bf16(char *p, z_pair v) {
  __m512i e = _mm512_srli_epi32(z_bf16_hi(v.e), 16);
  __m512i o = _mm512_and_si512(z_bf16_hi(v.o), _mm512_set1_epi32((int)0xffff0000u));
  _mm512_storeu_si512(p, _mm512_or_si512(e, o));
}

/* fp16 in pairs too (a 64-byte load per pair). */
ZI z_pair z_ld_fp16(const char *p) {
  __m512i x = _mm512_loadu_si512(p);
  return (z_pair){_mm512_cvtph_ps(_mm512_castsi512_si256(x)),
                  _mm512_cvtph_ps(_mm512_extracti64x4_epi64(x, 1))};
}
#define Z_RN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) /* must be an immediate */
ZI void z_st_fp16(char *p, z_pair v) {
  __m256i lo = _mm512_cvtps_ph(z_canon_ps(v.e), Z_RN), hi = _mm512_cvtps_ph(z_canon_ps(v.o), Z_RN);
  _mm512_storeu_si512(p, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
}

/* fp8: 16 bytes <-> 16 int32 lanes */
ZI __m512 z_ld_e4m3(const char *p) {
  __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
  __m512i mag = _mm512_and_si512(b, _mm512_set1_epi32(0x7f));
  __m512i sign = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24);
  __m512i normal = _mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23));
  __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(7))),
                             _mm512_set1_ps(0x1p-9f));
  __mmask16 is_sub = _mm512_testn_epi32_mask(b, _mm512_set1_epi32(0x78));
  __m512i r = _mm512_mask_mov_epi32(normal, is_sub, _mm512_castps_si512(sub));
  r = _mm512_or_si512(r, sign);
  r = _mm512_mask_mov_epi32(r, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7f)),
                            _mm512_set1_epi32(0x7fc00000));
  return _mm512_castsi512_ps(r);
}

ZI __m512 z_ld_e5m2(const char *p) {
  __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)), 8);
  return _mm512_cvtph_ps(h);
}

ZI __m128i z_enc_fp8(__m512 v, int nan_code, unsigned sat_a, int sat_code, unsigned min_normal_a,
                     int rebias, unsigned drop, float sub_scale) {
  __m512i u = _mm512_castps_si512(v);
  __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80));
  __m512i r = _mm512_sub_epi32(a, _mm512_set1_epi32(rebias << 23));
  __m512i odd =
      _mm512_and_si512(_mm512_srl_epi32(r, _mm_cvtsi32_si128((int)drop)), _mm512_set1_epi32(1));
  __m512i code =
      _mm512_add_epi32(_mm512_add_epi32(r, _mm512_set1_epi32((1 << (drop - 1)) - 1)), odd);
  code = _mm512_srl_epi32(code, _mm_cvtsi32_si128((int)drop));
  __m512 scaled = _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(sub_scale));
  __m512i sub = _mm512_cvttps_epi32(
      _mm512_roundscale_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  code = _mm512_mask_mov_epi32(
      code, _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32((int)min_normal_a)), sub);
  code = _mm512_mask_mov_epi32(code, _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)sat_a)),
                               _mm512_set1_epi32(sat_code));
  code = _mm512_or_si512(code, sign);
  code = _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000)),
                               _mm512_set1_epi32(nan_code));
  return _mm512_cvtepi32_epi8(code);
}
ZI void z_st_e4m3(char *p, __m512 v) {
  _mm_storeu_si128((__m128i *)p, z_enc_fp8(v, E4M3_NAN, E4M3_SAT_A, E4M3_SAT, E4M3_MIN_NORMAL_A,
                                           120, 20, 0x1p9f));
}
ZI void z_st_e5m2(char *p, __m512 v) {
  _mm_storeu_si128((__m128i *)p, z_enc_fp8(v, E5M2_NAN, E5M2_SAT_A, E5M2_SAT, E5M2_MIN_NORMAL_A,
                                           112, 21, 0x1p16f));
}

/* -- fp64 */
ZI __m512d z_add_pd(__m512d a, __m512d b) { return _mm512_add_pd(a, b); }
ZI __m512d z_mul_pd(__m512d a, __m512d b) { return _mm512_mul_pd(a, b); }
ZI __m512d z_max_pd(__m512d a, __m512d b) {
  return _mm512_mask_max_pd(a, _mm512_cmp_pd_mask(a, a, _CMP_ORD_Q), a, b);
}
ZI __m512d z_min_pd(__m512d a, __m512d b) {
  return _mm512_mask_min_pd(a, _mm512_cmp_pd_mask(a, a, _CMP_ORD_Q), a, b);
}
ZI __m512d z_ld_f64(const char *p) { return _mm512_loadu_pd(p); }
ZI void z_st_f64(char *p, __m512d v) {
  __m512d nan = _mm512_castsi512_pd(_mm512_set1_epi64(0x7ff8000000000000ll));
  _mm512_storeu_pd(p, _mm512_mask_mov_pd(v, _mm512_cmp_pd_mask(v, v, _CMP_UNORD_Q), nan));
}

/* -- integers */
ZI __m512i z_ld_i(const char *p) { return _mm512_loadu_si512(p); }
ZI void z_st_i(char *p, __m512i v) { _mm512_storeu_si512(p, v); }

ZI __m512i z_add_8(__m512i a, __m512i b) { return _mm512_add_epi8(a, b); }
ZI __m512i z_mul_8(__m512i a, __m512i b) {
  __m512i even = _mm512_and_si512(_mm512_mullo_epi16(a, b), _mm512_set1_epi16(0xff));
  __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
  return _mm512_or_si512(even, _mm512_slli_epi16(odd, 8));
}
ZI __m512i z_smax_8(__m512i a, __m512i b) { return _mm512_max_epi8(a, b); }
ZI __m512i z_smin_8(__m512i a, __m512i b) { return _mm512_min_epi8(a, b); }
ZI __m512i z_umax_8(__m512i a, __m512i b) { return _mm512_max_epu8(a, b); }
ZI __m512i z_umin_8(__m512i a, __m512i b) { return _mm512_min_epu8(a, b); }

ZI __m512i z_add_32(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }
ZI __m512i z_mul_32(__m512i a, __m512i b) { return _mm512_mullo_epi32(a, b); }
ZI __m512i z_smax_32(__m512i a, __m512i b) { return _mm512_max_epi32(a, b); }
ZI __m512i z_smin_32(__m512i a, __m512i b) { return _mm512_min_epi32(a, b); }
ZI __m512i z_umax_32(__m512i a, __m512i b) { return _mm512_max_epu32(a, b); }
ZI __m512i z_umin_32(__m512i a, __m512i b) { return _mm512_min_epu32(a, b); }

ZI __m512i z_add_64(__m512i a, __m512i b) { return _mm512_add_epi64(a, b); }
ZI __m512i z_mul_64(__m512i a, __m512i b) { return _mm512_mullo_epi64(a, b); }
ZI __m512i z_smax_64(__m512i a, __m512i b) { return _mm512_max_epi64(a, b); }
ZI __m512i z_smin_64(__m512i a, __m512i b) { return _mm512_min_epi64(a, b); }
ZI __m512i z_umax_64(__m512i a, __m512i b) { return _mm512_max_epu64(a, b); }
ZI __m512i z_umin_64(__m512i a, __m512i b) { return _mm512_min_epu64(a, b); }

FLOAT_KERNELS(z, TZ, __m512, 4, 16, f32, ps, ncclFloat32)
FLOAT_KERNELS(z, TZ, z_pair, 2, 32, fp16, pair, ncclFloat16)
FLOAT_KERNELS(z, TZ, z_pair, 2, 32, bf16, pair, ncclBfloat16)
FLOAT_KERNELS(z, TZ, __m512, 1, 16, e4m3, ps, ncclFloat8e4m3)
FLOAT_KERNELS(z, TZ, __m512, 1, 16, e5m2, ps, ncclFloat8e5m2)
FLOAT_KERNELS(z, TZ, __m512d, 8, 8, f64, pd, ncclFloat64)
INT_KERNELS(z, TZ, __m512i, 1, 64, 8, ncclInt8, ncclUint8)
INT_KERNELS(z, TZ, __m512i, 4, 16, 32, ncclInt32, ncclUint32)
INT_KERNELS(z, TZ, __m512i, 8, 8, 64, ncclInt64, ncclUint64)

const braid_reduce_table braid_reduce_avx512 = TABLE(z);

/* ---- CPU checks (libgcc's also check that the OS saves the wider registers) ---------------- */

/* F16C through CPUID: not every compiler's __builtin_cpu_supports knows its name.  (The AVX
 * check has already confirmed that the OS saves the ymm registers.) */
static int cpu_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

int braid_reduce_avx2_usable(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && cpu_has_f16c();
}

int braid_reduce_avx512_usable(void) {
  return braid_reduce_avx2_usable() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int braid_reduce_x86_unused;
#endif /* __x86_64__ */
