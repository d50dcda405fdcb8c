/* braid-perf: element types, reduction ops, deterministic inputs and result checks. */
#include "dtype.h"

#include <string.h>
#include <strings.h>

static const struct {
  ncclDataType_t dt;
  const char *name;
  size_t size;
} dt_table[] = {
    {ncclInt8, "int8", 1},      {ncclUint8, "uint8", 1},     {ncclInt32, "int32", 4},
    {ncclUint32, "uint32", 4},  {ncclInt64, "int64", 8},     {ncclUint64, "uint64", 8},
    {ncclFloat32, "float", 4},  {ncclFloat64, "double", 8},
};
#define DT_COUNT (sizeof dt_table / sizeof dt_table[0])

size_t dt_size(ncclDataType_t dt) {
  for (size_t i = 0; i < DT_COUNT; i++)
    if (dt_table[i].dt == dt) return dt_table[i].size;
  return 0;
}

const char *dt_name(ncclDataType_t dt) {
  for (size_t i = 0; i < DT_COUNT; i++)
    if (dt_table[i].dt == dt) return dt_table[i].name;
  return "?";
}

int dt_parse(const char *s, ncclDataType_t *dt) {
  static const struct { const char *alias; ncclDataType_t dt; } aliases[] = {
      {"char", ncclInt8},     {"int", ncclInt32},       {"float32", ncclFloat32},
      {"float64", ncclFloat64}, {"fp32", ncclFloat32}, {"fp64", ncclFloat64}};
  for (size_t i = 0; i < DT_COUNT; i++)
    if (!strcasecmp(s, dt_table[i].name)) return *dt = dt_table[i].dt, 0;
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (!strcasecmp(s, aliases[i].alias)) return *dt = aliases[i].dt, 0;
  return -1;
}

const char *dt_op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    default: return "none";
  }
}

int dt_op_parse(const char *s, ncclRedOp_t *op) {
  static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin};
  for (size_t i = 0; i < 4; i++)
    if (!strcasecmp(s, dt_op_name(ops[i]))) return *op = ops[i], 0;
  return -1;
}

/* The input value as an integer: [-8, 8] (signed) or [0, 16] for sum, {1, 2} for prod (exact up
 * to 2^nranks), [-50, 50] / [0, 100] for min and max. */
static int64_t dt_value(ncclRedOp_t op, int is_signed, int rank, uint32_t seed, size_t i) {
  /* (i>>4) and (i>>12) terms break the period so a misplaced block is caught. The seed's
   * factor is prime to 5, 17 and 101, so consecutive seeds (braid-perf's consecutive
   * operations) differ in every element for sum, min and max and shift prod's pattern: data
   * left from the previous operation never passes for this one's. */
  uint64_t h = (uint64_t)i * 7 + (uint64_t)(i >> 4) * 3 + (uint64_t)(i >> 12) * 11 +
               (uint64_t)rank * 13 + (uint64_t)seed * 19;
  switch (op) {
    case ncclProd: return (h % 5 == 0) ? 2 : 1;
    case ncclMax:
    case ncclMin: return (int64_t)(h % 101) - (is_signed ? 50 : 0);
    default: return (int64_t)(h % 17) - (is_signed ? 8 : 0);
  }
}

static int64_t dt_fold(ncclRedOp_t op, int64_t a, int64_t b) {
  switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return a + b;
  }
}

static int64_t dt_expect_reduce(ncclRedOp_t op, int sgn, int nranks, uint32_t seed, size_t i) {
  int64_t v = dt_value(op, sgn, 0, seed, i);
  for (int r = 1; r < nranks; r++) v = dt_fold(op, v, dt_value(op, sgn, r, seed, i));
  return v;
}

#define DT_REDUCE_LOOP(T, EXPR)                                 \
  do {                                                          \
    T *d = dst;                                                 \
    const T *x = a, *y = b;                                     \
    for (size_t i = 0; i < count; i++) d[i] = (T)(EXPR);       \
  } while (0)

#define DT_REDUCE_TYPE(T)                                                   \
  static void dt_reduce_##T(ncclRedOp_t op, void *dst, const void *a,       \
                            const void *b, size_t count) {                  \
    switch (op) {                                                           \
      case ncclProd: DT_REDUCE_LOOP(T, x[i] * y[i]); break;                 \
      case ncclMax: DT_REDUCE_LOOP(T, x[i] > y[i] ? x[i] : y[i]); break;    \
      case ncclMin: DT_REDUCE_LOOP(T, x[i] < y[i] ? x[i] : y[i]); break;    \
      default: DT_REDUCE_LOOP(T, x[i] + y[i]); break;                       \
    }                                                                       \
  }

#define DT_FILL_TYPE(T, SGN)                                                          \
  static void dt_fill_##T(ncclRedOp_t op, void *buf, size_t n, int rank, uint32_t s,  \
                          size_t first) {                                             \
    T *p = buf;                                                                       \
    for (size_t i = 0; i < n; i++) p[i] = (T)dt_value(op, SGN, rank, s, first + i);   \
  }                                                                                   \
  static size_t dt_ccopy_##T(ncclRedOp_t op, const void *buf, size_t n, int src,      \
                             uint32_t s, size_t first) {                              \
    const T *p = buf;                                                                 \
    size_t bad = 0;                                                                   \
    for (size_t i = 0; i < n; i++) bad += p[i] != (T)dt_value(op, SGN, src, s, first + i); \
    return bad;                                                                       \
  }                                                                                   \
  static size_t dt_cred_##T(ncclRedOp_t op, const void *buf, size_t n, int nranks,    \
                            uint32_t s, size_t first) {                               \
    const T *p = buf;                                                                 \
    size_t bad = 0;                                                                   \
    for (size_t i = 0; i < n; i++)                                                    \
      bad += p[i] != (T)dt_expect_reduce(op, SGN, nranks, s, first + i);              \
    return bad;                                                                       \
  }

typedef double double_t_;
typedef float float_t_;
DT_REDUCE_TYPE(int8_t)
DT_REDUCE_TYPE(uint8_t)
DT_REDUCE_TYPE(int32_t)
DT_REDUCE_TYPE(uint32_t)
DT_REDUCE_TYPE(int64_t)
DT_REDUCE_TYPE(uint64_t)
DT_REDUCE_TYPE(float_t_)
DT_REDUCE_TYPE(double_t_)
DT_FILL_TYPE(int8_t, 1)
DT_FILL_TYPE(uint8_t, 0)
DT_FILL_TYPE(int32_t, 1)
DT_FILL_TYPE(uint32_t, 0)
DT_FILL_TYPE(int64_t, 1)
DT_FILL_TYPE(uint64_t, 0)
DT_FILL_TYPE(float_t_, 1)
DT_FILL_TYPE(double_t_, 1)

/* Expands F(type) for dt's C type. */
#define DT_DISPATCH(dt, F)                         \
  switch (dt) {                                    \
    case ncclInt8: F(int8_t); break;               \
    case ncclUint8: F(uint8_t); break;             \
    case ncclInt32: F(int32_t); break;             \
    case ncclUint32: F(uint32_t); break;           \
    case ncclInt64: F(int64_t); break;             \
    case ncclUint64: F(uint64_t); break;           \
    case ncclFloat32: F(float_t_); break;          \
    case ncclFloat64: F(double_t_); break;         \
    default: break;                                \
  }

void dt_reduce(ncclDataType_t dt, ncclRedOp_t op, void *dst, const void *a, const void *b,
               size_t count) {
#define F(T) dt_reduce_##T(op, dst, a, b, count)
  DT_DISPATCH(dt, F)
#undef F
}

void dt_fill(ncclDataType_t dt, ncclRedOp_t op, void *buf, size_t count, int rank,
             uint32_t seed, size_t first) {
#define F(T) dt_fill_##T(op, buf, count, rank, seed, first)
  DT_DISPATCH(dt, F)
#undef F
}

size_t dt_check_copy(ncclDataType_t dt, ncclRedOp_t op, const void *buf, size_t count,
                     int src_rank, uint32_t seed, size_t first) {
  size_t bad = count;
#define F(T) bad = dt_ccopy_##T(op, buf, count, src_rank, seed, first)
  DT_DISPATCH(dt, F)
#undef F
  return bad;
}

size_t dt_check_reduce(ncclDataType_t dt, ncclRedOp_t op, const void *buf, size_t count,
                       int nranks, uint32_t seed, size_t first) {
  size_t bad = count;
#define F(T) bad = dt_cred_##T(op, buf, count, nranks, seed, first)
  DT_DISPATCH(dt, F)
#undef F
  return bad;
}

/* Byte pattern for send/recv, where any byte count is allowed: a mixed hash of the position. */
static uint8_t dt_byte(int rank, uint32_t seed, size_t i) {
  uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)rank * 0xBF58476D1CE4E5B9ull +
               seed * 0x94D049BB133111EBull;
  x ^= x >> 29;
  return (uint8_t)(x >> 17);
}

void dt_fill_bytes(void *buf, size_t n, int rank, uint32_t seed, size_t first) {
  uint8_t *p = buf;
  for (size_t i = 0; i < n; i++) p[i] = dt_byte(rank, seed, first + i);
}

size_t dt_check_bytes(const void *buf, size_t n, int rank, uint32_t seed, size_t first) {
  const uint8_t *p = buf;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += p[i] != dt_byte(rank, seed, first + i);
  return bad;
}
