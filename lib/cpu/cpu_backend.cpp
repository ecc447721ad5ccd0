// The CPU backend: oneDNN primitives for the GEMMs, softmax and layer norm
// (cpu/onednn), OpenMP loops for the rest (cpu/loops), 64-byte aligned host
// memory.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/backend.h"
#include "core/error.h"
#include "kernels/row_ops.h"
#include "cpu/loops.h"
#include "cpu/numerics.h"
#include "cpu/onednn.h"
#include "cpu/prepared_weight.h"

namespace nmt {

namespace {

const char* const kF32Operands =
    "the CPU's products take f32 operands ({compute_type} bf16 rounds them to bf16 inside "
    "the product)";

constexpr int64_t kLoopSoftmaxCols = 1024;

// Blocks of 64 KB and more are mappings of their own, so that one that
// grows keeps the pages it has: mremap moves them into the larger block. A
// decoding state's caches and activations grow as a file's batches widen;
// from malloc, each growth handed back every page and touched new ones, at
// a page fault each (about 9-15 us in a paravirtualised guest), and the
// blocks it left behind grew each worker's heap: from 1 MB on, a quarter of
// the faults of an int8 translation of test_2016_flickr went; from 64 KB
// on, another 8% (31K to 28.5K faults, 126 to 116 MB resident; f32 39K to
// 34K). Training allocates its blocks once.
constexpr size_t kMapped = size_t{64} << 10;

// A block made zeroed (alloc_zeroed: Tensor's constructor, for a model's
// parameters, training's gradients and moments) is used whole: from 2 MB
// on, its mapping is advised to take huge pages (where the system's
// transparent huge pages are "madvise"), one fault per 2 MB instead of 512,
// and it needs no memset (a new mapping reads as zeros). Loading
// the Multi30k transformer-small in f32 took 0.05 s instead of 0.18 s
// (1.5K page faults instead of 8.9K). Mappings that grow as they are
// used, as a decoding state's caches do, are not advised: there huge
// pages would hold memory never touched.
constexpr size_t kHuge = size_t{2} << 20;

class Mappings {
 public:
  // A new mapping (zeros), with huge pages where `dense`: the whole of it,
  // since advice for a part would split it in two, and mremap moves one
  // mapping only.
  void* map(size_t bytes, bool dense) {
    const size_t len = pages(bytes);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
    if (dense) madvise(p, len, MADV_HUGEPAGE);
    std::lock_guard<std::mutex> lock(mu_);
    len_[p] = len;
    return p;
  }
  // False if p is not a mapping of this allocator.
  bool unmap(void* p) {
    if (reinterpret_cast<uintptr_t>(p) % pages(1) != 0) return false;  // from malloc
    size_t len = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = len_.find(p);
      if (it == len_.end()) return false;
      len = it->second;
      len_.erase(it);
    }
    munmap(p, len);
    return true;
  }
  // p's pages in a mapping of `bytes`, or null if p is not a mapping (or
  // the system refuses: the caller then allocates anew).
  void* remap(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = len_.find(p);
    if (it == len_.end()) return nullptr;
    const size_t len = pages(bytes);
    void* q = mremap(p, it->second, len, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) return nullptr;
    len_.erase(it);
    len_[q] = len;
    return q;
  }

 private:
  static size_t pages(size_t bytes) {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
  }
  std::mutex mu_;
  std::unordered_map<void*, size_t> len_;
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  std::string version() const override { return cpu::backend_version(); }
  std::string numerics() const override { return cpu::describe(cpu::numerics()); }
  void set_num_threads(int n) override { cpu::set_num_threads(n); }
  int num_threads() const override { return cpu::num_threads(); }
  int64_t primitives_created() const override { return cpu::primitives_created(); }

  void* alloc(size_t bytes) override {
    if (bytes >= kMapped) return mappings_.map(bytes, /*dense=*/false);
    // 64 bytes: one cache line, and AVX-512 loads.
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void free(void* p) override {
    if (!mappings_.unmap(p)) std::free(p);
  }
  void* alloc_zeroed(size_t bytes) override {
    if (bytes >= kMapped) return mappings_.map(bytes, /*dense=*/bytes >= kHuge);
    return Backend::alloc_zeroed(bytes);
  }
  void* regrow(void* p, size_t bytes) override {
    if (bytes >= kMapped)
      if (void* q = mappings_.remap(p, bytes)) return q;
    free(p);
    return alloc(bytes);
  }
  void to_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void from_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void zero(void* p, size_t n) override { std::memset(p, 0, n); }
  void copy_rows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                 int64_t len) override {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * dst_ld, src + r * src_ld, static_cast<size_t>(len) * sizeof(float));
  }
  void copy_rows_bf16(const float* src, int64_t src_ld, uint16_t* dst, int64_t dst_ld, int64_t rows,
                      int64_t len) override {
    cpu::rows_to_bf16(src, src_ld, dst, dst_ld, rows, len);
  }
  void gather_rows(const void* src, int64_t src_ld, const int64_t* idx, int64_t n, int64_t len,
                   void* dst, int64_t dst_ld, const int64_t* dst_idx) override {
    cpu::loops().gather_rows(src, src_ld, idx, n, len, dst, dst_ld, dst_idx);
  }

  void gemm(const MatDesc& a, const MatDesc& b, const MatDesc& dst, const GemmAttr& attr) override {
    if (a.dtype != DType::F32 || b.dtype != DType::F32 || dst.dtype != DType::F32)
      throw Error(kF32Operands);
    if (attr.varying_shape)
      cpu::gemm_runtime(a, b, dst, attr);
    else if (attr.compute == ComputeType::BF16)
      cpu::gemm_bf16(a, b, dst, attr);
    else
      cpu::gemm(a, b, dst, attr);
  }
  void linear_backward(const MatDesc& dy, const MatDesc& w, const MatDesc& x, const MatDesc* dx,
                       bool accumulate_dx, const MatDesc& dw, float* db,
                       ComputeType compute) override {
    if (compute == ComputeType::BF16)
      cpu::linear_backward_bf16(dy, w, x, dx, accumulate_dx, dw, db);
    else
      Backend::linear_backward(dy, w, x, dx, accumulate_dx, dw, db, compute);
  }
  std::shared_ptr<PreparedWeight> prepare_weight(const WeightSource& w,
                                                 std::shared_ptr<PreparedWeight> reuse) override {
    return cpu::prepare_weight(w, std::move(reuse));
  }
  void gemm_prepared(const MatDesc& a, const PreparedWeight& w, const MatDesc& dst,
                     const float* bias, Activation act) override {
    if (a.dtype != DType::F32 || dst.dtype != DType::F32) throw Error(kF32Operands);
    cpu::gemm_prepared(a, w, dst, bias, act);
  }
  std::string unsupported(Op op, ComputeType t) const override {
    if (op == Op::GemmBf16Operands) return kF32Operands;
    const bool products = op == Op::Gemm || op == Op::LinearBackward;
    if (products && t == ComputeType::BF16 && !cpu::has_bf16())
      return "bf16 needs a CPU with AVX512-BF16 or AMX; this one has " + cpu::isa_name();
    return "";
  }
  void softmax(const float* src, float* dst, int64_t rows, int64_t cols, bool log) override {
    // oneDNN's kernel for vocabulary-wide rows (a primitive per row count,
    // which stays bounded); loops for attention's short, ever-changing rows.
    if (!log && cols <= kLoopSoftmaxCols)
      cpu::loops().softmax_rows(src, dst, rows, cols);
    else
      cpu::softmax(src, dst, rows, cols, log);
  }
  void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                        int64_t cols) override {
    cpu::softmax_backward(y, dy, dx, rows, cols);
  }
  void add_mask(float* scores, const std::array<int64_t, 4>& dims, const float* mask,
                const std::array<int64_t, 4>& mask_dims) override {
    cpu::loops().add_mask(scores, dims, mask, mask_dims);
  }
  void attend(const MatDesc& q, const MatDesc& k, const MatDesc& v, const float* mask, float scale,
              const MatDesc& ctx) override {
    cpu::loops().attend(q, k, v, mask, scale, ctx);
  }
  void padding_mask(const int32_t* ids, int64_t n, int32_t pad, float* mask) override {
    for (int64_t i = 0; i < n; ++i) mask[i] = ids[i] == pad ? kMask : 0.f;
  }
  void causal_mask(int64_t T, float* mask) override {
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) mask[i * T + j] = j > i ? kMask : 0.f;
  }
  void layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                  float* var, int64_t rows, int64_t D, float eps) override {
    if (mean)
      cpu::layer_norm(x, y, gamma, beta, mean, var, rows, D, eps, true);
    else
      cpu::loops().layer_norm_rows(x, y, gamma, beta, rows, D, eps);
  }
  void add_layer_norm(const float* x, const float* a, const float* gamma, const float* beta,
                      float* sum, float* y, int64_t rows, int64_t D, float eps) override {
    cpu::loops().add_layer_norm_rows(x, a, gamma, beta, sum, y, rows, D, eps);
  }
  void layer_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                           const float* var, float* dx, float* dgamma, float* dbeta, int64_t rows,
                           int64_t D, float eps) override {
    cpu::layer_norm_backward(x, dy, gamma, mean, var, dx, dgamma, dbeta, rows, D, eps);
  }

  void add(const float* a, const float* b, float* dst, int64_t n) override {
    cpu::loops().add(a, b, dst, n);
  }
  void add_inplace(float* dst, const float* src, int64_t n) override {
    cpu::loops().add_inplace(dst, src, n);
  }
  void scale(float* x, int64_t n, float s) override { cpu::loops().scale(x, n, s); }
  void dropout(float* x, int64_t n, float p, uint64_t seed) override {
    cpu::loops().dropout(x, n, p, seed);
  }
  void activate(const float* x, float* y, int64_t n, Activation act) override {
    cpu::loops().activate(x, y, n, act);
  }
  void activation_backward(const float* x, float* dy, int64_t n, Activation act) override {
    cpu::loops().activation_backward(x, dy, n, act);
  }
  void add_column_sums(const float* src, float* dst, int64_t rows, int64_t cols) override {
    cpu::loops().add_column_sums(src, dst, rows, cols);
  }
  void log_add_exp(float* dst, const float* src, int64_t n) override {
    cpu::loops().log_add_exp(dst, src, n);
  }
  void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t D, float scale,
                 const float* positions, int64_t pos0, int64_t T, float* out) override {
    cpu::loops().embedding(table, tokens, n, D, scale, positions, pos0, T, out);
  }
  void embedding_s8(const int8_t* table, const float* row_scales, const int32_t* tokens, int64_t n,
                    int64_t D, float scale, const float* positions, int64_t pos0, int64_t T,
                    float* out) override {
    cpu::loops().embedding_s8(table, row_scales, tokens, n, D, scale, positions, pos0, T, out);
  }
  void embedding_backward(const int32_t* tokens, int64_t n, int64_t D, float scale, const float* dy,
                          float* dtable, float* dpositions, int64_t T) override {
    cpu::loops().embedding_backward(tokens, n, D, scale, dy, dtable, dpositions, T);
  }
  void xent(const float* logits, const int32_t* targets, int64_t N, int64_t V, float eps,
            int32_t pad, float* dlogits, float grad_scale, double* totals) override {
    const XentRow t = cpu::loops().xent(logits, targets, N, V, eps, pad, dlogits, grad_scale);
    totals[0] += t.loss;
    totals[1] += t.nll;
    totals[2] += static_cast<double>(t.tokens);
  }
  void adam(float* p, const float* g, float* m, float* v, int64_t n, float beta1, float beta2,
            float step, float inv_sqrt_c2, float eps, const double* clip_sumsq,
            double clip_norm) override {
    cpu::loops().adam(p, g, m, v, n, beta1, beta2, step, inv_sqrt_c2, eps,
              clip_scale(clip_sumsq ? *clip_sumsq : 0.0, clip_norm));
  }
  void sum_squares(const float* x, int64_t n, double* out) override {
    *out = cpu::loops().sum_squares(x, n);
  }
  void pick(const float* x, int64_t N, int64_t V, const int32_t* cols, float* out) override {
    for (int64_t i = 0; i < N; ++i) out[i] = cols[i] < 0 ? 0.f : x[i * V + cols[i]];
  }
  void sample_tokens(const float* logits, int64_t V, const int64_t* rows, int64_t n,
                     float temperature, int64_t top_k, float top_p, const double* u,
                     const int32_t* forced, const int32_t* banned, int64_t n_banned, int32_t* ids,
                     float* lp) override {
    cpu::loops().sample_tokens(logits, V, rows, n, temperature, top_k, top_p, u, forced, banned, n_banned,
                       ids, lp);
  }
  void topk_log_softmax(const float* logits, const double* base, int64_t rows, int64_t V, int64_t k,
                        const int32_t* banned, int64_t n_banned, const int32_t* cols,
                        int64_t n_cols, double* values, int32_t* indices, float* col_lp,
                        const ColumnGroups* allowed) override {
    cpu::loops().topk_log_softmax(logits, base, rows, V, k, banned, n_banned, cols, n_cols, values, indices,
                          col_lp, allowed);
  }

 private:
  Mappings mappings_;
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace nmt
