// The CPU backend's oneDNN part: GEMM, softmax and layer normalisation
// primitives behind a cache that builds each primitive once per shape.
//
// Every primitive is keyed by its op, dimensions, strides and attributes and
// kept in a per-thread cache together with its memory objects, so a call in a
// hot loop only swaps data pointers and executes: no primitive creation and
// no allocation once a shape has been seen.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/backend.h"

namespace nmt::cpu {

// 0: all cores. Also flushes denormals to zero on every thread.
void set_num_threads(int n);
int num_threads();

// dst = act(alpha * a @ b (+ bias)) (+ dst if accumulate).
// (Attention masks are not fused as a binary post-op: oneDNN 2.6 runs a
// broadcast binary post-op on batched matmul up to 80x slower than the GEMM
// itself, so cpu::add_mask applies them before the softmax instead.)
void gemm(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr = {});

// The same for batched GEMMs whose shape changes from call to call (every
// dim but the second and the reduction): one primitive serves them all.
void gemm_runtime(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr);

// dst = act(a w + bias) against weights prepared by prepare_weight
// (prepared_weight.h), in their compute type (weights_gemm.cpp).
void gemm_prepared(const MatDesc& a, const PreparedWeight& w, const MatDesc& dst,
                   const float* bias, Activation act);
// The same for unbatched operands that change (training), in bf16 with f32
// accumulation and result (bf16_gemm.cpp).
void gemm_bf16(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr);
// Backend::linear_backward in bf16: dy rounded once for both products, its
// column sums (db) taken in the same pass.
void linear_backward_bf16(const MatDesc& dy, const MatDesc& w, const MatDesc& x, const MatDesc* dx,
                          bool accumulate_dx, const MatDesc& dw, float* db);
// The 2-D operand m, densely in bf16 (rounded to nearest even): the rows of
// a row-major operand, the columns of a column-major one. Returns the dense
// strides of the copy.
std::array<int64_t, 2> convert_to_bf16(const MatDesc& m, uint16_t* out);
// rows x len floats (src_ld apart) rounded as convert_to_bf16 rounds them,
// into rows dst_ld apart (Backend::copy_rows_bf16).
void rows_to_bf16(const float* src, int64_t src_ld, uint16_t* dst, int64_t dst_ld, int64_t rows,
                  int64_t len);
// Whether this CPU (as oneDNN may use it) has AVX512-BF16 or AMX.
bool has_bf16();

// Softmax (or log-softmax) over the last axis of a (rows, cols) matrix.
void softmax(const float* src, float* dst, int64_t rows, int64_t cols, bool log = false);
// diff_src = softmax backward, from the forward output dst.
void softmax_backward(const float* dst, const float* diff_dst, float* diff_src, int64_t rows,
                      int64_t cols);

// Layer normalisation over the last axis of (rows, D). mean and var (rows)
// are written when training, for the backward pass.
void layer_norm(const float* src, float* dst, const float* gamma, const float* beta, float* mean,
                float* var, int64_t rows, int64_t D, float eps, bool training);
// Writes diff_src; adds the parameter gradients into diff_gamma, diff_beta.
void layer_norm_backward(const float* src, const float* diff_dst, const float* gamma,
                         const float* mean, const float* var, float* diff_src, float* diff_gamma,
                         float* diff_beta, int64_t rows, int64_t D, float eps);

// The instruction set oneDNN uses here: "avx2", "avx512_core_amx", ...
std::string isa_name();
// "oneDNN 2.6.3 (ISA avx2)" for --version (numerics() is printed apart).
std::string backend_version();

// Number of primitives built so far, by every thread (tests check that a warm
// hot loop builds none).
int64_t primitives_created();

}  // namespace nmt::cpu
