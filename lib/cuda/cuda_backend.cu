// The CUDA backend behind core/backend.h: device memory, cuBLAS GEMMs,
// element-wise kernels, and row-wise ones around kernels/row_ops.h and
// kernels/decode_ops.h (whose arithmetic the host tests check without a GPU).
// Ops that have no CUDA kernel yet say so by name rather than compute
// something else; ops::device tests (tests/backend_ops) check every
// implemented one against the reference where a GPU exists.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "kernels/decode_ops.h"
#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/row_ops.h"

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

// At least one block: an empty launch is an error, and every kernel checks
// its bound (a grid-stride loop or an if), so one idle block does nothing.
int blocks_for(int64_t n) {
  return static_cast<int>(std::max<int64_t>((n + kThreads - 1) / kThreads, 1));
}

// A block per row, up to a grid that covers the device many times over
// (the kernels stride over the rest).
int row_blocks(int64_t rows) {
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(rows, 1), 65536));
}

// A thread per (chunk, column): columns along x, chunks along y.
dim3 column_grid(int64_t cols, int64_t chunks) {
  if (chunks > 65535) throw Error("a column reduction over more than 16.7M rows");
  return dim3(static_cast<unsigned>(blocks_for(cols)), static_cast<unsigned>(chunks));
}

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
  if (i < n) mask[i] = ids[i] == pad ? kMask : 0.f;
}

__global__ void causal_mask_kernel(int64_t T, float* mask) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < T * T) mask[i] = (i % T) > (i / T) ? kMask : 0.f;
}

// The clipping factor from the norm on the device: no host round trip.
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, float b1,
                            float b2, float step, float inv_sqrt_c2, float eps,
                            const double* clip_sumsq, double clip_norm) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float gi = g[i] * clip_scale(clip_sumsq ? *clip_sumsq : 0.0, clip_norm);
  m[i] = b1 * m[i] + (1.f - b1) * gi;
  v[i] = b2 * v[i] + (1.f - b2) * gi * gi;
  p[i] -= step * m[i] / (sqrtf(v[i]) * inv_sqrt_c2 + eps);
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

// The row-wise ops: the arithmetic is kernels/row_ops.h's, shared with the host
// tests. Rows are reduced by a block of kRowLanes lanes (below); what stays
// one thread per item (a decoding step's query rows, sampling, a top k
// larger than kLaneTopk) strides over the grid.
#define NMT_GRID_STRIDE(i, n)                                               \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// A block of kRowLanes threads per row (row_ops.h's lanes): reads and
// writes along the row are coalesced, and the lanes' partial results meet
// in shared memory, combined in lane order by the first thread, as the host
// tests' lanes_sum and lanes_max combine them. Every lane gets the result;
// the closing barrier lets the caller reuse `part` at once.
template <typename T, T (*combine)(const float*)>
__device__ T block_lanes(float mine, float* part) {
  __shared__ T total;
  part[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x == 0) total = combine(part);
  __syncthreads();
  const T v = total;
  __syncthreads();
  return v;
}
__device__ double block_lanes_sum(float mine, float* part) {
  return block_lanes<double, lanes_sum>(mine, part);
}
__device__ float block_lanes_max(float mine, float* part) {
  return block_lanes<float, lanes_max>(mine, part);
}

__global__ void softmax_kernel(const float* src, float* dst, int64_t rows, int64_t cols, bool log) {
  __shared__ float part[kRowLanes];
  __shared__ int64_t s_n;
  const int t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = src + r * cols;
    float* y = dst + r * cols;
    if (t == 0) s_n = log ? cols : unmasked_length(x, cols);
    __syncthreads();
    const int64_t n = s_n;  // read by every lane before block_lanes_max's barriers
    const float mx = block_lanes_max(lane_max(x, n, t), part);
    float z;
    lane_sums(x, n, mx, t, &z, nullptr);
    const float k = softmax_scale(block_lanes_sum(z, part), mx, log);
    for (int64_t c = t; c < cols; c += kRowLanes) y[c] = softmax_element(x[c], mx, k, log, c < n);
  }
}

// Softmax's backward pass by lanes, as softmax_kernel
// (softmax_backward_row_lanes). dx may be dy.
__global__ void softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t rows,
                                        int64_t cols) {
  __shared__ float part[kRowLanes];
  const int t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *yr = y + r * cols, *g = dy + r * cols;
    float* o = dx + r * cols;
    const float sum = static_cast<float>(
        block_lanes_sum(lane_dot(g, yr, cols, t), part));
    for (int64_t c = t; c < cols; c += kRowLanes) o[c] = yr[c] * (g[c] - sum);
  }
}

// One thread per score: consecutive threads read consecutive scores.
__global__ void add_mask_kernel(float* scores, int64_t n, const float* mask, MaskBroadcast m) {
  NMT_GRID_STRIDE(i, n) scores[i] += mask[mask_index(m, i)];
}

// Layer norm by lanes, as softmax_kernel (layer_norm_row_lanes); y may be x.
__global__ void layer_norm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                  float* mean, float* var, int64_t rows, int64_t D, float eps) {
  __shared__ float part[kRowLanes];
  const int t = threadIdx.x;
  const double d = static_cast<double>(D);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * D;
    float* yr = y + r * D;
    const float mu = static_cast<float>(block_lanes_sum(lane_sum(xr, D, t), part) / d);
    const float v = static_cast<float>(block_lanes_sum(lane_sum_sq(xr, D, mu, t), part) / d);
    if (t == 0) {
      if (mean) mean[r] = mu;
      if (var) var[r] = v;
    }
    const float rstd = 1.f / sqrtf(v + eps);
    for (int64_t i = t; i < D; i += kRowLanes)
      yr[i] = layer_norm_element(xr[i], mu, rstd, gamma[i], beta[i]);
  }
}

// dx by lanes (layer_norm_backward_row_lanes).
__global__ void layer_norm_dx_kernel(const float* x, const float* dy, const float* gamma,
                                     const float* mean, const float* var, float* dx, int64_t rows,
                                     int64_t D, float eps) {
  __shared__ float part[kRowLanes];
  const int t = threadIdx.x;
  const double d = static_cast<double>(D);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * D, *g = dy + r * D;
    const float mu = mean[r], rstd = 1.f / sqrtf(var[r] + eps);
    float sum_g, sum_gx;
    lane_layer_norm_grads(xr, g, gamma, mu, rstd, D, t, &sum_g, &sum_gx);
    const float mg = static_cast<float>(block_lanes_sum(sum_g, part) / d);
    const float mgx = static_cast<float>(block_lanes_sum(sum_gx, part) / d);
    for (int64_t i = t; i < D; i += kRowLanes)
      dx[r * D + i] = layer_norm_dx_element(xr[i], g[i], gamma[i], mu, rstd, mg, mgx);
  }
}

// Column reductions in two launches (row_ops.h's kColumnChunk): a thread
// per (chunk, column) writes its chunk's partial sums, then a thread per
// column adds the chunks in order to what the destination held.
__global__ void layer_norm_params_chunk_kernel(const float* x, const float* dy, const float* mean,
                                               const float* var, int64_t rows, int64_t D,
                                               float eps, float* pg, float* pb) {
  const int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, chunk = blockIdx.y;
  if (col < D)
    layer_norm_param_grads_chunk(x, dy, mean, var, rows, D, eps, col, chunk, &pg[chunk * D + col],
                                 &pb[chunk * D + col]);
}

__global__ void column_sums_chunk_kernel(const float* src, int64_t rows, int64_t cols,
                                         float* parts) {
  const int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, chunk = blockIdx.y;
  if (col < cols) parts[chunk * cols + col] = column_sum_chunk(src, rows, cols, col, chunk);
}

// dst[col] += the chunks' sums, for one or two outputs (layer norm's pair).
__global__ void add_column_chunks_kernel(const float* parts, const float* parts2, int64_t chunks,
                                         int64_t cols, float* dst, float* dst2) {
  const int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (col >= cols) return;
  dst[col] += sum_column_chunks(parts, chunks, cols, col);
  if (dst2) dst2[col] += sum_column_chunks(parts2, chunks, cols, col);
}

// The embedding's gradient from the rows sorted by id (CUB's stable radix
// sort) and cut into runs of one id (CUB's run-length encoding): a block per
// run, a thread per column, the run's rows in order; ids < 0 are skipped.
// Every token and column is summed by one thread, in row order, as on the
// CPU, with the whole batch's runs in flight at once.
__global__ void embedding_token_grads_kernel(const int32_t* sorted_rows, const int32_t* ids,
                                             const int32_t* counts, const int32_t* offsets,
                                             const int32_t* runs, const float* dy, int64_t D,
                                             float scale, float* dtable) {
  for (int64_t run = blockIdx.x; run < *runs; run += gridDim.x) {
    if (ids[run] < 0) continue;
    float* de = dtable + static_cast<int64_t>(ids[run]) * D;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
      embedding_backward_token(sorted_rows + offsets[run], counts[run], dy, D, scale, de, i);
  }
}

// A block per position, a thread per column.
__global__ void embedding_position_grads_kernel(const float* dy, int64_t n, int64_t D, int64_t T,
                                                float* dpositions) {
  for (int64_t p = blockIdx.x; p < T && p < n; p += gridDim.x)
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
      embedding_backward_position(dy, n, D, T, p, dpositions, i);
}

__global__ void iota_kernel(int32_t* v, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) v[i] = static_cast<int32_t>(i);
}

// A block of kRowLanes threads per row, as softmax_kernel: xent_row_lanes.
__global__ void xent_kernel(const float* logits, const int32_t* targets, int64_t N, int64_t V,
                            float eps, int32_t pad, float* dlogits, float grad_scale,
                            XentRow* rows) {
  __shared__ float part[kRowLanes];
  const int t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const float* x = logits + r * V;
    float* g = dlogits ? dlogits + r * V : nullptr;
    const int32_t target = targets[r];  // the same for every lane: the branch is uniform
    if (target == pad) {
      if (g)
        for (int64_t c = t; c < V; c += kRowLanes) g[c] = 0.f;
      if (t == 0) rows[r] = XentRow();
      continue;
    }
    const float mx = block_lanes_max(lane_max(x, V, t), part);
    float z, sum_x;
    lane_sums(x, V, mx, t, &z, &sum_x);
    const double z_row = block_lanes_sum(z, part), sum_x_row = block_lanes_sum(sum_x, part);
    if (t == 0) rows[r] = xent_totals(x[target], mx, z_row, sum_x_row, V, eps);
    if (g) {
      const float inv_z = static_cast<float>(1.0 / z_row);
      for (int64_t c = t; c < V; c += kRowLanes) {
        float v = xent_gradient(x[c], mx, inv_z, V, eps, grad_scale);
        if (c == target) v -= (1.f - eps) * grad_scale;
        g[c] = v;
      }
    }
  }
}

// The totals on one thread, in row order (the same sums on every launch),
// added to the caller's on the device.
__global__ void xent_sum_kernel(const XentRow* rows, int64_t N, double* totals) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const XentRow t = xent_sum(rows, N);
  totals[0] += t.loss;
  totals[1] += t.nll;
  totals[2] += static_cast<double>(t.tokens);
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

// Decoding's ops (kernels/decode_ops.h), one thread per query row or output
// row, like the row-wise ops: the same single-threaded order as the host
// tests check, whatever the launch.
__global__ void attend_kernel(const float* q, const float* k, const float* v, const float* mask,
                              float scale, float* ctx, AttendShape a, float* scores) {
  NMT_GRID_STRIDE(i, a.B * a.H * a.M) {
    attend_row(q, k, v, mask, scale, ctx, a, i, scores + i * a.L);
  }
}

// A search step by lanes (topk_log_softmax_row_lanes): each lane's best
// list in shared memory, merged pairwise in a fixed tree; the log-sum-exp
// by lanes, or in column order by the first lane (ordered_sum). k is at
// most kLaneTopk.
__global__ void topk_lanes_kernel(const float* logits, const double* base, int64_t rows, int64_t V,
                                  int64_t k, const int32_t* banned, int64_t n_banned,
                                  const int32_t* cols, int64_t n_cols, bool ordered,
                                  double* values, int32_t* indices, float* col_lp) {
  __shared__ float lv[kRowLanes][kLaneTopk];
  __shared__ int32_t li[kRowLanes][kLaneTopk];
  __shared__ int64_t filled[kRowLanes];
  __shared__ float part[kRowLanes];
  const int t = threadIdx.x;
  float tv[kLaneTopk];
  int32_t ti[kLaneTopk];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * V;
    filled[t] = topk_lane(x, V, k, banned, n_banned, t, lv[t], li[t]);
    __syncthreads();
    for (int s = kRowLanes / 2; s > 0; s /= 2) {
      if (t < s)
        filled[t] = merge_best(lv[t], li[t], filled[t], lv[t + s], li[t + s], filled[t + s], k,
                               tv, ti);
      __syncthreads();
    }
    const float mx = block_lanes_max(lane_max(x, V, t), part);
    float z = 0.f;
    if (!ordered) lane_sums(x, V, mx, t, &z, nullptr);
    const double z_row = block_lanes_sum(z, part);
    if (t == 0) {
      const float lse = ordered ? log_sum_exp_row(x, V) : static_cast<float>(mx + ::log(z_row));
      topk_finish(x, base ? base[r] : 0.0, k, cols + r * n_cols, n_cols, lse, lv[0], li[0],
                  filled[0], values + r * k, indices + r * k, col_lp + r * n_cols);
    }
    __syncthreads();  // the next row rewrites the lists the first lane read
  }
}

// A top k larger than kLaneTopk: one thread per row.
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

// A shortlisted search step's rows (Backend::topk_log_softmax's allowed),
// copied with -inf outside each row's group of columns: the ordered sum
// then adds exactly the group's exponentials in column order, so a row's
// numbers do not depend on where its columns lie or what the others hold.
__global__ void keep_columns_kernel(const float* x, int64_t rows, int64_t V, const int64_t* offsets,
                                    const int32_t* cols, int64_t group, float* out) {
  NMT_GRID_STRIDE(i, rows * V) {
    const int64_t g = i / V / group, c = i % V;
    const int32_t* lo = cols + offsets[g];
    const int32_t* const end = cols + offsets[g + 1];
    const int32_t* hi = end;
    while (lo < hi) {
      const int32_t* mid = lo + (hi - lo) / 2;
      if (*mid < c) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    out[i] = lo != end && *lo == c ? x[i] : -INFINITY;
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

// In place when prod is c (ldp == ldc); accumulating, prod is a scratch
// product and c what it is added to.
__global__ void gemm_epilogue_kernel(const float* prod, int64_t ldp, float* c, int64_t ldc,
                                     int64_t rows, int64_t cols, const float* bias, Activation act,
                                     bool accumulate) {
  NMT_GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, col = i % cols;
    float* y = c + r * ldc + col;
    *y = gemm_epilogue(prod[r * ldp + col], bias, col, act, accumulate ? *y : 0.f);
  }
}

__global__ void gather_kernel(const char* src, int64_t src_ld, const int64_t* idx, int64_t n,
                              int64_t len, char* dst, int64_t dst_ld, const int64_t* dst_idx) {
  NMT_GRID_STRIDE(e, n * len) {
    int64_t from, to;
    gather_byte(e, len, idx, src_ld, dst_idx, dst_ld, &from, &to);
    dst[to] = src[from];
  }
}

#undef NMT_GRID_STRIDE

// A buffer per host thread that only grows: allocated with Alloc, given
// back with Free (which waits for the device before the old one goes).
template <cudaError_t (*Alloc)(void**, size_t), cudaError_t (*Free)(void*)>
class GrowingBuffer {
 public:
  ~GrowingBuffer() {
    if (p_) Free(p_);  // at exit the runtime may be gone: nothing to report
  }
  void* get(size_t bytes) {
    if (bytes > cap_) {
      void* old = p_;
      p_ = nullptr, cap_ = 0;
      if (old) CUDA_CHECK(Free(old));
      CUDA_CHECK(Alloc(&p_, bytes));
      cap_ = bytes;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t cap_ = 0;
};

cudaError_t device_alloc(void** p, size_t n) { return cudaMalloc(p, n); }
cudaError_t pinned_alloc(void** p, size_t n) { return cudaMallocHost(p, n); }

// Device memory for a call's partial results and small host transfers,
// kept per host thread and grown as needed. A call's use either ends in a
// synchronous copy back to the host before it returns or is ordered on the
// one stream before the next call's (attend, an accumulating gemm's
// epilogue); growing it frees the old buffer, which waits for the device.
GrowingBuffer<device_alloc, cudaFree>& scratch() {
  thread_local GrowingBuffer<device_alloc, cudaFree> s;
  return s;
}

// Pinned host memory per host thread, grown as needed: a call's small host
// operands are packed here and go over in one asynchronous copy on the
// thread's stream, and its results come back the same way, with one wait.
// Every use ends in that wait, so the next call may reuse it.
GrowingBuffer<pinned_alloc, cudaFreeHost>& pinned() {
  thread_local GrowingBuffer<pinned_alloc, cudaFreeHost> p;
  return p;
}

// Offsets into the scratch buffer, each aligned for any element type.
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::CUDA; }
  std::string version() const override { return build_info(); }
  std::string numerics() const override {
    return "products on cuBLAS with f32 sums (bf16: CUBLAS_COMPUTE_32F_FAST_16BF); rows on nmt's "
           "kernels (lib/kernels/row_ops.h)";
  }
  void set_num_threads(int) override {}
  int num_threads() const override { return 1; }
  // cuBLASLt plans built so far: a warm loop builds none.
  int64_t primitives_created() const override { return lt_plans_.load(); }

  // A caching allocator: freed blocks are kept by size and handed out
  // again, so that a warm step loop (whose tensors are freed and resized
  // batch after batch) makes no cudaMalloc. The blocks a host thread frees
  // go to its own pool and are handed out again only to it: its stream may
  // still have work queued that uses them, which its own later work follows
  // but another thread's stream would not. A thread's pool is given back
  // when it runs out (and when it ends).
  void* alloc(size_t bytes) override {
    const size_t n = block_size(bytes);
    Pool& pool = thread_pool();
    // The smallest free block that fits, unless it is twice the size.
    auto it = pool.blocks.lower_bound(n);
    if (it != pool.blocks.end() && it->first < 2 * n) {
      void* p = it->second;
      const size_t size = it->first;
      pool.blocks.erase(it);
      remember(p, size);
      return p;
    }
    void* p = nullptr;
    if (cudaMalloc(&p, n) != cudaSuccess) {
      cudaGetLastError();  // clear the failure, give the pool back, and try once more
      pool.release();
      CUDA_CHECK(cudaMalloc(&p, n));
    }
    remember(p, n);
    return p;
  }
  void free(void* p) override {
    if (!p) return;
    size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(sizes_mu_);
      auto it = sizes_.find(p);
      if (it == sizes_.end()) return;  // not from alloc: nothing to give back
      size = it->second;
      sizes_.erase(it);
    }
    thread_pool().blocks.emplace(size, p);
  }
  void to_host(void* dst, const void* src, size_t n) override {
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
  }
  // From pageable memory cudaMemcpy may return before the data has reached
  // the device; other threads' streams (the translator's workers reading
  // weights this thread loaded) must see it, so wait for it.
  void from_host(void* dst, const void* src, size_t n) override {
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
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
  // bf16 caches are the CPU's int8 decoding's (int8 runs on the CPU alone).
  void copy_rows_bf16(const float*, int64_t, uint16_t*, int64_t, int64_t, int64_t) override {
    throw Error("copy_rows_bf16 is not implemented on CUDA");
  }
  // One kernel moves every byte; the indices are on the device already
  // (ops::RowIndices copied them once for every gather of a beam step).
  void gather_rows(const void* src, int64_t src_ld, const int64_t* idx, int64_t n, int64_t len,
                   void* dst, int64_t dst_ld, const int64_t* dst_idx) override {
    if (n == 0 || len == 0) return;
    gather_kernel<<<blocks_for(n * len), kThreads>>>(static_cast<const char*>(src), src_ld, idx, n,
                                                     len, static_cast<char*>(dst), dst_ld, dst_idx);
    check_launch();
  }

  void gemm(const MatDesc& a, const MatDesc& b, const MatDesc& c, const GemmAttr& attr) override;
  bool gemm_lt(const MatDesc& a, const MatDesc& b, const MatDesc& c, const GemmAttr& attr);
  // Everything but int8: products with int8 weights and int8 tables.
  std::string unsupported(Op op, ComputeType t) const override {
    if (op == Op::GemmBf16Operands) return "";
    const bool int8_kernel = op == Op::Gemm || op == Op::LinearBackward || op == Op::Embedding;
    if (t != ComputeType::INT8 || !int8_kernel) return "";
    return "int8 is not implemented on CUDA (f32 and bf16 are)";
  }

  void softmax(const float* src, float* dst, int64_t rows, int64_t cols, bool log) override {
    if (rows == 0) return;
    softmax_kernel<<<row_blocks(rows), kRowLanes>>>(src, dst, rows, cols, log);
    check_launch();
  }
  void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                        int64_t cols) override {
    if (rows == 0) return;
    softmax_backward_kernel<<<row_blocks(rows), kRowLanes>>>(y, dy, dx, rows, cols);
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
    // bf16 caches are the CPU's int8 decoding's (int8 runs on the CPU alone).
    if (k.dtype != DType::F32 || v.dtype != DType::F32)
      throw Error("attend: keys and values in bf16 are not implemented on CUDA");
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
    layer_norm_kernel<<<row_blocks(rows), kRowLanes>>>(x, gamma, beta, y, mean, var, rows, D, eps);
    check_launch();
  }
  // The sum, then its norm in place (layer_norm_kernel takes y = x).
  void add_layer_norm(const float* x, const float* a, const float* gamma, const float* beta,
                      float* sum, float* y, int64_t rows, int64_t D, float eps) override {
    if (rows == 0) return;
    float* s = sum ? sum : y;
    add(x, a, s, rows * D);
    layer_norm(s, gamma, beta, y, nullptr, nullptr, rows, D, eps);
  }
  void layer_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                           const float* var, float* dx, float* dgamma, float* dbeta, int64_t rows,
                           int64_t D, float eps) override {
    if (rows == 0 || D == 0) return;
    layer_norm_dx_kernel<<<row_blocks(rows), kRowLanes>>>(x, dy, gamma, mean, var, dx, rows, D,
                                                          eps);
    check_launch();
    const int64_t chunks = column_chunks(rows);
    auto* pg = static_cast<float*>(scratch().get(2 * chunks * D * sizeof(float)));
    float* pb = pg + chunks * D;
    layer_norm_params_chunk_kernel<<<column_grid(D, chunks), kThreads>>>(x, dy, mean, var, rows,
                                                                          D, eps, pg, pb);
    check_launch();
    add_column_chunks_kernel<<<blocks_for(D), kThreads>>>(pg, pb, chunks, D, dgamma, dbeta);
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
    if (rows == 0 || cols == 0) return;
    const int64_t chunks = column_chunks(rows);
    auto* parts = static_cast<float*>(scratch().get(chunks * cols * sizeof(float)));
    column_sums_chunk_kernel<<<column_grid(cols, chunks), kThreads>>>(src, rows, cols, parts);
    check_launch();
    add_column_chunks_kernel<<<blocks_for(cols), kThreads>>>(parts, nullptr, chunks, cols, dst,
                                                             nullptr);
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
    if (n > INT32_MAX) missing("an embedding gradient over more than 2^31 rows");
    if (dpositions) {
      embedding_position_grads_kernel<<<row_blocks(std::min(n, T)), kThreads>>>(dy, n, D, T,
                                                                                dpositions);
      check_launch();
    }
    // Scratch: the sorted ids and rows, the runs (id, count, first row),
    // their number, and CUB's temporary storage, each aligned.
    const int num = static_cast<int>(n);
    const size_t vec = aligned(n * sizeof(int32_t));
    size_t sort_b = 0, rle_b = 0, scan_b = 0;
    const cudaStream_t s = cudaStreamPerThread;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_b, tokens, (int32_t*)nullptr,
                                               (const int32_t*)nullptr, (int32_t*)nullptr, num, 0,
                                               32, s));
    CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, rle_b, (const int32_t*)nullptr,
                                                  (int32_t*)nullptr, (int32_t*)nullptr,
                                                  (int32_t*)nullptr, num, s));
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_b, (const int32_t*)nullptr,
                                             (int32_t*)nullptr, num, s));
    const size_t temp_b = std::max({sort_b, rle_b, scan_b, size_t{1}});
    char* p = static_cast<char*>(scratch().get(6 * vec + aligned(sizeof(int32_t)) + temp_b));
    auto* sorted_ids = reinterpret_cast<int32_t*>(p);
    auto* rows = reinterpret_cast<int32_t*>(p + vec);
    auto* sorted_rows = reinterpret_cast<int32_t*>(p + 2 * vec);
    auto* ids = reinterpret_cast<int32_t*>(p + 3 * vec);
    auto* counts = reinterpret_cast<int32_t*>(p + 4 * vec);
    auto* offsets = reinterpret_cast<int32_t*>(p + 5 * vec);
    auto* runs = reinterpret_cast<int32_t*>(p + 6 * vec);
    void* temp = p + 6 * vec + aligned(sizeof(int32_t));
    iota_kernel<<<blocks_for(n), kThreads>>>(rows, n);
    check_launch();
    // Radix sort is stable: each id's rows stay in row order.
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, sort_b, tokens, sorted_ids, rows, sorted_rows,
                                               num, 0, 32, s));
    // Counts past the last run stay 0, so the scan reads no stale memory.
    CUDA_CHECK(cudaMemsetAsync(counts, 0, vec, s));
    CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp, rle_b, sorted_ids, ids, counts, runs, num, s));
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, scan_b, counts, offsets, num, s));
    embedding_token_grads_kernel<<<row_blocks(n), kThreads>>>(sorted_rows, ids, counts, offsets,
                                                              runs, dy, D, scale, dtable);
    check_launch();
  }
  // Nothing comes back: the rows' totals go to scratch, and their sum is
  // added to the caller's totals on the device.
  void xent(const float* logits, const int32_t* targets, int64_t N, int64_t V, float eps,
            int32_t pad, float* dlogits, float grad_scale, double* totals) override {
    if (N == 0) return;
    auto* rows = static_cast<XentRow*>(scratch().get(N * sizeof(XentRow)));
    xent_kernel<<<row_blocks(N), kRowLanes>>>(logits, targets, N, V, eps, pad, dlogits, grad_scale,
                                              rows);
    check_launch();
    xent_sum_kernel<<<1, 1>>>(rows, N, totals);
    check_launch();
  }
  void adam(float* p, const float* g, float* m, float* v, int64_t n, float beta1, float beta2,
            float step, float inv_sqrt_c2, float eps, const double* clip_sumsq,
            double clip_norm) override {
    if (n == 0) return;
    adam_kernel<<<blocks_for(n), kThreads>>>(p, g, m, v, n, beta1, beta2, step, inv_sqrt_c2, eps,
                                             clip_sumsq, clip_norm);
    check_launch();
  }
  void sum_squares(const float* x, int64_t n, double* out) override {
    if (n == 0) {
      zero(out, sizeof(double));
      return;
    }
    const int64_t chunks = (n + kSumSquaresChunk - 1) / kSumSquaresChunk;
    auto* parts = static_cast<double*>(scratch().get(chunks * sizeof(double)));
    sum_squares_kernel<<<blocks_for(chunks), kThreads>>>(x, n, chunks, parts);
    check_launch();
    sum_in_order_kernel<<<1, 1>>>(parts, chunks, out);
    check_launch();
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
  // A search step's one round trip: the host's base scores, banned ids and
  // columns go over in one copy through pinned memory, the k best of every
  // row and the columns' log-probabilities come back in one, with one wait
  // (six synchronous copies before). A block per row, unless k is larger
  // than its lists hold.
  void topk_log_softmax(const float* logits, const double* base, int64_t rows, int64_t V, int64_t k,
                        const int32_t* banned, int64_t n_banned, const int32_t* cols,
                        int64_t n_cols, double* values, int32_t* indices, float* col_lp,
                        const ColumnGroups* allowed) override {
    if (rows == 0) return;
    const int64_t groups = allowed ? (rows + allowed->group - 1) / allowed->group : 0;
    const int64_t n_allowed = allowed ? allowed->offsets[groups] : 0;
    // Inputs, then outputs, laid out alike in scratch and in pinned memory.
    const size_t base_b = aligned(rows * sizeof(double)),
                 banned_b = aligned(n_banned * sizeof(int32_t)),
                 cols_b = aligned(rows * n_cols * sizeof(int32_t)),
                 values_b = aligned(rows * k * sizeof(double)),
                 indices_b = aligned(rows * k * sizeof(int32_t)),
                 col_lp_b = aligned(rows * n_cols * sizeof(float)),
                 offsets_b = aligned((groups + 1) * sizeof(int64_t)) * (allowed != nullptr),
                 allowed_b = aligned(n_allowed * sizeof(int32_t)),
                 kept_b = allowed ? aligned(rows * V * sizeof(float)) : 0;
    const size_t in_b = base_b + banned_b + cols_b + offsets_b + allowed_b,
                 out_b = values_b + indices_b + col_lp_b;
    char* d = static_cast<char*>(scratch().get(in_b + out_b + kept_b));
    char* h = static_cast<char*>(pinned().get(in_b + out_b));
    if (base) std::memcpy(h, base, rows * sizeof(double));
    if (n_banned) std::memcpy(h + base_b, banned, n_banned * sizeof(int32_t));
    if (n_cols) std::memcpy(h + base_b + banned_b, cols, rows * n_cols * sizeof(int32_t));
    const size_t offsets_at = base_b + banned_b + cols_b, allowed_at = offsets_at + offsets_b;
    if (allowed) {
      std::memcpy(h + offsets_at, allowed->offsets, (groups + 1) * sizeof(int64_t));
      if (n_allowed) std::memcpy(h + allowed_at, allowed->cols, n_allowed * sizeof(int32_t));
    }
    CUDA_CHECK(cudaMemcpyAsync(d, h, in_b, cudaMemcpyHostToDevice, cudaStreamPerThread));
    char* o = d + in_b;
    const bool ordered_sum = allowed != nullptr;
    if (allowed) {
      auto* kept = reinterpret_cast<float*>(o + out_b);
      keep_columns_kernel<<<blocks_for(rows * V), kThreads>>>(
          logits, rows, V, reinterpret_cast<const int64_t*>(d + offsets_at),
          reinterpret_cast<const int32_t*>(d + allowed_at), allowed->group, kept);
      check_launch();
      logits = kept;
    }
    const auto* d_base = base ? reinterpret_cast<const double*>(d) : nullptr;
    const auto* d_banned = reinterpret_cast<const int32_t*>(d + base_b);
    const auto* d_cols = reinterpret_cast<const int32_t*>(d + base_b + banned_b);
    auto* d_values = reinterpret_cast<double*>(o);
    auto* d_indices = reinterpret_cast<int32_t*>(o + values_b);
    auto* d_col_lp = reinterpret_cast<float*>(o + values_b + indices_b);
    if (k <= kLaneTopk)
      topk_lanes_kernel<<<row_blocks(rows), kRowLanes>>>(logits, d_base, rows, V, k, d_banned,
                                                         n_banned, d_cols, n_cols, ordered_sum,
                                                         d_values, d_indices, d_col_lp);
    else
      topk_log_softmax_kernel<<<blocks_for(rows), kThreads>>>(logits, d_base, rows, V, k, d_banned,
                                                              n_banned, d_cols, n_cols, d_values,
                                                              d_indices, d_col_lp);
    check_launch();
    char* ho = h + in_b;
    CUDA_CHECK(cudaMemcpyAsync(ho, o, out_b, cudaMemcpyDeviceToHost, cudaStreamPerThread));
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    std::memcpy(values, ho, rows * k * sizeof(double));
    std::memcpy(indices, ho + values_b, rows * k * sizeof(int32_t));
    if (n_cols) std::memcpy(col_lp, ho + values_b + indices_b, rows * n_cols * sizeof(float));
  }

 private:
  [[noreturn]] static void missing(const char* op) {
    throw Error(std::string("the CUDA backend has no kernel for ") + op + " yet");
  }
  // Each host thread (a translator's worker) has its own cuBLAS handle on
  // its own stream: the library is built with --default-stream=per-thread,
  // so its kernels and copies run on that thread's stream too, and workers
  // neither share a handle (cuBLAS's are not for concurrent use) nor wait
  // for each other's work.
  static cublasHandle_t handle() {
    struct Handle {
      cublasHandle_t h = nullptr;
      ~Handle() {
        if (h) cublasDestroy(h);  // at exit the runtime may be gone: nothing to report
      }
    };
    thread_local Handle t;
    if (!t.h) {
      CUBLAS_CHECK(cublasCreate(&t.h));
      CUBLAS_CHECK(cublasSetStream(t.h, cudaStreamPerThread));
    }
    return t.h;
  }
  // cuBLASLt beside cuBLAS, per host thread for the same reason.
  static cublasLtHandle_t lt_handle() {
    struct Handle {
      cublasLtHandle_t h = nullptr;
      ~Handle() {
        if (h) cublasLtDestroy(h);
      }
    };
    thread_local Handle t;
    if (!t.h) CUBLAS_CHECK(cublasLtCreate(&t.h));
    return t.h;
  }
  // Blocks of 512 bytes below 1 MiB, of 2 MiB above: few enough sizes for
  // the blocks of slowly growing tensors to be reused.
  static size_t block_size(size_t bytes) {
    const size_t g = bytes < (size_t{1} << 20) ? 512 : (size_t{2} << 20);
    return (std::max<size_t>(bytes, 1) + g - 1) / g * g;
  }
  struct Pool {
    std::multimap<size_t, void*> blocks;  // free, by size
    void release() {
      for (auto& [size, p] : blocks) cudaFree(p);  // waits for the device
      blocks.clear();
    }
    ~Pool() { release(); }  // at exit the runtime may be gone: nothing to report
  };
  static Pool& thread_pool() {
    thread_local Pool pool;
    return pool;
  }
  void remember(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(sizes_mu_);
    sizes_[p] = size;
  }
  std::atomic<int64_t> lt_plans_{0};
  std::mutex sizes_mu_;
  std::unordered_map<void*, size_t> sizes_;  // blocks handed out, by any thread
};

// A cuBLASLt plan: the product's descriptors and the algorithm its
// heuristic chose, built once per shape and kept per host thread (a warm
// step loop meets a few dozen shapes), or `usable` false where cuBLASLt
// offered none, which sends that shape to cuBLAS and the epilogue kernel.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;
  ~LtPlan() {  // at exit the library may be gone: nothing to report
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// The largest power of two up to 256 that divides p's address: cuBLASLt's
// heuristic assumes 256-byte aligned operands unless told less, and a view
// (a row range, a slice of the parameter buffer) may be aligned to 4 only.
uint32_t alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && u % a != 0) a /= 2;
  return a;
}

// A single product with a bias and/or ReLU and no accumulation, in one
// cuBLASLt call with its fused epilogue (the bias added, then ReLU, to the
// product; its bias runs along the rows of the column-major result, which
// are our columns). Returns false, having done nothing, for what it does
// not fuse: batches, accumulation, other activations, a matrix with no
// unit stride, a bias not 16-byte aligned (the epilogue reads it in
// vectors), a shape without an algorithm.
bool CudaBackend::gemm_lt(const MatDesc& a, const MatDesc& b, const MatDesc& c,
                          const GemmAttr& attr) {
  if (a.dims[0] * a.dims[1] != 1 || attr.accumulate || attr.alpha != 1.f) return false;
  if (a.dtype != DType::F32 || b.dtype != DType::F32) return false;
  if (attr.act != Activation::None && attr.act != Activation::Relu) return false;
  if (!attr.bias && attr.act == Activation::None) return false;  // plain: cuBLAS
  if (attr.bias && alignment(attr.bias) < 16) return false;
  for (const MatDesc* m : {&a, &b})
    if (m->strides[3] != 1 && m->strides[2] != 1) return false;
  const int64_t M = a.dims[2], K = a.dims[3], N = b.dims[3];
  const bool ta = a.strides[3] != 1, tb = b.strides[3] != 1;
  const int64_t lda = ta ? a.strides[3] : a.strides[2], ldb = tb ? b.strides[3] : b.strides[2];
  const int64_t ldc = c.strides[2];
  const cublasLtEpilogue_t epi = attr.bias ? (attr.act == Activation::Relu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                                                          : CUBLASLT_EPILOGUE_BIAS)
                                           : CUBLASLT_EPILOGUE_RELU;
  const bool bf16 = attr.compute == ComputeType::BF16;
  const uint32_t align_a = alignment(b.ptr), align_b = alignment(a.ptr), align_d = alignment(c.ptr);
  using Key = std::array<int64_t, 13>;
  thread_local std::map<Key, LtPlan> plans;
  const Key key = {M,  N,  K,  lda, ldb, ldc, ta, tb, static_cast<int64_t>(epi), bf16,
                   align_a, align_b, align_d};
  auto [it, fresh] = plans.try_emplace(key);
  LtPlan& p = it->second;
  if (fresh) {
    // Column-major: D (N x M) = op(b^T) (N x K) op(a^T) (K x M).
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasComputeType_t compute = bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    // The stored matrices: b as N x K (or K x N transposed), a as K x M (or M x K).
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, tb ? K : N, tb ? N : K, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, ta ? M : K, ta ? K : M, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, N, M, ldc));
  }
  // Each call's own bias, set before a new plan's heuristic sees the descriptor.
  if (attr.bias)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &attr.bias,
                                                sizeof attr.bias));
  if (fresh) {
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t workspace = 0;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                         sizeof workspace);
    // Only algorithms that work at this call's alignments (part of the key).
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                         sizeof align_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                         sizeof align_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                         sizeof align_d);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                         sizeof align_d);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_handle(), p.op, p.a, p.b, p.d, p.d,
                                                             pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    p.usable = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p.usable) p.algo = result.algo;
    ++lt_plans_;
  }
  if (!p.usable) return false;
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasLtMatmul(lt_handle(), p.op, &one, b.ptr, p.a, a.ptr, p.b, &zero, c.ptr, p.d,
                              const_cast<float*>(c.ptr), p.d, &p.algo, nullptr, 0,
                              cudaStreamPerThread));
  return true;
}

// Row-major C = A B is column-major C^T = B^T A^T: swap the operands
// instead of transposing anything. Each matrix must have one unit stride
// (rows or columns); the batch runs as one strided-batched call per B.
void CudaBackend::gemm(const MatDesc& a, const MatDesc& b, const MatDesc& c, const GemmAttr& attr) {
  if (c.strides[3] != 1) missing("gemm into a column-major output");
  // bf16 operands (Op::GemmBf16Operands): both of them, into an f32 result.
  if (a.dtype != b.dtype || (a.dtype != DType::F32 && a.dtype != DType::BF16))
    missing("gemm on operands other than two f32 or two bf16 matrices");
  if (c.dtype != DType::F32) missing("gemm into a result other than f32");
  const cudaDataType_t operand = a.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
  const size_t esize = dtype_size(a.dtype);  // the pointers are float* whatever they hold
  const bool epilogue = attr.bias || attr.act != Activation::None;
  if (epilogue && a.dims[0] * a.dims[1] != 1) missing("a batched gemm with a bias or activation");
  const int64_t M = a.dims[2], K = a.dims[3], N = b.dims[3];
  if (M == 0 || N == 0) return;  // nothing to write
  if (epilogue && K > 0 && gemm_lt(a, b, c, attr)) return;
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
  // An epilogue applies to the product, not to the sum: accumulating, the
  // product goes to scratch first, and the epilogue adds it to c.
  const bool to_scratch = epilogue && attr.accumulate;
  float* out = const_cast<float*>(c.ptr);
  int64_t ldo = c.strides[2];
  if (to_scratch) out = static_cast<float*>(scratch().get(M * N * sizeof(float))), ldo = N;
  const float alpha = attr.alpha, beta = attr.accumulate && !to_scratch ? 1.f : 0.f;
  // bf16: tensor cores on bf16-rounded operands with f32 accumulation, from
  // the f32 operands as they are (cuBLAS rounds them), as the CPU's bf16.
  // bf16 operands take the f32 compute type: their products are exact in it.
  const cublasComputeType_t compute =
      attr.compute == ComputeType::BF16 && operand == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                                 : CUBLAS_COMPUTE_32F;
  const char* a_bytes = reinterpret_cast<const char*>(a.ptr);
  const char* b_bytes = reinterpret_cast<const char*>(b.ptr);
  for (int64_t bi = 0; bi < a.dims[0]; ++bi)
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle(), op_b, op_a, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &alpha,
        b_bytes + bi * b.strides[0] * esize, operand, static_cast<int>(ldb), b.strides[1],
        a_bytes + bi * a.strides[0] * esize, operand, static_cast<int>(lda), a.strides[1], &beta,
        out + (to_scratch ? 0 : bi * c.strides[0]), CUDA_R_32F, static_cast<int>(ldo),
        to_scratch ? M * N : c.strides[1], static_cast<int>(a.dims[1]), compute,
        CUBLAS_GEMM_DEFAULT));
  if (!epilogue) return;
  gemm_epilogue_kernel<<<blocks_for(M * N), kThreads>>>(out, ldo, const_cast<float*>(c.ptr),
                                                        c.strides[2], M, N, attr.bias, attr.act,
                                                        attr.accumulate);
  check_launch();
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
