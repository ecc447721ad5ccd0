// GEMMs against constant weights (GemmAttr::constant_b): a frozen model's
// Linear layers and output projection, in the compute type it was loaded
// with.
//
// - Weights are reordered once, per compute type, into the layout oneDNN
//   prefers (format_tag::any), and shared by every thread. int8 weights are
//   quantised per output channel on the way.
// - Rows are cut into a bounded set of shapes (see for_each_piece), so that
//   real text, whose row counts change with every batch and decoding step,
//   stops creating primitives once those shapes have been seen.
// - bf16 and int8 convert the activations per call; int8 quantises each row
//   with its own dynamic scale (so no row depends on its batch), multiplies
//   by the weights' channel scales in a post-op, and applies the row scales,
//   bias and activation in one pass over the result.
// - Where oneDNN 2.6 falls short, f32 and int8 run on nmt's own AVX2
//   kernels (rows_gemm.h) instead of a primitive: f32 below AVX-512, whose
//   sums would depend on the batch, and int8 without VNNI, which would
//   need 7-bit weights. The choice is numerics()'s (numerics.h).
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "cpu/loops.h"
#include "cpu/numerics.h"
#include "cpu/onednn.h"
#include "cpu/parallel.h"
#include "cpu/primitive_cache.h"
#include "cpu/rows_gemm.h"

namespace nmt::cpu {
namespace {

using dnnl::memory;
using dt = memory::data_type;

constexpr int kScalesArg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;

dt weight_type(ComputeType ct) {
  return ct == ComputeType::BF16 ? dt::bf16 : ct == ComputeType::INT8 ? dt::s8 : dt::f32;
}

// ---- The packed weights ---------------------------------------------------

struct Packed {
  uint64_t owner;
  const void* src;
  int layout;       // layout_id() of md
  memory::desc md;  // the layout itself, to read the copy back (repack)
  std::shared_ptr<void> data;
  size_t bytes = 0;           // of data
  std::vector<float> scales;  // int8: per output channel
};
// A copy in the shared list. Shared so that dropping one owner's copies (a
// translation worker's batch weights, while other workers run) never frees
// a copy that a thread's memo still holds: a dropped copy lives until every
// memo has let go of it.
struct Held {
  Packed p;
  mutable std::atomic<bool> forgotten{false};  // set by forget_constants: memos let go of it
};
// Guards the list and `dropped`, and is held only to look them up or add
// to them, never while a copy is packed: a worker that packs its batch's
// output weights (every batch, with a shortlist) then makes no other worker
// wait for copies that are ready (it had, 140 times in an int8 translation
// of test_2016_flickr, perf sched_switch).
std::mutex packed_mu;
std::vector<std::shared_ptr<const Held>> packed;  // guarded by packed_mu
std::atomic<uint64_t> packed_epoch{0};  // bumped when an owner's copies are dropped
// Weights whose own pages were handed back (GemmAttr::b_packed_only), by
// owner and address: a layout they need later is packed from a copy.
std::vector<std::pair<uint64_t, const void*>> dropped;  // guarded by packed_mu
// The copies of one matrix are packed one at a time, under its stripe: a
// second thread that needs the same copy waits for it instead of packing
// it twice, and a matrix's pages are never handed back while another of its
// layouts is being read from them.
std::array<std::mutex, 64> packing_mu;
std::mutex layouts_mu;
std::vector<std::string> layouts;  // the bytes of each packed descriptor, guarded by layouts_mu

// A small id for a packed layout, so the hot path compares integers.
int layout_id(const memory::desc& d) {
  const std::string bytes(reinterpret_cast<const char*>(&d.data), sizeof(d.data));
  std::lock_guard<std::mutex> lock(layouts_mu);
  auto it = std::find(layouts.begin(), layouts.end(), bytes);
  if (it != layouts.end()) return static_cast<int>(it - layouts.begin()) + 1;
  layouts.push_back(bytes);
  return static_cast<int>(layouts.size());
}

// Copies of a megabyte and more are mapped on their own. A shortlisted
// translation packs its batch's output weights anew for every batch (3 MB
// for the Multi30k transformer-small), and from malloc those came, once
// glibc had raised its mmap threshold past them, from the heap, whose
// pages a freed copy does not give back: translating test_2016_flickr four
// times over peaked at 258,324 KiB against 178,352 without the shortlist.
//
// The last such copy freed, if at most 8 MB, is kept mapped for the next
// one of its size or a little less: each batch's copy then reuses the last
// batch's pages, where a new mapping took a page fault and a zeroed page
// for every 4 KB, and unmapping it an interrupt to the other cores.
struct SpareMapping {
  std::mutex mu;
  void* p = nullptr;
  size_t bytes = 0;
} spare_mapping;

void unmap_or_keep(void* p, size_t bytes) {
  constexpr size_t kKeep = size_t{8} << 20;
  if (bytes <= kKeep) {
    std::lock_guard<std::mutex> lock(spare_mapping.mu);
    std::swap(p, spare_mapping.p);
    std::swap(bytes, spare_mapping.bytes);
  }
  if (p) munmap(p, bytes);
}

std::shared_ptr<void> aligned_buffer(size_t bytes) {
  constexpr size_t kMapped = size_t{1} << 20;
  if (bytes >= kMapped) {
    void* p = nullptr;
    size_t len = bytes;
    {
      std::lock_guard<std::mutex> lock(spare_mapping.mu);
      if (spare_mapping.p && spare_mapping.bytes >= bytes && spare_mapping.bytes / 2 < bytes) {
        p = spare_mapping.p, len = spare_mapping.bytes;
        spare_mapping.p = nullptr;
      }
    }
    if (p) {
      std::memset(p, 0, bytes);  // zeros, as a new mapping holds (about 0.1 ms for 3 MB)
    } else {
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw Error("out of memory packing weights");
    }
    return std::shared_ptr<void>(p, [len](void* q) { unmap_or_keep(q, len); });
  }
  std::shared_ptr<void> buf(std::aligned_alloc(64, (bytes + 63) / 64 * 64), std::free);
  if (!buf) throw Error("out of memory packing weights");
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

// An empty packed copy in layout `want`. What follows the elements is
// zeroed: the reorders leave the padding before the extra data unwritten,
// and reads_back compares two copies whole.
Packed packed_copy(const memory::desc& want) {
  Packed p;
  p.md = want;
  p.bytes = want.get_size();
  p.data = aligned_buffer(p.bytes);
  const size_t elements = elements_of(want).get_size();
  std::memset(static_cast<char*>(p.data.get()) + elements, 0, p.bytes - elements);
  return p;
}

// Whether int8 products against weights run on rows_gemm_s8 rather than on
// oneDNN (numerics.h). On the Marian-trained fixture model
// (tests/fixtures/peers/marian-opus, its 2262 reference tokens), oneDNN's
// 7-bit weights put nmt score's log-probabilities 0.0182 on average from
// the f32 model's (greedy: 62 of 100 lines equal), exact sums of the 8-bit
// weights 0.0117 (73 of 100), as CTranslate2's own int8 does on the same
// model (0.0116).
bool s8_rows_kernel() { return numerics().int8 == Int8Products::nmt_rows; }

// The layout rows_gemm_s8 reads (BA16b2a), for weights (K, N).
memory::desc s8_pairs_desc(int64_t K, int64_t N) {
  return memory::desc({K, N}, dt::s8, memory::format_tag::BA16b2a);
}
bool is_s8_pairs(const memory::desc& d) {
  return d.data.ndims == 2 && d == s8_pairs_desc(d.data.dims[0], d.data.dims[1]);
}

// Whether s8 weights packed into `want` are first cut to 7 bits: for
// oneDNN's kernels without VNNI alone, which multiply u8 by s8 with
// vpmaddubsw, whose pairwise sums saturate at 16 bits (oneDNN's "int8
// computation" guide gives the same advice).
bool narrows(const memory::desc& want) {
  return numerics().int8 == Int8Products::onednn_7bit && !is_s8_pairs(want);
}

// The weights' address, whichever form they come in.
const void* weights_of(const MatDesc& b, const GemmAttr& attr) {
  return attr.b_s8 ? static_cast<const void*>(attr.b_s8) : b.ptr;
}

// s8 weights q (K, N) at strides (sk, sn) into p's layout. oneDNN 2.6
// reorders into a layout that carries s8s8 compensation (what its kernels
// for s8 sources without AMX read) only on its reference kernel
// ("simple:any": 2-6 ms for a shortlist's 256 x 3072 output weights, 157 ms
// of CPU time in an int8 translation of test_2016_flickr, ONEDNN_VERBOSE),
// but into the same layout without it on a JIT kernel (about 0.1 ms). So
// the elements take the JIT reorder, and the compensation is summed here:
// -128 times each output column's sum (those kernels add 128 to the s8
// sources, to multiply them as u8), one int32 per column after the
// elements.
void reorder_s8(const int8_t* q, int64_t K, int64_t N, int64_t sk, int64_t sn, const Packed& p) {
  if (is_s8_pairs(p.md)) return pack_rows_s8(q, K, N, sk, sn, static_cast<int8_t*>(p.data.get()));
  memory from(memory::desc({K, N}, dt::s8, {sk, sn}), ctx().engine, const_cast<int8_t*>(q));
  const auto& extra = p.md.data.extra;
  const bool columns_only = p.md.data.ndims == 2 &&
                            extra.flags == dnnl_memory_extra_flag_compensation_conv_s8s8 &&
                            extra.compensation_mask == 2;
  const memory::desc elements = columns_only ? elements_of(p.md) : p.md;
  memory to(elements, ctx().engine, p.data.get());
  dnnl::reorder(from, to).execute(ctx().stream, from, to);
  ctx().stream.wait();
  if (!columns_only) return;
  auto* comp = reinterpret_cast<int32_t*>(static_cast<char*>(p.data.get()) + elements.get_size());
#pragma omp parallel for if (K * N > 65536)
  for (int64_t n = 0; n < N; ++n) {
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += q[k * sk + n * sn];
    comp[n] = -128 * sum;
  }
}

// Reorders int8 weights (attr.b_s8 with its channel scales) into `want`:
// as they are with VNNI or for rows_gemm_s8, else rounded again to 7 bits
// (see has_vnni).
Packed pack_s8(const MatDesc& b, const GemmAttr& attr, const memory::desc& want) {
  const int64_t K = b.dims[2], N = b.dims[3], sk = b.strides[2], sn = b.strides[3];
  Packed p = packed_copy(want);
  p.scales.assign(attr.b_scales, attr.b_scales + N);
  const int8_t* from_q = attr.b_s8;
  std::shared_ptr<void> narrowed;
  if (narrows(want)) {
    narrowed = aligned_buffer(static_cast<size_t>(K * N));
    auto* q = static_cast<int8_t*>(narrowed.get());
#pragma omp parallel for
    for (int64_t n = 0; n < N; ++n) {
      int amax = 0;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::abs(int{attr.b_s8[k * sk + n * sn]}));
      const float s = amax > 0 ? amax * attr.b_scales[n] / 63.f : 1.f;
      for (int64_t k = 0; k < K; ++k)
        q[k * sk + n * sn] =
            static_cast<int8_t>(std::nearbyint(attr.b_s8[k * sk + n * sn] * attr.b_scales[n] / s));
      p.scales[n] = s;
    }
    from_q = q;
  }
  reorder_s8(from_q, K, N, sk, sn, p);
  return p;
}

// Reorders the weights b (K, N), f32 at b's strides, into `want`; int8
// first rounds each output channel n to s8 with scale max|b[:, n]| / 127
// (or / 63 where narrows(want)).
Packed pack(const MatDesc& b, const GemmAttr& attr, const memory::desc& want) {
  if (attr.b_s8) return pack_s8(b, attr, want);
  const int64_t K = b.dims[2], N = b.dims[3], sk = b.strides[2], sn = b.strides[3];
  Packed p = packed_copy(want);
  if (want.data_type() == dt::s8) {
    std::shared_ptr<void> quantised = aligned_buffer(K * N);
    auto* q = static_cast<int8_t*>(quantised.get());
    p.scales.resize(N);
    const float qmax = narrows(want) ? 63.f : 127.f;
#pragma omp parallel for
    for (int64_t n = 0; n < N; ++n) {
      float amax = 0;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(b.ptr[k * sk + n * sn]));
      const float s = amax > 0 ? amax / qmax : 1.f;
      p.scales[n] = s;
      for (int64_t k = 0; k < K; ++k)
        q[k * sk + n * sn] = static_cast<int8_t>(std::nearbyint(b.ptr[k * sk + n * sn] / s));
    }
    reorder_s8(q, K, N, sk, sn, p);
    return p;
  }
  memory from(memory::desc({K, N}, dt::f32, {sk, sn}), ctx().engine, const_cast<float*>(b.ptr));
  memory to(want, ctx().engine, p.data.get());
  dnnl::reorder(from, to).execute(ctx().stream, from, to);
  ctx().stream.wait();
  return p;
}

// Bytes from b's first element to its last, element size `elem`.
size_t span_bytes(const MatDesc& b, size_t elem) {
  return static_cast<size_t>((b.dims[2] - 1) * b.strides[2] + (b.dims[3] - 1) * b.strides[3] + 1) *
         elem;
}

// The packed copy `from` in layout `want`, through b's elements as rows
// again (f32 from f32 or bf16, exactly; s8 with the copy's channel scales),
// for weights whose own pages were handed back.
Packed repack(const Packed& from, const MatDesc& b, const GemmAttr& attr,
              const memory::desc& want) {
  const bool s8 = attr.b_s8 != nullptr;
  const int64_t K = b.dims[2], N = b.dims[3];
  std::shared_ptr<void> rows = aligned_buffer(span_bytes(b, s8 ? 1 : sizeof(float)));
  memory in(elements_of(from.md), ctx().engine, from.data.get());
  memory out(memory::desc({K, N}, s8 ? dt::s8 : dt::f32, {b.strides[2], b.strides[3]}),
             ctx().engine, rows.get());
  dnnl::reorder(in, out).execute(ctx().stream, in, out);
  ctx().stream.wait();
  GemmAttr a = attr;
  MatDesc w = b;
  if (s8)
    a.b_s8 = static_cast<const int8_t*>(rows.get()), a.b_scales = from.scales.data();
  else
    w.ptr = static_cast<const float*>(rows.get());
  Packed p = pack(w, a, want);
  // Where pack narrows again: the same 7-bit values, but a scale
  // recomputed as 63 * s / 63 may be an ulp off the copy's.
  if (s8) p.scales = from.scales;
  return p;
}

// Whether the copy p gives back what it was packed from, so that b's own
// pages can go: a layout without extra data always does (f32 and bf16
// exactly; bf16 packed again from its f32 reading is the same bf16). One
// with extra data is read back and packed again once, and must come out
// byte for byte the same (it would not if oneDNN had scaled the elements,
// as it does for s8 without VNNI).
bool reads_back(const Packed& p, const MatDesc& b, const GemmAttr& attr) {
  if (p.md.data.extra.flags == 0) return true;
  const Packed again = repack(p, b, attr, p.md);
  return again.bytes == p.bytes && again.scales == p.scales &&
         std::memcmp(again.data.get(), p.data.get(), p.bytes) == 0;
}

// Packs weights b in layout want() for (owner, src, layout), and adds the
// copy to the shared list. Runs under the matrix's stripe of packing_mu.
template <typename Want>
std::shared_ptr<const Held> pack_and_hold(uint64_t owner, const void* src, int layout,
                                          const MatDesc& b, const GemmAttr& attr,
                                          const Want& want) {
  const std::pair<uint64_t, const void*> id{owner, src};
  std::shared_ptr<const Held> from;  // where b's own pages were handed back: a copy to read
  {
    std::lock_guard<std::mutex> lock(packed_mu);
    if (std::find(dropped.begin(), dropped.end(), id) != dropped.end()) {
      const auto it = std::find_if(packed.begin(), packed.end(), [&](const auto& h) {
        return h->p.owner == owner && h->p.src == src;
      });
      if (it == packed.end()) throw Error("gemm: weights handed back without a copy to read");
      from = *it;
    }
  }
  auto h = std::make_shared<Held>();
  h->p = from ? repack(from->p, b, attr, want()) : pack(b, attr, want());
  h->p.owner = owner;
  h->p.src = src;
  h->p.layout = layout;
  const bool release = !from && attr.b_packed_only && reads_back(h->p, b, attr);
  if (release) release_pages(src, span_bytes(b, attr.b_s8 ? 1 : sizeof(float)));
  std::lock_guard<std::mutex> lock(packed_mu);
  packed.push_back(h);
  if (release) dropped.push_back(id);
  return h;
}

// The packed copy of weights b in layout `layout` (layout_id() of the
// descriptor want() returns), made on first use by any thread. A per-thread
// memo keeps the hot path lock-free; want() is asked on a miss alone.
// Weights read by their products alone (GemmAttr::b_packed_only) are then
// held in that copy alone, where the copy can be read back for another
// layout.
template <typename Want>
const Packed& packed_weights(uint64_t owner, const MatDesc& b, const GemmAttr& attr, int layout,
                             const Want& want) {
  thread_local std::vector<std::shared_ptr<const Held>> memo;
  thread_local uint64_t memo_epoch = 0;
  if (const uint64_t epoch = packed_epoch.load(); memo_epoch != epoch) {
    // Only the dropped owners' copies go: the rest stay found without a
    // lock (every worker drops its batch's output weights each batch).
    memo.erase(
        std::remove_if(memo.begin(), memo.end(), [](const auto& h) { return h->forgotten.load(); }),
        memo.end());
    memo_epoch = epoch;
  }
  const void* src = weights_of(b, attr);
  const auto same = [&](const std::shared_ptr<const Held>& h) {
    return h->p.owner == owner && h->p.src == src && h->p.layout == layout;
  };
  for (const auto& m : memo)
    if (same(m)) return m->p;
  const auto find = [&]() -> std::shared_ptr<const Held> {
    std::lock_guard<std::mutex> lock(packed_mu);
    const auto it = std::find_if(packed.begin(), packed.end(), same);
    return it == packed.end() ? nullptr : *it;
  };
  std::shared_ptr<const Held> h = find();
  if (!h) {
    const size_t stripe =
        (std::hash<const void*>()(src) ^ owner * 0x9e3779b97f4a7c15ull) % packing_mu.size();
    std::lock_guard<std::mutex> packing(packing_mu[stripe]);
    h = find();  // packed while this thread waited
    if (!h) h = pack_and_hold(owner, src, layout, b, attr, want);
  }
  memo.push_back(h);
  return h->p;
}

// The packed copy in the weights layout of a primitive's entry.
const Packed& packed_weights(uint64_t owner, const MatDesc& b, const GemmAttr& attr,
                             const Entry& e) {
  return packed_weights(owner, b, attr, e.packed,
                        [&e] { return e.args.at(DNNL_ARG_WEIGHTS).get_desc(); });
}

// Whether reading only the non-zero inputs pays for weights (K, N)
// (numerics.h's rule, by their size). Per shape, never per batch, so a
// row's result does not depend on its batch.
bool sparse_pays(int64_t K, int64_t N) {
  return K * N * static_cast<int64_t>(sizeof(float)) <= numerics().sparse_bytes;
}

// The weights b (K, N) packed as elements of `type` in oneDNN's layout
// `tag`, for the products that read them without a primitive.
const Packed& weights_as(const MatDesc& b, const GemmAttr& attr, dt type, memory::format_tag tag) {
  const auto want = [&b, type, tag] { return memory::desc({b.dims[2], b.dims[3]}, type, tag); };
  // Its layout id per shape, type and tag, so that a call builds no
  // descriptor and takes no lock once the shape has been seen on this thread.
  thread_local std::vector<std::pair<std::array<int64_t, 4>, int>> ids;
  const std::array<int64_t, 4> shape{b.dims[2], b.dims[3], static_cast<int64_t>(type),
                                     static_cast<int64_t>(tag)};
  int layout = 0;
  for (const auto& [s, id] : ids)
    if (s == shape) layout = id;
  if (!layout) ids.emplace_back(shape, layout = layout_id(want()));
  return packed_weights(attr.constant_b, b, attr, layout, want);
}

// The weights b (K, N) as plain rows, the layout sparse_rows_product reads.
const Packed& rows_of_weights(const MatDesc& b, const GemmAttr& attr) {
  return weights_as(b, attr, dt::f32, memory::format_tag::ab);
}

// ---- f32 rows that do not depend on their batch ----------------------------

// Whether f32 products against weights run on rows_gemm rather than on
// oneDNN (numerics.h).
bool f32_rows_kernel() { return numerics().f32 == F32Products::nmt_rows; }

void rows_product(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr) {
  const Packed& w = weights_as(b, attr, dt::f32, memory::format_tag::BA16a16b);
  if (w.md.data.padded_dims[0] != rows_gemm_depth(b.dims[2]))
    throw Error("gemm: the row kernel's packed weights have an unexpected depth");
  rows_gemm(a.ptr, a.strides[2], static_cast<const float*>(w.data.get()), a.dims[2], a.dims[3],
            b.dims[3], const_cast<float*>(dst.ptr), dst.strides[2], attr.alpha, attr.bias,
            attr.act);
}

// ---- Primitives per row count ---------------------------------------------

// One piece of rows [row, row + rows) of the activations.
struct Shape2 {
  int64_t rows, K, N, lda, ldc;
};

// A primitive for rows of s against weights in the layout it prefers (its
// packed copy: f32 packed was as fast as plain on test_2016_flickr, and
// transformer-base's peak memory fell from 707-733 MiB to 514-532 with f32
// weights held packed alone).
void build(Entry& e, const Shape2& s, const GemmAttr& attr, ComputeType ct) {
  const dt src_type = weight_type(ct);
  memory::desc a_md({s.rows, s.K}, src_type, {s.lda, 1});
  memory::desc b_md({s.K, s.N}, weight_type(ct), memory::format_tag::any);
  memory::desc c_md({s.rows, s.N}, dt::f32, {s.ldc, 1});
  memory::desc bias_md({1, s.N}, dt::f32, memory::format_tag::ab);
  memory::desc scales_md({1, s.N}, dt::f32, memory::format_tag::ab);
  // int8's scales change with every call. oneDNN 2.6 runs runtime output
  // scales only on its slow generic kernel, but a per-column multiply
  // post-op on AMX and VNNI kernels (measured: 1.7x the bare product at
  // M = 64, against 11x for runtime scales). (No accumulation here.)
  dnnl::matmul::desc d = attr.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                                   : dnnl::matmul::desc(a_md, b_md, c_md);
  dnnl::matmul::primitive_desc pd(
      d, matmul_attr(attr, ct == ComputeType::INT8 ? &scales_md : nullptr), ctx().engine);
  e.prim = dnnl::matmul(pd);
  e.args.emplace(DNNL_ARG_SRC, mem(a_md));
  e.args.emplace(DNNL_ARG_WEIGHTS, mem(pd.weights_desc()));
  e.args.emplace(DNNL_ARG_DST, mem(c_md));
  if (attr.bias) e.args.emplace(DNNL_ARG_BIAS, mem(bias_md));
  if (ct == ComputeType::INT8) e.args.emplace(kScalesArg, mem(scales_md));
  e.packed = layout_id(pd.weights_desc());
}

// Row pieces (for_each_piece), 256 rows at a time, then:
// - (32, 4) by default: at most 88 counts. Multiples of 4 because beam
//   search's rows come in multiples of the beam: with multiples of 16, most
//   decoding steps at beam 4 made a second call for 4-12 rows, which reads
//   all the weights again for a few rows (the vocabulary projection ran at
//   57 GFLOP/s on 4-8 rows against 155 on 65-128); real text ran 4% faster
//   (test_2016_flickr, f32, beam 4).
// - (16, 16) for int8 on AMX, which multiplies tiles of 16 rows, so a
//   tail costs a tile's pass anyway: at most 31 counts (63 met on
//   test_2016_flickr with the default cut), and each int8 primitive's
//   creation (its kernels generated) took about 1 ms, a tenth of an int8
//   translation of test_2016_flickr (ONEDNN_VERBOSE: 318 primitives,
//   318 ms, before; 148, 104 ms, after).
constexpr Cut kDefaultCut{256, 32, 4}, kAmxCut{256, 16, 16};

// ---- Activation conversion -------------------------------------------------

// dst = act(alpha * a b + bias) on rows_gemm_s8: a's rows quantised as
// for oneDNN (each with its own scale), held as int16.
void s8_rows_product(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr) {
  const int64_t M = a.dims[2], K = a.dims[3], N = b.dims[3];
  const Packed& w = weights_as(b, attr, dt::s8, memory::format_tag::BA16b2a);
  thread_local std::vector<int16_t> a16;
  thread_local std::vector<float> row_scales, col_scales;
  const int64_t lda = 2 * rows_gemm_pairs(K);
  loops().quantise_rows_s16(a, scratch(a16, M * lda), lda, scratch(row_scales, M));
  const float* cs = w.scales.data();
  if (attr.alpha != 1.f) {
    float* sc = scratch(col_scales, N);
    for (int64_t n = 0; n < N; ++n) sc[n] = attr.alpha * w.scales[n];
    cs = sc;
  }
  float* c = const_cast<float*>(dst.ptr);
  rows_gemm_s8(a16.data(), lda, static_cast<const int8_t*>(w.data.get()), M, K, N, c,
               dst.strides[2], cs);
  loops().scale_rows(c, dst.strides[2], M, N, row_scales.data(), attr.bias, attr.act);
}

void check_operands(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr) {
  const ComputeType ct = attr.compute;
  if (a.dims[3] != b.dims[2] || a.dims[2] != dst.dims[2] || b.dims[3] != dst.dims[3] ||
      a.strides[3] != 1 || dst.strides[3] != 1 || a.dims[0] * a.dims[1] != 1 || attr.accumulate)
    throw Error("gemm: constant weights need row-major 2-D operands and no accumulation");
  if (ct == ComputeType::BF16 && !numerics().bf16)
    throw Error("bf16 needs a CPU with AVX512-BF16 or AMX");
  if (attr.b_s8 && (ct != ComputeType::INT8 || !attr.constant_b || !attr.b_scales))
    throw Error("gemm: int8 weights need their scales, an owner and compute int8");
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

// Rows [row, row + rows) of dst = act(alpha * in b + bias) on a oneDNN
// primitive. int8 runs the bare product times the weights' column scales
// (col_scales, set by the first piece); the row scales, the bias and the
// activation follow in one pass over the result (a per-row post-op would
// put oneDNN 2.6 on its reference kernel, and the bias cannot be folded
// into the product once each row has its own scale).
void onednn_piece(const Activations& in, const MatDesc& b, const MatDesc& dst,
                  const GemmAttr& attr, int64_t row, int64_t rows, const float*& col_scales) {
  const ComputeType ct = in.ct;
  const int64_t K = b.dims[2], N = b.dims[3];
  GemmAttr fused = attr;
  if (ct == ComputeType::INT8) fused.bias = nullptr, fused.act = Activation::None;
  float* c_rows = const_cast<float*>(dst.ptr) + row * dst.strides[2];
  const Shape2 s{rows, K, N, in.ld, dst.strides[2]};
  Key key;
  key.add(8);
  key.add(std::array<int64_t, 7>{rows, K, N, in.ld, s.ldc, b.strides[2], b.strides[3]});
  key.add(bits(fused.alpha));
  key.add((fused.bias != nullptr) + static_cast<int>(fused.act) * 2 + static_cast<int>(ct) * 16);
  Entry& e = lookup(key, [&](Entry& e) { build(e, s, fused, ct); });
  const Packed& w = packed_weights(attr.constant_b, b, attr, e);
  if (ct == ComputeType::INT8 && !col_scales) {
    col_scales = w.scales.data();
    if (attr.alpha != 1.f) {  // the linears' alpha is 1: no pass over N per call
      thread_local std::vector<float> alpha_scales;
      float* sc = scratch(alpha_scales, N);
      for (int64_t n = 0; n < N; ++n) sc[n] = attr.alpha * w.scales[n];
      col_scales = sc;
    }
  }
  e.set(DNNL_ARG_SRC, static_cast<const char*>(in.rows) + row * in.ld * in.elem);
  e.set(DNNL_ARG_WEIGHTS, w.data.get());
  e.set(DNNL_ARG_DST, c_rows);
  if (fused.bias) e.set(DNNL_ARG_BIAS, fused.bias);
  if (ct == ComputeType::INT8) e.set(kScalesArg, col_scales);
  e.run();
  if (ct == ComputeType::INT8)
    loops().scale_rows(c_rows, s.ldc, rows, N, in.row_scales + row, attr.bias, attr.act);
}

// A small product runs on the calling thread alone, for the object's
// lifetime (however the call ends: a primitive that fails to build
// throws): a second thread cost more than it saved, on AMX about 0.08 ms
// per int8 call, 7x the whole product at 4 rows of 512 x 512
// (transformer-base, batch 1, beam 4: its latency was 60 ms on 2 threads,
// 26 ms on 1), and 0.04 ms, half of it, for f32 (ONEDNN_VERBOSE). Above
// about 16M multiply-adds in int8 (the 21k-piece vocabulary projection)
// and 2M in f32, two threads win. int8 sums are exact, so there the thread
// count changes no result; in f32, translations of test_2016_flickr on 1
// and 2 threads were identical.
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

void forget_constants(uint64_t owner) {
  std::lock_guard<std::mutex> lock(packed_mu);
  packed.erase(std::remove_if(packed.begin(), packed.end(),
                              [&](const auto& h) {
                                if (h->p.owner != owner) return false;
                                h->forgotten = true;
                                return true;
                              }),
               packed.end());
  // `dropped` keeps the owner's entries (owners are never reused): should a
  // store whose weights were handed back ever run a product again, it then
  // fails for want of a copy instead of packing its zeroed pages.
  ++packed_epoch;
}

int64_t constant_bytes() {
  std::lock_guard<std::mutex> lock(packed_mu);
  int64_t n = 0;
  for (const auto& h : packed)
    n += static_cast<int64_t>(h->p.bytes + h->p.scales.size() * sizeof(float));
  return n;
}

bool has_bf16() { return numerics().bf16; }

void gemm_weights(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr) {
  const ComputeType ct = attr.compute;
  const int64_t M = a.dims[2], K = a.dims[3], N = b.dims[3];
  check_operands(a, b, dst, attr);
  if (attr.a_sparse && ct == ComputeType::F32 && sparse_pays(K, N))
    return loops().sparse_rows_product(
        a, static_cast<const float*>(rows_of_weights(b, attr).data.get()), dst, attr);
  if (ct == ComputeType::F32 && f32_rows_kernel()) return rows_product(a, b, dst, attr);
  if (ct == ComputeType::INT8 && s8_rows_kernel()) return s8_rows_product(a, b, dst, attr);
  const Activations in = activations_in(a, ct);
  const float* col_scales = nullptr;  // int8: set by the first piece
  const SerialIfSmall serial(std::min<int64_t>(M, 256) * K * N, ct);
  for_each_piece(M, ct == ComputeType::INT8 && numerics().amx_rows ? kAmxCut : kDefaultCut,
                 [&](int64_t row, int64_t rows) {
                   onednn_piece(in, b, dst, attr, row, rows, col_scales);
                 });
}

}  // namespace nmt::cpu
