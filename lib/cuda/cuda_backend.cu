// The CUDA backend behind core/backend.h: device memory, cuBLAS GEMMs and
// element-wise kernels. Ops that have no CUDA kernel yet say so by name
// rather than compute something else; ops::device tests (tests/backend_ops)
// check every implemented one against the reference where a GPU exists.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "core/backend.h"
#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"

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

  void softmax(const float*, float*, int64_t, int64_t, bool) override { missing("softmax"); }
  void softmax_backward(const float*, const float*, float*, int64_t, int64_t) override {
    missing("softmax_backward");
  }
  void log_softmax_backward(const float*, const float*, float*, int64_t, int64_t) override {
    missing("log_softmax_backward");
  }
  void add_mask(float*, const std::array<int64_t, 4>&, const float*,
                const std::array<int64_t, 4>&) override {
    missing("add_mask");
  }
  void attend(const MatDesc&, const MatDesc&, const MatDesc&, const float*, float,
              const MatDesc&) override {
    missing("attend");
  }
  void padding_mask(const int32_t* ids, int64_t n, int32_t pad, float* mask) override {
    padding_mask_kernel<<<blocks_for(n), kThreads>>>(ids, n, pad, mask);
    check_launch();
  }
  void causal_mask(int64_t T, float* mask) override {
    causal_mask_kernel<<<blocks_for(T * T), kThreads>>>(T, mask);
    check_launch();
  }
  void layer_norm(const float*, const float*, const float*, float*, float*, float*, int64_t,
                  int64_t, float) override {
    missing("layer_norm");
  }
  void layer_norm_backward(const float*, const float*, const float*, const float*, const float*,
                           float*, float*, float*, int64_t, int64_t, float) override {
    missing("layer_norm_backward");
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
  void embedding_backward(const int32_t*, int64_t, int64_t, float, const float*, float*, float*,
                          int64_t) override {
    missing("embedding_backward");
  }
  XentTotals xent(const float*, const int32_t*, int64_t, int64_t, float, int32_t, float*,
                  float) override {
    missing("xent");
  }
  void adam(float* p, const float* g, float* m, float* v, int64_t n, float beta1, float beta2,
            float step, float inv_sqrt_c2, float eps) override {
    adam_kernel<<<blocks_for(n), kThreads>>>(p, g, m, v, n, beta1, beta2, step, inv_sqrt_c2, eps);
    check_launch();
  }
  double sum_squares(const float*, int64_t) override { missing("sum_squares"); }
  void pick(const float*, int64_t, int64_t, const int32_t*, float*) override { missing("pick"); }
  void sample_tokens(const float*, int64_t, const int64_t*, int64_t, float, int64_t, float,
                     const double*, const int32_t*, const int32_t*, int64_t, int32_t*,
                     float*) override {
    missing("sample_tokens");
  }
  void topk_log_softmax(const float*, const double*, int64_t, int64_t, int64_t, const int32_t*,
                        int64_t, const int32_t*, int64_t, double*, int32_t*, float*,
                        bool) override {
    missing("topk_log_softmax");
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
