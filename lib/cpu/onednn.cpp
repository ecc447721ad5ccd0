#include "cpu/onednn.h"

#include <omp.h>
#include <xmmintrin.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace nmt::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// One engine and stream per thread, as oneDNN recommends for CPU.
struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

Context& ctx() {
  thread_local Context c;
  return c;
}

// Cache key: the op and every number that shapes the primitive.
struct Key {
  static constexpr int kMax = 40;
  std::array<int64_t, kMax> v{};
  int n = 0;
  void add(int64_t x) {
    if (n == kMax) throw Error("primitive key overflow");
    v[n++] = x;
  }
  template <size_t N>
  void add(const std::array<int64_t, N>& a) {
    for (int64_t x : a) add(x);
  }
  bool operator==(const Key& o) const {
    return n == o.n && std::memcmp(v.data(), o.v.data(), n * sizeof(int64_t)) == 0;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < k.n; ++i) h = (h ^ static_cast<uint64_t>(k.v[i])) * 1099511628211ull;
    return h;
  }
};

// A built primitive with its argument memories; calls swap the data handles.
struct Entry {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  void set(int arg, const void* p) { args.at(arg).set_data_handle(const_cast<void*>(p)); }
  void run() { prim.execute(ctx().stream, args); }
};

thread_local std::unordered_map<Key, Entry, KeyHash> cache;
// Counted over all threads: translation workers build their own primitives.
std::atomic<int64_t> created{0};

int64_t bits(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i;
}

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

template <typename Build>
Entry& lookup(const Key& key, Build&& build) {
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  // Decoding sees one shape per (batch, length) pair; a long-running process
  // with very varied input could collect them without end, so start over
  // past a generous bound (rebuilding costs microseconds per primitive).
  constexpr size_t kMaxCached = 8192;
  if (cache.size() >= kMaxCached) cache.clear();
  Entry e;
  try {
    build(e);
  } catch (const dnnl::error& err) {
    throw Error(std::string("oneDNN could not build a primitive: ") + err.what());
  }
  ++created;
  return cache.emplace(key, std::move(e)).first->second;
}

memory mem(const memory::desc& d) { return memory(d, ctx().engine, DNNL_MEMORY_NONE); }

}  // namespace

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

std::string backend_version() {
  const dnnl_version_t* v = dnnl_version();
  std::string isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2:
      isa = "avx2";
      break;
    case dnnl::cpu_isa::avx512_core:
      isa = "avx512_core";
      break;
    case dnnl::cpu_isa::avx512_core_vnni:
      isa = "avx512_core_vnni";
      break;
    case dnnl::cpu_isa::avx512_core_bf16:
      isa = "avx512_core_bf16";
      break;
    case dnnl::cpu_isa::avx512_core_amx:
      isa = "avx512_core_amx";
      break;
    default:
      isa = "other";
      break;
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (ISA " + isa + ")";
}

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
  key.add(attr.accumulate * 1 + (attr.bias != nullptr) * 2 + attr.relu * 4);

  Entry& e = lookup(key, [&](Entry& e) {
    auto a_md = md4(a.dims, a.strides);
    auto b_md = md4(b.dims, b.strides);
    auto c_md = md4(dst.dims, dst.strides);
    memory::desc bias_md;
    if (attr.bias) bias_md = md_dense({1, 1, 1, dst.dims[3]});
    dnnl::primitive_attr pa;
    if (attr.alpha != 1.f) pa.set_output_scales(0, {attr.alpha});
    dnnl::post_ops ops;
    if (attr.relu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    if (attr.accumulate) ops.append_sum(1.f);
    pa.set_post_ops(ops);
    dnnl::matmul::desc d = attr.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                                     : dnnl::matmul::desc(a_md, b_md, c_md);
    dnnl::matmul::primitive_desc pd(d, pa, ctx().engine);
    e.prim = dnnl::matmul(pd);
    e.args.emplace(DNNL_ARG_SRC, mem(a_md));
    e.args.emplace(DNNL_ARG_WEIGHTS, mem(b_md));
    e.args.emplace(DNNL_ARG_DST, mem(c_md));
    if (attr.bias) e.args.emplace(DNNL_ARG_BIAS, mem(bias_md));
  });
  e.set(DNNL_ARG_SRC, a.ptr);
  e.set(DNNL_ARG_WEIGHTS, b.ptr);
  e.set(DNNL_ARG_DST, dst.ptr);
  if (attr.bias) e.set(DNNL_ARG_BIAS, attr.bias);
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
