// The ops tier: every computation the model, training and decoding do, on
// Tensors. Each op checks shapes, dtypes and devices and hands raw pointers
// to the tensor's backend (core/backend.h); nothing above this header knows
// which backend that is.
//
// Conventions: outputs are resized (capacity permitting, without
// allocation) unless an op says it accumulates; in-place ops end in '_'.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/activation.h"
#include "core/tensor.h"

namespace nmt {
class PreparedWeight;  // core/backend.h
}  // namespace nmt

namespace nmt::ops {

// Threads of the CPU backend for the calling thread (0: all cores).
void set_num_threads(int n);
int num_threads();
// Primitives built so far, by every thread (a warm loop must build none).
int64_t primitives_created();

// ---- Matrix products -----------------------------------------------------

struct MatmulOpts {
  float alpha = 1.f;
  bool accumulate = false;                 // c += ... (beta = 1)
  const Tensor* bias = nullptr;            // (N) added to every row
  Activation act = Activation::None;       // after the bias
  ComputeType compute = ComputeType::F32;  // f32, or bf16 (mixed-precision training)
};

// c (M, N) = act(alpha * op(a) op(b) (+ bias)) (+ c), op a transpose when
// asked (alpha 1 with a bias). 2-D tensors; a and b may be strided views.
void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
            const MatmulOpts& opts = {});

// A Linear layer's weight W (out, in) as its products read it: the value
// (F32; or S8 with one scale per row, which only a prepared weight
// multiplies), the bias, and, in a model loaded to translate or score, the
// form its backend prepared once (then value may be null: the model keeps
// no copy that nothing reads). compute: what products on the value run in
// (training: f32 or bf16); a prepared weight runs in its own.
struct Weight {
  int64_t out = 0, in = 0;
  const Tensor* value = nullptr;
  const Tensor* scales = nullptr;
  const Tensor* bias = nullptr;
  const PreparedWeight* prepared = nullptr;
  ComputeType compute = ComputeType::F32;
};
// W (out, in) prepared by its device's backend for products in `compute`
// (Backend::prepare_weight): scales given for an S8 W; sparse_input: the
// products' inputs are mostly zeros (a ReLU's output); reuse: a prepared
// weight no longer needed, whose memory may be reused.
std::shared_ptr<PreparedWeight> prepare_weight(const Tensor& w, const Tensor* scales,
                                               ComputeType compute, bool sparse_input,
                                               std::shared_ptr<PreparedWeight> reuse = nullptr);
// y (N, out) = act(x (N, in) W^T + b): the Linear layer's product.
void linear(const Tensor& x, const Weight& w, Tensor& y, Activation act = Activation::None);
// The backward pass of linear (y = x W^T + b) for dy (N, out): dx = dy W
// (resized; dx += when accumulate_dx; skipped when dx is null), dW += dy^T x
// and, when db is given, db += dy's column sums.
void linear_backward(const Tensor& x, const Tensor& dy, const Tensor& w, Tensor* dx,
                     bool accumulate_dx, Tensor& dw, Tensor* db,
                     ComputeType compute = ComputeType::F32);

// Batched over the first two dims: c (B, H, M, N) = alpha * a (B, H, M, K)
// b (B, H, K, N) (+ c). Any of the three may be strided views (head splits,
// transposes); c must have its shape already.
void bmm(const Tensor& a, const Tensor& b, Tensor& c, float alpha = 1.f, bool accumulate = false);
// Attention of the few queries of a decoding step, fused (see
// Backend::attend): q (B, H, M, dk), k (B, H, L, dk), v (B, H, L, dv) and
// ctx (B, H, M, dv) are views with a contiguous last dimension; mask holds
// an additive (B, L) key mask or is null.
void attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, float scale,
            Tensor& ctx);

// The (B, H, T, d) view of heads [h*d, (h+1)*d) of columns starting at
// `col` in a (B*T, ld) matrix: attention reads Q, K, V without copies.
Tensor heads(const Tensor& x, int64_t B, int64_t T, int64_t H, int64_t d, int64_t col);
// The same view with its last two dims swapped (for K^T).
Tensor transposed(const Tensor& v);

// ---- Softmax, masks, layer norm ------------------------------------------

// Over the last axis, of contiguous tensors (x may be y).
void softmax(const Tensor& x, Tensor& y);
void log_softmax(const Tensor& x, Tensor& y);
// dx = softmax backward, from the forward output y.
void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);
// scores (B, H, T, S) += mask, a 4-D tensor broadcast over its size-1 dims
// ({B,1,1,S} source padding, {1,1,T,T} causal), then softmax over S.
void masked_softmax_(Tensor& scores, const Tensor* mask);

// y = LN(x) over the last axis; mean and var (rows) written when given.
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y,
                Tensor* mean = nullptr, Tensor* var = nullptr);
// A residual and its norm (decoding): y = LN(x + a), and sum = x + a where
// given (sum may be x itself); the numbers of add then layer_norm.
void add_layer_norm(const Tensor& x, const Tensor& a, const Tensor& gamma, const Tensor& beta,
                    float eps, Tensor* sum, Tensor& y);
// dx assigned; dgamma and dbeta accumulated.
void layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                         const Tensor& var, float eps, Tensor& dx, Tensor& dgamma, Tensor& dbeta);

// Additive masks: -1e9 (large but finite: no inf - inf in a backward pass)
// where attention must not look. padding: (B,1,1,S) from ids (B*S);
// causal: (1,1,T,T), position t sees positions <= t.
void padding_mask(const Tensor& ids, int32_t pad, Tensor& mask);
void causal_mask(Tensor& mask);

// ---- Element-wise ---------------------------------------------------------

void add(const Tensor& a, const Tensor& b, Tensor& out);  // out = a + b
void add_(Tensor& dst, const Tensor& src);                // dst += src
// x (G * n, N) += m (G, N), row g of m to each of rows [g * n, (g + 1) * n):
// a per-sentence additive mask over its beam's rows.
void add_group_rows_(Tensor& x, const Tensor& m, int64_t n);
void scale_(Tensor& x, float s);
void copy(const Tensor& src, Tensor& dst);  // dst resized to src's shape
// Host memory into a tensor (of its shape and dtype) on its device.
void upload(const void* host, Tensor& dst);
// A contiguous F32 tensor into host memory (attention maps for users).
void download(const Tensor& src, std::vector<float>& host);
// A contiguous F32 tensor's elements as host memory: its own on the CPU,
// else a copy in `staging` (files and checkpoints read device tensors so).
const float* host_data(const Tensor& src, std::vector<float>& staging);
// Copies a (rows, len) block between 2-D views whose rows are contiguous but
// strided apart (appending a position to every row of a KV cache).
void copy_rows(const Tensor& src, Tensor& dst);
// Counter-hash dropout in place; the backward pass is the same call with the
// same seed on the gradient.
void dropout_(Tensor& x, float p, uint64_t seed);
void activate(const Tensor& x, Tensor& y, Activation act);  // y = act(x), resized
// dy *= act'(x); ReLU's may be given its output (where dy is 0 if it was 0).
void activation_backward_(const Tensor& x, Tensor& dy, Activation act);
void add_column_sums(const Tensor& src, Tensor& dst);  // dst (N) += sum over rows of src (M, N)
void log_add_exp_(Tensor& dst, const Tensor& src);     // dst = log(exp(dst) + exp(src))

// ---- Embeddings and loss --------------------------------------------------

// out (n, D) = table[tokens] * scale + positions[pos0 + r % T]; tokens are
// n = B*T ids (I32), range-checked against the table; -1 (no token:
// padding, a decoder's zero start) embeds as zeros before the positions.
// An S8 table (an int8 model's) comes with its f32 row scales.
void embedding(const Tensor& table, const Tensor& tokens, const Tensor& positions, int64_t pos0,
               int64_t T, float scale, Tensor& out, const Tensor* row_scales = nullptr);
// dtable[tokens] += dy * scale (ids -1 skipped); dpositions[r % T] += dy
// (when given).
void embedding_backward(const Tensor& tokens, const Tensor& dy, int64_t T, float scale,
                        Tensor& dtable, Tensor* dpositions);

struct LossTotals {
  double loss = 0;  // label-smoothed, summed over tokens
  double nll = 0;   // negative log-likelihood, summed
  int64_t tokens = 0;
};
// Label-smoothed cross-entropy of logits (N, V) against targets (N, I32);
// pad rows count for nothing. dlogits, when given, receives
// d(loss * grad_scale)/dlogits. The totals are added to totals[0..2] (an
// F64 tensor on the logits' device: loss, nll, tokens), where a training
// step's batches sum without the host waiting for any of them.
void add_label_smoothed_xent(const Tensor& logits, const Tensor& targets, float eps, int32_t pad,
                             Tensor* dlogits, float grad_scale, Tensor& totals);
// The same, returning this call's totals (which waits for them).
LossTotals label_smoothed_xent(const Tensor& logits, const Tensor& targets, float eps, int32_t pad,
                               Tensor* dlogits, float grad_scale);
// A small F64 tensor (a step's totals) into out[0..numel), no allocation.
void read_f64(const Tensor& t, double* out);

// ---- Optimiser ------------------------------------------------------------

struct AdamStep {
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-9;  // the bias corrections use them in double
  double lr = 0;
  int64_t t = 1;  // this update's number, from 1 (bias correction)
  // Clipping to norm clip_norm (0: none) by the gradient's sum of squares,
  // element clip_at of an F64 tensor on the parameters' device (sum_squares
  // put it there): the host need not read the norm first.
  const Tensor* clip_sumsq = nullptr;
  int64_t clip_at = 0;
  double clip_norm = 0;
};
void adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, const AdamStep& s);
// out[at] (F64, on x's device) = x's sum of squares, in a fixed order
// (thread-count independent).
void sum_squares(const Tensor& x, Tensor& out, int64_t at);
// L2 norm, the same sum read back.
double l2_norm(const Tensor& x);

// ---- Decoding ---------------------------------------------------------------

// The columns each sentence of a shortlisted batch may take: sentence s's
// are cols[offsets[s] .. offsets[s + 1]), ascending.
struct ColumnLists {
  std::vector<int64_t> offsets{0};
  std::vector<int32_t> cols;
  int64_t size() const { return static_cast<int64_t>(offsets.size()) - 1; }
  void clear() { offsets.assign(1, 0), cols.clear(); }
  // Sentences `which` (indices into these), in that order. (Each reorder of
  // a search that drops finished sentences calls it: the buffers are
  // reused.)
  void keep(const std::vector<int64_t>& which);

 private:
  std::vector<int64_t> spare_offsets_;
  std::vector<int32_t> spare_cols_;
};

// A search step over logits (rows, V), whose log-softmax it never stores:
// per row r, the k best base[r] + logp[r, v] over v not in `banned`, best
// first (ties: lower id first), and the log-probabilities of chosen columns
// (</s>, forced prefix tokens, constraint tokens): cols holds n_cols ids per
// row, col_lp[r * n_cols + c] = logp[r, cols[r * n_cols + c]], -inf for -1.
// allowed (a shortlisted batch; may be null): each group of `group` rows
// (a sentence's beam) takes only its list's columns, as if the others were
// -inf, with numbers that depend on those columns alone (see
// Backend::topk_log_softmax).
void topk_log_softmax(const Tensor& logits, const std::vector<double>& base, int64_t k,
                      const std::vector<int32_t>& banned, const std::vector<int32_t>& cols,
                      int64_t n_cols, std::vector<double>& values, std::vector<int32_t>& indices,
                      std::vector<float>& col_lp, const ColumnLists* allowed = nullptr,
                      int64_t group = 1);
// A sampling step over logits (R, V): output i reads row rows[i]. With
// forced[i] >= 0 it is that id (a prefix, the length limit's </s>); else a
// draw, by the uniform u[i] in [0, 1), from softmax(logits / temperature)
// restricted to the top_k largest (0: no limit), then to the fewest of the
// largest whose probability reaches top_p (1: no limit), never a banned id.
// ids[i], and lp[i] its log-probability under the model (untempered, as
// search scores are). A pure function of its inputs: the same draws on any
// thread count or batch.
void sample_tokens(const Tensor& logits, const std::vector<int64_t>& rows, float temperature,
                   int64_t top_k, float top_p, const std::vector<double>& u,
                   const std::vector<int32_t>& forced, const std::vector<int32_t>& banned,
                   std::vector<int32_t>& ids, std::vector<float>& lp);
// out[i] = x[i, cols[i]] for a (N, V) tensor, into host memory (forced
// decoding reads the log-probabilities of the given targets); 0 where
// cols[i] is -1 (padding).
void pick(const Tensor& x, const std::vector<int32_t>& cols, std::vector<float>& out);
// Row indices where the gathers below run: a host list, checked against the
// rows it will index and copied to the device once (on the CPU, the list
// itself), so that every gather that reads it after costs no transfer.
class RowIndices {
 public:
  void assign(const std::vector<int64_t>& idx, int64_t rows, Device device);
  const std::vector<int64_t>& host() const { return host_; }
  int64_t size() const { return static_cast<int64_t>(host_.size()); }
  int64_t rows() const { return rows_; }  // what it indexes
  Device device() const { return device_kind_; }
  const int64_t* data() const;  // on its device

 private:
  std::vector<int64_t> host_;
  int64_t rows_ = 0;
  Device device_kind_ = Device::CPU;
  Tensor device_;  // I64, beside a GPU's tensors; unused on the CPU
};

// A reordering of the first dimension (row i becomes row idx[i]) planned
// once for every tensor it applies to, as each layer's caches in a beam
// step: which rows are saved before being overwritten and which are read
// in place, all of it copied to the device in one transfer.
class RowOrder {
 public:
  void plan(const std::vector<int64_t>& idx, int64_t rows, Device device);
  int64_t size() const { return n_; }
  int64_t rows() const { return rows_; }
  Device device() const { return list_.device(); }

 private:
  friend void reorder_cache(Tensor& cache, const RowOrder& order, int64_t len, Tensor& scratch);
  int64_t n_ = 0, rows_ = 0;
  // Where idx, saved, from_saved, to_saved, from_cache and to_cache start in
  // the list, and its end.
  std::array<int64_t, 7> at_{};
  RowIndices list_;
};

// dst rows = src rows idx (src, dst contiguous with rows of equal width;
// any dtype, which dst takes).
void gather_rows(const Tensor& src, const RowIndices& idx, Tensor& dst);
void gather_rows(const Tensor& src, const std::vector<int64_t>& idx, Tensor& dst);
// Rows of a cache (N, capacity, W): row i of dst gets row idx[i] of src, its
// first `len` positions only (the filled prefix).
void gather_cache(const Tensor& src, const std::vector<int64_t>& idx, int64_t len, Tensor& dst);
// The same reordering of a cache in place, copying only the rows whose
// history changes (beam search keeps many): scratch holds the rows that are
// read after being overwritten. Grows through scratch if idx is longer.
void reorder_cache(Tensor& cache, const RowOrder& order, int64_t len, Tensor& scratch);
void reorder_cache(Tensor& cache, const std::vector<int64_t>& idx, int64_t len, Tensor& scratch);

}  // namespace nmt::ops
