// The products against packed weights of rows_gemm.h, in AVX2 and FMA.
//
// f32: tiles of R rows by P panels (16 columns, two registers each) keep
// R * 2P sums in registers through the whole depth: 6 x 1 (12 sums, the
// classic AVX2 shape) for blocks of six rows, and for the 1-5 rows left
// over as many panels as the 16 registers hold (1 x 6, 2 x 3, 3 x 2,
// 4 x 1, 5 x 1), so that a decoding step's few rows still have 8-12
// independent FMA chains. Each sum is the same chain whatever its tile: 0,
// then + a[m, k] w[k, n] by FMA for k = 0, 1, ..., K - 1.
#include "cpu/rows_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/isa.h"
#include "cpu/parallel.h"

namespace nmt::cpu {
// The kernels, compiled for AVX2 and FMA whatever the build's flags (the
// namespace marks them for tests/isa_check.sh).
namespace avx2 {

#define NMT_AVX2 __attribute__((target("avx2,fma")))

// What follows the sum: dst = act(alpha * sum + bias).
struct Epilogue {
  float alpha;
  const float* bias;  // null: none
  Activation act;
};

// The sums of R rows of a (row stride lda) against P panels from w (panel
// stride ps) into acc (R rows of 16 P). Nothing else happens here, so that
// the compiler keeps all R * 2P sums in registers (with the epilogue in the
// same function GCC spilled five of tile<6, 1>'s twelve in the loop).
template <int R, int P>
NMT_AVX2 __attribute__((noinline)) void sums(const float* a, int64_t lda, const float* w,
                                             int64_t ps, int64_t K, float* acc) {
  __m256 c[R][2 * P];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < 2 * P; ++j) c[r][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* wk = w + k * kRowsPanel;
    if constexpr (P == 1) {
      // Two registers of weights, each row's value broadcast in turn.
      const __m256 b0 = _mm256_loadu_ps(wk), b1 = _mm256_loadu_ps(wk + 8);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
        c[r][0] = _mm256_fmadd_ps(x, b0, c[r][0]);
        c[r][1] = _mm256_fmadd_ps(x, b1, c[r][1]);
      }
    } else {
      // The R row values held, each register of weights loaded once.
      __m256 x[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) x[r] = _mm256_broadcast_ss(a + r * lda + k);
#pragma GCC unroll 16
      for (int j = 0; j < 2 * P; ++j) {
        const __m256 b = _mm256_loadu_ps(wk + (j / 2) * ps + (j % 2) * 8);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) c[r][j] = _mm256_fmadd_ps(x[r], b, c[r][j]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < 2 * P; ++j) _mm256_store_ps(acc + r * 16 * P + 8 * j, c[r][j]);
}

// dst = act(alpha * acc + bias) for R rows of `width` sums (acc's row
// stride), of which the first `cols` are real (fewer only in the last
// panel of the weights).
NMT_AVX2 void finish(const float* acc, int R, int64_t width, int64_t cols, float* dst, int64_t ldc,
                     const Epilogue& e) {
  const __m256 alpha = _mm256_set1_ps(e.alpha);
  for (int r = 0; r < R; ++r) {
    const float* s = acc + r * width;
    float* y = dst + r * ldc;
    int64_t n = 0;
    for (; n + 8 <= cols; n += 8) {
      __m256 v = _mm256_load_ps(s + n);
      if (e.alpha != 1.f) v = _mm256_mul_ps(v, alpha);
      if (e.bias) v = _mm256_add_ps(v, _mm256_loadu_ps(e.bias + n));
      if (e.act == Activation::Relu) v = _mm256_max_ps(v, _mm256_setzero_ps());
      _mm256_storeu_ps(y + n, v);
    }
    for (; n < cols; ++n) {  // the same operations, one lane
      __m128 v = _mm_set_ss(s[n]);
      if (e.alpha != 1.f) v = _mm_mul_ss(v, _mm256_castps256_ps128(alpha));
      if (e.bias) v = _mm_add_ss(v, _mm_set_ss(e.bias[n]));
      if (e.act == Activation::Relu) v = _mm_max_ss(v, _mm_setzero_ps());
      y[n] = _mm_cvtss_f32(v);
    }
    if (e.act != Activation::None && e.act != Activation::Relu)
      for (n = 0; n < cols; ++n) y[n] = activate(e.act, y[n]);
  }
}

// R rows against P panels: their sums, then the epilogue into dst, of
// which `cols` columns are real.
template <int R, int P>
NMT_AVX2 void tile(const float* a, int64_t lda, const float* w, int64_t ps, int64_t K, float* dst,
                   int64_t ldc, int64_t cols, const Epilogue& e) {
  alignas(32) float acc[R * 16 * P];
  sums<R, P>(a, lda, w, ps, K, acc);
  finish(acc, R, 16 * P, std::min<int64_t>(cols, 16 * P), dst, ldc, e);
}

// Panels [p0, p1) for R rows, P at a time, then the rest in a narrower
// tile (panel p starts at column 16 p).
template <int R, int P>
NMT_AVX2 void panels(const float* a, int64_t lda, const float* w, int64_t ps, int64_t K, int64_t N,
                     int64_t p0, int64_t p1, float* dst, int64_t ldc, Epilogue e) {
  const float* bias = e.bias;
  int64_t p = p0;
  for (; p + P <= p1; p += P) {
    e.bias = bias ? bias + p * kRowsPanel : nullptr;
    tile<R, P>(a, lda, w + p * ps, ps, K, dst + p * kRowsPanel, ldc, N - p * kRowsPanel, e);
  }
  if constexpr (P > 1) {
    if (p < p1) {
      e.bias = bias;
      // One narrower call per leftover count: a tile's width is fixed.
      panels<R, P - 1>(a, lda, w, ps, K, N, p, p1, dst, ldc, e);
    }
  }
}

NMT_AVX2 void rows(int R, const float* a, int64_t lda, const float* w, int64_t ps, int64_t K,
                   int64_t N, int64_t p0, int64_t p1, float* dst, int64_t ldc, const Epilogue& e) {
  switch (R) {
    case 1:
      return panels<1, 6>(a, lda, w, ps, K, N, p0, p1, dst, ldc, e);
    case 2:
      return panels<2, 3>(a, lda, w, ps, K, N, p0, p1, dst, ldc, e);
    case 3:
      return panels<3, 2>(a, lda, w, ps, K, N, p0, p1, dst, ldc, e);
    case 4:
      return panels<4, 1>(a, lda, w, ps, K, N, p0, p1, dst, ldc, e);
    case 5:
      return panels<5, 1>(a, lda, w, ps, K, N, p0, p1, dst, ldc, e);
    default:
      return panels<6, 1>(a, lda, w, ps, K, N, p0, p1, dst, ldc, e);
  }
}

// int8: R rows against one panel of 16 columns. The sums' chains are
// integer adds of one cycle, so two registers of sums per row keep the
// multipliers busy; the panel's pair of rows, widened once, serves all R.
// (R = 6: 12 sums, 2 weights, a row's pair and a product: 16 registers.)
template <int R>
NMT_AVX2 __attribute__((noinline)) void sums_s8(const int16_t* a, int64_t lda, const int8_t* w,
                                                int64_t pairs, int32_t* acc) {
  __m256i c[R][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) c[r][0] = c[r][1] = _mm256_setzero_si256();
  for (int64_t j = 0; j < pairs; ++j) {
    const int8_t* wj = w + j * 2 * kRowsPanel;
    const __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wj)));
    const __m256i b1 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wj + 16)));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      int32_t pair;  // (a[m, 2j], a[m, 2j + 1])
      std::memcpy(&pair, a + r * lda + 2 * j, sizeof pair);
      const __m256i x = _mm256_set1_epi32(pair);
      c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(x, b0));
      c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(x, b1));
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(acc + 16 * r), c[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(acc + 16 * r + 8), c[r][1]);
  }
}

// Panels [p0, p1) for R rows: dst = scale[n] * sum, `cols` columns real.
template <int R>
NMT_AVX2 void panels_s8(const int16_t* a, int64_t lda, const int8_t* w, int64_t pairs, int64_t N,
                        int64_t p0, int64_t p1, float* dst, int64_t ldc, const float* scale) {
  for (int64_t p = p0; p < p1; ++p) {
    alignas(32) int32_t acc[R * 16];
    sums_s8<R>(a, lda, w + p * pairs * 2 * kRowsPanel, pairs, acc);
    const int64_t n0 = p * kRowsPanel, cols = std::min<int64_t>(kRowsPanel, N - n0);
    for (int r = 0; r < R; ++r) {
      float* y = dst + r * ldc + n0;
      if (cols == kRowsPanel) {
        for (int h = 0; h < 2; ++h) {
          const __m256 s = _mm256_cvtepi32_ps(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(acc + 16 * r + 8 * h)));
          _mm256_storeu_ps(y + 8 * h, _mm256_mul_ps(s, _mm256_loadu_ps(scale + n0 + 8 * h)));
        }
      } else {
        for (int64_t n = 0; n < cols; ++n)
          y[n] = _mm_cvtss_f32(_mm_mul_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), acc[16 * r + n]),
                                          _mm_set_ss(scale[n0 + n])));
      }
    }
  }
}

NMT_AVX2 void rows_s8(int R, const int16_t* a, int64_t lda, const int8_t* w, int64_t pairs,
                      int64_t N, int64_t p0, int64_t p1, float* dst, int64_t ldc,
                      const float* scale) {
  switch (R) {
    case 1:
      return panels_s8<1>(a, lda, w, pairs, N, p0, p1, dst, ldc, scale);
    case 2:
      return panels_s8<2>(a, lda, w, pairs, N, p0, p1, dst, ldc, scale);
    case 3:
      return panels_s8<3>(a, lda, w, pairs, N, p0, p1, dst, ldc, scale);
    case 4:
      return panels_s8<4>(a, lda, w, pairs, N, p0, p1, dst, ldc, scale);
    case 5:
      return panels_s8<5>(a, lda, w, pairs, N, p0, p1, dst, ldc, scale);
    default:
      return panels_s8<6>(a, lda, w, pairs, N, p0, p1, dst, ldc, scale);
  }
}

}  // namespace avx2

void pack_rows_s8(const int8_t* q, int64_t K, int64_t N, int64_t sk, int64_t sn, int8_t* dst) {
  const int64_t pairs = rows_gemm_pairs(K), panels = (N + kRowsPanel - 1) / kRowsPanel;
  parallel_for(panels, K * N > 65536, [&](int64_t p) {
    int8_t* out = dst + p * pairs * 2 * kRowsPanel;
    for (int64_t j = 0; j < pairs; ++j)
      for (int64_t c = 0; c < kRowsPanel; ++c)
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t k = 2 * j + h, n = p * kRowsPanel + c;
          out[(j * kRowsPanel + c) * 2 + h] = k < K && n < N ? q[k * sk + n * sn] : 0;
        }
  });
}

void rows_gemm_s8(const int16_t* a, int64_t lda, const int8_t* w, int64_t M, int64_t K, int64_t N,
                  float* dst, int64_t ldc, const float* scale) {
  const int64_t pairs = rows_gemm_pairs(K), panels = (N + kRowsPanel - 1) / kRowsPanel;
  constexpr int64_t kChunk = 6;  // panels per task, as rows_gemm
  const int64_t chunks = (panels + kChunk - 1) / kChunk;
  parallel_for(chunks, M * K * N >= (int64_t{1} << 22), [&](int64_t c) {
    const int64_t p0 = c * kChunk, p1 = std::min(panels, p0 + kChunk);
    for (int64_t m = 0; m < M; m += 6)
      avx2::rows_s8(static_cast<int>(std::min<int64_t>(6, M - m)), a + m * lda, lda, w, pairs, N, p0, p1,
              dst + m * ldc, ldc, scale);
  });
}

bool rows_gemm_runs() { return isa() != Isa::scalar; }

void rows_gemm(const float* a, int64_t lda, const float* w, int64_t M, int64_t K, int64_t N,
               float* dst, int64_t ldc, float alpha, const float* bias, Activation act) {
  const int64_t ps = rows_gemm_depth(K) * kRowsPanel;  // floats per panel
  const int64_t panels = (N + kRowsPanel - 1) / kRowsPanel;
  // Six panels (96 columns) per task: a multiple of every tile's width, so
  // a task's panels are tiled alike wherever the task starts; within one,
  // each block of rows runs over the same panels while they are in cache.
  constexpr int64_t kChunk = 6;
  const int64_t chunks = (panels + kChunk - 1) / kChunk;
  const avx2::Epilogue e{alpha, bias, act};
  // Two threads paid from about 2M multiply-adds (as for oneDNN's f32
  // product, weights_gemm.cpp); below that a team costs more than it saves.
  parallel_for(chunks, M * K * N >= (int64_t{1} << 21), [&](int64_t c) {
    const int64_t p0 = c * kChunk, p1 = std::min(panels, p0 + kChunk);
    for (int64_t m = 0; m < M; m += 6)
      avx2::rows(static_cast<int>(std::min<int64_t>(6, M - m)), a + m * lda, lda, w, ps, K, N, p0,
                 p1, dst + m * ldc, ldc, e);
  });
}

}  // namespace nmt::cpu
