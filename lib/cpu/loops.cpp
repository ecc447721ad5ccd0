#include "cpu/loops.h"

#include <omp.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/decode_ops.h"
#include "core/error.h"
#include "core/rng.h"
#include "cpu/parallel.h"

// Compiled once per instruction-set class (cpu/isa.h), each copy in a
// namespace of its own (NMT_CPU_VARIANT: scalar, avx2 or avx512) with its
// class's flags; the classes' tables are kLoops.
#ifndef NMT_CPU_VARIANT
#error "loops.cpp is compiled with -DNMT_CPU_VARIANT=scalar, avx2 or avx512"
#endif

namespace nmt::cpu::NMT_CPU_VARIANT {

void add(const float* a, const float* b, float* dst, int64_t n) {
  parallel_range(n, n > 32768, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) dst[i] = a[i] + b[i];
  });
}

void add_inplace(float* dst, const float* src, int64_t n) {
  parallel_range(n, n > 32768, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) dst[i] += src[i];
  });
}

void scale(float* x, int64_t n, float s) {
  parallel_range(n, n > 32768, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) x[i] *= s;
  });
}

void add_mask(float* scores, const std::array<int64_t, 4>& d, const float* mask,
              const std::array<int64_t, 4>& md) {
  const int64_t sb = md[0] == 1 ? 0 : md[1] * md[2] * md[3], sh = md[1] == 1 ? 0 : md[2] * md[3],
                st = md[2] == 1 ? 0 : md[3];
  const bool row_bcast = md[3] == 1;
  parallel_for(d[0] * d[1], d[0] * d[1] * d[2] * d[3] > 65536, [&](int64_t bh) {
    const int64_t b = bh / d[1], h = bh % d[1];
    for (int64_t t = 0; t < d[2]; ++t) {
      float* row = scores + ((b * d[1] + h) * d[2] + t) * d[3];
      const float* m = mask + b * sb + h * sh + t * st;
      if (row_bcast) {
        for (int64_t s = 0; s < d[3]; ++s) row[s] += m[0];
      } else {
        for (int64_t s = 0; s < d[3]; ++s) row[s] += m[s];
      }
    }
  });
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
namespace {

// The vector operations the decoding kernels below use, on the widest
// registers the build has: 16 lanes with AVX-512, 8 with AVX2 (no mask
// registers there: masks are lanes of all ones). The kernels are written
// once over them.
#if defined(__AVX512F__)
struct Lanes {
  using V = __m512;
  static constexpr int kN = 16;
  static constexpr int64_t kMaxWidth = 128;  // a head's accumulators, q and dots fit 32 registers
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  // 16 bf16 values widened (a bf16 is the top half of its float).
  static V load(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V zero() { return _mm512_setzero_ps(); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  // 2^(n - 1) for integral n in float lanes, by building the exponent field.
  static V pow2_half(V n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(126)), 23));
  }
  static float reduce_add(V v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(V v) { return _mm512_reduce_max_ps(v); }
  // Lanes [0, n) of m (the others 0), and of x (the others `fill`).
  static V load_first(const float* m, int64_t n) { return _mm512_maskz_loadu_ps(live(n), m); }
  static V first(int64_t n, V x, V fill) { return _mm512_mask_blend_ps(live(n), fill, x); }
  static __mmask16 live(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }
  // Lane j of the result: the sum of a[j]'s 16 lanes. A transpose by
  // shuffles and adds, 45 operations where 16 horizontal sums take about
  // three times that.
  static V lane_sums(const V* a) {
    V b[8], c[4], d[2];
    for (int i = 0; i < 8; ++i)  // lanes of two vectors interleaved
      b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                           _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; ++i) {  // each 128-bit lane: four vectors' partial sums
      const __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
      c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                           _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    for (int i = 0; i < 2; ++i)  // then across the 128-bit lanes
      d[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0x88),
                           _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], 0x88),
                         _mm512_shuffle_f32x4(d[0], d[1], 0xDD));
  }
};
#else
struct Lanes {
  using V = __m256;
  static constexpr int kN = 8;
  static constexpr int64_t kMaxWidth = 64;  // at 128 the query alone fills AVX2's 16 registers
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V zero() { return _mm256_setzero_ps(); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static V pow2_half(V n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23));
  }
  static float reduce(V v, bool max) {
    __m128 x = max ? _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))
                   : _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 y = _mm_movehl_ps(x, x);
    x = max ? _mm_max_ps(x, y) : _mm_add_ps(x, y);
    y = _mm_shuffle_ps(x, x, 1);
    return _mm_cvtss_f32(max ? _mm_max_ss(x, y) : _mm_add_ss(x, y));
  }
  static float reduce_add(V v) { return reduce(v, false); }
  static float reduce_max(V v) { return reduce(v, true); }
  static __m256i live(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load_first(const float* m, int64_t n) { return _mm256_maskload_ps(m, live(n)); }
  static V first(int64_t n, V x, V fill) {
    return _mm256_blendv_ps(fill, x, _mm256_castsi256_ps(live(n)));
  }
  // Lane j of the result: the sum of a[j]'s 8 lanes (horizontal adds, then
  // the two 128-bit halves).
  static V lane_sums(const V* a) {
    const V u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const V u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
  }
};
#endif
using V = Lanes::V;

// exp_approx (kernels/row_ops.h) on a vector: the same operations, so the
// same values. (The
// clamps take x second: max and min return their second operand when
// either is NaN, so a NaN stays NaN, as in exp_approx.)
inline V exp_lanes(V x) {
  using L = Lanes;
  x = L::max(L::set1(-87.33654f), x);
  x = L::min(L::set1(88.37626f), x);
  const V round = L::set1(12582912.f);
  const V n = L::sub(L::fmadd(x, L::set1(1.44269504088896341f), round), round);
  const V r = L::fmadd(n, L::set1(2.12194440e-4f), L::fnmadd(n, L::set1(0.693359375f), x));
  V p = L::set1(1.9875691500e-4f);
  p = L::fmadd(p, r, L::set1(1.3981999507e-3f));
  p = L::fmadd(p, r, L::set1(8.3334519073e-3f));
  p = L::fmadd(p, r, L::set1(4.1665795894e-2f));
  p = L::fmadd(p, r, L::set1(1.6666665459e-1f));
  p = L::fmadd(p, r, L::set1(5.0000001201e-1f));
  const V y = L::add(L::fmadd(L::mul(p, r), r, r), L::set1(1.f));
  return L::mul(L::mul(y, L::pow2_half(n)), L::set1(2.f));
}

// One query against L keys and values of kN * NC elements, s scratch of L
// rounded up to kN. The rows of decoding are short (a few to a few dozen
// positions), where the generic loop spent its time on one horizontal sum
// per key and on exponentials in the scalar tail of a vector loop that
// rarely ran; here kN keys' scores come out of one transpose as a vector,
// and the softmax runs on whole vectors whose lanes past L hold -inf.
template <int NC, typename T>
void attend_row(const float* qi, const T* kb, int64_t ks, const T* vb, int64_t vs, const float* m,
                int64_t L, float scale, float* s, float* o) {
  using Ln = Lanes;
  constexpr int N = Ln::kN;
  if (L <= 0) {  // no keys: zeros, as the loop writes
    for (int c = 0; c < NC; ++c) Ln::store(o + N * c, Ln::zero());
    return;
  }
  V q[NC];
  for (int c = 0; c < NC; ++c) q[c] = Ln::load(qi + N * c);
  V vmax = Ln::set1(-INFINITY);
  for (int64_t j0 = 0; j0 < L; j0 += N) {
    const int64_t n = std::min<int64_t>(N, L - j0);
    V dots[N];
    for (int64_t j = 0; j < n; ++j) {
      const T* kj = kb + (j0 + j) * ks;
      V acc = Ln::mul(q[0], Ln::load(kj));
      for (int c = 1; c < NC; ++c) acc = Ln::fmadd(q[c], Ln::load(kj + N * c), acc);
      dots[j] = acc;
    }
    for (int64_t j = n; j < N; ++j) dots[j] = Ln::zero();
    V x = Ln::mul(Ln::lane_sums(dots), Ln::set1(scale));
    if (m) x = Ln::add(x, Ln::load_first(m + j0, n));
    x = Ln::first(n, x, Ln::set1(-INFINITY));
    Ln::store(s + j0, x);
    vmax = Ln::max(vmax, x);
  }
  const V mx = Ln::set1(Ln::reduce_max(vmax));
  V sum = Ln::zero();
  for (int64_t j0 = 0; j0 < L; j0 += N) {
    const V e = exp_lanes(Ln::sub(Ln::load(s + j0), mx));  // -inf: 0
    Ln::store(s + j0, e);
    sum = Ln::add(sum, e);
  }
  // The weighted sum unnormalised, in U independent chains of FMAs (one
  // chain of NC would wait on each FMA's latency), scaled once at the end.
  constexpr int U = NC >= 8 ? 1 : 8 / NC;
  V acc[U][NC];
  for (int u = 0; u < U; ++u)
    for (int c = 0; c < NC; ++c) acc[u][c] = Ln::zero();
  int64_t j = 0;
  for (; j + U <= L; j += U)
    for (int u = 0; u < U; ++u) {
      const V p = Ln::set1(s[j + u]);
      const T* vj = vb + (j + u) * vs;
      for (int c = 0; c < NC; ++c) acc[u][c] = Ln::fmadd(p, Ln::load(vj + N * c), acc[u][c]);
    }
  for (; j < L; ++j) {
    const V p = Ln::set1(s[j]);
    const T* vj = vb + j * vs;
    for (int c = 0; c < NC; ++c) acc[0][c] = Ln::fmadd(p, Ln::load(vj + N * c), acc[0][c]);
  }
  const V inv = Ln::set1(1.f / Ln::reduce_add(sum));
  for (int c = 0; c < NC; ++c) {
    V t = acc[0][c];
    for (int u = 1; u < U; ++u) t = Ln::add(t, acc[u][c]);
    Ln::store(o + N * c, Ln::mul(t, inv));
  }
}

// The sum of exp(x[v] - mx) over n values, on whole vectors (the last
// one's lanes past n count 0). The `omp simd` loop of exp_approx it replaces
// computed the same values, but GCC made it a loop masked throughout, with
// the clamps as compares and blends: 36 instructions per vector, where
// this loop takes 26 (top-k over an 8000-piece vocabulary spent most of
// its time there, 12% of int8 decoding without a shortlist).
inline float exp_sum(const float* x, int64_t n, float mx) {
  using Ln = Lanes;
  constexpr int N = Ln::kN;
  const V m = Ln::set1(mx);
  V sum = Ln::zero();
  int64_t v = 0;
  for (; v + N <= n; v += N) sum = Ln::add(sum, exp_lanes(Ln::sub(Ln::load(x + v), m)));
  if (v < n) {
    const V e = exp_lanes(Ln::sub(Ln::load_first(x + v, n - v), m));
    sum = Ln::add(sum, Ln::first(n - v, e, Ln::zero()));
  }
  return Ln::reduce_add(sum);
}

}  // namespace
#else
namespace {

inline float exp_sum(const float* x, int64_t n, float mx) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t v = 0; v < n; ++v) sum += exp_approx(x[v] - mx);
  return sum;
}

}  // namespace
#endif

namespace {

template <typename T>
using AttendRow = void (*)(const float*, const T*, int64_t, const T*, int64_t, const float*,
                           int64_t, float, float*, float*);

// The vector kernel for a row's steps (attend_row), for heads 16 to
// Lanes::kMaxWidth wide, keys as wide as values; null where the loop runs.
template <typename T>
AttendRow<T> attend_row_kernel(const MatDesc& q, const MatDesc& k, const MatDesc& v,
                               const MatDesc& ctx) {
  [[maybe_unused]] const int64_t D = q.dims[3], Dv = v.dims[3];
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  if (D == Dv && D >= 16 && D <= Lanes::kMaxWidth && q.strides[3] == 1 && k.strides[3] == 1 &&
      v.strides[3] == 1 && ctx.strides[3] == 1) {
    switch (D / Lanes::kN * (D % Lanes::kN == 0)) {
      case 1:
        return attend_row<1, T>;
      case 2:
        return attend_row<2, T>;
      case 4:
        return attend_row<4, T>;
      case 8:
        return attend_row<8, T>;
    }
  }
#endif
  return nullptr;
}

// Keys and values of element type T: f32, or bf16 (uint16_t, an int8
// model's caches), which the vector kernel widens as it loads and the loop
// reads through a widened copy of the (batch, head)'s rows.
template <typename T>
void attend_as(const MatDesc& q, const MatDesc& k, const MatDesc& v, const float* mask, float scale,
               const MatDesc& ctx) {
  // Decoding's attention is a few dot products per (batch, head) against a
  // short history: oneDNN ran it as thousands of 1-row GEMMs at a fraction
  // of a millisecond each (a quarter of int8 decoding). Here one pass per
  // query: scores, softmax and the weighted sum, vectorised along the head.
  const int64_t B = q.dims[0], H = q.dims[1], M = q.dims[2], D = q.dims[3];
  const int64_t Lmax = k.dims[2], Dv = v.dims[3];
  const AttendRow<T> row_kernel = attend_row_kernel<T>(q, k, v, ctx);
  static thread_local std::vector<float> scores, widened;
  parallel_for(
      B * H, B * H * M * Lmax * (D + Dv) > 65536, [&](int64_t bh) {
        const int64_t b = bh / H, h = bh % H;
        if (static_cast<int64_t>(scores.size()) < Lmax + 16) scores.resize(Lmax + 16);
        if constexpr (!std::is_same_v<T, float>)
          if (!row_kernel && static_cast<int64_t>(widened.size()) < Lmax * (D + Dv))
            widened.resize(static_cast<size_t>(Lmax * (D + Dv)));
        float* s = scores.data();
        const T* kb = reinterpret_cast<const T*>(k.ptr) + b * k.strides[0] + h * k.strides[1];
        const T* vb = reinterpret_cast<const T*>(v.ptr) + b * v.strides[0] + h * v.strides[1];
        const float* m = mask ? mask + b * Lmax : nullptr;
        const int64_t L = m ? unmasked_length(m, Lmax) : Lmax;
        // The loop reads bf16 keys and values through a widened copy, made
        // once for the (batch, head)'s query rows (the vector kernels cover
        // the usual head widths; the loop is the remainder).
        const float *kf = nullptr, *vf = nullptr;
        int64_t ks = k.strides[2], vs = v.strides[2];
        if constexpr (std::is_same_v<T, float>) {
          kf = kb, vf = vb;
        } else if (!row_kernel) {
          float* w = widened.data();
          for (int64_t j = 0; j < L; ++j) {
            for (int64_t x = 0; x < D; ++x) w[j * D + x] = bf16_to_float(kb[j * ks + x]);
            for (int64_t x = 0; x < Dv; ++x) w[L * D + j * Dv + x] = bf16_to_float(vb[j * vs + x]);
          }
          kf = w, vf = w + L * D, ks = D, vs = Dv;
        }
        for (int64_t i = 0; i < M; ++i) {
          const float* qi = q.ptr + b * q.strides[0] + h * q.strides[1] + i * q.strides[2];
          float* o = const_cast<float*>(ctx.ptr) + b * ctx.strides[0] + h * ctx.strides[1] +
                     i * ctx.strides[2];
          if (row_kernel)
            row_kernel(qi, kb, k.strides[2], vb, v.strides[2], m, L, scale, s, o);
          else
            attend_keys(qi, kf, ks, vf, vs, m, L, D, Dv, scale, s, o);
        }
      });
}

}  // namespace

void attend(const MatDesc& q, const MatDesc& k, const MatDesc& v, const float* mask, float scale,
            const MatDesc& ctx) {
  if (k.dtype == DType::BF16)
    attend_as<uint16_t>(q, k, v, mask, scale, ctx);
  else
    attend_as<float>(q, k, v, mask, scale, ctx);
}

void dropout(float* x, int64_t n, float p, uint64_t seed) {
  if (p <= 0.f) return;
  const float keep = 1.f / (1.f - p);
  const uint32_t threshold = static_cast<uint32_t>(p * 4294967296.0);
  // dropout_value's masks, one hash per pair of elements.
  const int64_t pairs = n / 2;
#pragma omp parallel for if (n > 32768)
  for (int64_t j = 0; j < pairs; ++j) {
    const uint64_t h = mix_seed(seed, static_cast<uint64_t>(j));
    x[2 * j] = dropout_of(x[2 * j], h, 0, threshold, keep);
    x[2 * j + 1] = dropout_of(x[2 * j + 1], h, 1, threshold, keep);
  }
  if (n % 2)
    x[n - 1] = dropout_value(x[n - 1], seed, static_cast<uint64_t>(n - 1), threshold, keep);
}

void activate(const float* x, float* y, int64_t n, Activation act) {
  parallel_range(n, n > 32768, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) y[i] = nmt::activate(act, x[i]);
  });
}

void activation_backward(const float* x, float* dy, int64_t n, Activation act) {
  if (act == Activation::Relu) {  // the paper's case, a select
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) dy[i] = x[i] > 0.f ? dy[i] : 0.f;
    return;
  }
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dy[i] *= activate_derivative(act, x[i]);
}

void log_add_exp(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    const float a = dst[i], b = src[i], hi = a > b ? a : b, lo = a > b ? b : a;
    // -inf + -inf stays -inf (a token both models rule out).
    dst[i] = lo == -INFINITY ? hi : hi + std::log1p(std::exp(lo - hi));
  }
}

float* column_sum_scratch(int64_t n) {
  thread_local std::vector<float> part;  // grows only: no allocation once warm
  if (static_cast<int64_t>(part.size()) < n) part.resize(n);
  return part.data();
}

void add_column_sums(const float* src, float* dst, int64_t rows, int64_t cols) {
  // Rows in sequence within a block stream and vectorise (a block of columns
  // per task instead reads each row in pieces, and is slower).
  add_column_sums_with(src, cols, rows, cols, dst, [](int64_t, const float*) {});
}

void softmax_rows(const float* src, float* dst, int64_t rows, int64_t cols) {
  parallel_for(rows, rows * cols > 4096,
               [&](int64_t r) { softmax_row(src + r * cols, dst + r * cols, cols, false); });
}

void layer_norm_rows(const float* src, float* dst, const float* gamma, const float* beta,
                     int64_t rows, int64_t D, float eps) {
  parallel_for(rows, rows * D > 4096, [&](int64_t r) {
    layer_norm_row(src + r * D, gamma, beta, dst + r * D, nullptr, nullptr, D, eps);
  });
}

void add_layer_norm_rows(const float* x, const float* a, const float* gamma, const float* beta,
                         float* sum, float* dst, int64_t rows, int64_t D, float eps) {
  // Each row's sum, while it is in the core's cache, then its norm (in
  // place where the sum is not kept): the numbers of add then
  // layer_norm_rows, without a pass over the whole of either.
  parallel_for(rows, rows * D > 4096, [&](int64_t r) {
    float* s = (sum ? sum : dst) + r * D;
    const float *xr = x + r * D, *ar = a + r * D;
#pragma omp simd
    for (int64_t i = 0; i < D; ++i) s[i] = xr[i] + ar[i];
    layer_norm_row(s, gamma, beta, dst + r * D, nullptr, nullptr, D, eps);
  });
}

void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t D, float scale,
               const float* positions, int64_t pos0, int64_t T, float* out) {
  parallel_for(n, n * D > 65536, [&](int64_t r) {
    const float* p = positions + (pos0 + r % T) * D;
    float* o = out + r * D;
    if (tokens[r] < 0) {  // no token: the position alone
      for (int64_t i = 0; i < D; ++i) o[i] = p[i];
      return;
    }
    const float* e = table + static_cast<int64_t>(tokens[r]) * D;
    for (int64_t i = 0; i < D; ++i) o[i] = e[i] * scale + p[i];
  });
}

void embedding_s8(const int8_t* table, const float* row_scales, const int32_t* tokens, int64_t n,
                  int64_t D, float scale, const float* positions, int64_t pos0, int64_t T,
                  float* out) {
  parallel_for(n, n * D > 65536, [&](int64_t r) {
    const float* p = positions + (pos0 + r % T) * D;
    float* o = out + r * D;
    if (tokens[r] < 0) {
      for (int64_t i = 0; i < D; ++i) o[i] = p[i];
      return;
    }
    const int8_t* e = table + static_cast<int64_t>(tokens[r]) * D;
    const float s = row_scales[tokens[r]];
    for (int64_t i = 0; i < D; ++i) {
      const float w = e[i] * s;  // the weight as an f32 table holds it
      o[i] = w * scale + p[i];
    }
  });
}

void embedding_backward(const int32_t* tokens, int64_t n, int64_t D, float scale, const float* dy,
                        float* dtable, float* dpositions, int64_t T) {
  // A token may appear many times: each thread owns a slice of the D
  // columns and walks all rows in order, so no two threads write one float
  // and every sum keeps a fixed order (training stays deterministic).
  constexpr int64_t kSlice = 32;
  const int64_t slices = (D + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static) if (n * D > 65536)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t i0 = s * kSlice, i1 = std::min(D, i0 + kSlice);
    for (int64_t r = 0; r < n; ++r) {
      const float* g = dy + r * D;
      if (tokens[r] >= 0) {
        float* de = dtable + static_cast<int64_t>(tokens[r]) * D;
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) de[i] += g[i] * scale;
      }
      if (dpositions) {
        float* dp = dpositions + (r % T) * D;
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) dp[i] += g[i];
      }
    }
  }
}

XentRow xent(const float* logits, const int32_t* targets, int64_t N, int64_t V, float eps,
                int32_t pad, float* dlogits, float grad_scale) {
  std::vector<double> loss(N, 0.0), nll(N, 0.0);
#pragma omp parallel for
  for (int64_t i = 0; i < N; ++i) {
    const float* x = logits + i * V;
    float* g = dlogits ? dlogits + i * V : nullptr;
    if (targets[i] == pad) {
      if (g) std::fill(g, g + V, 0.f);
      continue;
    }
    float mx = x[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < V; ++j) mx = x[j] > mx ? x[j] : mx;
    const float x_target = x[targets[i]];  // read before g, which may be x, is written
    // exp in float and sums in float over blocks of 1024 (vectorised), the
    // blocks summed in double: a vocabulary may hold 37k terms. With a
    // gradient to write, each exp is kept in it, so the row's exps are
    // computed once, not twice (the row is still in cache when scaled).
    double z = 0, sum_x = 0;
    for (int64_t j0 = 0; j0 < V; j0 += 1024) {
      const int64_t j1 = std::min(V, j0 + 1024);
      float zb = 0.f, sb = 0.f;
      if (g) {
#pragma omp simd reduction(+ : zb, sb)
        for (int64_t j = j0; j < j1; ++j) {
          const float xj = x[j], e = exp_approx(xj - mx);
          g[j] = e;
          zb += e;
          sb += xj;
        }
      } else {
#pragma omp simd reduction(+ : zb, sb)
        for (int64_t j = j0; j < j1; ++j) {
          zb += exp_approx(x[j] - mx);
          sb += x[j];
        }
      }
      z += zb;
      sum_x += sb;
    }
    const double logz = mx + std::log(z);
    const double lp_target = x_target - logz;
    const double mean_lp = sum_x / V - logz;
    nll[i] = -lp_target;
    loss[i] = -(1.0 - eps) * lp_target - eps * mean_lp;
    if (g) {
      // d/dx_j = softmax_j - q_j, q = (1-eps) onehot + eps / V
      const float inv_z = static_cast<float>(1.0 / z), u = eps / V;
#pragma omp simd
      for (int64_t j = 0; j < V; ++j) g[j] = (g[j] * inv_z - u) * grad_scale;
      g[targets[i]] -= (1.f - eps) * grad_scale;
    }
  }
  XentRow t;
  for (int64_t i = 0; i < N; ++i) {
    if (targets[i] == pad) continue;
    t.loss += loss[i];
    t.nll += nll[i];
    ++t.tokens;
  }
  return t;
}

void adam(float* p, const float* g, float* m, float* v, int64_t n, float b1, float b2, float step,
          float inv_sqrt_c2, float eps, float g_scale) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * g_scale;
    m[i] = b1 * m[i] + (1.f - b1) * gi;
    v[i] = b2 * v[i] + (1.f - b2) * gi * gi;
    p[i] -= step * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
  }
}

double sum_squares(const float* x, int64_t n) {
  // Fixed chunks summed in order: the same result for any thread count.
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(chunks, 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    double s = 0;
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) s += static_cast<double>(x[i]) * x[i];
    part[c] = s;
  }
  double s = 0;
  for (double q : part) s += q;
  return s;
}

void topk_log_softmax(const float* logits, const double* base, int64_t rows, int64_t V, int64_t k,
                      const int32_t* banned, int64_t n_banned, const int32_t* cols, int64_t n_cols,
                      double* values, int32_t* indices, float* col_lp,
                      const ColumnGroups* allowed) {
  // One row per thread, two passes: the k best logits (their order is the
  // log-probabilities' order) in a small sorted list, with the row's maximum
  // from the same vectorised block maxima that pass over a block of 32 when
  // none beats the k-th; then a vectorised log-sum-exp. A row with allowed
  // columns runs on a packed copy of them: its numbers are then those of its
  // own columns in their order, whatever its batch, and it reads a few
  // hundred columns instead of the batch's thousands.
  parallel_for(rows, rows * V > 32768, [&](int64_t r) {
    const float* x = logits + r * V;
    const int32_t* id = nullptr;  // packed column j is logits column id[j]
    int64_t n = V;
    if (allowed) {
      const int64_t g = r / allowed->group;
      id = allowed->cols + allowed->offsets[g];
      n = allowed->offsets[g + 1] - allowed->offsets[g];
      thread_local std::vector<float> own;
      if (static_cast<int64_t>(own.size()) < n) own.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) own[j] = x[id[j]];
      x = own.data();
    }
    double* val = values + r * k;  // the logits while selecting
    int32_t* idx = indices + r * k;
    int64_t filled = 0;
    float worst = -INFINITY;  // the k-th best so far, once there are k
    float mx = -INFINITY;
    for (int64_t v0 = 0; v0 < n; v0 += 32) {
      const int64_t end = std::min(n, v0 + 32);
      float block_max = -INFINITY;
#pragma omp simd reduction(max : block_max)
      for (int64_t v = v0; v < end; ++v) block_max = x[v] > block_max ? x[v] : block_max;
      mx = block_max > mx ? block_max : mx;
      if (filled == k && !(block_max > worst)) continue;
      for (int64_t v = v0; v < end; ++v) {
        if (filled == k && !(x[v] > worst)) continue;
        const int32_t column = id ? id[v] : static_cast<int32_t>(v);
        if (is_banned_id(column, banned, n_banned)) continue;
        insert_best<double>(val, idx, filled, k, x[v], column, HigherValue());
        if (filled == k) worst = static_cast<float>(val[k - 1]);
      }
    }
    const float lse = mx + std::log(exp_sum(x, n, mx));
    for (int64_t c = 0; c < n_cols; ++c) {
      const int32_t col = cols[r * n_cols + c];
      int64_t at = col;
      if (col >= 0 && id) {
        const int32_t* p = std::lower_bound(id, id + n, col);
        at = p != id + n && *p == col ? p - id : -1;
      }
      col_lp[r * n_cols + c] = at >= 0 ? x[at] - lse : -INFINITY;
    }
    const double b = base ? base[r] : 0.0;
    for (int64_t j = 0; j < filled; ++j) val[j] = b + (static_cast<float>(val[j]) - lse);
    for (int64_t j = filled; j < k; ++j) val[j] = -INFINITY, idx[j] = -1;
  });
}

void sample_tokens(const float* logits, int64_t V, const int64_t* rows, int64_t n,
                   float temperature, int64_t top_k, float top_p, const double* u,
                   const int32_t* forced, const int32_t* banned, int64_t n_banned, int32_t* ids,
                   float* lp) {
  // One output per thread, each in a fixed order of its own: the draws do
  // not depend on the thread count. Vectorised passes over the row (its
  // maximum and log-sum-exp); a small top k is selected while streaming;
  // top-p sorts the row.
  SampleParams p;
  p.inv_t = 1.f / temperature, p.top_k = top_k, p.top_p = top_p;
  p.banned = banned, p.n_banned = n_banned;
#pragma omp parallel for schedule(dynamic, 1) if (n * V > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float* x = logits + rows[i] * V;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < V; ++v) mx = x[v] > mx ? x[v] : mx;
    const float lse = mx + std::log(exp_sum(x, V, mx));
    int32_t pick = forced[i];
    if (pick < 0) {
      thread_local std::vector<float> cand_val;
      thread_local std::vector<int32_t> cand_id;
      cand_val.resize(static_cast<size_t>(V)), cand_id.resize(static_cast<size_t>(V));
      pick = sample_draw(x, V, p, u[i], cand_val.data(), cand_id.data());
    }
    ids[i] = pick;
    lp[i] = x[pick] - lse;
  }
}

void gather_rows(const void* src, int64_t src_ld, const int64_t* idx, int64_t n, int64_t len,
                 void* dst, int64_t dst_ld, const int64_t* dst_idx) {
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  parallel_for(n, n * len > 262144, [&](int64_t i) {
    std::memcpy(to + (dst_idx ? dst_idx[i] : i) * dst_ld, from + idx[i] * src_ld,
                static_cast<size_t>(len));
  });
}

// ---- Products with sparse activations -------------------------------------

// The non-zero elements of x[0, K), in order: their columns and values.
// Whole vectors at a time where the build has AVX-512 or AVX2: a pass of
// one element at a time was about a quarter of the sparse product's time
// (perf), and AVX-512's compress took the whole of test_2016_flickr from
// 2.40-2.46 s to 2.35-2.37 s (f32, shortlisted).
int64_t nonzeros(const float* x, int64_t K, int32_t* col, float* val) {
  int64_t n = 0, k = 0;
#if defined(__AVX512F__)
  const __m512i step = _mm512_set1_epi32(16);
  __m512i cols = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (; k + 16 <= K; k += 16, cols = _mm512_add_epi32(cols, step)) {
    const __m512 v = _mm512_loadu_ps(x + k);
    const __mmask16 mask = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    // Compressed in registers and stored whole (col and val hold K
    // elements, so the stores stay inside them); n moves by the count.
    _mm512_storeu_ps(val + n, _mm512_maskz_compress_ps(mask, v));
    _mm512_storeu_si512(col + n, _mm512_maskz_compress_epi32(mask, cols));
    n += __builtin_popcount(mask);
  }
#elif defined(__AVX2__)
  for (; k + 8 <= K; k += 8) {
    unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(
        _mm256_cmp_ps(_mm256_loadu_ps(x + k), _mm256_setzero_ps(), _CMP_NEQ_UQ)));
    for (; mask; mask &= mask - 1) {
      const int64_t j = k + __builtin_ctz(mask);
      col[n] = static_cast<int32_t>(j), val[n++] = x[j];
    }
  }
#endif
  for (; k < K; ++k)
    if (x[k] != 0.f) col[n] = static_cast<int32_t>(k), val[n++] = x[k];
  return n;
}

// 16 floats, as GCC's vector extension lowers them for the target (one
// AVX-512 register, two AVX ones), read and written at any alignment.
using v16 = float __attribute__((vector_size(64)));
using v16u = float __attribute__((vector_size(64), aligned(4), may_alias));
inline v16 load16(const float* p) { return *reinterpret_cast<const v16u*>(p); }
inline void store16(float* p, v16 v) { *reinterpret_cast<v16u*>(p) = v; }

// acc[0, 16 * V) = sum over j of val[j] * w[col[j] * ldw + (0, 16 * V)], the
// V vectors held in registers through the sum where the target has them
// (V = 16 takes half of AVX-512's 32; AVX2 has sparse_block_avx2).
template <int V>
void sparse_block(const int32_t* col, const float* val, int64_t nnz, const float* w, int64_t ldw,
                  float* acc) {
  v16 s[V];
  for (int i = 0; i < V; ++i) s[i] = v16{};
  for (int64_t j = 0; j < nnz; ++j) {
    const float* wr = w + static_cast<int64_t>(col[j]) * ldw;
    const v16 x = v16{} + val[j];
    for (int i = 0; i < V; ++i) s[i] += x * load16(wr + 16 * i);
  }
  for (int i = 0; i < V; ++i) store16(acc + 16 * i, s[i]);
}

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
// sparse_block for AVX2, 8 * R columns: GCC lowers sparse_block<16>'s
// vectors of 16 to pairs of AVX registers and spilled them at every
// non-zero, 4x slower than these 16 (a quarter of an AVX2 build's f32
// translation, perf). The same sums in the same order.
template <int R>
void sparse_block_avx2(const int32_t* col, const float* val, int64_t nnz, const float* w,
                       int64_t ldw, float* acc) {
  __m256 s[R];
  for (int i = 0; i < R; ++i) s[i] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nnz; ++j) {
    const float* wr = w + static_cast<int64_t>(col[j]) * ldw;
    const __m256 x = _mm256_broadcast_ss(val + j);
    for (int i = 0; i < R; ++i) s[i] = _mm256_fmadd_ps(x, _mm256_loadu_ps(wr + 8 * i), s[i]);
  }
  for (int i = 0; i < R; ++i) _mm256_storeu_ps(acc + 8 * i, s[i]);
}
#endif

// dst = act(alpha * a w + bias) for f32 rows a (M, K) that are mostly
// zeros and w (K, N) row-major: each row sums, over its non-zero elements
// in column order, that element times its row of w, 256 output columns at
// a time. At 10% non-zeros (the 1024 -> 256 product of the Multi30k
// transformer-small while it translates) that is a tenth of the dense
// product's multiply-adds. Rows are independent: the result of one is the
// same in any batch and on any number of threads. (Four rows at a time
// over the union of their non-zeros, so that beam siblings share each
// weight row read, was slower, 2.48-2.58 s against 2.43-2.53 s for
// test_2016_flickr: the union of four holds 2.3 rows' worth, all
// multiplied.)
void sparse_rows_product(const MatDesc& a, const float* w, const MatDesc& dst,
                         const GemmAttr& attr) {
  const int64_t M = a.dims[2], K = a.dims[3], N = dst.dims[3];
  const int64_t lda = a.strides[2], ldc = dst.strides[2];
  parallel_for(M, M * K * N > (int64_t{1} << 24), [&](int64_t m) {
    thread_local std::vector<int32_t> col;
    thread_local std::vector<float> val;
    if (static_cast<int64_t>(col.size()) < K) col.resize(K), val.resize(K);
    const int64_t nnz = nonzeros(a.ptr + m * lda, K, col.data(), val.data());
    float* y = const_cast<float*>(dst.ptr) + m * ldc;
    alignas(64) float acc[256];
    for (int64_t n0 = 0; n0 < N; n0 += 256) {
      const int64_t nb = std::min<int64_t>(256, N - n0);
      int64_t c = 0;
      if (nb == 256) {
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
        sparse_block_avx2<16>(col.data(), val.data(), nnz, w + n0, N, acc);
        sparse_block_avx2<16>(col.data(), val.data(), nnz, w + n0 + 128, N, acc + 128);
#else
        sparse_block<16>(col.data(), val.data(), nnz, w + n0, N, acc);
#endif
        c = nb;
      }
      for (; c + 16 <= nb; c += 16)
        sparse_block<1>(col.data(), val.data(), nnz, w + n0 + c, N, acc + c);
      for (; c < nb; ++c) {
        float sum = 0.f;
        for (int64_t j = 0; j < nnz; ++j) sum += val[j] * w[col[j] * N + n0 + c];
        acc[c] = sum;
      }
      const float* bias = attr.bias ? attr.bias + n0 : nullptr;
      if (attr.act == Activation::None && bias) {
#pragma omp simd
        for (int64_t i = 0; i < nb; ++i) y[n0 + i] = attr.alpha * acc[i] + bias[i];
      } else {
        for (int64_t i = 0; i < nb; ++i)
          y[n0 + i] = activate(attr.act, attr.alpha * acc[i] + (bias ? bias[i] : 0.f));
      }
    }
  });
}

// One symmetric scale per row, as CTranslate2 quantises activations: a
// row's rounding, and so a sentence's translation, does not depend on the
// other rows in its batch. (Written so that the loops vectorise: a select
// for the maximum, and rounding to nearest even by adding and subtracting
// 1.5 * 2^23.)
// Rows of T (int8_t for oneDNN, int16_t for rows_gemm_s8) ldo apart, the
// elements past K zeros.
template <typename T>
void quantise_rows(const MatDesc& a, T* out, int64_t ldo, float* row_scale) {
  const int64_t M = a.dims[2], K = a.dims[3], ld = a.strides[2];
  constexpr float kRound = 12582912.f;
  parallel_for(M, M * K > 65536, [&](int64_t m) {
    const float* x = a.ptr + m * ld;
    // The maximum over 32 lanes, so that the vector maxima form several
    // independent chains: one reduction variable made one chain, whose
    // latency held this loop to a fraction of its loads (perf).
    float lane[32] = {};
    int64_t k0 = 0;
    for (; k0 + 32 <= K; k0 += 32)
#pragma omp simd
      for (int l = 0; l < 32; ++l) {
        const float v = x[k0 + l] < 0 ? -x[k0 + l] : x[k0 + l];
        lane[l] = v > lane[l] ? v : lane[l];
      }
    // The lanes folded in halves (a scalar pass over them was one chain of
    // 32 dependent maxima, a third of this function's time).
    for (int w = 16; w > 0; w /= 2)
#pragma omp simd
      for (int l = 0; l < w; ++l) lane[l] = lane[l + w] > lane[l] ? lane[l + w] : lane[l];
    float amax = lane[0];
    for (int64_t k = k0; k < K; ++k) {
      const float v = x[k] < 0 ? -x[k] : x[k];
      amax = v > amax ? v : amax;
    }
    const float scale = amax > 0 ? amax / 127.f : 1.f, inv = 1.f / scale;
    row_scale[m] = scale;
    T* q = out + m * ldo;
#pragma omp simd
    for (int64_t k = 0; k < K; ++k)
      q[k] = static_cast<T>(static_cast<int32_t>((x[k] * inv + kRound) - kRound));
    for (int64_t k = K; k < ldo; ++k) q[k] = 0;
  });
}

// int8's epilogue: y = act(r_i * y + bias) over rows x N of the result.
// One loop per case, so that the common ones (no activation, ReLU)
// vectorise: with the activation chosen inside the loop the compiler kept
// it scalar, and this pass took a fifth of an int8 translation (perf, over
// the vocabulary projection's 8000 columns).
template <typename Act>
void scale_rows_with(float* c, int64_t ldc, int64_t rows, int64_t N, const float* rs,
                     const float* bias, Act act) {
  parallel_for(rows, rows * N > 65536, [&](int64_t i) {
    float* y = c + i * ldc;
    const float r = rs[i];
    if (bias) {
#pragma omp simd
      for (int64_t n = 0; n < N; ++n) y[n] = act(r * y[n] + bias[n]);
    } else {
#pragma omp simd
      for (int64_t n = 0; n < N; ++n) y[n] = act(r * y[n]);
    }
  });
}

void scale_rows(float* c, int64_t ldc, int64_t rows, int64_t N, const float* rs, const float* bias,
                Activation a) {
  switch (a) {
    case Activation::None:
      return scale_rows_with(c, ldc, rows, N, rs, bias, [](float v) { return v; });
    case Activation::Relu:
      return scale_rows_with(c, ldc, rows, N, rs, bias, [](float v) { return v > 0.f ? v : 0.f; });
    default:
      return scale_rows_with(c, ldc, rows, N, rs, bias, [a](float v) { return activate(a, v); });
  }
}

void quantise_rows_s8(const MatDesc& a, int8_t* out, int64_t ldo, float* row_scale) {
  quantise_rows(a, out, ldo, row_scale);
}
void quantise_rows_s16(const MatDesc& a, int16_t* out, int64_t ldo, float* row_scale) {
  quantise_rows(a, out, ldo, row_scale);
}

extern const Loops kLoops = {
    Isa::NMT_CPU_VARIANT, add, add_inplace, scale, dropout, activate, activation_backward,
    add_column_sums, log_add_exp, add_mask, attend, softmax_rows,
    layer_norm_rows, add_layer_norm_rows, embedding, embedding_s8, embedding_backward, xent, adam,
    sum_squares, topk_log_softmax, sample_tokens, gather_rows, sparse_rows_product,
    quantise_rows_s8, quantise_rows_s16, scale_rows, column_sum_scratch};

}  // namespace nmt::cpu::NMT_CPU_VARIANT
