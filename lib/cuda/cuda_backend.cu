// The CUDA backend behind core/backend.h: device memory, cuBLAS GEMMs,
// element-wise kernels, and row-wise ones around core/row_ops.h and
// core/decode_ops.h (whose arithmetic the host tests check without a GPU).
// Ops that have no CUDA kernel yet say so by name rather than compute
// something else; ops::device tests (tests/backend_ops) check every
// implemented one against the reference where a GPU exists.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "core/backend.h"
#include "core/decode_ops.h"
#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/row_ops.h"

#define CUDA_CHECK(expr)                                                               \
  do {                                                                                 \
    const cudaError_t err_ = (expr);                                                   \
    if (err_ != cudaSuccess)                                                           \
      throw ::nmt::Error(std::string(#expr) + " failed: " + cudaGetErrorString(err_)); \
  } while (0)

#define CUBLAS_CHECK(expr)                                                               \
  do {                                                                                   \
    const cublasStatus_t st_ = (expr);                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                    \
      throw ::nmt::Error(std::string(#expr) + " failed: " + cublasGetStatusString(st_)); \
  } while (0)

namespace nmt {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

void check_launch() { CUDA_CHECK(cudaGetLastError()); }

// "CUDA 13.0 (runtime 13.0, 1 device)": what `nmt --version` prints.
std::string build_info() {
  int runtime = 0, devices = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  return "CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10) + " (runtime " + std::to_string(runtime / 1000) +
         "." + std::to_string(runtime % 1000 / 10) + ", " + std::to_string(devices) + " device" +
         (devices == 1 ? "" : "s") + ")";
}

__global__ void add_kernel(const float* a, const float* b, float* dst, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] = a[i] + b[i];
}

__global__ void add_inplace_kernel(float* dst, const float* src, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] += src[i];
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= s;
}

__global__ void dropout_kernel(float* x, int64_t n, uint64_t seed, uint32_t threshold, float keep) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = dropout_value(x[i], seed, static_cast<uint64_t>(i), threshold, keep);
}

__global__ void log_add_exp_kernel(float* dst, const float* src, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float a = dst[i], b = src[i], hi = fmaxf(a, b), lo = fminf(a, b);
  dst[i] = lo == -INFINITY ? hi : hi + log1pf(expf(lo - hi));
}

__global__ void activate_kernel(const float* x, float* y, int64_t n, Activation act) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = activate(act, x[i]);
}

__global__ void activation_backward_kernel(const float* x, float* dy, int64_t n, Activation act) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) dy[i] *= activate_derivative(act, x[i]);
}

__global__ void padding_mask_kernel(const int32_t* ids, int64_t n, int32_t pad, float* mask) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) mask[i] = ids[i] == pad ? -1e9f : 0.f;
}

__global__ void causal_mask_kernel(int64_t T, float* mask) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < T * T) mask[i] = (i % T) > (i / T) ? -1e9f : 0.f;
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, float b1,
                            float b2, float step, float inv_sqrt_c2, float eps) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  m[i] = b1 * m[i] + (1.f - b1) * g[i];
  v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
  p[i] -= step * m[i] / (sqrtf(v[i]) * inv_sqrt_c2 + eps);
}

// One thread per column, rows in order: the same sums as the CPU's loop.
__global__ void column_sums_kernel(const float* src, float* dst, int64_t rows, int64_t cols) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= cols) return;
  float s = 0.f;
  for (int64_t i = 0; i < rows; ++i) s += src[i * cols + j];
  dst[j] += s;
}

__global__ void embedding_kernel(const float* table, const int32_t* tokens, int64_t n, int64_t D,
                                 float scale, const float* positions, int64_t pos0, int64_t T,
                                 float* out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n * D) return;
  const int64_t r = i / D, d = i % D;
  const float e = tokens[r] < 0 ? 0.f : table[int64_t(tokens[r]) * D + d] * scale;
  out[i] = e + positions[(pos0 + r % T) * D + d];
}

// The row-wise ops: the arithmetic is core/row_ops.h's, shared with the host
// tests. One thread per row (grid-stride) for now: simple and deterministic,
// but a long row runs serially on one thread and a warp's loads are strided
// by a row. The next step is a block per row with a CUB block reduction
// (cub/block/block_reduce.cuh) over a fixed shape, so results stay
// independent of the launch.
#define NMT_GRID_STRIDE(i, n)                                               \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

__global__ void softmax_kernel(const float* src, float* dst, int64_t rows, int64_t cols, bool log) {
  NMT_GRID_STRIDE(r, rows) softmax_row(src + r * cols, dst + r * cols, cols, log);
}

__global__ void softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t rows,
                                        int64_t cols) {
  NMT_GRID_STRIDE(r, rows) softmax_backward_row(y + r * cols, dy + r * cols, dx + r * cols, cols);
}

__global__ void log_softmax_backward_kernel(const float* y, const float* dy, float* dx,
                                            int64_t rows, int64_t cols) {
  NMT_GRID_STRIDE(r, rows) {
    log_softmax_backward_row(y + r * cols, dy + r * cols, dx + r * cols, cols);
  }
}

// One thread per score: consecutive threads read consecutive scores.
__global__ void add_mask_kernel(float* scores, int64_t n, const float* mask, MaskBroadcast m) {
  NMT_GRID_STRIDE(i, n) scores[i] += mask[mask_index(m, i)];
}

__global__ void layer_norm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                  float* mean, float* var, int64_t rows, int64_t D, float eps) {
  NMT_GRID_STRIDE(r, rows) {
    layer_norm_row(x + r * D, gamma, beta, y + r * D, mean ? mean + r : nullptr,
                   var ? var + r : nullptr, D, eps);
  }
}

__global__ void layer_norm_dx_kernel(const float* x, const float* dy, const float* gamma,
                                     const float* mean, const float* var, float* dx, int64_t rows,
                                     int64_t D, float eps) {
  NMT_GRID_STRIDE(r, rows) {
    layer_norm_backward_row(x + r * D, dy + r * D, gamma, mean[r], var[r], dx + r * D, D, eps);
  }
}

// One thread per column, rows in order: no atomics, and a fixed order.
__global__ void layer_norm_params_kernel(const float* x, const float* dy, const float* mean,
                                         const float* var, int64_t rows, int64_t D, float eps,
                                         float* dgamma, float* dbeta) {
  NMT_GRID_STRIDE(i, D) {
    layer_norm_param_grads_col(x, dy, mean, var, rows, D, eps, i, dgamma, dbeta);
  }
}

// One thread per column of D: a repeated token's rows are added by the one
// thread that owns the column, in row order, and a warp's writes coalesce.
__global__ void embedding_backward_kernel(const int32_t* tokens, int64_t n, int64_t D, float scale,
                                          const float* dy, float* dtable, float* dpositions,
                                          int64_t T) {
  NMT_GRID_STRIDE(i, D) {
    embedding_backward_cols(tokens, n, D, scale, dy, dtable, dpositions, T, i, i + 1);
  }
}

__global__ void xent_kernel(const float* logits, const int32_t* targets, int64_t N, int64_t V,
                            float eps, int32_t pad, float* dlogits, float grad_scale,
                            XentRow* rows) {
  NMT_GRID_STRIDE(r, N) {
    rows[r] = xent_row(logits + r * V, targets[r], pad, V, eps, dlogits ? dlogits + r * V : nullptr,
                       grad_scale);
  }
}

// The totals on one thread, in row order: the same sums on every launch.
__global__ void xent_sum_kernel(const XentRow* rows, int64_t N, XentRow* total) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *total = xent_sum(rows, N);
}

__global__ void sum_squares_kernel(const float* x, int64_t n, int64_t chunks, double* parts) {
  NMT_GRID_STRIDE(c, chunks) parts[c] = sum_squares_chunk(x, n, c);
}

__global__ void sum_in_order_kernel(const double* parts, int64_t n, double* total) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *total = sum_in_order(parts, n);
}

__global__ void pick_kernel(const float* x, int64_t N, int64_t V, const int32_t* cols, float* out) {
  NMT_GRID_STRIDE(i, N) out[i] = pick_value(x + i * V, cols[i]);
}

// Decoding's ops (core/decode_ops.h), one thread per query row or output
// row, like the row-wise ops: the same single-threaded order as the host
// tests check, whatever the launch.
__global__ void attend_kernel(const float* q, const float* k, const float* v, const float* mask,
                              float scale, float* ctx, AttendShape a, float* scores) {
  NMT_GRID_STRIDE(i, a.B * a.H * a.M) {
    attend_row(q, k, v, mask, scale, ctx, a, i, scores + i * a.L);
  }
}

__global__ void topk_log_softmax_kernel(const float* logits, const double* base, int64_t rows,
                                        int64_t V, int64_t k, const int32_t* banned,
                                        int64_t n_banned, const int32_t* cols, int64_t n_cols,
                                        double* values, int32_t* indices, float* col_lp) {
  NMT_GRID_STRIDE(r, rows) {
    topk_log_softmax_row(logits + r * V, base ? base[r] : 0.0, V, k, banned, n_banned,
                         cols + r * n_cols, n_cols, values + r * k, indices + r * k,
                         col_lp + r * n_cols);
  }
}

__global__ void sample_kernel(const float* logits, int64_t V, const int64_t* rows, int64_t n,
                              SampleParams p, const double* u, const int32_t* forced,
                              float* cand_val, int32_t* cand_id, int32_t* ids, float* lp) {
  NMT_GRID_STRIDE(i, n) {
    ids[i] = sample_row(logits + rows[i] * V, V, p, u[i], forced[i], cand_val + i * V,
                        cand_id + i * V, lp + i);
  }
}

#undef NMT_GRID_STRIDE

// Device memory for a call's partial results and small host transfers,
// kept per host thread and grown as needed. Every use but attend's ends in
// a synchronous copy back to the host before the call returns, so the next
// call may reuse it (attend's is stream-ordered: see there).
class Scratch {
 public:
  ~Scratch() {
    if (p_) cudaFree(p_);  // at exit the runtime may already be gone: nothing to report
  }
  void* get(size_t bytes) {
    if (bytes > cap_) {
      void* old = p_;
      p_ = nullptr, cap_ = 0;
      if (old) CUDA_CHECK(cudaFree(old));
      CUDA_CHECK(cudaMalloc(&p_, bytes));
      cap_ = bytes;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t cap_ = 0;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Offsets into the scratch buffer, each aligned for any element type.
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override {
    if (blas_) cublasDestroy(blas_);
  }
  Device device() const override { return Device::CUDA; }
  std::string version() const override { return build_info(); }
  void set_num_threads(int) override {}
  int num_threads() const override { return 1; }
  int64_t primitives_created() const override { return 0; }

  void* alloc(size_t bytes) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
  }
  void free(void* p) override {
    if (p) cudaFree(p);
  }
  void to_host(void* dst, const void* src, size_t n) override {
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
  }
  void from_host(void* dst, const void* src, size_t n) override {
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
  }
  void copy(void* dst, const void* src, size_t n) override {
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
  }
  void zero(void* p, size_t n) override { CUDA_CHECK(cudaMemset(p, 0, n)); }
  void copy_rows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                 int64_t len) override {
    CUDA_CHECK(cudaMemcpy2D(dst, dst_ld * sizeof(float), src, src_ld * sizeof(float),
                            len * sizeof(float), rows, cudaMemcpyDeviceToDevice));
  }
  void gather_rows(const void* src, int64_t src_ld, const int64_t* idx, int64_t n, int64_t len,
                   void* dst, int64_t dst_ld, const int64_t* dst_idx) override {
    const auto* from = static_cast<const char*>(src);
    auto* to = static_cast<char*>(dst);
    for (int64_t i = 0; i < n; ++i)
      CUDA_CHECK(cudaMemcpy(to + (dst_idx ? dst_idx[i] : i) * dst_ld, from + idx[i] * src_ld, len,
                            cudaMemcpyDeviceToDevice));
  }

  void gemm(const MatDesc& a, const MatDesc& b, const MatDesc& c, const GemmAttr& attr) override;
  void forget_constants(uint64_t) override {}
  int64_t constant_bytes() const override { return 0; }
  std::string unsupported(ComputeType t) const override {
    if (t == ComputeType::F32) return "";
    return std::string(compute_type_name(t)) + " is not implemented on CUDA yet (f32 only)";
  }

  void softmax(const float* src, float* dst, int64_t rows, int64_t cols, bool log) override {
    if (rows == 0) return;
    softmax_kernel<<<blocks_for(rows), kThreads>>>(src, dst, rows, cols, log);
    check_launch();
  }
  void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                        int64_t cols) override {
    if (rows == 0) return;
    softmax_backward_kernel<<<blocks_for(rows), kThreads>>>(y, dy, dx, rows, cols);
    check_launch();
  }
  void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                            int64_t cols) override {
    if (rows == 0) return;
    log_softmax_backward_kernel<<<blocks_for(rows), kThreads>>>(y, dy, dx, rows, cols);
    check_launch();
  }
  void add_mask(float* scores, const std::array<int64_t, 4>& dims, const float* mask,
                const std::array<int64_t, 4>& mask_dims) override {
    const int64_t n = dims[0] * dims[1] * dims[2] * dims[3];
    if (n == 0) return;
    add_mask_kernel<<<blocks_for(n), kThreads>>>(scores, n, mask,
                                                 mask_broadcast(dims.data(), mask_dims.data()));
    check_launch();
  }
  // The scores go to scratch that no copy back waits for: the next call's
  // kernels queue behind this one on the same stream, and growing the
  // scratch frees it with cudaFree, which waits for the device.
  void attend(const MatDesc& q, const MatDesc& k, const MatDesc& v, const float* mask, float scale,
              const MatDesc& ctx) override {
    AttendShape a;
    a.B = q.dims[0], a.H = q.dims[1], a.M = q.dims[2], a.D = q.dims[3];
    a.L = k.dims[2], a.Dv = v.dims[3];
    for (int d = 0; d < 3; ++d) {
      a.q[d] = q.strides[d], a.k[d] = k.strides[d], a.v[d] = v.strides[d];
      a.ctx[d] = ctx.strides[d];
    }
    const int64_t n = a.B * a.H * a.M;
    if (n == 0) return;
    auto* scores = static_cast<float*>(scratch().get(n * a.L * sizeof(float)));
    attend_kernel<<<blocks_for(n), kThreads>>>(q.ptr, k.ptr, v.ptr, mask, scale,
                                               const_cast<float*>(ctx.ptr), a, scores);
    check_launch();
  }
  void padding_mask(const int32_t* ids, int64_t n, int32_t pad, float* mask) override {
    padding_mask_kernel<<<blocks_for(n), kThreads>>>(ids, n, pad, mask);
    check_launch();
  }
  void causal_mask(int64_t T, float* mask) override {
    causal_mask_kernel<<<blocks_for(T * T), kThreads>>>(T, mask);
    check_launch();
  }
  void layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                  float* var, int64_t rows, int64_t D, float eps) override {
    if (rows == 0) return;
    layer_norm_kernel<<<blocks_for(rows), kThreads>>>(x, gamma, beta, y, mean, var, rows, D, eps);
    check_launch();
  }
  void layer_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                           const float* var, float* dx, float* dgamma, float* dbeta, int64_t rows,
                           int64_t D, float eps) override {
    if (rows == 0 || D == 0) return;
    layer_norm_dx_kernel<<<blocks_for(rows), kThreads>>>(x, dy, gamma, mean, var, dx, rows, D, eps);
    check_launch();
    layer_norm_params_kernel<<<blocks_for(D), kThreads>>>(x, dy, mean, var, rows, D, eps, dgamma,
                                                          dbeta);
    check_launch();
  }
  void add(const float* a, const float* b, float* dst, int64_t n) override {
    add_kernel<<<blocks_for(n), kThreads>>>(a, b, dst, n);
    check_launch();
  }
  void add_inplace(float* dst, const float* src, int64_t n) override {
    add_inplace_kernel<<<blocks_for(n), kThreads>>>(dst, src, n);
    check_launch();
  }
  void scale(float* x, int64_t n, float s) override {
    scale_kernel<<<blocks_for(n), kThreads>>>(x, n, s);
    check_launch();
  }
  void dropout(float* x, int64_t n, float p, uint64_t seed) override {
    if (p <= 0.f) return;
    dropout_kernel<<<blocks_for(n), kThreads>>>(x, n, seed, static_cast<uint32_t>(p * 4294967296.0),
                                                1.f / (1.f - p));
    check_launch();
  }
  void activate(const float* x, float* y, int64_t n, Activation act) override {
    activate_kernel<<<blocks_for(n), kThreads>>>(x, y, n, act);
    check_launch();
  }
  void activation_backward(const float* x, float* dy, int64_t n, Activation act) override {
    activation_backward_kernel<<<blocks_for(n), kThreads>>>(x, dy, n, act);
    check_launch();
  }
  void log_add_exp(float* dst, const float* src, int64_t n) override {
    log_add_exp_kernel<<<blocks_for(n), kThreads>>>(dst, src, n);
    check_launch();
  }
  void add_column_sums(const float* src, float* dst, int64_t rows, int64_t cols) override {
    column_sums_kernel<<<blocks_for(cols), kThreads>>>(src, dst, rows, cols);
    check_launch();
  }
  void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t D, float scale,
                 const float* positions, int64_t pos0, int64_t T, float* out) override {
    embedding_kernel<<<blocks_for(n * D), kThreads>>>(table, tokens, n, D, scale, positions, pos0,
                                                      T, out);
    check_launch();
  }
  void embedding_s8(const int8_t*, const float*, const int32_t*, int64_t, int64_t, float,
                    const float*, int64_t, int64_t, float*) override {
    missing("embedding from an int8 table");
  }
  void embedding_backward(const int32_t* tokens, int64_t n, int64_t D, float scale, const float* dy,
                          float* dtable, float* dpositions, int64_t T) override {
    if (n == 0 || D == 0) return;
    embedding_backward_kernel<<<blocks_for(D), kThreads>>>(tokens, n, D, scale, dy, dtable,
                                                           dpositions, T);
    check_launch();
  }
  XentTotals xent(const float* logits, const int32_t* targets, int64_t N, int64_t V, float eps,
                  int32_t pad, float* dlogits, float grad_scale) override {
    if (N == 0) return {};
    auto* rows =
        static_cast<XentRow*>(scratch().get(aligned(N * sizeof(XentRow)) + sizeof(XentRow)));
    XentRow* total =
        reinterpret_cast<XentRow*>(reinterpret_cast<char*>(rows) + aligned(N * sizeof(XentRow)));
    xent_kernel<<<blocks_for(N), kThreads>>>(logits, targets, N, V, eps, pad, dlogits, grad_scale,
                                             rows);
    check_launch();
    xent_sum_kernel<<<1, 1>>>(rows, N, total);
    check_launch();
    XentRow t;
    to_host(&t, total, sizeof t);
    XentTotals out;
    out.loss = t.loss, out.nll = t.nll, out.tokens = t.tokens;
    return out;
  }
  void adam(float* p, const float* g, float* m, float* v, int64_t n, float beta1, float beta2,
            float step, float inv_sqrt_c2, float eps) override {
    adam_kernel<<<blocks_for(n), kThreads>>>(p, g, m, v, n, beta1, beta2, step, inv_sqrt_c2, eps);
    check_launch();
  }
  double sum_squares(const float* x, int64_t n) override {
    if (n == 0) return 0;
    const int64_t chunks = (n + kSumSquaresChunk - 1) / kSumSquaresChunk;
    auto* parts =
        static_cast<double*>(scratch().get(aligned(chunks * sizeof(double)) + sizeof(double)));
    double* total = parts + aligned(chunks * sizeof(double)) / sizeof(double);
    sum_squares_kernel<<<blocks_for(chunks), kThreads>>>(x, n, chunks, parts);
    check_launch();
    sum_in_order_kernel<<<1, 1>>>(parts, chunks, total);
    check_launch();
    double s = 0;
    to_host(&s, total, sizeof s);
    return s;
  }
  // host_cols in, host_out back: one round trip each way instead of one per row.
  void pick(const float* x, int64_t N, int64_t V, const int32_t* host_cols,
            float* host_out) override {
    if (N == 0) return;
    const size_t cols_bytes = aligned(N * sizeof(int32_t));
    char* buf = static_cast<char*>(scratch().get(cols_bytes + N * sizeof(float)));
    auto* cols = reinterpret_cast<int32_t*>(buf);
    auto* out = reinterpret_cast<float*>(buf + cols_bytes);
    from_host(cols, host_cols, N * sizeof(int32_t));
    pick_kernel<<<blocks_for(N), kThreads>>>(x, N, V, cols, out);
    check_launch();
    to_host(host_out, out, N * sizeof(float));
  }
  // Host inputs in and host outputs back, one copy each, through scratch
  // laid out in the order below. Room for every id of the vocabulary per
  // output: the nucleus and a large k sort a whole row.
  void sample_tokens(const float* logits, int64_t V, const int64_t* rows, int64_t n,
                     float temperature, int64_t top_k, float top_p, const double* u,
                     const int32_t* forced, const int32_t* banned, int64_t n_banned, int32_t* ids,
                     float* lp) override {
    if (n == 0) return;
    const size_t rows_b = aligned(n * sizeof(int64_t)), u_b = aligned(n * sizeof(double)),
                 forced_b = aligned(n * sizeof(int32_t)),
                 banned_b = aligned(n_banned * sizeof(int32_t)),
                 cand_val_b = aligned(n * V * sizeof(float)),
                 cand_id_b = aligned(n * V * sizeof(int32_t)), ids_b = aligned(n * sizeof(int32_t));
    char* p = static_cast<char*>(scratch().get(rows_b + u_b + forced_b + banned_b + cand_val_b +
                                               cand_id_b + ids_b + n * sizeof(float)));
    auto* d_rows = reinterpret_cast<int64_t*>(p);
    auto* d_u = reinterpret_cast<double*>(p += rows_b);
    auto* d_forced = reinterpret_cast<int32_t*>(p += u_b);
    auto* d_banned = reinterpret_cast<int32_t*>(p += forced_b);
    auto* cand_val = reinterpret_cast<float*>(p += banned_b);
    auto* cand_id = reinterpret_cast<int32_t*>(p += cand_val_b);
    auto* d_ids = reinterpret_cast<int32_t*>(p += cand_id_b);
    auto* d_lp = reinterpret_cast<float*>(p += ids_b);
    from_host(d_rows, rows, n * sizeof(int64_t));
    from_host(d_u, u, n * sizeof(double));
    from_host(d_forced, forced, n * sizeof(int32_t));
    if (n_banned) from_host(d_banned, banned, n_banned * sizeof(int32_t));
    SampleParams sp;
    sp.inv_t = 1.f / temperature, sp.top_k = top_k, sp.top_p = top_p;
    sp.banned = d_banned, sp.n_banned = n_banned;
    sample_kernel<<<blocks_for(n), kThreads>>>(logits, V, d_rows, n, sp, d_u, d_forced, cand_val,
                                               cand_id, d_ids, d_lp);
    check_launch();
    to_host(ids, d_ids, n * sizeof(int32_t));
    to_host(lp, d_lp, n * sizeof(float));
  }
  // As sample_tokens: host inputs in, host outputs back. The exponentials
  // are always summed in column order (ordered_sum's order): on one thread
  // a row has no vector lanes to group them.
  void topk_log_softmax(const float* logits, const double* base, int64_t rows, int64_t V, int64_t k,
                        const int32_t* banned, int64_t n_banned, const int32_t* cols,
                        int64_t n_cols, double* values, int32_t* indices, float* col_lp,
                        bool) override {
    if (rows == 0) return;
    const size_t base_b = aligned(rows * sizeof(double)),
                 banned_b = aligned(n_banned * sizeof(int32_t)),
                 cols_b = aligned(rows * n_cols * sizeof(int32_t)),
                 values_b = aligned(rows * k * sizeof(double)),
                 indices_b = aligned(rows * k * sizeof(int32_t));
    char* p = static_cast<char*>(scratch().get(base_b + banned_b + cols_b + values_b + indices_b +
                                               rows * n_cols * sizeof(float)));
    double* d_base = base ? reinterpret_cast<double*>(p) : nullptr;
    auto* d_banned = reinterpret_cast<int32_t*>(p += base_b);
    auto* d_cols = reinterpret_cast<int32_t*>(p += banned_b);
    auto* d_values = reinterpret_cast<double*>(p += cols_b);
    auto* d_indices = reinterpret_cast<int32_t*>(p += values_b);
    auto* d_col_lp = reinterpret_cast<float*>(p += indices_b);
    if (base) from_host(d_base, base, rows * sizeof(double));
    if (n_banned) from_host(d_banned, banned, n_banned * sizeof(int32_t));
    if (n_cols) from_host(d_cols, cols, rows * n_cols * sizeof(int32_t));
    topk_log_softmax_kernel<<<blocks_for(rows), kThreads>>>(logits, d_base, rows, V, k, d_banned,
                                                            n_banned, d_cols, n_cols, d_values,
                                                            d_indices, d_col_lp);
    check_launch();
    to_host(values, d_values, rows * k * sizeof(double));
    to_host(indices, d_indices, rows * k * sizeof(int32_t));
    if (n_cols) to_host(col_lp, d_col_lp, rows * n_cols * sizeof(float));
  }

 private:
  [[noreturn]] static void missing(const char* op) {
    throw Error(std::string("the CUDA backend has no kernel for ") + op + " yet");
  }
  cublasHandle_t handle() {
    if (!blas_) CUBLAS_CHECK(cublasCreate(&blas_));
    return blas_;
  }
  cublasHandle_t blas_ = nullptr;
};

// Row-major C = A B is column-major C^T = B^T A^T: swap the operands
// instead of transposing anything. Each matrix must have one unit stride
// (rows or columns); the batch runs as one strided-batched call per B.
void CudaBackend::gemm(const MatDesc& a, const MatDesc& b, const MatDesc& c, const GemmAttr& attr) {
  if (attr.b_s8) missing("gemm with int8 weights");
  if (attr.bias || attr.act != Activation::None) missing("gemm with a bias or activation epilogue");
  if (c.strides[3] != 1) missing("gemm into a column-major output");
  const int64_t M = a.dims[2], K = a.dims[3], N = b.dims[3];
  auto layout = [](const MatDesc& x, cublasOperation_t& op, int64_t& ld) {
    if (x.strides[3] == 1) {
      op = CUBLAS_OP_N, ld = x.strides[2];
    } else if (x.strides[2] == 1) {
      op = CUBLAS_OP_T, ld = x.strides[3];
    } else {
      missing("gemm on a matrix with no unit stride");
    }
  };
  cublasOperation_t op_a, op_b;
  int64_t lda, ldb;
  layout(a, op_a, lda);
  layout(b, op_b, ldb);
  const float alpha = attr.alpha, beta = attr.accumulate ? 1.f : 0.f;
  for (int64_t bi = 0; bi < a.dims[0]; ++bi)
    CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle(), op_b, op_a, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &alpha,
        b.ptr + bi * b.strides[0], static_cast<int>(ldb), b.strides[1], a.ptr + bi * a.strides[0],
        static_cast<int>(lda), a.strides[1], &beta, const_cast<float*>(c.ptr) + bi * c.strides[0],
        static_cast<int>(c.strides[2]), c.strides[1], static_cast<int>(a.dims[1])));
}

}  // namespace

}  // namespace nmt

// The module's entry points (lib/cuda/cuda_loader.cpp opens this library
// with dlopen on the first use of a GPU and finds them by these names), so
// that nmt links no CUDA library and loads none until asked for a GPU.

// The Backend interface this library was compiled against (a hash of
// core/backend.h); the loader refuses a library from another build.
extern "C" __attribute__((visibility("default"))) const char* nmt_cuda_abi() {
  return NMT_BACKEND_ABI;
}

extern "C" __attribute__((visibility("default"))) bool nmt_cuda_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

extern "C" __attribute__((visibility("default"))) nmt::Backend* nmt_cuda_backend() {
  if (!nmt_cuda_available()) throw nmt::Error("no CUDA device is available");
  static nmt::CudaBackend b;
  return &b;
}

extern "C" __attribute__((visibility("default"))) void nmt_cuda_build_info(std::string* out) {
  *out = nmt::build_info();
}
