// Mixed-precision products for training (`nmt train --compute-type bf16`):
// both operands are rounded to bf16 per call and multiplied on oneDNN's bf16
// kernels (AMX tiles or AVX512-BF16 dot products) with f32 accumulation and
// an f32 result; bias, ReLU, alpha and accumulation stay fused. The master
// weights, gradients, optimiser state, softmax, layer norm and the loss stay
// in f32, as in PyTorch's autocast.
//
// An operand is converted in the orientation it has in memory (row- or
// column-major), so the conversion streams along rows and the transposed
// products of the backward pass need no transposing copy.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/loops.h"
#include "cpu/onednn.h"
#include "cpu/parallel.h"
#include "cpu/primitive_cache.h"

namespace nmt::cpu {
namespace {

using dnnl::memory;
using dt = memory::data_type;

}  // namespace

namespace avx512 {

// The first n - n % 32 of n floats rounded to bf16 by vcvtne2ps2bf16, 32
// in one instruction: a third faster than float_to_bf16's integer sequence
// on an output layer's whole gradient, twice as fast from cache. It
// flushes subnormals to zero where float_to_bf16 keeps them, but the bf16
// products (AMX tiles, vdpbf16ps) take subnormal inputs as zero anyway, so
// no product changes. Returns how many it rounded.
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl"))) int64_t to_bf16_32s(
    const float* src, uint16_t* dst, int64_t n) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + j + 16), _mm512_loadu_ps(src + j));
    _mm512_storeu_si512(dst + j, reinterpret_cast<__m512i>(h));
  }
  return j;
}

}  // namespace avx512

namespace {

// n floats rounded to bf16, 32 at a time where the CPU has the instruction
// and the process runs its AVX-512 class.
inline void to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  static const bool wide = isa() == Isa::avx512 && __builtin_cpu_supports("avx512bf16");
  const int64_t j = wide ? avx512::to_bf16_32s(src, dst, n) : 0;
#pragma omp simd
  for (int64_t k = j; k < n; ++k) dst[k] = float_to_bf16(src[k]);
}

// Per-thread buffers that only grow (scratch): no allocation once warm.
thread_local std::vector<uint16_t> a_bf16, b_bf16, dy_bf16;

}  // namespace

void rows_to_bf16(const float* src, int64_t src_ld, uint16_t* dst, int64_t dst_ld, int64_t rows,
                  int64_t len) {
  for (int64_t i = 0; i < rows; ++i) to_bf16_row(src + i * src_ld, dst + i * dst_ld, len);
}

std::array<int64_t, 2> convert_to_bf16(const MatDesc& m, uint16_t* out) {
  const int64_t R = m.dims[2], C = m.dims[3];
  const bool row_major = m.strides[3] == 1 || C == 1;
  const int64_t lines = row_major ? R : C, len = row_major ? C : R;
  const int64_t ld = row_major ? m.strides[2] : m.strides[3];
  parallel_for(lines, R * C > 65536,
               [&](int64_t i) { to_bf16_row(m.ptr + i * ld, out + i * len, len); });
  // A single row is dense either way; give oneDNN the plain strides then.
  return row_major || R == 1 ? std::array<int64_t, 2>{C, 1} : std::array<int64_t, 2>{1, R};
}

namespace {

// Training's row counts change with every batch (batches of 4096 tokens
// had 45 different counts in their first 60 updates), and each new count
// built a primitive for every product it met: 584 with AMX kernels in those
// 60 updates, 1.6 ms each, 3% of the time. Rows are cut into pieces of a
// bounded set of counts (1024 at a time, then multiples of AMX's 16-row
// tiles, then under 16: at most 79 counts), and a product that sums over the
// rows (dW = dy^T x) gets zero rows up to a multiple of kRowsPad instead,
// which changes no sum: 64 counts up to 4096 rows.
constexpr Cut kTrainCut{1024, 16, 16};
constexpr int64_t kRowsPad = 64;
int64_t padded_rows(int64_t rows) { return (rows + kRowsPad - 1) / kRowsPad * kRowsPad; }

// dst = act(alpha * a @ b (+ bias)) (+ dst) for operands already in bf16,
// each given with its (row, column) strides: one primitive.
void product_bf16(int64_t M, int64_t K, int64_t N, const uint16_t* a16, std::array<int64_t, 2> sa,
                  const uint16_t* b16, std::array<int64_t, 2> sb, const MatDesc& dst,
                  const GemmAttr& attr) {
  Key key;
  key.add(9);
  key.add(M), key.add(K), key.add(N);
  key.add(sa[1] == 1 ? 0 : 1);
  key.add(sb[1] == 1 ? 0 : 1);
  key.add(dst.strides[2]);
  key.add(bits(attr.alpha));
  key.add(attr.accumulate * 1 + (attr.bias != nullptr) * 2 + static_cast<int>(attr.act) * 4);
  Entry& e = lookup(key, [&](Entry& e) {
    const memory::desc a_md({M, K}, dt::bf16, {sa[0], sa[1]});
    const memory::desc b_md({K, N}, dt::bf16, {sb[0], sb[1]});
    const memory::desc c_md({M, N}, dt::f32, {dst.strides[2], 1});
    const memory::desc bias_md({1, N}, dt::f32, memory::format_tag::ab);
    const dnnl::matmul::desc d = attr.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                                           : dnnl::matmul::desc(a_md, b_md, c_md);
    e.prim = dnnl::matmul(dnnl::matmul::primitive_desc(d, matmul_attr(attr), ctx().engine));
    e.args.emplace(DNNL_ARG_SRC, mem(a_md));
    e.args.emplace(DNNL_ARG_WEIGHTS, mem(b_md));
    e.args.emplace(DNNL_ARG_DST, mem(c_md));
    if (attr.bias) e.args.emplace(DNNL_ARG_BIAS, mem(bias_md));
  });
  e.set(DNNL_ARG_SRC, a16);
  e.set(DNNL_ARG_WEIGHTS, b16);
  e.set(DNNL_ARG_DST, dst.ptr);
  if (attr.bias) e.set(DNNL_ARG_BIAS, attr.bias);
  e.run();
}

// The same, a row-major a cut into row pieces of kTrainCut (a column-major
// one would keep M in its strides: one primitive).
void run_bf16(int64_t M, int64_t K, int64_t N, const uint16_t* a16, std::array<int64_t, 2> sa,
              const uint16_t* b16, std::array<int64_t, 2> sb, const MatDesc& dst,
              const GemmAttr& attr) {
  if (sa[1] != 1) return product_bf16(M, K, N, a16, sa, b16, sb, dst, attr);
  for_each_piece(M, kTrainCut, [&](int64_t row, int64_t rows) {
    MatDesc d = dst;
    d.ptr += row * dst.strides[2];
    d.dims[2] = rows;
    product_bf16(rows, K, N, a16 + row * sa[0], sa, b16, sb, d, attr);
  });
}

// The product that sums over the K rows of two dense copies, a's read
// column-major (dW = dy^T x): both get zero rows up to padded_rows(K), which
// their buffers must have room for.
void run_bf16_over_rows(int64_t M, int64_t K, int64_t N, uint16_t* a16, uint16_t* b16,
                        const MatDesc& dst, const GemmAttr& attr) {
  const int64_t Kp = padded_rows(K);
  std::fill(a16 + K * M, a16 + Kp * M, uint16_t{0});
  std::fill(b16 + K * N, b16 + Kp * N, uint16_t{0});
  product_bf16(M, Kp, N, a16, {1, M}, b16, {N, 1}, dst, attr);
}

bool unbatched(const MatDesc& m) { return m.dims[0] * m.dims[1] == 1; }
bool row_major(const MatDesc& m) { return unbatched(m) && (m.strides[3] == 1 || m.dims[3] == 1); }

}  // namespace

void gemm_bf16(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr) {
  const int64_t M = a.dims[2], K = a.dims[3], N = b.dims[3];
  if (K != b.dims[2] || M != dst.dims[2] || N != dst.dims[3] || dst.strides[3] != 1 ||
      a.dims[0] * a.dims[1] != 1 || b.dims[0] * b.dims[1] != 1 || dst.dims[0] * dst.dims[1] != 1)
    throw Error("gemm: bf16 products need unbatched operands and a row-major result");
  if (!has_bf16()) throw Error("bf16 needs a CPU with AVX512-BF16 or AMX");
  const int64_t Kp = padded_rows(K);
  uint16_t* a16 = scratch(a_bf16, M * Kp);
  uint16_t* b16 = scratch(b_bf16, Kp * N);
  const auto sa = convert_to_bf16(a, a16), sb = convert_to_bf16(b, b16);
  if (sa[1] != 1 && sb[1] == 1) return run_bf16_over_rows(M, K, N, a16, b16, dst, attr);
  run_bf16(M, K, N, a16, sa, b16, sb, dst, attr);
}

void linear_backward_bf16(const MatDesc& dy, const MatDesc& w, const MatDesc& x, const MatDesc* dx,
                          bool accumulate_dx, const MatDesc& dw, float* db) {
  const int64_t M = dy.dims[2], out = dy.dims[3], in = w.dims[3];
  // dy's rounded copy is read both ways, so dy must be row-major; w and x
  // are rounded in whichever orientation they have.
  if (!row_major(dy) || !unbatched(w) || !unbatched(x) || !row_major(dw) ||
      (dx && !row_major(*dx)) || w.dims[2] != out || x.dims[2] != M || x.dims[3] != in ||
      dw.dims[2] != out || dw.dims[3] != in || (dx && (dx->dims[2] != M || dx->dims[3] != in)))
    throw Error("linear_backward: bf16 products need row-major operands of matching shapes");
  if (!has_bf16()) throw Error("bf16 needs a CPU with AVX512-BF16 or AMX");
  // dy in bf16 once, for both products: row-major (out apart) as dx's left
  // operand, and read column-major as dw's, with room for zero rows to Mp.
  const int64_t Mp = padded_rows(M);
  uint16_t* dy16 = scratch(dy_bf16, Mp * out);
  if (db)
    add_column_sums_with(dy.ptr, dy.strides[2], M, out, db,
                         [&](int64_t i, const float* row) { to_bf16_row(row, dy16 + i * out, out); });
  else
    convert_to_bf16(dy, dy16);
  GemmAttr attr;
  if (dx) {
    attr.accumulate = accumulate_dx;
    uint16_t* w16 = scratch(b_bf16, out * in);
    run_bf16(M, out, in, dy16, {out, 1}, w16, convert_to_bf16(w, w16), *dx, attr);
  }
  attr.accumulate = true;
  uint16_t* x16 = scratch(b_bf16, Mp * in);
  const auto sx = convert_to_bf16(x, x16);
  if (sx[1] == 1)
    run_bf16_over_rows(out, M, in, dy16, x16, dw, attr);
  else
    run_bf16(out, M, in, dy16, {1, out}, x16, sx, dw, attr);
}

}  // namespace nmt::cpu
