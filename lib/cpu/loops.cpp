#include "cpu/loops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace nmt::cpu {

void add(const float* a, const float* b, float* dst, int64_t n) {
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

void add_inplace(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void scale(float* x, int64_t n, float s) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void add_mask(float* scores, const std::array<int64_t, 4>& d, const float* mask,
              const std::array<int64_t, 4>& md) {
  const int64_t sb = md[0] == 1 ? 0 : md[1] * md[2] * md[3], sh = md[1] == 1 ? 0 : md[2] * md[3],
                st = md[2] == 1 ? 0 : md[3];
  const bool row_bcast = md[3] == 1;
#pragma omp parallel for collapse(2) if (d[0] * d[1] * d[2] * d[3] > 65536)
  for (int64_t b = 0; b < d[0]; ++b)
    for (int64_t h = 0; h < d[1]; ++h)
      for (int64_t t = 0; t < d[2]; ++t) {
        float* row = scores + ((b * d[1] + h) * d[2] + t) * d[3];
        const float* m = mask + b * sb + h * sh + t * st;
        if (row_bcast) {
          for (int64_t s = 0; s < d[3]; ++s) row[s] += m[0];
        } else {
          for (int64_t s = 0; s < d[3]; ++s) row[s] += m[s];
        }
      }
}

void dropout(float* x, int64_t n, float p, uint64_t seed) {
  if (p <= 0.f) return;
  const float keep = 1.f / (1.f - p);
  const uint32_t threshold = static_cast<uint32_t>(p * 4294967296.0);
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i)
    x[i] = dropout_value(x[i], seed, static_cast<uint64_t>(i), threshold, keep);
}

void relu_backward(const float* y, float* dy, int64_t n) {
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dy[i] = y[i] > 0.f ? dy[i] : 0.f;
}

void add_column_sums(const float* src, float* dst, int64_t rows, int64_t cols) {
  // Rows in sequence per column: the sum does not depend on the thread count.
#pragma omp parallel for if (rows * cols > 65536)
  for (int64_t j = 0; j < cols; ++j) {
    float s = 0.f;
    for (int64_t i = 0; i < rows; ++i) s += src[i * cols + j];
    dst[j] += s;
  }
}

void softmax_rows(const float* src, float* dst, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols > 4096)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = src + r * cols;
    float* y = dst + r * cols;
    float mx = x[0];
    for (int64_t c = 1; c < cols; ++c) mx = std::max(mx, x[c]);
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) {
      y[c] = std::exp(x[c] - mx);
      sum += y[c];
    }
    const float inv = 1.f / sum;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) y[c] *= inv;
  }
}

void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* g = dy + r * cols;
    float* o = dx + r * cols;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) sum += g[c];
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) o[c] = g[c] - std::exp(yr[c]) * sum;
  }
}

void layer_norm_rows(const float* src, float* dst, const float* gamma, const float* beta,
                     int64_t rows, int64_t D, float eps) {
#pragma omp parallel for if (rows * D > 4096)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = src + r * D;
    float* y = dst + r * D;
    float mean = 0.f, var = 0.f;
#pragma omp simd reduction(+ : mean)
    for (int64_t i = 0; i < D; ++i) mean += x[i];
    mean /= static_cast<float>(D);
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < D; ++i) var += (x[i] - mean) * (x[i] - mean);
    const float rstd = 1.f / std::sqrt(var / static_cast<float>(D) + eps);
#pragma omp simd
    for (int64_t i = 0; i < D; ++i) y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
  }
}

void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t D, float scale,
               const float* positions, int64_t pos0, int64_t T, float* out) {
#pragma omp parallel for if (n * D > 65536)
  for (int64_t r = 0; r < n; ++r) {
    const float* e = table + static_cast<int64_t>(tokens[r]) * D;
    const float* p = positions + (pos0 + r % T) * D;
    float* o = out + r * D;
    for (int64_t i = 0; i < D; ++i) o[i] = e[i] * scale + p[i];
  }
}

void embedding_backward(const int32_t* tokens, int64_t n, int64_t D, float scale, const float* dy,
                        float* dtable, float* dpositions, int64_t T) {
  // Sequential over rows: a token may appear many times, and a fixed order
  // keeps training deterministic.
  for (int64_t r = 0; r < n; ++r) {
    const float* g = dy + r * D;
    float* de = dtable + static_cast<int64_t>(tokens[r]) * D;
    for (int64_t i = 0; i < D; ++i) de[i] += g[i] * scale;
    if (dpositions) {
      float* dp = dpositions + (r % T) * D;
      for (int64_t i = 0; i < D; ++i) dp[i] += g[i];
    }
  }
}

XentTotals xent(const float* logits, const int32_t* targets, int64_t N, int64_t V, float eps,
                int32_t pad, float* dlogits, float grad_scale) {
  std::vector<double> loss(N, 0.0), nll(N, 0.0);
#pragma omp parallel for
  for (int64_t i = 0; i < N; ++i) {
    const float* x = logits + i * V;
    float* g = dlogits ? dlogits + i * V : nullptr;
    if (targets[i] == pad) {
      if (g) std::fill(g, g + V, 0.f);
      continue;
    }
    float mx = x[0];
    for (int64_t j = 1; j < V; ++j) mx = std::max(mx, x[j]);
    double z = 0, sum_x = 0;
    for (int64_t j = 0; j < V; ++j) {
      z += std::exp(static_cast<double>(x[j] - mx));
      sum_x += x[j];
    }
    const double logz = mx + std::log(z);
    const double lp_target = x[targets[i]] - logz;
    const double mean_lp = sum_x / V - logz;
    nll[i] = -lp_target;
    loss[i] = -(1.0 - eps) * lp_target - eps * mean_lp;
    if (g) {
      // d/dx_j = softmax_j - q_j, q = (1-eps) onehot + eps / V
      const double inv_z = 1.0 / z;
      const float u = eps / V;
      for (int64_t j = 0; j < V; ++j)
        g[j] =
            static_cast<float>((std::exp(static_cast<double>(x[j] - mx)) * inv_z - u) * grad_scale);
      g[targets[i]] -= (1.f - eps) * grad_scale;
    }
  }
  XentTotals t;
  for (int64_t i = 0; i < N; ++i) {
    if (targets[i] == pad) continue;
    t.loss += loss[i];
    t.nll += nll[i];
    ++t.tokens;
  }
  return t;
}

void adam(float* p, const float* g, float* m, float* v, int64_t n, float b1, float b2, float step,
          float inv_sqrt_c2, float eps) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1.f - b1) * g[i];
    v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
    p[i] -= step * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
  }
}

double sum_squares(const float* x, int64_t n) {
  // Fixed chunks summed in order: the same result for any thread count.
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(chunks, 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    double s = 0;
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) s += static_cast<double>(x[i]) * x[i];
    part[c] = s;
  }
  double s = 0;
  for (double q : part) s += q;
  return s;
}

void topk_log_softmax(const float* logits, const double* base, int64_t rows, int64_t V, int64_t k,
                      const int32_t* banned, int64_t n_banned, int32_t col, double* values,
                      int32_t* indices, float* col_lp) {
  // One row per thread: a vectorised log-sum-exp, then the k best logits
  // (their order is the log-probabilities' order) in a small sorted list.
  // A block of 16 logits is passed over at once when none beats the k-th.
#pragma omp parallel for schedule(static) if (rows * V > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * V;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < V; ++v) mx = x[v] > mx ? x[v] : mx;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < V; ++v) sum += std::exp(x[v] - mx);
    const float lse = mx + std::log(sum);
    col_lp[r] = x[col] - lse;
    double* val = values + r * k;  // the logits while selecting
    int32_t* idx = indices + r * k;
    int64_t filled = 0;
    float worst = -INFINITY;  // the k-th best so far, once there are k
    for (int64_t v0 = 0; v0 < V; v0 += 16) {
      const int64_t end = std::min(V, v0 + 16);
      bool any = false;
      for (int64_t v = v0; v < end; ++v) any |= x[v] > worst;
      if (!any && filled == k) continue;
      for (int64_t v = v0; v < end; ++v) {
        if (filled == k && !(x[v] > worst)) continue;
        bool skip = false;
        for (int64_t q = 0; q < n_banned; ++q) skip |= banned[q] == v;
        if (skip) continue;
        int64_t pos = filled < k ? filled : k - 1;
        while (pos > 0 && val[pos - 1] < x[v]) {
          val[pos] = val[pos - 1];
          idx[pos] = idx[pos - 1];
          --pos;
        }
        val[pos] = x[v];
        idx[pos] = static_cast<int32_t>(v);
        if (filled < k) ++filled;
        if (filled == k) worst = static_cast<float>(val[k - 1]);
      }
    }
    const double b = base ? base[r] : 0.0;
    for (int64_t j = 0; j < filled; ++j) val[j] = b + (static_cast<float>(val[j]) - lse);
    for (int64_t j = filled; j < k; ++j) val[j] = -INFINITY, idx[j] = -1;
  }
}

void gather_rows(const float* src, int64_t src_ld, const int64_t* idx, int64_t n, int64_t len,
                 float* dst, int64_t dst_ld) {
#pragma omp parallel for if (n * len > 65536)
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * dst_ld, src + idx[i] * src_ld, static_cast<size_t>(len) * sizeof(float));
}

}  // namespace nmt::cpu
