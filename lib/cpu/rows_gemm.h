// Products against constant weights for CPUs where oneDNN 2.6 falls short,
// in AVX2 (chosen at run time, so a portable build has them too):
//
// - f32, where every row's result must be the same whatever the other rows
//   of the call: how many there are, and where the row sits among them.
//   oneDNN gives that on AVX-512 (its brgemm kernels), but on AVX2 it runs
//   f32 matmul on its jit gemm, whose kernels for 1, 2-3 and 4 or more
//   rows, and for K split across threads, sum in different orders: a
//   sentence's scores then moved in the 6th digit with its batch. Here
//   each element is one chain of FMAs in k order, however the rows and
//   columns are tiled and threaded.
// - int8 without VNNI, where oneDNN multiplies u8 by s8 with vpmaddubsw,
//   whose pairs saturate at 16 bits unless the weights are cut to 7 bits,
//   which made an int8 model's log-probabilities 1.6 times as far from the
//   f32 model's as with VNNI's exact sums (README.md, Numerics). Here 8-bit
//   weights and activations are widened to 16 bits and multiplied with
//   vpmaddwd: every sum is exact, as with VNNI.
#pragma once

#include <cstdint>

#include "core/activation.h"

namespace nmt::cpu {

// Whether this process runs these kernels: its class (cpu/isa.h) has AVX2.
bool rows_gemm_runs();

// The weights (K, N) as the kernel reads them: panels of 16 columns, each
// K rounded up to 16 rows of 16 contiguous floats, the last panel's
// columns past N padded (oneDNN's BA16a16b, so its reorders pack them).
constexpr int64_t kRowsPanel = 16;
inline int64_t rows_gemm_depth(int64_t K) { return (K + kRowsPanel - 1) / kRowsPanel * kRowsPanel; }

// dst[m, n] = act(alpha * sum_k a[m, k] w[k, n] + bias[n]) for a (M, K) at
// row stride lda, w packed as above, dst (M, N) at row stride ldc; bias
// may be null. The sum starts at 0 and adds k = 0, 1, ... by FMA. Columns
// are shared across threads where the product is large enough.
void rows_gemm(const float* a, int64_t lda, const float* w, int64_t M, int64_t K, int64_t N,
               float* dst, int64_t ldc, float alpha, const float* bias, Activation act);

// int8 weights (K, N) as rows_gemm_s8 reads them: panels of 16 columns,
// each a run of pairs of rows (K rounded up to even), a pair's 16 columns
// of 2 values each, (w[k, n], w[k + 1, n]) side by side (oneDNN's
// BA16b2a). The values past K and N are 0.
inline int64_t rows_gemm_pairs(int64_t K) { return (K + 1) / 2; }
void pack_rows_s8(const int8_t* q, int64_t K, int64_t N, int64_t sk, int64_t sn, int8_t* dst);

// dst[m, n] = scale[n] * sum_k a[m, k] w[k, n], the sum exact in int32,
// for activations a (M, K) of int8 values held as int16 at row stride lda
// (even, with a[m, K] = 0 where K is odd), w packed as above, dst (M, N)
// at row stride ldc.
void rows_gemm_s8(const int16_t* a, int64_t lda, const int8_t* w, int64_t M, int64_t K, int64_t N,
                  float* dst, int64_t ldc, const float* scale);

}  // namespace nmt::cpu
