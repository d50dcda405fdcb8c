// Tests of the braid-ps reduction kernels (ps_offload/reduce.c, reduce_x86.c).
//
// Every implementation this CPU has (portable, avx2, avx512) is compared bit for bit with an
// independent reference written here: scalar, one element at a time, folding the inputs in index
// order, with its own fp16/bf16/fp8 codecs (ldexp decoding, nearest-value search encoding).
// Order: the fold runs in index order, so a given srcs[] array always gives the same bits (that is
// what makes results independent of the order in which peers' data arrived: the server places
// each peer at a fixed index); permuting srcs[] may change a float sum, and a test shows that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "reduce.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace {

constexpr int kTypes = 12;
constexpr int kOps = 4;
const char *const kTypeNames[kTypes] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                        "fp16", "fp32",  "fp64",  "bf16",   "e4m3",  "e5m2"};
const char *const kOpNames[kOps] = {"sum", "prod", "max", "min"};
const size_t kSizes[kTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

bool IsSmallFloat(int t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}
bool IsSignedInt(int t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }
bool IsInt(int t) { return t <= ncclUint64; }

// ---- Reference codecs ------------------------------------------------------------------------

// The value of a code of a small float format with E exponent bits and M mantissa bits (IEEE
// style: bias 2^(E-1)-1, subnormals); e4m3 has no infinities and one NaN mantissa.
struct Format {
  int bits, ebits, mbits;
  bool ocp_e4m3;        // e4m3: exponent all-ones is a normal binade except mantissa all-ones
  bool satfinite;       // fp8: out-of-range values (and infinities) clamp to the largest finite
  uint32_t nan;         // canonical NaN
  uint32_t max_finite;  // largest finite positive code
};
const Format kFp16 = {16, 5, 10, false, false, 0x7e00, 0x7bff};
const Format kBf16 = {16, 8, 7, false, false, 0x7fc0, 0x7f7f};
const Format kE4m3 = {8, 4, 3, true, true, 0x7f, 0x7e};
const Format kE5m2 = {8, 5, 2, false, true, 0x7e, 0x7b};

const Format &FormatOf(int t) {
  switch (t) {
    case ncclFloat16:
      return kFp16;
    case ncclBfloat16:
      return kBf16;
    case ncclFloat8e4m3:
      return kE4m3;
    default:
      return kE5m2;
  }
}

double RefDecode(const Format &f, uint32_t code) {
  uint32_t mag = code & ((1u << (f.bits - 1)) - 1);
  bool neg = (code >> (f.bits - 1)) & 1;
  uint32_t e = mag >> f.mbits, m = mag & ((1u << f.mbits) - 1);
  uint32_t emax = (1u << f.ebits) - 1;
  int bias = (1 << (f.ebits - 1)) - 1;
  double v;
  if (f.ocp_e4m3 && e == emax && m == (1u << f.mbits) - 1)
    v = NAN;
  else if (!f.ocp_e4m3 && e == emax)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = std::ldexp((double)m, 1 - bias - f.mbits);
  else
    v = std::ldexp((double)((1u << f.mbits) + m), (int)e - bias - f.mbits);
  return neg ? -v : v;
}

// Values of codes 0..max_finite (increasing), computed once per format.
const std::vector<double> &PositiveValues(const Format &f) {
  static std::map<const Format *, std::vector<double>> cache;
  std::vector<double> &v = cache[&f];
  if (v.empty())
    for (uint32_t c = 0; c <= f.max_finite; c++) v.push_back(RefDecode(f, c));
  return v;
}

// Round to nearest, ties to the even code; IEEE overflow (to infinity) or satfinite.
uint32_t RefEncode(const Format &f, float x) {
  if (std::isnan(x)) return f.nan;
  uint32_t sign = std::signbit(x) ? 1u << (f.bits - 1) : 0;
  double a = std::fabs((double)x);
  double maxv = RefDecode(f, f.max_finite);
  uint32_t lo, hi;
  double vlo, vhi;
  if (a >= maxv) {
    if (f.satfinite || a == maxv) return sign | f.max_finite;
    lo = f.max_finite, hi = f.max_finite + 1;  // the infinity code, as if the exponent went on
    vlo = maxv, vhi = maxv + (maxv - RefDecode(f, f.max_finite - 1));
  } else {
    const std::vector<double> &values = PositiveValues(f);  // largest code with value <= a
    lo = (uint32_t)(std::upper_bound(values.begin(), values.end(), a) - values.begin()) - 1;
    hi = lo + 1, vlo = values[lo], vhi = values[hi];
  }
  uint32_t code;
  if (a - vlo < vhi - a)
    code = lo;
  else if (a - vlo > vhi - a)
    code = hi;
  else
    code = (lo & 1) ? hi : lo;
  return sign | code;
}

uint32_t Bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
float Float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
uint64_t Bits64(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}
double Double(uint64_t u) {
  double d;
  memcpy(&d, &u, 8);
  return d;
}

// Decode tables (small formats), built once.
const std::vector<float> &DecodeTable(int t) {
  static std::vector<float> tables[kTypes];
  std::vector<float> &tab = tables[t];
  if (tab.empty()) {
    const Format &f = FormatOf(t);
    tab.resize(size_t(1) << f.bits);
    for (size_t c = 0; c < tab.size(); c++) tab[c] = (float)RefDecode(f, (uint32_t)c);
  }
  return tab;
}

// Little-endian element access; fixed-size copies so that they compile to plain moves.
template <typename T>
uint64_t LoadAs(const uint8_t *p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void StoreAs(uint8_t *p, uint64_t v) {
  T t = (T)v;
  memcpy(p, &t, sizeof t);
}
uint64_t LoadU(const uint8_t *p, size_t size) {
  switch (size) {
    case 1:
      return LoadAs<uint8_t>(p);
    case 2:
      return LoadAs<uint16_t>(p);
    case 4:
      return LoadAs<uint32_t>(p);
    default:
      return LoadAs<uint64_t>(p);
  }
}
void StoreU(uint8_t *p, uint64_t v, size_t size) {
  switch (size) {
    case 1:
      return StoreAs<uint8_t>(p, v);
    case 2:
      return StoreAs<uint16_t>(p, v);
    case 4:
      return StoreAs<uint32_t>(p, v);
    default:
      return StoreAs<uint64_t>(p, v);
  }
}

// ---- The reference fold -------------------------------------------------------------------

float FoldF(float acc, float x, int op) {
  switch (op) {
    case ncclSum:
      return acc + x;
    case ncclProd:
      return acc * x;
    case ncclMax:
      return (std::isnan(acc) || std::isnan(x)) ? NAN : (acc > x ? acc : x);
    default:
      return (std::isnan(acc) || std::isnan(x)) ? NAN : (acc < x ? acc : x);
  }
}
double FoldD(double acc, double x, int op) {
  switch (op) {
    case ncclSum:
      return acc + x;
    case ncclProd:
      return acc * x;
    case ncclMax:
      return (std::isnan(acc) || std::isnan(x)) ? NAN : (acc > x ? acc : x);
    default:
      return (std::isnan(acc) || std::isnan(x)) ? NAN : (acc < x ? acc : x);
  }
}
uint64_t FoldI(uint64_t acc, uint64_t x, int op, size_t size, bool is_signed) {
  switch (op) {
    case ncclSum:
      return acc + x;
    case ncclProd:
      return acc * x;
    default:
      break;
  }
  bool acc_greater;
  if (is_signed) {
    int sh = 64 - 8 * (int)size;  // sign-extend
    int64_t a = (int64_t)(acc << sh) >> sh, b = (int64_t)(x << sh) >> sh;
    acc_greater = a > b;
  } else {
    uint64_t mask = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
    acc_greater = (acc & mask) > (x & mask);
  }
  bool acc_less = !acc_greater && (acc != x);
  if (op == ncclMax) return acc_greater ? acc : x;
  return acc_less ? acc : x;
}

std::vector<uint8_t> Reference(const std::vector<const uint8_t *> &srcs, size_t count, int t,
                               int op) {
  const size_t es = kSizes[t];
  std::vector<uint8_t> out(count * es);
  const int n = (int)srcs.size();
  for (size_t i = 0; i < count; i++) {
    const size_t o = i * es;
    if (IsInt(t)) {
      uint64_t acc = LoadU(srcs[0] + o, es);
      for (int j = 1; j < n; j++) acc = FoldI(acc, LoadU(srcs[j] + o, es), op, es, IsSignedInt(t));
      StoreU(&out[o], acc, es);
    } else if (t == ncclFloat32) {
      float acc = Float((uint32_t)LoadU(srcs[0] + o, 4));
      for (int j = 1; j < n; j++) acc = FoldF(acc, Float((uint32_t)LoadU(srcs[j] + o, 4)), op);
      StoreU(&out[o], std::isnan(acc) ? 0x7fc00000u : Bits(acc), 4);
    } else if (t == ncclFloat64) {
      double acc = Double(LoadU(srcs[0] + o, 8));
      for (int j = 1; j < n; j++) acc = FoldD(acc, Double(LoadU(srcs[j] + o, 8)), op);
      StoreU(&out[o], std::isnan(acc) ? 0x7ff8000000000000ull : Bits64(acc), 8);
    } else {
      const std::vector<float> &dec = DecodeTable(t);
      float acc = dec[LoadU(srcs[0] + o, es)];
      for (int j = 1; j < n; j++) acc = FoldF(acc, dec[LoadU(srcs[j] + o, es)], op);
      StoreU(&out[o], RefEncode(FormatOf(t), acc), es);
    }
  }
  return out;
}

// ---- Inputs ---------------------------------------------------------------------------------

bool IsSpecialCode(int t, uint64_t code) {
  float v = DecodeTable(t)[code];
  return std::isnan(v) || std::isinf(v);
}

// Random elements of type t: integers uniform; floats mostly ordinary values of mixed sign and
// magnitude, with NaN, infinities, zeros, subnormals and extremes mixed in.
void FillRandom(uint8_t *p, size_t count, int t, std::mt19937_64 &rng) {
  const size_t es = kSizes[t];
  for (size_t i = 0; i < count; i++) {
    uint64_t r = rng();
    if (IsInt(t)) {
      StoreU(p + i * es, r, es);
    } else if (IsSmallFloat(t)) {
      uint64_t code = r & ((1ull << (8 * es)) - 1);
      while (IsSpecialCode(t, code) && (rng() & 7) != 0) code = rng() & ((1ull << (8 * es)) - 1);
      StoreU(p + i * es, code, es);
    } else if (t == ncclFloat32) {
      static const uint32_t specials[] = {0x7fc00000, 0xffc00123, 0x7f800001, 0x7f800000,
                                          0xff800000, 0x00000000, 0x80000000, 0x00000001,
                                          0x807fffff, 0x7f7fffff, 0xff7fffff, 0x00800000};
      uint32_t u;
      if ((r & 31) == 0)
        u = specials[(r >> 8) % 12];
      else if ((r & 31) == 1)
        u = (uint32_t)(r >> 32);
      else
        u = Bits(
            std::ldexp(1.0f + (float)((r >> 8) & 0xffffff) * 0x1p-24f, (int)((r >> 40) % 41) - 20) *
            ((r >> 63) ? -1.0f : 1.0f));
      StoreU(p + i * es, u, 4);
    } else {
      static const uint64_t specials[] = {0x7ff8000000000000ull, 0xfff8000000000123ull,
                                          0x7ff0000000000001ull, 0x7ff0000000000000ull,
                                          0xfff0000000000000ull, 0,
                                          0x8000000000000000ull, 1,
                                          0x7fefffffffffffffull, 0x0010000000000000ull};
      uint64_t u;
      if ((r & 31) == 0)
        u = specials[(r >> 8) % 10];
      else if ((r & 31) == 1)
        u = rng();
      else
        u = Bits64(std::ldexp(1.0 + (double)((r >> 8) & 0xffffffff) * 0x1p-32,
                              (int)((r >> 40) % 81) - 40) *
                   ((r >> 63) ? -1.0 : 1.0));
      StoreU(p + i * es, u, 8);
    }
  }
}

// ---- Implementations ----------------------------------------------------------------------

std::vector<std::string> AvailableImpls() {
  std::string before = braid_reduce_impl();
  std::vector<std::string> out;
  for (const char *name : {"portable", "avx2", "avx512"})
    if (braid_reduce_force(name) == 0) out.push_back(name);
  braid_reduce_force(before.c_str());
  return out;
}

// Restores the implementation in use when it goes out of scope.
struct ImplGuard {
  std::string saved = braid_reduce_impl();
  ~ImplGuard() { braid_reduce_force(saved.c_str()); }
};

std::string Hex(const uint8_t *p, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string s = "0x";
  for (size_t k = size; k-- > 0;) s += digits[p[k] >> 4], s += digits[p[k] & 15];
  return s;
}

// Buffers for one case.  Each input is its own allocation of exactly offset + count * size
// bytes (so the sanitizer sees any read past the end); dst has guard bytes on both sides.
struct Case {
  int t, op, n;
  size_t count;
  enum Layout { kAligned, kMisaligned, kInPlace } layout;
  std::vector<std::vector<uint8_t>> in;
  std::vector<const uint8_t *> srcs;

  static constexpr size_t kGuard = 64;
  Case(int t_, int op_, int n_, size_t count_, Layout layout_, std::mt19937_64 &rng)
      : t(t_), op(op_), n(n_), count(count_), layout(layout_), in(n_) {
    for (int j = 0; j < n; j++) {
      size_t off = layout == kMisaligned ? (size_t)(j * 7 + 1) % 61 : 0;
      in[j].resize(off + count * kSizes[t] + (layout == kAligned ? 64 : 0));
      uint8_t *base = in[j].data() + off;
      if (layout == kAligned) base += (64 - (uintptr_t)base % 64) % 64;
      FillRandom(base, count, t, rng);
      srcs.push_back(base);
    }
  }

  // Runs braid_reduce and compares with the reference; a description of the first difference.
  std::string Check(const std::vector<uint8_t> &want) const {
    const size_t es = kSizes[t], bytes = count * es;
    std::vector<uint8_t> dstbuf(2 * kGuard + bytes + 64, 0xa5);
    std::vector<uint8_t> copy0;
    uint8_t *dst = dstbuf.data() + kGuard + (layout == kMisaligned ? 3 : 0);
    std::vector<const void *> ptrs(srcs.begin(), srcs.end());
    if (layout == kInPlace) {  // dst is srcs[0]: work on a copy of input 0
      copy0.assign(srcs[0], srcs[0] + bytes);
      dst = copy0.data();
      ptrs[0] = dst;
    }
    int rc = braid_reduce(dst, ptrs.data(), n, count, t, op);
    std::string what = std::string(kTypeNames[t]) + " " + kOpNames[op] + " n=" + std::to_string(n) +
                       " count=" + std::to_string(count) +
                       (layout == kAligned      ? " aligned"
                        : layout == kMisaligned ? " misaligned"
                                                : " in-place") +
                       " impl=" + braid_reduce_impl();
    if (rc != 0) return what + ": returned " + std::to_string(rc);
    if (bytes && memcmp(dst, want.data(), bytes) != 0) {
      for (size_t i = 0; i < count; i++)
        if (memcmp(dst + i * es, &want[i * es], es) != 0)
          return what + ": element " + std::to_string(i) + " is " + Hex(dst + i * es, es) +
                 ", want " + Hex(&want[i * es], es);
    }
    if (layout != kInPlace) {
      const size_t head = (size_t)(dst - dstbuf.data());
      for (size_t k = 0; k < dstbuf.size(); k++)
        if ((k < head || k >= head + bytes) && dstbuf[k] != 0xa5)
          return what + ": wrote outside dst";
    }
    return "";
  }
};

// ---- The matrix: every dtype x op x n x count x layout x implementation --------------------

class ReduceMatrix : public ::testing::TestWithParam<int> {};

TEST_P(ReduceMatrix, EveryImplMatchesReference) {
  const int t = GetParam();
  ImplGuard guard;
  const std::vector<std::string> impls = AvailableImpls();
  std::mt19937_64 rng(1234 + t);
  const size_t counts[] = {0, 1, 2, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 257, 1031};
  for (int op = 0; op < kOps; op++) {
    for (int n : {1, 2, 3, 8}) {
      std::vector<Case> cases;
      for (size_t count : counts)
        for (Case::Layout layout : {Case::kAligned, Case::kMisaligned, Case::kInPlace})
          cases.emplace_back(t, op, n, count, layout, rng);
      // One large case: long vector runs, every unrolled loop, and a tail.
      cases.emplace_back(t, op, n, 100003, n == 8 ? Case::kInPlace : Case::kMisaligned, rng);
      for (const Case &c : cases) {
        const std::vector<uint8_t> want = Reference(c.srcs, c.count, t, op);
        for (const std::string &impl : impls) {
          ASSERT_EQ(braid_reduce_force(impl.c_str()), 0);
          std::string diff = c.Check(want);
          ASSERT_EQ(diff, "");
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reduce, ReduceMatrix, ::testing::Range(0, kTypes),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(kTypeNames[info.param]);
                         });

// ---- Special values, with the expected bits written out -------------------------------------

struct Special {
  int t, op;
  std::vector<uint64_t> in;  // one element per input, folded in this order
  uint64_t want;
};

// Each case is repeated over 77 elements (vector body and tail), for every implementation.
void CheckSpecials(const std::vector<Special> &cases) {
  ImplGuard guard;
  const size_t count = 77;
  for (const std::string &impl : AvailableImpls()) {
    ASSERT_EQ(braid_reduce_force(impl.c_str()), 0);
    for (const Special &s : cases) {
      const size_t es = kSizes[s.t];
      std::vector<std::vector<uint8_t>> in(s.in.size(), std::vector<uint8_t>(count * es));
      std::vector<const void *> srcs;
      for (size_t j = 0; j < s.in.size(); j++) {
        for (size_t i = 0; i < count; i++) StoreU(&in[j][i * es], s.in[j], es);
        srcs.push_back(in[j].data());
      }
      std::vector<uint8_t> dst(count * es);
      ASSERT_EQ(braid_reduce(dst.data(), srcs.data(), (int)srcs.size(), count, s.t, s.op), 0);
      std::vector<const uint8_t *> refsrcs;
      for (const auto &v : in) refsrcs.push_back(v.data());
      std::vector<uint8_t> ref = Reference(refsrcs, count, s.t, s.op);
      for (size_t i = 0; i < count; i++) {
        uint64_t got = LoadU(&dst[i * es], es), refv = LoadU(&ref[i * es], es);
        ASSERT_EQ(got, s.want) << impl << " " << kTypeNames[s.t] << " " << kOpNames[s.op]
                               << " first input 0x" << std::hex << s.in[0] << " element "
                               << std::dec << i;
        ASSERT_EQ(refv, s.want) << "reference disagrees: " << kTypeNames[s.t] << " 0x" << std::hex
                                << s.in[0];
      }
    }
  }
}

TEST(ReduceSpecials, Fp16) {
  CheckSpecials({
      {ncclFloat16, ncclSum, {0x3c00, 0x1000}, 0x3c00},          // 1 + 2^-11: tie, to even (1)
      {ncclFloat16, ncclSum, {0x3c01, 0x1000}, 0x3c02},          // (1+2^-10) + 2^-11: tie, up
      {ncclFloat16, ncclSum, {0x3c00, 0x1000, 0x0c00}, 0x3c01},  // 1 + 2^-11 + 2^-12: rounded once
      {ncclFloat16, ncclSum, {0x7bff, 0x4c00}, 0x7c00},          // 65504 + 16 = 65520: tie, to inf
      {ncclFloat16, ncclSum, {0x7bff, 0x4800}, 0x7bff},          // 65504 + 8: stays
      {ncclFloat16, ncclSum, {0xfbff, 0xcc00}, 0xfc00},          // -65520: -inf
      {ncclFloat16, ncclSum, {0x7bff, 0x7bff, 0xfbff}, 0x7bff},  // no overflow in fp32 on the way
      {ncclFloat16, ncclProd, {0x0c00, 0x0800}, 0x0000},         // 2^-12 * 2^-13 = 2^-25: tie, to 0
      {ncclFloat16, ncclProd, {0x0e00, 0x0c00}, 0x0002},         // 1.5 * 2^-24: tie, to 2^-23
      {ncclFloat16, ncclProd, {0x8c00, 0x0800}, 0x8000},         // -2^-25: -0
      {ncclFloat16, ncclSum, {0x0001, 0x0001}, 0x0002},          // subnormals
      {ncclFloat16, ncclSum, {0x03ff, 0x0001}, 0x0400},  // largest subnormal + tiniest: normal
      {ncclFloat16, ncclSum, {0x8000, 0x8000}, 0x8000},  // -0 + -0
      {ncclFloat16, ncclSum, {0x8000, 0x0000}, 0x0000},  // -0 + 0
      {ncclFloat16, ncclSum, {0x7c00, 0xfc00}, 0x7e00},  // inf - inf: NaN
      {ncclFloat16, ncclSum, {0x7c00, 0x3c00}, 0x7c00},  // inf + 1
      {ncclFloat16, ncclSum, {0xfd01}, 0x7e00},          // signalling negative NaN: canonical
      {ncclFloat16, ncclMax, {0x3c00, 0x7e01, 0x4000}, 0x7e00},  // NaN propagates through max
      {ncclFloat16, ncclMin, {0x7e00, 0x3c00}, 0x7e00},
      {ncclFloat16, ncclMax, {0x0000, 0x8000}, 0x8000},  // equal: the later input
      {ncclFloat16, ncclMin, {0x8000, 0x0000}, 0x0000},
      {ncclFloat16, ncclMax, {0xfc00, 0xc000}, 0xc000},
  });
}

TEST(ReduceSpecials, Bf16) {
  CheckSpecials({
      {ncclBfloat16, ncclSum, {0x3f80, 0x3b80}, 0x3f80},  // 1 + 2^-8: tie, to even
      {ncclBfloat16, ncclSum, {0x3f81, 0x3b80}, 0x3f82},  // (1+2^-7) + 2^-8: tie, up
      {ncclBfloat16, ncclSum, {0x7f7f, 0x7b00}, 0x7f80},  // max + half an ulp: tie, to inf
      {ncclBfloat16, ncclSum, {0xff7f, 0xfb00}, 0xff80},
      {ncclBfloat16, ncclSum, {0x7f7f, 0x7aff}, 0x7f7f},   // just under the tie
      {ncclBfloat16, ncclSum, {0x0001, 0x0001}, 0x0002},   // subnormals
      {ncclBfloat16, ncclProd, {0x0001, 0x3f00}, 0x0000},  // half the smallest subnormal: to 0
      {ncclBfloat16, ncclProd, {0x0003, 0x3f00}, 0x0002},  // 1.5 units: tie, to 2
      {ncclBfloat16, ncclSum, {0x8000, 0x8000}, 0x8000},
      {ncclBfloat16, ncclSum, {0xffc1, 0x3f80}, 0x7fc0},  // negative NaN with payload: canonical
      {ncclBfloat16, ncclSum, {0x7f81}, 0x7fc0},          // signalling NaN alone
      {ncclBfloat16, ncclSum, {0x7f80, 0xff80}, 0x7fc0},
      {ncclBfloat16, ncclMin, {0x3f80, 0xff81}, 0x7fc0},
      {ncclBfloat16, ncclMax, {0x8000, 0x0000}, 0x0000},
  });
}

TEST(ReduceSpecials, Fp8) {
  CheckSpecials({
      // e4m3: bias 7, max 448 (0x7e), NaN 0x7f/0xff, no infinity, satfinite.
      {ncclFloat8e4m3, ncclSum, {0x7e, 0x60}, 0x7e},        // 448 + 32 = 480: saturates
      {ncclFloat8e4m3, ncclSum, {0x78, 0x78}, 0x7e},        // 256 + 256 = 512
      {ncclFloat8e4m3, ncclSum, {0xfe, 0xfe}, 0xfe},        // -896: -448
      {ncclFloat8e4m3, ncclSum, {0x7e, 0x7e, 0xfe}, 0x7e},  // no saturation in fp32 on the way
      {ncclFloat8e4m3, ncclSum, {0x38, 0x18}, 0x38},        // 1 + 2^-4: tie, to even
      {ncclFloat8e4m3, ncclSum, {0x39, 0x18}, 0x3a},        // 1.125 + 2^-4: tie, up
      {ncclFloat8e4m3, ncclSum, {0x01, 0x01}, 0x02},        // subnormals 2^-9
      {ncclFloat8e4m3, ncclProd, {0x01, 0x30}, 0x00},       // 2^-9 * 0.5: tie, to 0
      {ncclFloat8e4m3, ncclProd, {0x03, 0x30}, 0x02},       // 1.5 * 2^-9: tie, to 2
      {ncclFloat8e4m3, ncclProd, {0x81, 0x28}, 0x80},       // -2^-11: -0
      {ncclFloat8e4m3, ncclSum, {0x7f, 0x38}, 0x7f},        // NaN
      {ncclFloat8e4m3, ncclSum, {0xff}, 0x7f},              // negative NaN: canonical
      {ncclFloat8e4m3, ncclMax, {0x38, 0xff, 0x40}, 0x7f},
      {ncclFloat8e4m3, ncclMax, {0x00, 0x80}, 0x80},
      {ncclFloat8e4m3, ncclProd, {0x77, 0x77}, 0x7e},  // 240 * 240: saturates
      // e5m2: bias 15, max 57344 (0x7b), inf 0x7c, NaN 0x7d..0x7f, satfinite.
      {ncclFloat8e5m2, ncclSum, {0x7b, 0x70}, 0x7b},   // 57344 + 8192: saturates
      {ncclFloat8e5m2, ncclSum, {0x7c, 0x3c}, 0x7b},   // inf + 1: satfinite
      {ncclFloat8e5m2, ncclSum, {0xfc}, 0xfb},         // -inf alone: -57344
      {ncclFloat8e5m2, ncclSum, {0x7c, 0xfc}, 0x7e},   // inf - inf: NaN
      {ncclFloat8e5m2, ncclSum, {0x7d, 0x3c}, 0x7e},   // signalling NaN: canonical
      {ncclFloat8e5m2, ncclSum, {0x3c, 0x30}, 0x3c},   // 1 + 2^-3: tie, to even
      {ncclFloat8e5m2, ncclSum, {0x3d, 0x30}, 0x3e},   // 1.25 + 2^-3: tie, up
      {ncclFloat8e5m2, ncclProd, {0x01, 0x38}, 0x00},  // 2^-17: tie, to 0
      {ncclFloat8e5m2, ncclProd, {0x03, 0x38}, 0x02},  // 1.5 * 2^-16: tie, to 2
      {ncclFloat8e5m2, ncclSum, {0x80, 0x80}, 0x80},
      {ncclFloat8e5m2, ncclMin, {0x3c, 0xfc}, 0xfb},  // -inf wins, then saturates
  });
}

TEST(ReduceSpecials, Fp32AndFp64) {
  CheckSpecials({
      {ncclFloat32, ncclSum, {0xffc00001, 0x3f800000}, 0x7fc00000},  // NaN payloads dropped
      {ncclFloat32, ncclSum, {0x7f800000, 0xff800000}, 0x7fc00000},  // inf - inf (x86 gives -NaN)
      {ncclFloat32, ncclSum, {0x7f800001}, 0x7fc00000},              // sNaN alone
      {ncclFloat32, ncclSum, {0x7f7fffff, 0x7f7fffff}, 0x7f800000},  // overflow
      {ncclFloat32, ncclSum, {0x00000001, 0x00000001}, 0x00000002},  // subnormals kept (no FTZ)
      {ncclFloat32, ncclProd, {0x00800000, 0x3f000000}, 0x00400000},
      {ncclFloat32, ncclSum, {0x80000000, 0x80000000}, 0x80000000},
      {ncclFloat32, ncclMax, {0x00000000, 0x80000000}, 0x80000000},
      {ncclFloat32, ncclMin, {0x80000000, 0x00000000}, 0x00000000},
      {ncclFloat32, ncclMax, {0x3f800000, 0x7fc00000, 0x40000000}, 0x7fc00000},
      {ncclFloat32, ncclMin, {0xff800001, 0x3f800000}, 0x7fc00000},
      {ncclFloat32, ncclMax, {0xff800000, 0xbf800000}, 0xbf800000},
      {ncclFloat64, ncclSum, {0xfff8000000000001ull, 0x3ff0000000000000ull}, 0x7ff8000000000000ull},
      {ncclFloat64, ncclSum, {0x7ff0000000000000ull, 0xfff0000000000000ull}, 0x7ff8000000000000ull},
      {ncclFloat64, ncclSum, {1, 1}, 2},
      {ncclFloat64, ncclMax, {0, 0x8000000000000000ull}, 0x8000000000000000ull},
      {ncclFloat64, ncclMin, {0x3ff0000000000000ull, 0x7ff0000000000001ull}, 0x7ff8000000000000ull},
  });
}

TEST(ReduceSpecials, IntegersWrap) {
  CheckSpecials({
      {ncclInt8, ncclSum, {0x7f, 0x01}, 0x80},
      {ncclUint8, ncclProd, {0x10, 0x10, 0x03}, 0x00},
      {ncclInt8, ncclProd, {0xff, 0x80}, 0x80},  // -1 * -128 = 128: wraps to -128
      {ncclInt8, ncclMax, {0xff, 0x01}, 0x01},
      {ncclUint8, ncclMax, {0xff, 0x01}, 0xff},
      {ncclInt32, ncclSum, {0x7fffffff, 1}, 0x80000000},
      {ncclInt32, ncclProd, {0x10000, 0x10000}, 0},
      {ncclInt32, ncclMin, {0x80000000, 0}, 0x80000000},
      {ncclUint32, ncclMin, {0x80000000, 0}, 0},
      {ncclInt64, ncclProd, {0x100000001ull, 0x100000001ull}, 0x200000001ull},
      {ncclInt64, ncclProd, {0xffffffffffffffffull, 0x8000000000000000ull}, 0x8000000000000000ull},
      {ncclInt64, ncclMax, {0x8000000000000000ull, 0xffffffffffffffffull}, 0xffffffffffffffffull},
      {ncclUint64, ncclMax, {0x8000000000000000ull, 0x7fffffffffffffffull}, 0x8000000000000000ull},
      {ncclUint64, ncclSum, {0xffffffffffffffffull, 2}, 1},
  });
}

// All fp8 pairs, every op, every implementation: exhaustive over the inputs of n = 2.
TEST(ReduceSpecials, Fp8AllPairs) {
  ImplGuard guard;
  for (int t : {ncclFloat8e4m3, ncclFloat8e5m2}) {
    std::vector<uint8_t> a(65536), b(65536);
    for (size_t k = 0; k < 65536; k++) a[k] = (uint8_t)(k >> 8), b[k] = (uint8_t)k;
    std::vector<const uint8_t *> srcs = {a.data(), b.data()};
    const void *ptrs[] = {a.data(), b.data()};
    for (int op = 0; op < kOps; op++) {
      std::vector<uint8_t> want = Reference(srcs, 65536, t, op);
      for (const std::string &impl : AvailableImpls()) {
        ASSERT_EQ(braid_reduce_force(impl.c_str()), 0);
        std::vector<uint8_t> dst(65536);
        ASSERT_EQ(braid_reduce(dst.data(), ptrs, 2, 65536, t, op), 0);
        for (size_t k = 0; k < 65536; k++)
          ASSERT_EQ(dst[k], want[k]) << impl << " " << kTypeNames[t] << " " << kOpNames[op] << " 0x"
                                     << std::hex << (k >> 8) << " , 0x" << (k & 255);
      }
    }
  }
}

// Every fp16 and bf16 code through n = 1 (decode then encode): itself, or the canonical NaN.
TEST(ReduceSpecials, SixteenBitRoundTrip) {
  ImplGuard guard;
  for (int t : {ncclFloat16, ncclBfloat16}) {
    std::vector<uint16_t> codes(65536);
    for (size_t k = 0; k < 65536; k++) codes[k] = (uint16_t)k;
    const void *src = codes.data();
    for (const std::string &impl : AvailableImpls()) {
      ASSERT_EQ(braid_reduce_force(impl.c_str()), 0);
      for (int op = 0; op < kOps; op++) {
        std::vector<uint16_t> dst(65536);
        ASSERT_EQ(braid_reduce(dst.data(), &src, 1, 65536, t, op), 0);
        for (size_t k = 0; k < 65536; k++) {
          uint16_t want = std::isnan(RefDecode(FormatOf(t), (uint32_t)k))
                              ? (uint16_t)FormatOf(t).nan
                              : (uint16_t)k;
          ASSERT_EQ(dst[k], want) << impl << " " << kTypeNames[t] << " 0x" << std::hex << k;
        }
      }
    }
  }
}

// ---- The scalar conversions against the reference codecs ------------------------------------

TEST(ReduceConvert, DecodeEveryCode) {
  for (uint32_t c = 0; c < 65536; c++) {
    double f16 = RefDecode(kFp16, c), b16 = RefDecode(kBf16, c);
    float g16 = braid_fp16_to_f32((uint16_t)c), gb = braid_bf16_to_f32((uint16_t)c);
    if (std::isnan(f16))
      EXPECT_TRUE(std::isnan(g16)) << std::hex << c;
    else
      ASSERT_EQ(Bits(g16), Bits((float)f16)) << "fp16 0x" << std::hex << c;
    if (std::isnan(b16))
      EXPECT_TRUE(std::isnan(gb)) << std::hex << c;
    else
      ASSERT_EQ(Bits(gb), Bits((float)b16)) << "bf16 0x" << std::hex << c;
  }
  for (uint32_t c = 0; c < 256; c++) {
    double e4 = RefDecode(kE4m3, c), e5 = RefDecode(kE5m2, c);
    float g4 = braid_e4m3_to_f32((uint8_t)c), g5 = braid_e5m2_to_f32((uint8_t)c);
    if (std::isnan(e4))
      EXPECT_TRUE(std::isnan(g4)) << std::hex << c;
    else
      ASSERT_EQ(Bits(g4), Bits((float)e4)) << "e4m3 0x" << std::hex << c;
    if (std::isnan(e5))
      EXPECT_TRUE(std::isnan(g5)) << std::hex << c;
    else
      ASSERT_EQ(Bits(g5), Bits((float)e5)) << "e5m2 0x" << std::hex << c;
  }
}

// fp32 inputs: a stride through all bit patterns, plus every code's value, the midpoints between
// neighbouring codes (the ties) and the floats just either side of them.
std::vector<float> EncodeProbes(const Format &f) {
  std::vector<float> v;
  for (uint64_t u = 0; u < (1ull << 32); u += 65521) v.push_back(Float((uint32_t)u));
  for (uint32_t c = 0; c < f.max_finite; c++) {
    double lo = RefDecode(f, c), hi = RefDecode(f, c + 1);
    float mid = (float)((lo + hi) / 2);  // exact: fewer mantissa bits than fp32
    for (float x : {(float)lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)})
      v.push_back(x), v.push_back(-x);
  }
  double maxv = RefDecode(f, f.max_finite), ulp = maxv - RefDecode(f, f.max_finite - 1);
  for (double x : {maxv, maxv + ulp / 2, maxv + ulp, 2 * maxv, (double)INFINITY}) {
    float xf = (float)x;
    for (float y : {xf, std::nextafter(xf, 0.0f), std::nextafter(xf, INFINITY)})
      v.push_back(y), v.push_back(-y);
  }
  return v;
}

TEST(ReduceConvert, EncodeMatchesReference) {
  struct {
    const Format *f;
    uint32_t (*enc)(float);
    const char *name;
  } fmts[] = {
      {&kFp16, [](float x) -> uint32_t { return braid_f32_to_fp16(x); }, "fp16"},
      {&kBf16, [](float x) -> uint32_t { return braid_f32_to_bf16(x); }, "bf16"},
      {&kE4m3, [](float x) -> uint32_t { return braid_f32_to_e4m3(x); }, "e4m3"},
      {&kE5m2, [](float x) -> uint32_t { return braid_f32_to_e5m2(x); }, "e5m2"},
  };
  for (const auto &fm : fmts) {
    // bf16 has 32k codes: probing its midpoints is cheap enough; strided patterns cover the rest.
    for (float x : EncodeProbes(*fm.f))
      ASSERT_EQ(fm.enc(x), RefEncode(*fm.f, x)) << fm.name << " of fp32 0x" << std::hex << Bits(x);
  }
}

// ---- API edges ---------------------------------------------------------------------------

TEST(ReduceApi, SupportedAndSizes) {
  for (int t = 0; t < kTypes; t++) {
    EXPECT_EQ(braid_reduce_type_size(t), kSizes[t]) << t;
    for (int op = 0; op < kOps; op++) EXPECT_EQ(braid_reduce_supported(t, op), 1) << t << " " << op;
    EXPECT_EQ(braid_reduce_supported(t, 4), 0);  // ncclAvg and beyond: not for the server
    EXPECT_EQ(braid_reduce_supported(t, -1), 0);
    EXPECT_EQ(braid_reduce_supported(t, 0x7fffffff), 0);
  }
  for (int t : {-1, 12, 13, 255, -2147483647 - 1}) {
    EXPECT_EQ(braid_reduce_type_size(t), 0u) << t;
    for (int op = -1; op <= 4; op++) EXPECT_EQ(braid_reduce_supported(t, op), 0) << t;
  }
}

TEST(ReduceApi, RejectsWithoutWriting) {
  uint32_t src[4] = {1, 2, 3, 4}, dst[4] = {9, 9, 9, 9};
  const void *srcs[] = {src};
  EXPECT_EQ(braid_reduce(dst, srcs, 1, 4, 12, ncclSum), -1);
  EXPECT_EQ(braid_reduce(dst, srcs, 1, 4, ncclFloat32, 4), -1);
  EXPECT_EQ(braid_reduce(dst, srcs, 0, 4, ncclFloat32, ncclSum), -1);
  EXPECT_EQ(braid_reduce(dst, srcs, -3, 4, ncclFloat32, ncclSum), -1);
  for (uint32_t v : dst) EXPECT_EQ(v, 9u);
  EXPECT_EQ(braid_reduce(dst, srcs, 1, 0, ncclFloat32, ncclSum), 0);
  for (uint32_t v : dst) EXPECT_EQ(v, 9u);
}

TEST(ReduceApi, ForceAndImpl) {
  ImplGuard guard;
  std::vector<std::string> impls = AvailableImpls();
  ASSERT_FALSE(impls.empty());
  EXPECT_EQ(impls[0], "portable");
  for (const std::string &impl : impls) {
    ASSERT_EQ(braid_reduce_force(impl.c_str()), 0);
    EXPECT_EQ(std::string(braid_reduce_impl()), impl);
  }
  EXPECT_EQ(braid_reduce_force("sse9"), -1);
  EXPECT_EQ(braid_reduce_force(""), -1);
  EXPECT_EQ(braid_reduce_force(nullptr), -1);
  EXPECT_EQ(std::string(braid_reduce_impl()), impls.back());  // unchanged by the failures
#if defined(__x86_64__)
  unsigned a, b, c, d;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  const bool avx2 = __builtin_cpu_supports("avx2") && f16c;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  EXPECT_EQ(impls.back(), avx512 ? "avx512" : avx2 ? "avx2" : "portable");
#endif
}

// ---- Order: the fold is in index order, so the same srcs[] always gives the same bits -------

TEST(ReduceOrder, FoldIsInIndexOrder) {
  ImplGuard guard;
  const float big = 1e8f, one = 1.0f, minus_big = -1e8f;
  // (big + 1) - big = 0 in fp32 (1 is lost), (big - big) + 1 = 1.
  const float *a[] = {&big, &one, &minus_big};
  const float *b[] = {&big, &minus_big, &one};
  for (const std::string &impl : AvailableImpls()) {
    ASSERT_EQ(braid_reduce_force(impl.c_str()), 0);
    float ra = -1, rb = -1;
    ASSERT_EQ(braid_reduce(&ra, (const void *const *)a, 3, 1, ncclFloat32, ncclSum), 0);
    ASSERT_EQ(braid_reduce(&rb, (const void *const *)b, 3, 1, ncclFloat32, ncclSum), 0);
    EXPECT_EQ(ra, 0.0f) << impl;
    EXPECT_EQ(rb, 1.0f) << impl;
  }
  // Same arrays, same bits, whatever implementation and however often: a long random fp32 sum.
  std::mt19937_64 rng(7);
  const size_t count = 4099;
  std::vector<std::vector<uint8_t>> in(8, std::vector<uint8_t>(count * 4));
  std::vector<const void *> srcs;
  for (auto &v : in) FillRandom(v.data(), count, ncclFloat32, rng), srcs.push_back(v.data());
  std::vector<uint8_t> first;
  for (const std::string &impl : AvailableImpls()) {
    ASSERT_EQ(braid_reduce_force(impl.c_str()), 0);
    for (int rep = 0; rep < 2; rep++) {
      std::vector<uint8_t> dst(count * 4);
      ASSERT_EQ(braid_reduce(dst.data(), srcs.data(), 8, count, ncclFloat32, ncclSum), 0);
      if (first.empty()) first = dst;
      EXPECT_EQ(dst, first) << impl;
    }
  }
}

}  // namespace
