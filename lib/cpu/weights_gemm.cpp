// Products against prepared weights (prepared_weight.h): a loaded model's
// Linear layers and output projection, in the compute type it was loaded
// with, on the form weights_pack.cpp made.
//
// - Rows are cut into a bounded set of shapes (see for_each_piece), so that
//   real text, whose row counts change with every batch and decoding step,
//   stops creating primitives once those shapes have been seen.
// - bf16 and int8 convert the activations per call; int8 quantises each row
//   with its own dynamic scale (so no row depends on its batch), multiplies
//   by the weights' channel scales in a post-op, and applies the row scales,
//   bias and activation in one pass over the result.
#include <omp.h>

#include <algorithm>
#include <array>
#include <vector>

#include "core/error.h"
#include "cpu/loops.h"
#include "cpu/numerics.h"
#include "cpu/onednn.h"
#include "cpu/prepared_weight.h"
#include "cpu/rows_gemm.h"

namespace nmt::cpu {
namespace {

using dnnl::memory;

constexpr int kScalesArg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;

// dst = act(a w + bias) on rows_gemm_s8: a's rows quantised as for oneDNN
// (each with its own scale), held as int16.
void s8_rows_product(const MatDesc& a, const CpuWeight& w, const MatDesc& dst, const float* bias,
                     Activation act) {
  const int64_t M = a.dims[2], K = a.dims[3];
  thread_local std::vector<int16_t> a16;
  thread_local std::vector<float> row_scales;
  const int64_t lda = 2 * rows_gemm_pairs(K);
  loops().quantise_rows_s16(a, scratch(a16, M * lda), lda, scratch(row_scales, M));
  float* c = const_cast<float*>(dst.ptr);
  rows_gemm_s8(a16.data(), lda, static_cast<const int8_t*>(w.copies[0].data.get()), M, K, w.N, c,
               dst.strides[2], w.scales.data());
  loops().scale_rows(c, dst.strides[2], M, w.N, row_scales.data(), bias, act);
}

// The activations a (M, K) as a primitive in compute type ct reads them:
// f32 as they are, bf16 rounded, int8 quantised per row (each row its own
// scale, so that no row depends on its batch).
struct Activations {
  const void* rows;
  int64_t ld;
  size_t elem;                        // bytes per element
  const float* row_scales = nullptr;  // int8
  ComputeType ct;
};

Activations activations_in(const MatDesc& a, ComputeType ct) {
  const int64_t M = a.dims[2], K = a.dims[3];
  thread_local std::vector<uint16_t> a_bf16;
  thread_local std::vector<int8_t> a_s8;
  thread_local std::vector<float> row_scales;
  if (ct == ComputeType::BF16) {
    convert_to_bf16(a, scratch(a_bf16, M * K));  // row-major: strides (K, 1)
    return {a_bf16.data(), K, 2, nullptr, ct};
  }
  if (ct == ComputeType::INT8) {
    loops().quantise_rows_s8(a, scratch(a_s8, M * K), K, scratch(row_scales, M));
    return {a_s8.data(), K, 1, row_scales.data(), ct};
  }
  return {a.ptr, a.strides[2], sizeof(float), nullptr, ct};
}

// A primitive for `rows` rows against w's copy for that row count.
void build(Entry& e, const CpuWeight& w, const PackedCopy& c, int64_t rows, int64_t lda,
           int64_t ldc, bool bias, Activation act) {
  const auto pd = matmul_for(rows, w.K, w.N, lda, ldc, w.compute, c.md, bias, act);
  e.prim = dnnl::matmul(pd);
  e.args.emplace(DNNL_ARG_SRC, mem(pd.src_desc()));
  e.args.emplace(DNNL_ARG_WEIGHTS, mem(pd.weights_desc()));
  e.args.emplace(DNNL_ARG_DST, mem(pd.dst_desc()));
  const memory::desc row({1, w.N}, memory::data_type::f32, memory::format_tag::ab);
  if (bias) e.args.emplace(DNNL_ARG_BIAS, mem(row));
  if (w.compute == ComputeType::INT8) e.args.emplace(kScalesArg, mem(row));
}

// Rows [row, row + rows) of dst = act(in w + bias) on a oneDNN primitive.
// int8 runs the bare product times the weights' column scales; the row
// scales, the bias and the activation follow in one pass over the result
// (a per-row post-op would put oneDNN 2.6 on its reference kernel, and the
// bias cannot be folded into the product once each row has its own scale).
void onednn_piece(const Activations& in, const CpuWeight& w, const MatDesc& dst, const float* bias,
                  Activation act, int64_t row, int64_t rows) {
  const bool int8 = w.compute == ComputeType::INT8;
  const float* fused_bias = int8 ? nullptr : bias;
  const Activation fused_act = int8 ? Activation::None : act;
  const PackedCopy& c = w.copies[w.piece_copy[rows]];
  float* c_rows = const_cast<float*>(dst.ptr) + row * dst.strides[2];
  Key key;
  key.add(9);
  key.add(std::array<int64_t, 5>{rows, w.K, w.N, in.ld, dst.strides[2]});
  key.add(static_cast<int64_t>(c.layout));
  key.add((fused_bias != nullptr) + static_cast<int>(fused_act) * 2 + static_cast<int>(w.compute) * 16);
  Entry& e = lookup(key, [&](Entry& e) {
    build(e, w, c, rows, in.ld, dst.strides[2], fused_bias != nullptr, fused_act);
  });
  e.set(DNNL_ARG_SRC, static_cast<const char*>(in.rows) + row * in.ld * in.elem);
  e.set(DNNL_ARG_WEIGHTS, c.data.get());
  e.set(DNNL_ARG_DST, c_rows);
  if (fused_bias) e.set(DNNL_ARG_BIAS, fused_bias);
  if (int8) e.set(kScalesArg, w.scales.data());
  e.run();
  if (int8) loops().scale_rows(c_rows, dst.strides[2], rows, w.N, in.row_scales + row, bias, act);
}

// A small product runs on the calling thread alone, for the object's
// lifetime (however the call ends: a primitive that fails to build
// throws): below about 16M multiply-adds in int8 and 2M in f32 a second
// thread cost more than it saved (README.md, "Weights prepared once, at
// load"). int8 sums are exact, so there the thread count changes no result;
// in f32, translations of test_2016_flickr on 1 and 2 threads were
// identical.
class SerialIfSmall {
 public:
  SerialIfSmall(int64_t multiply_adds, ComputeType ct) {
    const int64_t below = ct == ComputeType::INT8 ? int64_t{1} << 24 : int64_t{1} << 21;
    const int n = omp_get_max_threads();
    if (n > 1 && multiply_adds < below) threads_ = n, omp_set_num_threads(1);
  }
  ~SerialIfSmall() {
    if (threads_ > 0) omp_set_num_threads(threads_);
  }
  SerialIfSmall(const SerialIfSmall&) = delete;
  SerialIfSmall& operator=(const SerialIfSmall&) = delete;

 private:
  int threads_ = 0;
};

}  // namespace

bool has_bf16() { return numerics().bf16; }

void gemm_prepared(const MatDesc& a, const PreparedWeight& prepared, const MatDesc& dst,
                   const float* bias, Activation act) {
  const auto* w = dynamic_cast<const CpuWeight*>(&prepared);
  if (!w) throw Error("gemm: weights prepared by another backend");
  const int64_t M = a.dims[2], K = a.dims[3];
  if (K != w->K || M != dst.dims[2] || w->N != dst.dims[3] || a.strides[3] != 1 ||
      dst.strides[3] != 1 || a.dims[0] * a.dims[1] != 1)
    throw Error("gemm: prepared weights need row-major 2-D operands of their shape");
  const float* packed = static_cast<const float*>(w->copies[0].data.get());
  GemmAttr attr;
  attr.bias = bias, attr.act = act;
  switch (w->how) {
    case WeightForm::sparse_rows:
      return loops().sparse_rows_product(a, packed, dst, attr);
    case WeightForm::f32_rows:
      return rows_gemm(a.ptr, a.strides[2], packed, M, K, w->N, const_cast<float*>(dst.ptr),
                       dst.strides[2], 1.f, bias, act);
    case WeightForm::s8_rows:
      return s8_rows_product(a, *w, dst, bias, act);
    case WeightForm::onednn:
      break;
  }
  const Activations in = activations_in(a, w->compute);
  const SerialIfSmall serial(std::min<int64_t>(M, 256) * K * w->N, w->compute);
  for_each_piece(M, w->cut, [&](int64_t row, int64_t rows) {
    onednn_piece(in, *w, dst, bias, act, row, rows);
  });
}

}  // namespace nmt::cpu
