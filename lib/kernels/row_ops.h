// The kernels tier: the arithmetic of the row-wise ops (softmax, masks, layer norm, label-
// smoothed cross-entropy, the embedding's gradient, sums of squares, a
// GEMM's epilogue, row gathers), one row, column or element at a time, on
// raw pointers: one definition that the CUDA kernels call and the host tests
// check against reference loops, so a kernel is only a launch shape around
// it. Each function keeps the semantics of the CPU backend
// (lib/cpu/loops.cpp, and oneDNN's primitives in lib/cpu/onednn.cpp), and
// sums in a fixed order, so a result does not depend on how rows are spread
// over threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/activation.h"
#include "core/host_device.h"

namespace nmt {

// What an additive mask adds to a score it hides: large but finite, so that
// no inf - inf appears in a backward pass. The one definition: every
// backend's masks and the decoder's step masks use it.
constexpr float kMask = -1e9f;
// A score at or below this is masked: a score plus kMask stays well under.
constexpr float kMaskedScore = -1e8f;

// exp(x) in float, the one every backend's softmax, loss, attention and
// sampling take, written so that the CPU's `omp simd` loops vectorise it
// (glibc's vector expf is only declared under -ffast-math, and the scalar
// call was a fifth of decoding time). Cephes' range reduction and
// polynomial: within 1.5 ulp of std::exp from -86 to 88; below about -87
// (where exp is under 2^-125) it gives 0, above 88.4 it saturates at
// exp(88.4).
NMT_SIMD_FUNCTION
NMT_KERNEL float exp_approx(float x) {
  x = x < -87.33654f ? -87.33654f : x;
  x = x > 88.37626f ? 88.37626f : x;
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.f;
  // 2^n by building the exponent field of 2^(n-1), so that n = 128 (at the
  // upper clamp) stays in range; n = -126 gives a zero field, i.e. 0.
  // (A NaN x leaves y NaN whatever the exponent, which is then built from
  // 0: converting a NaN to an integer is undefined, UBSan said.)
  const int32_t e = static_cast<int32_t>(n == n ? n : 0.f) + 126;  // 0 to 254
  const uint32_t bits = static_cast<uint32_t>(e) << 23;
  float two_n;
  memcpy(&two_n, &bits, sizeof two_n);
  return y * two_n * 2.f;
}

// Masked columns at the end of a row (source padding, future positions),
// as the CPU's softmax leaves them out: each sum then keeps its order
// however far the batch is padded. At least one column stays.
NMT_KERNEL int64_t unmasked_length(const float* x, int64_t n) {
  while (n > 1 && x[n - 1] <= kMaskedScore) --n;
  return n;
}

// y = softmax(x) or log-softmax(x) over one row of `cols`; y may be x. The
// softmax gives the trailing masked columns exactly 0 (as the CPU's loop
// does, rather than summing their zeros); the log-softmax spans every
// column, as oneDNN's does.
NMT_KERNEL void softmax_row(const float* x, float* y, int64_t cols, bool log) {
  const int64_t n = log ? cols : unmasked_length(x, cols);
  float mx = x[0];
  for (int64_t c = 1; c < n; ++c) mx = x[c] > mx ? x[c] : mx;
  float sum = 0.f;
  if (log) {
    for (int64_t c = 0; c < n; ++c) sum += exp_approx(x[c] - mx);
    const float shift = mx + logf(sum);
    for (int64_t c = 0; c < n; ++c) y[c] = x[c] - shift;
    return;
  }
  NMT_SIMD_SUM(sum)
  for (int64_t c = 0; c < n; ++c) {
    y[c] = exp_approx(x[c] - mx);
    sum += y[c];
  }
  const float inv = 1.f / sum;
  NMT_SIMD
  for (int64_t c = 0; c < n; ++c) y[c] *= inv;
  for (int64_t c = n; c < cols; ++c) y[c] = 0.f;
}

// dx = y * (dy - sum(dy * y)) over one row, from the softmax's output y.
NMT_KERNEL void softmax_backward_row(const float* y, const float* dy, float* dx,
                                                 int64_t cols) {
  float dot = 0.f;
  for (int64_t c = 0; c < cols; ++c) dot += dy[c] * y[c];
  for (int64_t c = 0; c < cols; ++c) dx[c] = y[c] * (dy[c] - dot);
}

// Where element i of scores (B, H, T, S) finds its mask value, for a mask
// broadcast from mask_dims (a dim of 1 broadcasts): the mask's strides, 0
// along a broadcast dim, fixed once per call.
struct MaskBroadcast {
  int64_t H = 0, T = 0, S = 0;     // the scores' inner dims
  int64_t sb = 0, sh = 0, st = 0;  // the mask's strides over B, H, T
  bool row_bcast = false;          // one mask value for a whole row
};

NMT_KERNEL MaskBroadcast mask_broadcast(const int64_t* dims, const int64_t* mask_dims) {
  const int64_t* md = mask_dims;
  MaskBroadcast m;
  m.H = dims[1], m.T = dims[2], m.S = dims[3];
  m.sb = md[0] == 1 ? 0 : md[1] * md[2] * md[3];
  m.sh = md[1] == 1 ? 0 : md[2] * md[3];
  m.st = md[2] == 1 ? 0 : md[3];
  m.row_bcast = md[3] == 1;
  return m;
}

NMT_KERNEL int64_t mask_index(const MaskBroadcast& m, int64_t i) {
  const int64_t s = i % m.S, row = i / m.S;
  const int64_t t = row % m.T, h = row / m.T % m.H, b = row / (m.T * m.H);
  return b * m.sb + h * m.sh + t * m.st + (m.row_bcast ? 0 : s);
}

// Layer normalisation of one row of D: the biased (1/D) variance, as oneDNN
// keeps it; mean and var written where given (training). y may be x.
NMT_KERNEL void layer_norm_row(const float* x, const float* gamma, const float* beta,
                                           float* y, float* mean, float* var, int64_t D,
                                           float eps) {
  float mu = 0.f, v = 0.f;
  NMT_SIMD_SUM(mu)
  for (int64_t i = 0; i < D; ++i) mu += x[i];
  mu /= static_cast<float>(D);
  NMT_SIMD_SUM(v)
  for (int64_t i = 0; i < D; ++i) v += (x[i] - mu) * (x[i] - mu);
  v /= static_cast<float>(D);
  if (mean) *mean = mu;
  if (var) *var = v;
  const float rstd = 1.f / sqrtf(v + eps);
  NMT_SIMD
  for (int64_t i = 0; i < D; ++i) y[i] = (x[i] - mu) * rstd * gamma[i] + beta[i];
}

// dx of one row (assigned), from the forward pass's mean and var:
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma.
NMT_KERNEL void layer_norm_backward_row(const float* x, const float* dy,
                                                    const float* gamma, float mean, float var,
                                                    float* dx, int64_t D, float eps) {
  const float rstd = 1.f / sqrtf(var + eps);
  float sum_g = 0.f, sum_gx = 0.f;
  for (int64_t i = 0; i < D; ++i) {
    const float g = dy[i] * gamma[i];
    sum_g += g;
    sum_gx += g * (x[i] - mean) * rstd;
  }
  const float mg = sum_g / static_cast<float>(D), mgx = sum_gx / static_cast<float>(D);
  for (int64_t i = 0; i < D; ++i) {
    const float xhat = (x[i] - mean) * rstd;
    dx[i] = rstd * (dy[i] * gamma[i] - mg - xhat * mgx);
  }
}

// dgamma[col] += sum_r dy * xhat and dbeta[col] += sum_r dy over the rows, in
// row order: one column per thread writes no float another thread writes.
NMT_KERNEL void layer_norm_param_grads_col(const float* x, const float* dy,
                                                       const float* mean, const float* var,
                                                       int64_t rows, int64_t D, float eps,
                                                       int64_t col, float* dgamma, float* dbeta) {
  float dg = 0.f, db = 0.f;
  for (int64_t r = 0; r < rows; ++r) {
    const float rstd = 1.f / sqrtf(var[r] + eps);
    const float g = dy[r * D + col];
    dg += g * (x[r * D + col] - mean[r]) * rstd;
    db += g;
  }
  dgamma[col] += dg;
  dbeta[col] += db;
}

// The embedding's gradient over columns [i0, i1): dtable[tokens[r]] +=
// dy[r] * scale (ids < 0 skipped), dpositions[r % T] += dy[r] (if given),
// rows in order. A token may repeat: a thread that owns its columns and
// walks every row neither races nor reorders a sum.
NMT_KERNEL void embedding_backward_cols(const int32_t* tokens, int64_t n, int64_t D,
                                                    float scale, const float* dy, float* dtable,
                                                    float* dpositions, int64_t T, int64_t i0,
                                                    int64_t i1) {
  for (int64_t r = 0; r < n; ++r) {
    const float* g = dy + r * D;
    if (tokens[r] >= 0) {
      float* de = dtable + static_cast<int64_t>(tokens[r]) * D;
      for (int64_t i = i0; i < i1; ++i) de[i] += g[i] * scale;
    }
    if (dpositions) {
      float* dp = dpositions + (r % T) * D;
      for (int64_t i = i0; i < i1; ++i) dp[i] += g[i];
    }
  }
}

// The same sums grouped for a GPU, where a thread per column walking every
// row leaves the device nearly idle: column i of one token's gradient from
// the rows that hold it (rows[0..count), ascending: a stable sort of the
// batch's ids), and column i of position p's from rows p, p + T, ... Each
// adds in row order onto what was there, so each equals
// embedding_backward_cols's sum for that token or position.
NMT_KERNEL void embedding_backward_token(const int32_t* rows, int64_t count,
                                                     const float* dy, int64_t D, float scale,
                                                     float* de, int64_t i) {
  float acc = de[i];
  for (int64_t k = 0; k < count; ++k) acc += dy[static_cast<int64_t>(rows[k]) * D + i] * scale;
  de[i] = acc;
}
NMT_KERNEL void embedding_backward_position(const float* dy, int64_t n, int64_t D,
                                                        int64_t T, int64_t p, float* dpositions,
                                                        int64_t i) {
  float acc = dpositions[p * D + i];
  for (int64_t r = p; r < n; r += T) acc += dy[r * D + i];
  dpositions[p * D + i] = acc;
}

// One row's label-smoothed cross-entropy: loss, negative log-likelihood and
// whether it counts (a pad row does not, and its gradient is 0).
struct XentRow {
  double loss = 0, nll = 0;
  int64_t tokens = 0;
};

// A row's loss from its target's logit x_t, its largest logit mx, the sum
// z of exp(x - mx) and the sum of its logits (a token: pad rows have none).
NMT_KERNEL XentRow xent_totals(float x_t, float mx, double z, double sum_x, int64_t V,
                                           float eps) {
  XentRow out;
  const double logz = mx + log(z);
  const double lp_target = x_t - logz;
  const double mean_lp = sum_x / V - logz;
  out.nll = -lp_target;
  out.loss = -(1.0 - eps) * lp_target - eps * mean_lp;
  out.tokens = 1;
  return out;
}

// The gradient at a logit x of a row, but for the target's extra
// -(1 - eps) * grad_scale: (softmax - eps / V) * grad_scale.
NMT_KERNEL float xent_gradient(float x, float mx, float inv_z, int64_t V, float eps,
                                           float grad_scale) {
  return (exp_approx(x - mx) * inv_z - eps / V) * grad_scale;
}

// Against target (q = (1-eps) onehot + eps/V); g (optional) receives
// (softmax - q) * grad_scale. exp in float, summed in float over blocks of
// 1024 and the blocks in double, as the CPU does: a vocabulary may hold 37k
// terms. g may be x.
NMT_KERNEL XentRow xent_row(const float* x, int32_t target, int32_t pad, int64_t V,
                                        float eps, float* g, float grad_scale) {
  XentRow out;
  if (target == pad) {
    if (g)
      for (int64_t j = 0; j < V; ++j) g[j] = 0.f;
    return out;
  }
  float mx = x[0];
  for (int64_t j = 1; j < V; ++j) mx = x[j] > mx ? x[j] : mx;
  double z = 0, sum_x = 0;
  for (int64_t j0 = 0; j0 < V; j0 += 1024) {
    const int64_t j1 = j0 + 1024 < V ? j0 + 1024 : V;
    float zb = 0.f, sb = 0.f;
    for (int64_t j = j0; j < j1; ++j) {
      zb += exp_approx(x[j] - mx);
      sb += x[j];
    }
    z += zb;
    sum_x += sb;
  }
  out = xent_totals(x[target], mx, z, sum_x, V, eps);
  if (g) {
    const float inv_z = static_cast<float>(1.0 / z);
    for (int64_t j = 0; j < V; ++j) g[j] = xent_gradient(x[j], mx, inv_z, V, eps, grad_scale);
    g[target] -= (1.f - eps) * grad_scale;
  }
  return out;
}

// The rows' totals in row order, whatever computed the rows.
NMT_KERNEL XentRow xent_sum(const XentRow* rows, int64_t N) {
  XentRow t;
  for (int64_t i = 0; i < N; ++i) {
    t.loss += rows[i].loss;
    t.nll += rows[i].nll;
    t.tokens += rows[i].tokens;
  }
  return t;
}

// A sum of squares is these chunks' sums, in double, added in chunk order:
// the CPU's split, so the order (and the result) is the same on any device
// and thread count.
constexpr int64_t kSumSquaresChunk = int64_t(1) << 14;

// Chunk c of x (n elements in all).
NMT_KERNEL double sum_squares_chunk(const float* x, int64_t n, int64_t c) {
  double s = 0;
  const int64_t end = (c + 1) * kSumSquaresChunk < n ? (c + 1) * kSumSquaresChunk : n;
  for (int64_t i = c * kSumSquaresChunk; i < end; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

// What a gradient with sum of squares `sumsq` is multiplied by to clip it
// to norm clip_norm (0: no clipping): clip_norm / norm, rounded to float
// once, where the norm exceeds it, else exactly 1.
NMT_KERNEL float clip_scale(double sumsq, double clip_norm) {
  if (!(clip_norm > 0)) return 1.f;
  const double norm = sqrt(sumsq);
  return norm > clip_norm ? static_cast<float>(clip_norm / norm) : 1.f;
}

NMT_KERNEL double sum_in_order(const double* parts, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += parts[i];
  return s;
}

// Wide rows on a GPU (softmax over attention or the vocabulary, the loss):
// a row's reductions are split over kRowLanes lanes, a block's threads, lane
// t taking columns t, t + kRowLanes, ... (neighbouring threads read
// neighbouring columns); the lanes' partial results are combined in lane
// order, so a row's result does not depend on how the lanes were scheduled.
// The one-thread row functions above sum in column order, as the CPU does:
// the two agree to rounding. The *_row_lanes functions run the lanes one
// after another: what the host tests check, with the same arithmetic.
constexpr int kRowLanes = 256;

NMT_KERNEL float lane_max(const float* x, int64_t n, int lane) {
  float m = -INFINITY;
  for (int64_t c = lane; c < n; c += kRowLanes) m = x[c] > m ? x[c] : m;
  return m;
}

// Lane `lane`'s sums of exp(x - mx) and (with sum_x) of x.
NMT_KERNEL void lane_sums(const float* x, int64_t n, float mx, int lane, float* z,
                                      float* sum_x) {
  float a = 0.f, b = 0.f;
  for (int64_t c = lane; c < n; c += kRowLanes) {
    a += exp_approx(x[c] - mx);
    b += x[c];
  }
  *z = a;
  if (sum_x) *sum_x = b;
}

NMT_KERNEL float lanes_max(const float* parts) {
  float m = parts[0];
  for (int t = 1; t < kRowLanes; ++t) m = parts[t] > m ? parts[t] : m;
  return m;
}

NMT_KERNEL double lanes_sum(const float* parts) {
  double s = 0;
  for (int t = 0; t < kRowLanes; ++t) s += parts[t];
  return s;
}

// Element x of a softmax row (inside: not in its masked tail) or of a
// log-softmax row, from the row's largest value mx and k: 1 / sum for the
// softmax, mx + log(sum) for the log-softmax.
NMT_KERNEL float softmax_scale(double sum, float mx, bool log) {
  return log ? static_cast<float>(mx + ::log(sum)) : static_cast<float>(1.0 / sum);
}
NMT_KERNEL float softmax_element(float x, float mx, float k, bool log, bool inside) {
  if (log) return x - k;
  return inside ? exp_approx(x - mx) * k : 0.f;
}

// softmax_row's semantics (the masked tail exactly 0; the log-softmax over
// every column), by lanes.
inline void softmax_row_lanes(const float* x, float* y, int64_t cols, bool log) {
  const int64_t n = log ? cols : unmasked_length(x, cols);
  float part[kRowLanes];
  for (int t = 0; t < kRowLanes; ++t) part[t] = lane_max(x, n, t);
  const float mx = lanes_max(part);
  for (int t = 0; t < kRowLanes; ++t) lane_sums(x, n, mx, t, &part[t], nullptr);
  const float k = softmax_scale(lanes_sum(part), mx, log);
  for (int64_t c = 0; c < cols; ++c) y[c] = softmax_element(x[c], mx, k, log, c < n);
}

// xent_row's semantics by lanes.
inline XentRow xent_row_lanes(const float* x, int32_t target, int32_t pad, int64_t V, float eps,
                              float* g, float grad_scale) {
  if (target == pad) {
    if (g)
      for (int64_t j = 0; j < V; ++j) g[j] = 0.f;
    return XentRow();
  }
  float part[kRowLanes], part_x[kRowLanes];
  for (int t = 0; t < kRowLanes; ++t) part[t] = lane_max(x, V, t);
  const float mx = lanes_max(part);
  for (int t = 0; t < kRowLanes; ++t) lane_sums(x, V, mx, t, &part[t], &part_x[t]);
  const double z = lanes_sum(part);
  const XentRow out = xent_totals(x[target], mx, z, lanes_sum(part_x), V, eps);
  if (g) {
    const float inv_z = static_cast<float>(1.0 / z);
    for (int64_t j = 0; j < V; ++j) g[j] = xent_gradient(x[j], mx, inv_z, V, eps, grad_scale);
    g[target] -= (1.f - eps) * grad_scale;
  }
  return out;
}

// Lane `lane`'s sum of x, or of (x - mu)^2 (a variance's), or of a * b.
NMT_KERNEL float lane_sum(const float* x, int64_t n, int lane) {
  float s = 0.f;
  for (int64_t c = lane; c < n; c += kRowLanes) s += x[c];
  return s;
}
NMT_KERNEL float lane_sum_sq(const float* x, int64_t n, float mu, int lane) {
  float s = 0.f;
  for (int64_t c = lane; c < n; c += kRowLanes) s += (x[c] - mu) * (x[c] - mu);
  return s;
}
NMT_KERNEL float lane_dot(const float* a, const float* b, int64_t n, int lane) {
  float s = 0.f;
  for (int64_t c = lane; c < n; c += kRowLanes) s += a[c] * b[c];
  return s;
}

// Layer norm by lanes: lane t's sums of g = dy * gamma and of g * xhat
// (the backward pass's two reductions).
NMT_KERNEL void lane_layer_norm_grads(const float* x, const float* dy,
                                                  const float* gamma, float mean, float rstd,
                                                  int64_t D, int lane, float* sum_g,
                                                  float* sum_gx) {
  float a = 0.f, b = 0.f;
  for (int64_t i = lane; i < D; i += kRowLanes) {
    const float g = dy[i] * gamma[i];
    a += g;
    b += g * (x[i] - mean) * rstd;
  }
  *sum_g = a, *sum_gx = b;
}

// One element of layer norm's output, and of its dx, from the row's
// statistics (mg and mgx: the means of g and of g * xhat).
NMT_KERNEL float layer_norm_element(float x, float mean, float rstd, float gamma,
                                                float beta) {
  return (x - mean) * rstd * gamma + beta;
}
NMT_KERNEL float layer_norm_dx_element(float x, float dy, float gamma, float mean,
                                                   float rstd, float mg, float mgx) {
  const float xhat = (x - mean) * rstd;
  return rstd * (dy * gamma - mg - xhat * mgx);
}

// layer_norm_row's semantics by lanes (the mean, then the biased variance
// about it, each a lanes sum).
inline void layer_norm_row_lanes(const float* x, const float* gamma, const float* beta, float* y,
                                 float* mean, float* var, int64_t D, float eps) {
  float part[kRowLanes];
  for (int t = 0; t < kRowLanes; ++t) part[t] = lane_sum(x, D, t);
  const float mu = static_cast<float>(lanes_sum(part) / static_cast<double>(D));
  for (int t = 0; t < kRowLanes; ++t) part[t] = lane_sum_sq(x, D, mu, t);
  const float v = static_cast<float>(lanes_sum(part) / static_cast<double>(D));
  if (mean) *mean = mu;
  if (var) *var = v;
  const float rstd = 1.f / sqrtf(v + eps);
  for (int64_t i = 0; i < D; ++i) y[i] = layer_norm_element(x[i], mu, rstd, gamma[i], beta[i]);
}

// layer_norm_backward_row's semantics by lanes.
inline void layer_norm_backward_row_lanes(const float* x, const float* dy, const float* gamma,
                                          float mean, float var, float* dx, int64_t D, float eps) {
  const float rstd = 1.f / sqrtf(var + eps);
  float pg[kRowLanes], pgx[kRowLanes];
  for (int t = 0; t < kRowLanes; ++t)
    lane_layer_norm_grads(x, dy, gamma, mean, rstd, D, t, &pg[t], &pgx[t]);
  const float mg = static_cast<float>(lanes_sum(pg) / static_cast<double>(D));
  const float mgx = static_cast<float>(lanes_sum(pgx) / static_cast<double>(D));
  for (int64_t i = 0; i < D; ++i)
    dx[i] = layer_norm_dx_element(x[i], dy[i], gamma[i], mean, rstd, mg, mgx);
}

// softmax_backward_row's semantics by lanes (dx may be dy).
inline void softmax_backward_row_lanes(const float* y, const float* dy, float* dx, int64_t cols) {
  float part[kRowLanes];
  for (int t = 0; t < kRowLanes; ++t) part[t] = lane_dot(dy, y, cols, t);
  const float s = static_cast<float>(lanes_sum(part));
  for (int64_t c = 0; c < cols; ++c) dx[c] = y[c] * (dy[c] - s);
}

// Column reductions over many rows (a bias's gradient, layer norm's
// parameter gradients: 25k rows of 512 columns in a training step) split
// the rows into chunks of kColumnChunk, a thread per (chunk, column), and
// add the chunks' partial sums in chunk order: enough threads to fill a
// GPU, and one order whatever the launch.
constexpr int64_t kColumnChunk = 256;

NMT_KERNEL int64_t column_chunks(int64_t rows) {
  return (rows + kColumnChunk - 1) / kColumnChunk;
}

// Where chunk `chunk` of `rows` ends (it starts at chunk * kColumnChunk).
NMT_KERNEL int64_t chunk_end(int64_t chunk, int64_t rows) {
  return (chunk + 1) * kColumnChunk < rows ? (chunk + 1) * kColumnChunk : rows;
}

// Chunk `chunk`'s sum of column `col` of src (rows, cols).
NMT_KERNEL float column_sum_chunk(const float* src, int64_t rows, int64_t cols,
                                              int64_t col, int64_t chunk) {
  const int64_t r1 = chunk_end(chunk, rows);
  float s = 0.f;
  for (int64_t r = chunk * kColumnChunk; r < r1; ++r) s += src[r * cols + col];
  return s;
}

// Chunk `chunk`'s sums of dy * xhat and of dy down column `col`.
NMT_KERNEL void layer_norm_param_grads_chunk(const float* x, const float* dy,
                                                         const float* mean, const float* var,
                                                         int64_t rows, int64_t D, float eps,
                                                         int64_t col, int64_t chunk, float* dg,
                                                         float* db) {
  const int64_t r1 = chunk_end(chunk, rows);
  float a = 0.f, b = 0.f;
  for (int64_t r = chunk * kColumnChunk; r < r1; ++r) {
    const float rstd = 1.f / sqrtf(var[r] + eps);
    const float g = dy[r * D + col];
    a += g * (x[r * D + col] - mean[r]) * rstd;
    b += g;
  }
  *dg = a, *db = b;
}

// The chunks' partial sums of column `col` (parts: chunks rows of `cols`),
// in chunk order.
NMT_KERNEL float sum_column_chunks(const float* parts, int64_t chunks, int64_t cols,
                                               int64_t col) {
  float s = 0.f;
  for (int64_t c = 0; c < chunks; ++c) s += parts[c * cols + col];
  return s;
}

// x[row, col] of a row of x, or 0 where col is -1 (no column asked for).
NMT_KERNEL float pick_value(const float* row, int32_t col) {
  return col < 0 ? 0.f : row[col];
}

// A GEMM's epilogue at one element of column `col` of its result, p the
// product (alpha included): act(p + bias[col]) (no bias: null), plus what
// the destination held when the GEMM accumulates (GemmAttr: the bias and the
// activation apply to the product, not to the sum).
NMT_KERNEL float gemm_epilogue(float p, const float* bias, int64_t col, Activation act,
                                           float prior) {
  return activate(act, bias ? p + bias[col] : p) + prior;
}

// Byte e of gather_rows's n rows of `len` bytes: where it is read and where
// written (row idx[i] of the source, rows src_ld bytes apart, into row
// dst_idx[i], or i, of the destination, rows dst_ld bytes apart).
NMT_KERNEL void gather_byte(int64_t e, int64_t len, const int64_t* idx, int64_t src_ld,
                                        const int64_t* dst_idx, int64_t dst_ld, int64_t* from,
                                        int64_t* to) {
  const int64_t i = e / len, b = e % len;
  *from = idx[i] * src_ld + b;
  *to = (dst_idx ? dst_idx[i] : i) * dst_ld + b;
}

}  // namespace nmt
