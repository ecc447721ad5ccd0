// The CPU backend's loops: the kernels oneDNN has no primitive for, or where
// a plain OpenMP loop is as fast. Reductions that feed training run in a
// fixed order, so results do not depend on the thread count.
#pragma once

#include <array>
#include <cstdint>

#include "core/backend.h"
#include "kernels/row_ops.h"
#include "cpu/isa.h"

namespace nmt::cpu {

// The loops, as the instruction-set class of the process compiles them: one
// table per class (the same source), chosen once (cpu/isa.h).
struct Loops {
  Isa isa;
  void (*add)(const float* a, const float* b, float* dst, int64_t n);
  void (*add_inplace)(float* dst, const float* src, int64_t n);
  void (*scale)(float* x, int64_t n, float s);
  void (*dropout)(float* x, int64_t n, float p, uint64_t seed);
  void (*activate)(const float* x, float* y, int64_t n, Activation act);
  void (*activation_backward)(const float* x, float* dy, int64_t n, Activation act);
  void (*add_column_sums)(const float* src, float* dst, int64_t rows, int64_t cols);
  void (*log_add_exp)(float* dst, const float* src, int64_t n);
  void (*add_mask)(float* scores, const std::array<int64_t, 4>& dims, const float* mask,
                const std::array<int64_t, 4>& mask_dims);
  // See Backend::attend.
  void (*attend)(const MatDesc& q, const MatDesc& k, const MatDesc& v, const float* mask, float scale,
              const MatDesc& ctx);

  // Softmax over rows of a few hundred columns at most (attention), and layer
  // normalisation without statistics (inference): plain vectorised loops, so
  // the row counts and lengths of real text need no primitive per shape.
  void (*softmax_rows)(const float* src, float* dst, int64_t rows, int64_t cols);
  void (*layer_norm_rows)(const float* src, float* dst, const float* gamma, const float* beta,
                       int64_t rows, int64_t D, float eps);
  // sum = x + a (where given; may be x), dst = LN(x + a): layer_norm_rows's
  // numbers, in one pass over each row's operands.
  void (*add_layer_norm_rows)(const float* x, const float* a, const float* gamma, const float* beta,
                           float* sum, float* dst, int64_t rows, int64_t D, float eps);

  void (*embedding)(const float* table, const int32_t* tokens, int64_t n, int64_t D, float scale,
                 const float* positions, int64_t pos0, int64_t T, float* out);
  void (*embedding_s8)(const int8_t* table, const float* row_scales, const int32_t* tokens, int64_t n,
                    int64_t D, float scale, const float* positions, int64_t pos0, int64_t T,
                    float* out);
  void (*embedding_backward)(const int32_t* tokens, int64_t n, int64_t D, float scale, const float* dy,
                          float* dtable, float* dpositions, int64_t T);

  // Label-smoothed cross-entropy totals over the non-pad rows of one call.
  XentRow (*xent)(const float* logits, const int32_t* targets, int64_t N, int64_t V, float eps,
                  int32_t pad, float* dlogits, float grad_scale);

  // g is taken times g_scale (gradient clipping; 1 leaves it exact).
  void (*adam)(float* p, const float* g, float* m, float* v, int64_t n, float beta1, float beta2,
            float step, float inv_sqrt_c2, float eps, float g_scale);
  double (*sum_squares)(const float* x, int64_t n);

  void (*topk_log_softmax)(const float* logits, const double* base, int64_t rows, int64_t V, int64_t k,
                        const int32_t* banned, int64_t n_banned, const int32_t* cols, int64_t n_cols,
                        double* values, int32_t* indices, float* col_lp, const ColumnGroups* allowed);

  void (*sample_tokens)(const float* logits, int64_t V, const int64_t* rows, int64_t n,
                     float temperature, int64_t top_k, float top_p, const double* u,
                     const int32_t* forced, const int32_t* banned, int64_t n_banned, int32_t* ids,
                     float* lp);

  // Bytes: ld and len as Backend::gather_rows has them.
  void (*gather_rows)(const void* src, int64_t src_ld, const int64_t* idx, int64_t n, int64_t len,
                   void* dst, int64_t dst_ld, const int64_t* dst_idx);
  // dst = act(alpha * a w + bias) for rows a that are mostly zeros and
  // weights w (K, N) as plain rows: see loops.cpp.
  void (*sparse_rows_product)(const MatDesc& a, const float* w, const MatDesc& dst,
                              const GemmAttr& attr);
  // int8 products' activations: each row of a quantised with one symmetric
  // scale (row_scale), into rows ldo apart whose elements past K are 0.
  void (*quantise_rows_s8)(const MatDesc& a, int8_t* out, int64_t ldo, float* row_scale);
  void (*quantise_rows_s16)(const MatDesc& a, int16_t* out, int64_t ldo, float* row_scale);
  // int8 products' epilogue: y = act(rs[i] * y + bias) over rows x N.
  void (*scale_rows)(float* c, int64_t ldc, int64_t rows, int64_t N, const float* rs,
                     const float* bias, Activation act);
  // The calling thread's scratch for add_column_sums_with, grown as needed.
  float* (*column_sum_scratch)(int64_t n);
};
namespace scalar { extern const Loops kLoops; }
namespace avx2 { extern const Loops kLoops; }
namespace avx512 { extern const Loops kLoops; }
// The table for isa(); loops_for(i) the one compiled for class i.
const Loops& loops();
const Loops& loops_for(Isa isa);

// dst (cols) += the column sums of src's rows (ld apart), in an order that
// does not depend on the thread count: rows in blocks of kSumRows, each
// block summed row by row, then the blocks' sums added in order. on_row(i,
// row) sees each row as it is summed, so that another pass over src (bf16
// rounding) rides on the same read.
constexpr int64_t kSumRows = 256;
template <class OnRow>
void add_column_sums_with(const float* src, int64_t ld, int64_t rows, int64_t cols, float* dst,
                          OnRow&& on_row) {
  if (rows <= 0) return;
  const int64_t blocks = (rows + kSumRows - 1) / kSumRows;
  float* part = loops().column_sum_scratch(blocks * cols);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    float* acc = part + b * cols;
    for (int64_t c = 0; c < cols; ++c) acc[c] = 0.f;
    const int64_t end = rows < (b + 1) * kSumRows ? rows : (b + 1) * kSumRows;
    for (int64_t i = b * kSumRows; i < end; ++i) {
      const float* row = src + i * ld;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) acc[c] += row[c];
      on_row(i, row);
    }
  }
  for (int64_t b = 1; b < blocks; ++b) {
    const float* acc = part + b * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) part[c] += acc[c];
  }
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) dst[c] += part[c];
}
}  // namespace nmt::cpu
