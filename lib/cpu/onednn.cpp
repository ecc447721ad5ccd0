#include "cpu/onednn.h"

#include <omp.h>
#include <xmmintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "cpu/isa.h"
#include "cpu/numerics.h"
#include "cpu/primitive_cache.h"

namespace nmt::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

}  // namespace

Context& ctx() {
  thread_local Context c;
  return c;
}

void Key::add(int64_t x) {
  if (n == kMax) throw Error("primitive key overflow");
  v[n++] = x;
}

namespace {

// Least recently used first out: a long-running process with very varied
// input (a shape per batch size and length) keeps the shapes in use and
// drops the stale ones one at a time.
struct Cached {
  Entry entry;
  std::list<Key>::iterator age;  // position in `recent`, most recent first
};
thread_local std::unordered_map<Key, Cached, KeyHash> cache;
thread_local std::list<Key> recent;
// Counted over all threads: translation workers build their own primitives.
std::atomic<int64_t> created{0};

memory::desc md4(const std::array<int64_t, 4>& d, std::array<int64_t, 4> s) {
  // The stride of a dimension of size 1 is never used, but oneDNN 2.6 reads
  // it when classifying the layout and crashes building some batched
  // matmuls (M = 1, K = 64) with an arbitrary one; give it the dense value.
  for (int i = 2; i >= 0; --i)
    if (d[i] == 1) s[i] = s[i + 1] * d[i + 1];
  return memory::desc(memory::dims(d.begin(), d.end()), dt::f32, memory::dims(s.begin(), s.end()));
}

memory::desc md_dense(const std::array<int64_t, 4>& d) {
  return memory::desc(memory::dims(d.begin(), d.end()), dt::f32, tag::abcd);
}

memory::desc md2(int64_t rows, int64_t cols) {
  return memory::desc({rows, cols}, dt::f32, tag::ab);
}

}  // namespace

dnnl::primitive_attr matmul_attr(const GemmAttr& attr, const memory::desc* scales) {
  dnnl::primitive_attr pa;
  dnnl::post_ops ops;
  if (scales)
    ops.append_binary(dnnl::algorithm::binary_mul, *scales);
  else if (attr.alpha != 1.f)
    pa.set_output_scales(0, {attr.alpha});
  switch (attr.act) {
    case Activation::Relu:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      break;
    case Activation::Swish:  // x * sigmoid(alpha x)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
      break;
    case Activation::Gelu:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
      break;
    case Activation::GeluTanh:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      break;
    case Activation::None:
      break;
  }
  if (attr.accumulate) ops.append_sum(1.f);
  pa.set_post_ops(ops);
  return pa;
}

Key with_thread_count(const Key& key) {
  Key k = key;
  k.add(omp_get_max_threads());
  return k;
}

Entry& lookup(const Key& shape_key, const std::function<void(Entry&)>& build) {
  const Key key = with_thread_count(shape_key);
  auto it = cache.find(key);
  if (it != cache.end()) {
    recent.splice(recent.begin(), recent, it->second.age);
    return it->second.entry;
  }
  constexpr size_t kMaxCached = 8192;
  if (cache.size() >= kMaxCached) {
    cache.erase(recent.back());
    recent.pop_back();
  }
  Entry e;
  try {
    build(e);
  } catch (const dnnl::error& err) {
    throw Error(std::string("oneDNN could not build a primitive: ") + err.what());
  }
  ++created;
  recent.push_front(key);
  return cache.emplace(key, Cached{std::move(e), recent.begin()}).first->second.entry;
}

void set_num_threads(int n) {
  omp_set_num_threads(n > 0 ? n : omp_get_num_procs());
  // Flush denormals to zero on every worker: Adam's second moments and
  // vanishing gradients drift into denormals, which run ~100x slower.
  const unsigned ftz_daz = 0x8040;
  _mm_setcsr(_mm_getcsr() | ftz_daz);
#pragma omp parallel
  _mm_setcsr(_mm_getcsr() | ftz_daz);
}
int num_threads() { return omp_get_max_threads(); }
int64_t primitives_created() { return created; }

std::string isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

std::string backend_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (ISA " + isa_name() + ")";
}

namespace {

// A matmul primitive for these operands into e.
// A 2-D matrix at its strides (a size-1 dimension made dense, as in md4).
memory::desc md2_strided(const MatDesc& m) {
  const int64_t r = m.dims[2], c = m.dims[3];
  int64_t sr = m.strides[2], sc = m.strides[3];
  if (c == 1) sc = 1;
  if (r == 1) sr = sc * c;
  return memory::desc({r, c}, dt::f32, {sr, sc});
}

void build_matmul(Entry& e, const MatDesc& a, const MatDesc& b, const MatDesc& dst,
                  const GemmAttr& attr) {
  // Unbatched products go to oneDNN as 2-D: with 4-D descriptors, a
  // transposed operand (training's x W^T and dY^T X) falls back from the
  // brgemm kernels to gemm:jit, which ran 10-25% slower here.
  const bool flat =
      a.dims[0] * a.dims[1] == 1 && b.dims[0] * b.dims[1] == 1 && dst.dims[0] * dst.dims[1] == 1;
  auto a_md = flat ? md2_strided(a) : md4(a.dims, a.strides);
  auto b_md = flat ? md2_strided(b) : md4(b.dims, b.strides);
  auto c_md = flat ? md2_strided(dst) : md4(dst.dims, dst.strides);
  memory::desc bias_md;
  if (attr.bias) bias_md = flat ? md2(1, dst.dims[3]) : md_dense({1, 1, 1, dst.dims[3]});
  dnnl::matmul::desc d = attr.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                                   : dnnl::matmul::desc(a_md, b_md, c_md);
  dnnl::matmul::primitive_desc pd(d, matmul_attr(attr), ctx().engine);
  e.prim = dnnl::matmul(pd);
  e.args.emplace(DNNL_ARG_SRC, mem(a_md));
  e.args.emplace(DNNL_ARG_WEIGHTS, mem(b_md));
  e.args.emplace(DNNL_ARG_DST, mem(c_md));
  if (attr.bias) e.args.emplace(DNNL_ARG_BIAS, mem(bias_md));
}

}  // namespace

void gemm(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr) {
  if (a.dims[3] != b.dims[2] || a.dims[2] != dst.dims[2] || b.dims[3] != dst.dims[3])
    throw Error("gemm: inner or outer dimensions do not match");
  Key key;
  key.add(1);
  key.add(a.dims);
  key.add(a.strides);
  key.add(b.dims);
  key.add(b.strides);
  key.add(dst.dims);
  key.add(dst.strides);
  key.add(bits(attr.alpha));
  key.add(attr.accumulate * 1 + (attr.bias != nullptr) * 2 + static_cast<int>(attr.act) * 4);
  Entry& e = lookup(key, [&](Entry& e) { build_matmul(e, a, b, dst, attr); });
  e.set(DNNL_ARG_SRC, a.ptr);
  e.set(DNNL_ARG_WEIGHTS, b.ptr);
  e.set(DNNL_ARG_DST, dst.ptr);
  if (attr.bias) e.set(DNNL_ARG_BIAS, attr.bias);
  e.run();
}

namespace {

// Attention's batched GEMMs change shape with every batch and step (rows,
// sentence lengths, cache capacity). Built with oneDNN runtime dimensions
// (all but the heads and the reduction) and runtime strides (all but the
// unit ones), one primitive serves every shape, and it runs the same jit
// kernel a fixed shape would get; only the cheap memory objects are per shape.
struct RuntimeShapes {
  std::unordered_map<Key, std::array<memory, 3>, KeyHash> mems;
};
thread_local std::unordered_map<const Entry*, RuntimeShapes> runtime_shapes;

memory::desc runtime_md(const std::array<int64_t, 4>& d, const std::array<int64_t, 4>& s,
                        bool static_dim1, int static_dim) {
  constexpr int64_t R = DNNL_RUNTIME_DIM_VAL;
  memory::dims dims(4), strides(4);
  for (int i = 0; i < 4; ++i) {
    dims[i] = (i == 1 && static_dim1) || i == static_dim ? d[i] : R;
    strides[i] = s[i] == 1 ? 1 : R;
  }
  return memory::desc(dims, dt::f32, strides);
}

// Strides as md4 gives them to oneDNN (size-1 dims made dense).
std::array<int64_t, 4> fixed_strides(const MatDesc& m) {
  std::array<int64_t, 4> s = m.strides;
  for (int i = 2; i >= 0; --i)
    if (m.dims[i] == 1) s[i] = s[i + 1] * m.dims[i + 1];
  return s;
}

int64_t unit_pattern(const std::array<int64_t, 4>& s) {
  int64_t bits = 0;
  for (int i = 0; i < 4; ++i) bits |= int64_t(s[i] == 1) << i;
  return bits;
}

}  // namespace

void gemm_runtime(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr) {
  if (a.dims[3] != b.dims[2] || a.dims[2] != dst.dims[2] || b.dims[3] != dst.dims[3] ||
      a.dims[0] != b.dims[0] || a.dims[1] != b.dims[1] || attr.bias || attr.act != Activation::None)
    throw Error("gemm: batched operands do not match");
  const auto sa = fixed_strides(a), sb = fixed_strides(b), sc = fixed_strides(dst);
  Key key;
  key.add(7);
  key.add(a.dims[1]);
  key.add(a.dims[3]);
  key.add(unit_pattern(sa) | unit_pattern(sb) << 4 | unit_pattern(sc) << 8);
  key.add(bits(attr.alpha));
  key.add(attr.accumulate);
  Entry& e = lookup(key, [&](Entry& e) {
    dnnl::primitive_attr pa;
    if (attr.alpha != 1.f) pa.set_output_scales(0, {attr.alpha});
    dnnl::post_ops ops;
    if (attr.accumulate) ops.append_sum(1.f);
    pa.set_post_ops(ops);
    dnnl::matmul::desc d(runtime_md(a.dims, sa, true, 3), runtime_md(b.dims, sb, true, 2),
                         runtime_md(dst.dims, sc, true, -1));
    e.prim = dnnl::matmul(dnnl::matmul::primitive_desc(d, pa, ctx().engine));
  });
  RuntimeShapes& rs = runtime_shapes[&e];
  Key shape;
  for (const MatDesc* m : {&a, &b, &dst}) shape.add(m->dims), shape.add(m->strides);
  auto it = rs.mems.find(shape);
  if (it == rs.mems.end()) {
    if (rs.mems.size() >= 4096) rs.mems.clear();  // memory objects only: cheap to remake
    it = rs.mems
             .emplace(shape, std::array<memory, 3>{mem(md4(a.dims, a.strides)),
                                                   mem(md4(b.dims, b.strides)),
                                                   mem(md4(dst.dims, dst.strides))})
             .first;
  }
  e.args[DNNL_ARG_SRC] = it->second[0];
  e.args[DNNL_ARG_WEIGHTS] = it->second[1];
  e.args[DNNL_ARG_DST] = it->second[2];
  e.set(DNNL_ARG_SRC, a.ptr);
  e.set(DNNL_ARG_WEIGHTS, b.ptr);
  e.set(DNNL_ARG_DST, dst.ptr);
  e.run();
}

void softmax(const float* src, float* dst, int64_t rows, int64_t cols, bool log) {
  if (rows == 0) return;
  Key key;
  key.add(log ? 3 : 2);
  key.add(rows);
  key.add(cols);
  Entry& e = lookup(key, [&](Entry& e) {
    auto d = md2(rows, cols);
    if (log) {
      dnnl::logsoftmax_forward::desc desc(dnnl::prop_kind::forward_inference, d, 1);
      e.prim = dnnl::logsoftmax_forward({desc, ctx().engine});
    } else {
      dnnl::softmax_forward::desc desc(dnnl::prop_kind::forward_training, d, 1);
      e.prim = dnnl::softmax_forward({desc, ctx().engine});
    }
    e.args.emplace(DNNL_ARG_SRC, mem(d));
    e.args.emplace(DNNL_ARG_DST, mem(d));
  });
  e.set(DNNL_ARG_SRC, src);
  e.set(DNNL_ARG_DST, dst);
  e.run();
}

void softmax_backward(const float* dst, const float* diff_dst, float* diff_src, int64_t rows,
                      int64_t cols) {
  if (rows == 0) return;
  Key key;
  key.add(4);
  key.add(rows);
  key.add(cols);
  Entry& e = lookup(key, [&](Entry& e) {
    auto d = md2(rows, cols);
    dnnl::softmax_forward::desc fd(dnnl::prop_kind::forward_training, d, 1);
    dnnl::softmax_forward::primitive_desc fpd(fd, ctx().engine);
    dnnl::softmax_backward::desc bd(d, d, 1);
    e.prim = dnnl::softmax_backward({bd, ctx().engine, fpd});
    e.args.emplace(DNNL_ARG_DST, mem(d));
    e.args.emplace(DNNL_ARG_DIFF_DST, mem(d));
    e.args.emplace(DNNL_ARG_DIFF_SRC, mem(d));
  });
  e.set(DNNL_ARG_DST, dst);
  e.set(DNNL_ARG_DIFF_DST, diff_dst);
  e.set(DNNL_ARG_DIFF_SRC, diff_src);
  e.run();
}

namespace {
const auto kLnFlags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
}

void layer_norm(const float* src, float* dst, const float* gamma, const float* beta, float* mean,
                float* var, int64_t rows, int64_t D, float eps, bool training) {
  if (rows == 0) return;
  Key key;
  key.add(5);
  key.add(rows);
  key.add(D);
  key.add(bits(eps));
  key.add(training);
  Entry& e = lookup(key, [&](Entry& e) {
    auto d = md2(rows, D);
    auto prop = training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    dnnl::layer_normalization_forward::desc desc(prop, d, eps, kLnFlags);
    dnnl::layer_normalization_forward::primitive_desc pd(desc, ctx().engine);
    e.prim = dnnl::layer_normalization_forward(pd);
    e.args.emplace(DNNL_ARG_SRC, mem(d));
    e.args.emplace(DNNL_ARG_DST, mem(d));
    e.args.emplace(DNNL_ARG_SCALE, mem(memory::desc({D}, dt::f32, tag::a)));
    e.args.emplace(DNNL_ARG_SHIFT, mem(memory::desc({D}, dt::f32, tag::a)));
    if (training) {
      e.args.emplace(DNNL_ARG_MEAN, mem(pd.mean_desc()));
      e.args.emplace(DNNL_ARG_VARIANCE, mem(pd.variance_desc()));
    }
  });
  e.set(DNNL_ARG_SRC, src);
  e.set(DNNL_ARG_DST, dst);
  e.set(DNNL_ARG_SCALE, gamma);
  e.set(DNNL_ARG_SHIFT, beta);
  if (training) {
    e.set(DNNL_ARG_MEAN, mean);
    e.set(DNNL_ARG_VARIANCE, var);
  }
  e.run();
}

void layer_norm_backward(const float* src, const float* diff_dst, const float* gamma,
                         const float* mean, const float* var, float* diff_src, float* diff_gamma,
                         float* diff_beta, int64_t rows, int64_t D, float eps) {
  if (rows == 0) return;
  // oneDNN assigns the parameter gradients; ours accumulate, so it writes into
  // per-thread scratch that is then added.
  thread_local std::vector<float> dg, db;
  dg.resize(D);
  db.resize(D);
  Key key;
  key.add(6);
  key.add(rows);
  key.add(D);
  key.add(bits(eps));
  Entry& e = lookup(key, [&](Entry& e) {
    auto d = md2(rows, D);
    dnnl::layer_normalization_forward::desc fd(dnnl::prop_kind::forward_training, d, eps, kLnFlags);
    dnnl::layer_normalization_forward::primitive_desc fpd(fd, ctx().engine);
    dnnl::layer_normalization_backward::desc bd(dnnl::prop_kind::backward, d, d, eps, kLnFlags);
    dnnl::layer_normalization_backward::primitive_desc pd(bd, ctx().engine, fpd);
    e.prim = dnnl::layer_normalization_backward(pd);
    auto p = memory::desc({D}, dt::f32, tag::a);
    e.args.emplace(DNNL_ARG_SRC, mem(d));
    e.args.emplace(DNNL_ARG_DIFF_DST, mem(d));
    e.args.emplace(DNNL_ARG_DIFF_SRC, mem(d));
    e.args.emplace(DNNL_ARG_MEAN, mem(fpd.mean_desc()));
    e.args.emplace(DNNL_ARG_VARIANCE, mem(fpd.variance_desc()));
    e.args.emplace(DNNL_ARG_SCALE, mem(p));
    e.args.emplace(DNNL_ARG_SHIFT, mem(p));
    e.args.emplace(DNNL_ARG_DIFF_SCALE, mem(p));
    e.args.emplace(DNNL_ARG_DIFF_SHIFT, mem(p));
  });
  e.set(DNNL_ARG_SRC, src);
  e.set(DNNL_ARG_DIFF_DST, diff_dst);
  e.set(DNNL_ARG_DIFF_SRC, diff_src);
  e.set(DNNL_ARG_MEAN, mean);
  e.set(DNNL_ARG_VARIANCE, var);
  e.set(DNNL_ARG_SCALE, gamma);
  e.set(DNNL_ARG_SHIFT, gamma);  // unused by the backward pass, but must be bound
  e.set(DNNL_ARG_DIFF_SCALE, dg.data());
  e.set(DNNL_ARG_DIFF_SHIFT, db.data());
  e.run();
  for (int64_t i = 0; i < D; ++i) {
    diff_gamma[i] += dg[i];
    diff_beta[i] += db[i];
  }
}

}  // namespace nmt::cpu
