// The arithmetic of decoding's ops (a step's fused attention, the search
// step's top k of the log-probabilities, a sampling step), one query row or
// one logits row at a time, on raw pointers: one definition that the CPU's
// loops (lib/cpu/loops.cpp) and the CUDA kernels call and the host tests
// check against reference loops. The CPU's vector kernels (attention whose
// head width fills whole vectors, the search step's top k with its block
// maxima) are variants of these with the same selections and tie breaks,
// checked against the naive references of tests/backend_ops.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "kernels/row_ops.h"

namespace nmt {

// Where attend's operands lie: 4-D views (B, H, rows, width) with a unit
// last stride, flattened to plain integers so that a kernel takes them by
// value.
struct AttendShape {
  // Queries (B, H, M, D), keys (B, H, L, D), values (B, H, L, Dv).
  int64_t B = 0, H = 0, M = 0, D = 0, L = 0, Dv = 0;
  // Each operand's strides over B, H and rows.
  int64_t q[3] = {}, k[3] = {}, v[3] = {}, ctx[3] = {};
};

// One query qi (D wide) against L keys and values, rows ks and vs apart
// (the keys past the mask's unmasked length already left out): o (Dv) =
// sum_j p_j v_j with p = softmax_j(scale qi . k_j + m[j]); s holds L floats
// of scratch. Four keys at a time: four independent sums instead of one
// dependent chain per key, and the context accumulated in the grouping o +=
// ((p0 v0 + p1 v1) + p2 v2) + p3 v3. The CPU's loop without a vector
// kernel, and one GPU thread's query row.
NMT_KERNEL void attend_keys(const float* qi, const float* kb, int64_t ks, const float* vb,
                            int64_t vs, const float* m, int64_t L, int64_t D, int64_t Dv,
                            float scale, float* s, float* o) {
  int64_t j = 0;
  for (; j + 4 <= L; j += 4) {
    const float *k0 = kb + j * ks, *k1 = k0 + ks, *k2 = k1 + ks, *k3 = k2 + ks;
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    NMT_SIMD_SUM(d0, d1, d2, d3)
    for (int64_t x = 0; x < D; ++x) {
      d0 += qi[x] * k0[x];
      d1 += qi[x] * k1[x];
      d2 += qi[x] * k2[x];
      d3 += qi[x] * k3[x];
    }
    s[j] = d0, s[j + 1] = d1, s[j + 2] = d2, s[j + 3] = d3;
  }
  for (; j < L; ++j) {
    const float* kj = kb + j * ks;
    float dot = 0.f;
    NMT_SIMD_SUM(dot)
    for (int64_t x = 0; x < D; ++x) dot += qi[x] * kj[x];
    s[j] = dot;
  }
  float mx = -INFINITY;
  for (j = 0; j < L; ++j) {
    s[j] = s[j] * scale + (m ? m[j] : 0.f);
    mx = s[j] > mx ? s[j] : mx;
  }
  float sum = 0.f;
  NMT_SIMD_SUM(sum)
  for (j = 0; j < L; ++j) {
    s[j] = exp_approx(s[j] - mx);
    sum += s[j];
  }
  const float inv = 1.f / sum;
  NMT_SIMD
  for (int64_t x = 0; x < Dv; ++x) o[x] = 0.f;
  for (j = 0; j + 4 <= L; j += 4) {
    const float *v0 = vb + j * vs, *v1 = v0 + vs, *v2 = v1 + vs, *v3 = v2 + vs;
    const float p0 = s[j] * inv, p1 = s[j + 1] * inv, p2 = s[j + 2] * inv, p3 = s[j + 3] * inv;
    NMT_SIMD
    for (int64_t x = 0; x < Dv; ++x) o[x] += p0 * v0[x] + p1 * v1[x] + p2 * v2[x] + p3 * v3[x];
  }
  for (; j < L; ++j) {
    const float* vj = vb + j * vs;
    const float p = s[j] * inv;
    NMT_SIMD
    for (int64_t x = 0; x < Dv; ++x) o[x] += p * vj[x];
  }
}

// Query row `item` (of B * H * M, in (b, h, i) order) of a step's
// attention (attend_keys). Keys past the mask's unmasked length are left
// out, as the CPU does, so a sentence's numbers do not depend on its
// batch's padding.
NMT_KERNEL void attend_row(const float* q, const float* k, const float* v, const float* mask,
                           float scale, float* ctx, const AttendShape& a, int64_t item, float* s) {
  const int64_t i = item % a.M, h = item / a.M % a.H, b = item / (a.M * a.H);
  const float* m = mask ? mask + b * a.L : nullptr;
  attend_keys(q + b * a.q[0] + h * a.q[1] + i * a.q[2], k + b * a.k[0] + h * a.k[1], a.k[2],
              v + b * a.v[0] + h * a.v[1], a.v[2], m, m ? unmasked_length(m, a.L) : a.L, a.D,
              a.Dv, scale, s, ctx + b * a.ctx[0] + h * a.ctx[1] + i * a.ctx[2]);
}

NMT_KERNEL bool is_banned_id(int64_t v, const int32_t* banned, int64_t n_banned) {
  for (int64_t q = 0; q < n_banned; ++q)
    if (banned[q] == v) return true;
  return false;
}

// Orders of a best-first list: the higher value (a newcomer goes after its
// equals, so ties keep the lower id when ids arrive ascending), and
// sampling's (sample_before).
struct HigherValue {
  template <typename T>
  NMT_HOST_DEVICE bool operator()(T a, int32_t, T b, int32_t) const {
    return b < a;
  }
};

// Admits (x, id) to the best-first lists val and idx, `filled` of at most k
// entries long, moving down every entry it comes `before`; a full list
// drops its last. The caller has already checked that x beats the last
// entry of a full list (the search's and sampling's selection, CPU and GPU).
template <typename T, typename Before>
NMT_KERNEL void insert_best(T* val, int32_t* idx, int64_t& filled, int64_t k, T x,
                                        int32_t id, Before before) {
  int64_t pos = filled < k ? filled : k - 1;
  while (pos > 0 && before(x, id, val[pos - 1], idx[pos - 1])) {
    val[pos] = val[pos - 1];
    idx[pos] = idx[pos - 1];
    --pos;
  }
  val[pos] = x;
  idx[pos] = id;
  if (filled < k) ++filled;
}

// The row's log-sum-exp. ordered (the search's ordered_sum, and every sum
// here) adds the exponentials one by one in column order; exp(-inf) adds
// exactly 0, so a row's -inf columns never change its other numbers.
NMT_KERNEL float log_sum_exp_row(const float* x, int64_t V) {
  float mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) mx = x[v] > mx ? x[v] : mx;
  float sum = 0.f;
  for (int64_t v = 0; v < V; ++v) sum += exp_approx(x[v] - mx);
  return mx + logf(sum);
}

// One row of the search step (Backend::topk_log_softmax): val and idx (k
// each) receive the k best base + lp[v] over the ids not banned, best first;
// col_lp (n_cols) lp[cols[c]], -inf for -1. The selection is the CPU's: a
// list kept sorted by insertion, a newcomer placed after its equals and
// admitted to a full list only if it beats the k-th, so ties keep the lower
// id; -inf logits fill a list that has room. Slots left over: -inf, id -1.
NMT_KERNEL void topk_log_softmax_row(const float* x, double base, int64_t V, int64_t k,
                                                 const int32_t* banned, int64_t n_banned,
                                                 const int32_t* cols, int64_t n_cols, double* val,
                                                 int32_t* idx, float* col_lp) {
  int64_t filled = 0;
  float worst = -INFINITY;  // the k-th best so far, once there are k
  for (int64_t v = 0; v < V; ++v) {
    if (filled == k && !(x[v] > worst)) continue;
    if (is_banned_id(v, banned, n_banned)) continue;
    insert_best<double>(val, idx, filled, k, x[v], static_cast<int32_t>(v), HigherValue());
    if (filled == k) worst = static_cast<float>(val[k - 1]);
  }
  const float lse = log_sum_exp_row(x, V);
  for (int64_t c = 0; c < n_cols; ++c) col_lp[c] = cols[c] >= 0 ? x[cols[c]] - lse : -INFINITY;
  // The difference in float, then the sum in double: the CPU's roundings.
  for (int64_t j = 0; j < filled; ++j) val[j] = base + (static_cast<float>(val[j]) - lse);
  for (int64_t j = filled; j < k; ++j) val[j] = -INFINITY, idx[j] = -1;
}

// A candidate comes before another: the larger logit, ties the lower id (a
// strict total order, so every correct sort or merge agrees): the order of
// a sampling step's candidates and of the search step's merged lists.
NMT_KERNEL bool sample_before(float a, int32_t ia, float b, int32_t ib) {
  return a != b ? a > b : ia < ib;
}

// The search step by lanes (a GPU's block per row): lane t keeps its own
// best-first list over columns t, t + kRowLanes, ... (ids ascending, so
// insert_best's ties keep the lower id), and the lanes' lists are merged
// pairwise in a fixed tree, lane t taking in lane t + s for s = 128, 64,
// ..., 1. "Higher value, then lower id" is a strict total order, so any
// merge order selects what topk_log_softmax_row selects. k is at most
// kLaneTopk here (the lists live in a block's shared memory); a larger k
// takes the one-thread row.
constexpr int64_t kLaneTopk = 16;

// Lane `lane`'s list (val, idx: k entries), its length returned.
NMT_KERNEL int64_t topk_lane(const float* x, int64_t V, int64_t k,
                                         const int32_t* banned, int64_t n_banned, int lane,
                                         float* val, int32_t* idx) {
  int64_t filled = 0;
  for (int64_t v = lane; v < V; v += kRowLanes) {
    if (filled == k && !(x[v] > val[k - 1])) continue;
    if (is_banned_id(v, banned, n_banned)) continue;
    insert_best<float>(val, idx, filled, k, x[v], static_cast<int32_t>(v), HigherValue());
  }
  return filled;
}

// Merges list b (nb) into list a (na), both best first, keeping at most k:
// a's new length. tmp holds k entries of each.
NMT_KERNEL int64_t merge_best(float* av, int32_t* ai, int64_t na, const float* bv,
                                          const int32_t* bi, int64_t nb, int64_t k, float* tv,
                                          int32_t* ti) {
  int64_t i = 0, j = 0, n = 0;
  while (n < k && (i < na || j < nb)) {
    if (j >= nb || (i < na && sample_before(av[i], ai[i], bv[j], bi[j]))) {
      tv[n] = av[i], ti[n] = ai[i], ++i;
    } else {
      tv[n] = bv[j], ti[n] = bi[j], ++j;
    }
    ++n;
  }
  for (int64_t m = 0; m < n; ++m) av[m] = tv[m], ai[m] = ti[m];
  return n;
}

// The row's largest logit and log-sum-exp from the lanes' partial maxima
// and sums (the unordered sum; ordered_sum takes log_sum_exp_row's order).
// The selected lp values and col_lp as topk_log_softmax_row writes them.
NMT_KERNEL void topk_finish(const float* x, double base, int64_t k,
                                        const int32_t* cols, int64_t n_cols, float lse,
                                        const float* best_val, const int32_t* best_idx,
                                        int64_t filled, double* val, int32_t* idx, float* col_lp) {
  for (int64_t c = 0; c < n_cols; ++c) col_lp[c] = cols[c] >= 0 ? x[cols[c]] - lse : -INFINITY;
  for (int64_t j = 0; j < filled; ++j) val[j] = base + (best_val[j] - lse), idx[j] = best_idx[j];
  for (int64_t j = filled; j < k; ++j) val[j] = -INFINITY, idx[j] = -1;
}

// topk_log_softmax_row by lanes, the lanes one after another: what the
// host tests check of the GPU's kernel, with the same functions.
inline void topk_log_softmax_row_lanes(const float* x, double base, int64_t V, int64_t k,
                                       const int32_t* banned, int64_t n_banned,
                                       const int32_t* cols, int64_t n_cols, bool ordered_sum,
                                       double* val, int32_t* idx, float* col_lp) {
  if (k > kLaneTopk) {
    topk_log_softmax_row(x, base, V, k, banned, n_banned, cols, n_cols, val, idx, col_lp);
    return;
  }
  float lv[kRowLanes][kLaneTopk], tv[kLaneTopk];
  int32_t li[kRowLanes][kLaneTopk], ti[kLaneTopk];
  int64_t filled[kRowLanes];
  float part[kRowLanes];
  for (int t = 0; t < kRowLanes; ++t) {
    filled[t] = topk_lane(x, V, k, banned, n_banned, t, lv[t], li[t]);
    part[t] = lane_max(x, V, t);
  }
  for (int s = kRowLanes / 2; s > 0; s /= 2)
    for (int t = 0; t < s; ++t)
      filled[t] = merge_best(lv[t], li[t], filled[t], lv[t + s], li[t + s], filled[t + s], k, tv, ti);
  float lse;
  if (ordered_sum) {
    lse = log_sum_exp_row(x, V);
  } else {
    const float mx = lanes_max(part);
    for (int t = 0; t < kRowLanes; ++t) lane_sums(x, V, mx, t, &part[t], nullptr);
    lse = static_cast<float>(mx + ::log(lanes_sum(part)));
  }
  topk_finish(x, base, k, cols, n_cols, lse, lv[0], li[0], filled[0], val, idx, col_lp);
}


struct SampleBefore {
  NMT_HOST_DEVICE bool operator()(float a, int32_t ia, float b, int32_t ib) const {
    return sample_before(a, ia, b, ib);
  }
};

// Sorts n candidates by sample_before, in place, without extra memory (a
// heap sort: a kernel's thread has no std::sort). The order is total, so
// the result equals std::sort's and std::partial_sort's prefix.
NMT_KERNEL void sort_candidates(float* val, int32_t* id, int64_t n) {
  // A heap whose root comes last in the order; popped to the back.
  auto sift = [&](int64_t root, int64_t end) {
    for (;;) {
      int64_t c = 2 * root + 1;
      if (c >= end) return;
      if (c + 1 < end && sample_before(val[c], id[c], val[c + 1], id[c + 1])) ++c;
      if (!sample_before(val[root], id[root], val[c], id[c])) return;
      const float tv = val[root];
      const int32_t ti = id[root];
      val[root] = val[c], id[root] = id[c];
      val[c] = tv, id[c] = ti;
      root = c;
    }
  };
  for (int64_t r = n / 2 - 1; r >= 0; --r) sift(r, n);
  for (int64_t end = n - 1; end > 0; --end) {
    const float tv = val[0];
    const int32_t ti = id[0];
    val[0] = val[end], id[0] = id[end];
    val[end] = tv, id[end] = ti;
    sift(0, end);
  }
}

// The candidate drawn at u in [0, 1) from m candidates by their weights:
// weight(j) gives the same float at every call (recomputed or stored), and
// the totals are summed in double in candidate order. With top_p (and no
// top_k) it draws from the nucleus: the fewest of the first candidates
// (sorted, largest first) that reach top_p of the mass. m - 1 where
// rounding leaves u past the total; -1 without candidates.
template <typename Weight>
NMT_KERNEL int64_t draw_index(int64_t m, const Weight& weight, int64_t top_k,
                                          float top_p, double u) {
  double total = 0;
  for (int64_t j = 0; j < m; ++j) total += weight(j);
  if (top_p < 1.f && top_k == 0) {
    const double need = top_p * total;
    double acc = 0;
    int64_t keep = 0;
    while (keep < m) {
      acc += weight(keep);
      ++keep;
      if (acc >= need) break;
    }
    m = keep;
    total = acc;
  }
  const double target = u * total;
  double acc = 0;
  for (int64_t j = 0; j < m; ++j) {
    acc += weight(j);
    if (target < acc) return j;
  }
  return m - 1;
}

// What a sampling step draws from, the same for every output.
struct SampleParams {
  float inv_t = 1.f;  // 1 / temperature, rounded once as the CPU does
  int64_t top_k = 0;
  float top_p = 1.f;
  const int32_t* banned = nullptr;
  int64_t n_banned = 0;
};

// The id drawn at u in [0, 1) from logits row x (V) by p: the candidates
// and their order are a small top k selected while streaming (sorted), a
// large one sorted, the nucleus sorted, and otherwise every id not banned
// in id order; the weights are exp(z / t - max) in float (written over
// cand_val), their totals in double in candidate order, so the same u walks
// to the same id on every backend. cand_val and cand_id hold room for V
// candidates.
NMT_KERNEL int32_t sample_draw(const float* x, int64_t V, const SampleParams& p, double u,
                               float* cand_val, int32_t* cand_id) {
  const int64_t top_k = p.top_k;
  int64_t m = 0;
  if (top_k > 0 && top_k <= 64 && top_k < V) {
    float worst = -INFINITY;
    for (int64_t v = 0; v < V; ++v) {
      if (m == top_k && !(x[v] > worst)) continue;
      if (is_banned_id(v, p.banned, p.n_banned)) continue;
      insert_best(cand_val, cand_id, m, top_k, x[v], static_cast<int32_t>(v), SampleBefore());
      if (m == top_k) worst = cand_val[top_k - 1];
    }
  } else {
    for (int64_t v = 0; v < V; ++v)
      if (!is_banned_id(v, p.banned, p.n_banned)) {
        cand_val[m] = x[v];
        cand_id[m] = static_cast<int32_t>(v);
        ++m;
      }
    if (top_k > 0 && top_k < m) {  // a large k
      sort_candidates(cand_val, cand_id, m);
      m = top_k;
    } else if (p.top_p < 1.f) {
      sort_candidates(cand_val, cand_id, m);  // the nucleus is a prefix
    }
  }
  float zmax = -INFINITY;
  for (int64_t j = 0; j < m; ++j) {
    const float z = cand_val[j] * p.inv_t;
    zmax = z > zmax ? z : zmax;
  }
  for (int64_t j = 0; j < m; ++j) cand_val[j] = exp_approx(cand_val[j] * p.inv_t - zmax);
  const int64_t j = draw_index(m, [&](int64_t i) { return cand_val[i]; }, top_k, p.top_p, u);
  return j >= 0 ? cand_id[j] : 0;
}

// One output of a sampling step (ops::sample_tokens) from logits row x:
// the id (forced if forced >= 0, else sample_draw's at u) and its
// untempered log-probability.
NMT_KERNEL int32_t sample_row(const float* x, int64_t V, const SampleParams& p, double u,
                              int32_t forced, float* cand_val, int32_t* cand_id, float* lp) {
  const float lse = log_sum_exp_row(x, V);
  const int32_t pick = forced >= 0 ? forced : sample_draw(x, V, p, u, cand_val, cand_id);
  *lp = x[pick] - lse;
  return pick;
}

}  // namespace nmt
