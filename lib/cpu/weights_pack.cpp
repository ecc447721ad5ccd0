// Weights prepared once for their products (prepared_weight.h): converted
// to the compute type, quantised per output channel for int8, and reordered
// into the layout their kernel reads. numerics() picks the form here, by
// compute type and shape.
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "cpu/numerics.h"
#include "cpu/onednn.h"
#include "cpu/prepared_weight.h"
#include "cpu/rows_gemm.h"

namespace nmt::cpu {

using dnnl::memory;
using dt = memory::data_type;

dt weight_type(ComputeType ct) {
  return ct == ComputeType::BF16 ? dt::bf16 : ct == ComputeType::INT8 ? dt::s8 : dt::f32;
}

dnnl::matmul::primitive_desc matmul_for(int64_t rows, int64_t K, int64_t N, int64_t lda,
                                        int64_t ldc, ComputeType ct, const memory::desc& weights,
                                        bool bias, Activation act) {
  const memory::desc a_md({rows, K}, weight_type(ct), {lda, 1});
  const memory::desc c_md({rows, N}, dt::f32, {ldc, 1});
  const memory::desc bias_md({1, N}, dt::f32, memory::format_tag::ab);
  const memory::desc scales_md({1, N}, dt::f32, memory::format_tag::ab);
  const dnnl::matmul::desc d = bias ? dnnl::matmul::desc(a_md, weights, bias_md, c_md)
                                    : dnnl::matmul::desc(a_md, weights, c_md);
  GemmAttr attr;
  attr.act = act;
  return dnnl::matmul::primitive_desc(
      d, matmul_attr(attr, ct == ComputeType::INT8 ? &scales_md : nullptr), ctx().engine);
}

namespace {

// Copies of a megabyte and more are mapped on their own, so that a freed
// one gives its pages back (a shortlist prepares its rows of the output
// projection anew for every batch, 3 MB for the Multi30k transformer-small:
// from the heap, those pages stayed with the process).
std::shared_ptr<void> aligned_buffer(size_t bytes) {
  if (bytes >= (size_t{1} << 20)) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error("out of memory preparing weights");
    return std::shared_ptr<void>(p, [bytes](void* q) { munmap(q, bytes); });
  }
  std::shared_ptr<void> buf(std::aligned_alloc(64, (bytes + 63) / 64 * 64), std::free);
  if (!buf) throw Error("out of memory preparing weights");
  return buf;
}

// A packed layout's elements alone. A layout with extra data (s8 weights
// for s8 sources without AMX carry their column sums, oneDNN's s8s8
// compensation) holds the elements first, laid out as without it, and the
// extra data after them.
memory::desc elements_of(const memory::desc& d) {
  dnnl_memory_desc_t e = d.data;
  e.extra = dnnl_memory_extra_desc_t{};
  return memory::desc(e);
}

// An empty copy in layout md, in the memory of `spare` where that is large
// enough and at most twice as large: each batch's shortlist then reuses the
// last batch's pages, where a new mapping took a page fault for every 4 KB.
// What follows the elements is zeroed (the reorders leave the padding
// before extra data unwritten); reused memory is zeroed whole, as a new
// mapping holds (about 0.1 ms for 3 MB).
PackedCopy empty_copy(const memory::desc& md, PackedCopy* spare) {
  PackedCopy c;
  c.md = md;
  c.bytes = md.get_size();
  const std::string bytes(reinterpret_cast<const char*>(&md.data), sizeof(md.data));
  c.layout = std::hash<std::string>()(bytes);
  size_t zero_from = elements_of(md).get_size();
  if (spare && spare->capacity >= c.bytes && spare->capacity / 2 < c.bytes) {
    c.data = std::move(spare->data), c.capacity = spare->capacity, zero_from = 0;
  } else {
    c.data = aligned_buffer(c.bytes), c.capacity = c.bytes;
  }
  std::memset(static_cast<char*>(c.data.get()) + zero_from, 0, c.bytes - zero_from);
  return c;
}

// The layout rows_gemm_s8 reads (BA16b2a), for weights (K, N).
memory::desc s8_pairs_desc(int64_t K, int64_t N) {
  return memory::desc({K, N}, dt::s8, memory::format_tag::BA16b2a);
}

// s8 weights q (K, N), dense at strides (1, K), into c's layout. oneDNN 2.6
// reorders into a layout that carries s8s8 compensation (what its kernels
// for s8 sources without AMX read) only on its reference kernel (2-6 ms for
// a shortlist's 256 x 3072 output weights), but into the same layout
// without it on a JIT kernel (about 0.1 ms). So the elements take the JIT
// reorder, and the compensation is summed here: -128 times each output
// column's sum (those kernels add 128 to the s8 sources, to multiply them
// as u8), one int32 per column after the elements.
void reorder_s8(const int8_t* q, int64_t K, int64_t N, const PackedCopy& c) {
  memory from(memory::desc({K, N}, dt::s8, {1, K}), ctx().engine, const_cast<int8_t*>(q));
  const auto& extra = c.md.data.extra;
  const bool columns_only = c.md.data.ndims == 2 &&
                            extra.flags == dnnl_memory_extra_flag_compensation_conv_s8s8 &&
                            extra.compensation_mask == 2;
  const memory::desc elements = columns_only ? elements_of(c.md) : c.md;
  memory to(elements, ctx().engine, c.data.get());
  dnnl::reorder(from, to).execute(ctx().stream, from, to);
  ctx().stream.wait();
  if (!columns_only) return;
  auto* comp = reinterpret_cast<int32_t*>(static_cast<char*>(c.data.get()) + elements.get_size());
#pragma omp parallel for if (K * N > 65536)
  for (int64_t n = 0; n < N; ++n) {
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += q[n * K + k];
    comp[n] = -128 * sum;
  }
}

// w's values as s8 (K, N) at strides (1, K) with a scale per column: an
// int8 source's own where qmax is 127, else each column rounded to qmax
// steps of its largest magnitude (f32 sources; and int8 ones cut to 7 bits
// for oneDNN's kernels without VNNI, which multiply u8 by s8 with
// vpmaddubsw, whose pairwise sums saturate at 16 bits).
std::vector<int8_t> s8_of(const WeightSource& w, float qmax, std::vector<float>& scales) {
  const int64_t K = w.b.dims[2], N = w.b.dims[3], sk = w.b.strides[2], sn = w.b.strides[3];
  std::vector<int8_t> q(static_cast<size_t>(K * N));
  scales.resize(N);
  const auto value = [&](int64_t k, int64_t n) {
    return w.s8 ? w.s8[k * sk + n * sn] * w.scales[n] : w.b.ptr[k * sk + n * sn];
  };
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    if (w.s8 && qmax == 127.f) {
      for (int64_t k = 0; k < K; ++k) q[n * K + k] = w.s8[k * sk + n * sn];
      scales[n] = w.scales[n];
      continue;
    }
    float amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(value(k, n)));
    const float s = amax > 0 ? amax / qmax : 1.f;
    for (int64_t k = 0; k < K; ++k) q[n * K + k] = static_cast<int8_t>(std::nearbyint(value(k, n) / s));
    scales[n] = s;
  }
  return q;
}

// w's f32 values into c's layout (f32 or bf16, rounded to nearest even).
void reorder_f32(const WeightSource& w, const PackedCopy& c) {
  memory from(memory::desc({w.b.dims[2], w.b.dims[3]}, dt::f32, {w.b.strides[2], w.b.strides[3]}),
              ctx().engine, const_cast<float*>(w.b.ptr));
  memory to(c.md, ctx().engine, c.data.get());
  dnnl::reorder(from, to).execute(ctx().stream, from, to);
  ctx().stream.wait();
}

WeightForm form_for(const WeightSource& w) {
  const int64_t K = w.b.dims[2], N = w.b.dims[3];
  const Numerics& n = numerics();
  switch (w.compute) {
    case ComputeType::F32:
      if (w.sparse_input && K * N * static_cast<int64_t>(sizeof(float)) <= n.sparse_bytes)
        return WeightForm::sparse_rows;
      return n.f32 == F32Products::nmt_rows ? WeightForm::f32_rows : WeightForm::onednn;
    case ComputeType::INT8:
      return n.int8 == Int8Products::nmt_rows ? WeightForm::s8_rows : WeightForm::onednn;
    case ComputeType::BF16:
      if (!n.bf16) throw Error("bf16 needs a CPU with AVX512-BF16 or AMX");
      return WeightForm::onednn;
  }
  return WeightForm::onednn;
}

// The layouts oneDNN's primitives want for every row count of a piece
// (asked once, here, so that no product ever packs): one copy per distinct
// layout, and piece_copy to find it.
std::vector<memory::desc> onednn_layouts(CpuWeight& p) {
  p.cut = p.compute == ComputeType::INT8 && numerics().amx_rows ? kAmxCut : kDefaultCut;
  std::vector<bool> seen(static_cast<size_t>(p.cut.chunk) + 1);
  for (int64_t M = 1; M <= p.cut.chunk; ++M)
    for_each_piece(M, p.cut, [&](int64_t, int64_t rows) { seen[rows] = true; });
  std::vector<memory::desc> layouts;
  const memory::desc any({p.K, p.N}, weight_type(p.compute), memory::format_tag::any);
  for (int64_t rows = 1; rows <= p.cut.chunk; ++rows) {
    if (!seen[rows]) continue;
    const memory::desc md =
        matmul_for(rows, p.K, p.N, p.K, p.N, p.compute, any, false, Activation::None)
            .weights_desc();
    auto it = std::find(layouts.begin(), layouts.end(), md);
    if (it == layouts.end()) it = layouts.insert(layouts.end(), md);
    p.piece_copy[rows] = static_cast<uint8_t>(it - layouts.begin());
  }
  return layouts;
}

}  // namespace

int64_t CpuWeight::bytes() const {
  int64_t n = static_cast<int64_t>(scales.size() * sizeof(float));
  for (const auto& c : copies) n += static_cast<int64_t>(c.bytes);
  return n;
}

std::string CpuWeight::form() const {
  static const char* const names[] = {"f32 rows (nmt)", "f32 sparse rows (nmt)",
                                      "int8 rows (nmt, exact sums)", "oneDNN"};
  std::string s = names[static_cast<int>(how)];
  if (how == WeightForm::onednn)
    s += std::string(" ") + compute_type_name(compute) + ", " + std::to_string(copies.size()) +
         (copies.size() == 1 ? " layout" : " layouts");
  return s;
}

std::shared_ptr<PreparedWeight> prepare_weight(const WeightSource& w,
                                               std::shared_ptr<PreparedWeight> reuse) {
  const int64_t K = w.b.dims[2], N = w.b.dims[3];
  if (w.b.dims[0] * w.b.dims[1] != 1) throw Error("prepare_weight: a 2-D weight only");
  if (w.s8 && (w.compute != ComputeType::INT8 || !w.scales))
    throw Error("prepare_weight: int8 weights need their scales and compute int8");
  if (!w.s8 && !w.b.ptr) throw Error("prepare_weight: no values");
  auto p = std::make_shared<CpuWeight>();
  p->how = form_for(w), p->compute = w.compute, p->K = K, p->N = N;
  auto* old = reuse.use_count() == 1 ? dynamic_cast<CpuWeight*>(reuse.get()) : nullptr;
  PackedCopy* spare = old && old->copies.size() == 1 ? &old->copies[0] : nullptr;
  std::vector<memory::desc> layouts;
  switch (p->how) {
    case WeightForm::f32_rows:
      layouts = {memory::desc({K, N}, dt::f32, memory::format_tag::BA16a16b)};
      break;
    case WeightForm::sparse_rows:
      layouts = {memory::desc({K, N}, dt::f32, memory::format_tag::ab)};
      break;
    case WeightForm::s8_rows:
      layouts = {s8_pairs_desc(K, N)};
      break;
    case WeightForm::onednn:
      layouts = onednn_layouts(*p);
      break;
  }
  // int8 values packed as they are for the row kernel (a shortlist's rows
  // every batch), else first laid out as s8_of makes them.
  const bool direct = w.s8 && p->how == WeightForm::s8_rows;
  std::vector<int8_t> q;
  if (direct)
    p->scales.assign(w.scales, w.scales + N);
  else if (w.compute == ComputeType::INT8)
    q = s8_of(w, numerics().int8 == Int8Products::onednn_7bit ? 63.f : 127.f, p->scales);
  for (const auto& md : layouts) {
    p->copies.push_back(empty_copy(md, spare));
    spare = nullptr;
    const PackedCopy& c = p->copies.back();
    auto* dst = static_cast<int8_t*>(c.data.get());
    if (direct)
      pack_rows_s8(w.s8, K, N, w.b.strides[2], w.b.strides[3], dst);
    else if (p->how == WeightForm::s8_rows)
      pack_rows_s8(q.data(), K, N, 1, K, dst);
    else if (w.compute == ComputeType::INT8)
      reorder_s8(q.data(), K, N, c);
    else
      reorder_f32(w, c);
  }
  if (p->how == WeightForm::f32_rows &&
      p->copies[0].md.data.padded_dims[0] != rows_gemm_depth(K))
    throw Error("prepare_weight: the row kernel's packed weights have an unexpected depth");
  return p;
}

}  // namespace nmt::cpu
