// A stand-in for a GPU that any CI machine has: the CPU backend's arithmetic
// on memory that the host cannot touch. Its allocations come from one
// reserved region that stays PROT_NONE except while one of its own calls
// runs, so code above the seam that reads or writes a device tensor's memory
// directly crashes here as it would misbehave on a GPU; and every call
// checks that its device pointers lie in the region and its host pointers
// outside it. Installed for Device::CUDA (install_backend_for_testing), it
// lets the placement of weights, gradients, optimiser state, activations and
// decoding state be tested end to end without a GPU. Calls are serialised.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/error.h"

namespace nmt::test {

class GuardedDevice final : public Backend {
 public:
  GuardedDevice() : cpu_(cpu_backend()) {
    void* p = mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw Error("guarded device: cannot reserve its memory");
    base_ = static_cast<char*>(p);
  }
  ~GuardedDevice() override { munmap(base_, kReserve); }
  GuardedDevice(const GuardedDevice&) = delete;
  GuardedDevice& operator=(const GuardedDevice&) = delete;

  Device device() const override { return Device::CUDA; }
  std::string version() const override { return "guarded host memory (a test stand-in)"; }
  std::string numerics() const override { return cpu_.numerics(); }
  void set_num_threads(int n) override { cpu_.set_num_threads(n); }
  int num_threads() const override { return cpu_.num_threads(); }
  int64_t primitives_created() const override { return cpu_.primitives_created(); }
  // Calls made so far, and bytes handed out (a test may require that a
  // path ran here at all).
  int64_t calls() const { return calls_; }
  int64_t bytes_used() const { return static_cast<int64_t>(used_); }

  void* alloc(size_t bytes) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    const size_t n = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    auto it = free_.find(n);
    if (it != free_.end() && !it->second.empty()) {
      char* p = it->second.back();
      it->second.pop_back();
      sizes_[p] = n;
      return p;
    }
    if (used_ + n > kReserve) throw Error("guarded device: out of its reserved memory");
    char* p = base_ + used_;
    used_ += n;
    sizes_[p] = n;
    return p;
  }
  void free(void* p) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    auto it = sizes_.find(static_cast<char*>(p));
    if (it == sizes_.end()) throw Error("guarded device: free of memory it did not allocate");
    free_[it->second].push_back(it->first);
    sizes_.erase(it);
  }
  void to_host(void* dst, const void* src, size_t n) override {
    Open o(*this, "to_host", {src}, {dst});
    cpu_.to_host(dst, src, n);
  }
  void from_host(void* dst, const void* src, size_t n) override {
    Open o(*this, "from_host", {dst}, {src});
    cpu_.from_host(dst, src, n);
  }
  void copy(void* dst, const void* src, size_t n) override {
    Open o(*this, "copy", {dst, src});
    cpu_.copy(dst, src, n);
  }
  void zero(void* p, size_t n) override {
    Open o(*this, "zero", {p});
    cpu_.zero(p, n);
  }
  void copy_rows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                 int64_t len) override {
    Open o(*this, "copy_rows", {src, dst});
    cpu_.copy_rows(src, src_ld, dst, dst_ld, rows, len);
  }
  void copy_rows_bf16(const float* src, int64_t src_ld, uint16_t* dst, int64_t dst_ld, int64_t rows,
                      int64_t len) override {
    Open o(*this, "copy_rows_bf16", {src, dst});
    cpu_.copy_rows_bf16(src, src_ld, dst, dst_ld, rows, len);
  }
  void gather_rows(const void* src, int64_t src_ld, const int64_t* idx, int64_t n, int64_t len,
                   void* dst, int64_t dst_ld, const int64_t* dst_idx) override {
    Open o(*this, "gather_rows", {src, dst, idx, dst_idx});
    cpu_.gather_rows(src, src_ld, idx, n, len, dst, dst_ld, dst_idx);
  }
  void gemm(const MatDesc& a, const MatDesc& b, const MatDesc& dst,
            const GemmAttr& attr) override {
    Open o(*this, "gemm", {a.ptr, b.ptr, dst.ptr, attr.bias});
    cpu_.gemm(a, b, dst, attr);
  }
  void linear_backward(const MatDesc& dy, const MatDesc& w, const MatDesc& x, const MatDesc* dx,
                       bool accumulate_dx, const MatDesc& dw, float* db,
                       ComputeType compute) override {
    Open o(*this, "linear_backward", {dy.ptr, w.ptr, x.ptr, dx ? dx->ptr : nullptr, dw.ptr, db});
    cpu_.linear_backward(dy, w, x, dx, accumulate_dx, dw, db, compute);
  }
  std::shared_ptr<PreparedWeight> prepare_weight(const WeightSource& w,
                                                 std::shared_ptr<PreparedWeight> reuse) override {
    Open o(*this, "prepare_weight", {w.b.ptr, w.s8, w.scales});
    return cpu_.prepare_weight(w, std::move(reuse));
  }
  void gemm_prepared(const MatDesc& a, const PreparedWeight& w, const MatDesc& dst,
                     const float* bias, Activation act) override {
    Open o(*this, "gemm_prepared", {a.ptr, dst.ptr, bias});
    cpu_.gemm_prepared(a, w, dst, bias, act);
  }
  std::string unsupported(Op op, ComputeType t) const override {
    if (t == ComputeType::INT8 && (op == Op::Gemm || op == Op::Embedding))
      return "int8 is held on the CPU only";
    auto it = lacking.find(op);
    if (it != lacking.end()) return it->second;
    return cpu_.unsupported(op, t);
  }
  // Tests of the capability query: ops this device claims to lack, and why.
  std::map<Op, std::string> lacking;

  void softmax(const float* src, float* dst, int64_t rows, int64_t cols, bool log) override {
    Open o(*this, "softmax", {src, dst});
    cpu_.softmax(src, dst, rows, cols, log);
  }
  void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                        int64_t cols) override {
    Open o(*this, "softmax_backward", {y, dy, dx});
    cpu_.softmax_backward(y, dy, dx, rows, cols);
  }
  void add_mask(float* scores, const std::array<int64_t, 4>& dims, const float* mask,
                const std::array<int64_t, 4>& mask_dims) override {
    Open o(*this, "add_mask", {scores, mask});
    cpu_.add_mask(scores, dims, mask, mask_dims);
  }
  void attend(const MatDesc& q, const MatDesc& k, const MatDesc& v, const float* mask, float scale,
              const MatDesc& ctx) override {
    Open o(*this, "attend", {q.ptr, k.ptr, v.ptr, mask, ctx.ptr});
    cpu_.attend(q, k, v, mask, scale, ctx);
  }
  void padding_mask(const int32_t* ids, int64_t n, int32_t pad, float* mask) override {
    Open o(*this, "padding_mask", {ids, mask});
    cpu_.padding_mask(ids, n, pad, mask);
  }
  void causal_mask(int64_t T, float* mask) override {
    Open o(*this, "causal_mask", {mask});
    cpu_.causal_mask(T, mask);
  }
  void layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                  float* var, int64_t rows, int64_t D, float eps) override {
    Open o(*this, "layer_norm", {x, gamma, beta, y, mean, var});
    cpu_.layer_norm(x, gamma, beta, y, mean, var, rows, D, eps);
  }
  void add_layer_norm(const float* x, const float* a, const float* gamma, const float* beta,
                      float* sum, float* y, int64_t rows, int64_t D, float eps) override {
    Open o(*this, "add_layer_norm", {x, a, gamma, beta, sum, y});
    cpu_.add_layer_norm(x, a, gamma, beta, sum, y, rows, D, eps);
  }
  void layer_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                           const float* var, float* dx, float* dgamma, float* dbeta, int64_t rows,
                           int64_t D, float eps) override {
    Open o(*this, "layer_norm_backward", {x, dy, gamma, mean, var, dx, dgamma, dbeta});
    cpu_.layer_norm_backward(x, dy, gamma, mean, var, dx, dgamma, dbeta, rows, D, eps);
  }
  void add(const float* a, const float* b, float* dst, int64_t n) override {
    Open o(*this, "add", {a, b, dst});
    cpu_.add(a, b, dst, n);
  }
  void add_inplace(float* dst, const float* src, int64_t n) override {
    Open o(*this, "add_inplace", {dst, src});
    cpu_.add_inplace(dst, src, n);
  }
  void scale(float* x, int64_t n, float s) override {
    Open o(*this, "scale", {x});
    cpu_.scale(x, n, s);
  }
  void dropout(float* x, int64_t n, float p, uint64_t seed) override {
    Open o(*this, "dropout", {x});
    cpu_.dropout(x, n, p, seed);
  }
  void activate(const float* x, float* y, int64_t n, Activation act) override {
    Open o(*this, "activate", {x, y});
    cpu_.activate(x, y, n, act);
  }
  void activation_backward(const float* x, float* dy, int64_t n, Activation act) override {
    Open o(*this, "activation_backward", {x, dy});
    cpu_.activation_backward(x, dy, n, act);
  }
  void add_column_sums(const float* src, float* dst, int64_t rows, int64_t cols) override {
    Open o(*this, "add_column_sums", {src, dst});
    cpu_.add_column_sums(src, dst, rows, cols);
  }
  void log_add_exp(float* dst, const float* src, int64_t n) override {
    Open o(*this, "log_add_exp", {dst, src});
    cpu_.log_add_exp(dst, src, n);
  }
  void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t D, float scale,
                 const float* positions, int64_t pos0, int64_t T, float* out) override {
    Open o(*this, "embedding", {table, tokens, positions, out});
    cpu_.embedding(table, tokens, n, D, scale, positions, pos0, T, out);
  }
  void embedding_s8(const int8_t* table, const float* row_scales, const int32_t* tokens, int64_t n,
                    int64_t D, float scale, const float* positions, int64_t pos0, int64_t T,
                    float* out) override {
    Open o(*this, "embedding_s8", {table, row_scales, tokens, positions, out});
    cpu_.embedding_s8(table, row_scales, tokens, n, D, scale, positions, pos0, T, out);
  }
  void embedding_backward(const int32_t* tokens, int64_t n, int64_t D, float scale,
                          const float* dy, float* dtable, float* dpositions, int64_t T) override {
    Open o(*this, "embedding_backward", {tokens, dy, dtable, dpositions});
    cpu_.embedding_backward(tokens, n, D, scale, dy, dtable, dpositions, T);
  }
  void xent(const float* logits, const int32_t* targets, int64_t N, int64_t V, float eps,
            int32_t pad, float* dlogits, float grad_scale, double* totals) override {
    Open o(*this, "xent", {logits, targets, dlogits, totals});
    cpu_.xent(logits, targets, N, V, eps, pad, dlogits, grad_scale, totals);
  }
  void adam(float* p, const float* g, float* m, float* v, int64_t n, float beta1, float beta2,
            float step, float inv_sqrt_c2, float eps, const double* clip_sumsq,
            double clip_norm) override {
    Open o(*this, "adam", {p, g, m, v, clip_sumsq});
    cpu_.adam(p, g, m, v, n, beta1, beta2, step, inv_sqrt_c2, eps, clip_sumsq, clip_norm);
  }
  void sum_squares(const float* x, int64_t n, double* out) override {
    Open o(*this, "sum_squares", {x, out});
    cpu_.sum_squares(x, n, out);
  }
  void pick(const float* x, int64_t N, int64_t V, const int32_t* host_cols,
            float* host_out) override {
    Open o(*this, "pick", {x}, {host_cols, host_out});
    cpu_.pick(x, N, V, host_cols, host_out);
  }
  void sample_tokens(const float* logits, int64_t V, const int64_t* rows, int64_t n,
                     float temperature, int64_t top_k, float top_p, const double* u,
                     const int32_t* forced, const int32_t* banned, int64_t n_banned, int32_t* ids,
                     float* lp) override {
    Open o(*this, "sample_tokens", {logits}, {rows, u, forced, banned, ids, lp});
    cpu_.sample_tokens(logits, V, rows, n, temperature, top_k, top_p, u, forced, banned, n_banned,
                       ids, lp);
  }
  void topk_log_softmax(const float* logits, const double* base, int64_t rows, int64_t V, int64_t k,
                        const int32_t* banned, int64_t n_banned, const int32_t* cols,
                        int64_t n_cols, double* values, int32_t* indices, float* col_lp,
                        const ColumnGroups* allowed) override {
    Open o(*this, "topk_log_softmax", {logits},
           {base, banned, cols, values, indices, col_lp, allowed ? allowed->offsets : nullptr,
            allowed ? allowed->cols : nullptr});
    cpu_.topk_log_softmax(logits, base, rows, V, k, banned, n_banned, cols, n_cols, values, indices,
                          col_lp, allowed);
  }

 private:
  static constexpr size_t kReserve = size_t{64} << 30;  // address space, not memory

  bool inside(const void* p) const {
    const char* c = static_cast<const char*>(p);
    return c >= base_ && c < base_ + used_;
  }

  // One call: checks its pointers, then opens the region for its duration.
  class Open {
   public:
    Open(GuardedDevice& d, const char* op, std::initializer_list<const void*> device_ptrs,
         std::initializer_list<const void*> host_ptrs = {})
        : d_(d), lock_(d.mu_) {
      for (const void* p : device_ptrs)
        if (p && !d.inside(p))
          throw Error(std::string("guarded device: ") + op +
                      " was given host memory where device memory belongs");
      for (const void* p : host_ptrs)
        if (p && d.inside(p))
          throw Error(std::string("guarded device: ") + op +
                      " was given device memory where host memory belongs");
      ++d.calls_;
      if (d.depth_++ == 0) d.protect(PROT_READ | PROT_WRITE);
    }
    ~Open() {
      if (--d_.depth_ == 0) d_.protect(PROT_NONE);
    }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    GuardedDevice& d_;
    std::lock_guard<std::recursive_mutex> lock_;
  };

  void protect(int prot) {
    const size_t page = 4096, n = (used_ + page - 1) / page * page;
    if (n && mprotect(base_, n, prot) != 0) throw Error("guarded device: mprotect failed");
  }

  Backend& cpu_;
  char* base_ = nullptr;
  size_t used_ = 0;
  std::map<size_t, std::vector<char*>> free_;  // by size, for reuse
  std::map<char*, size_t> sizes_;
  std::recursive_mutex mu_;
  int depth_ = 0;
  int64_t calls_ = 0;
};

// Installs a GuardedDevice as the CUDA device for one scope.
class GuardedDeviceScope {
 public:
  GuardedDeviceScope() { install_backend_for_testing(Device::CUDA, &device_); }
  ~GuardedDeviceScope() { install_backend_for_testing(Device::CUDA, nullptr); }
  GuardedDevice& device() { return device_; }

 private:
  GuardedDevice device_;
};

}  // namespace nmt::test
