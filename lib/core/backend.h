// The seam between the ops tier (lib/ops) and the devices: one abstract
// Backend per device, implemented by lib/cpu (oneDNN and OpenMP loops) and
// lib/cuda (cuBLAS and kernels). Only the backends know how; the ops tier
// checks shapes and picks the backend from a tensor's device; nothing above
// the ops tier knows that backends exist. Adding a device means implementing
// this class and nothing else.
//
// Everything here works on raw device pointers and sizes: no oneDNN, CUDA or
// tensor types cross the seam.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/activation.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"

namespace nmt {

// The columns each group of rows may take (a search's shortlist): rows
// [g * group, (g + 1) * group) take cols[offsets[g] .. offsets[g + 1]),
// ascending. Host memory.
struct ColumnGroups {
  const int64_t* offsets = nullptr;
  const int32_t* cols = nullptr;
  int64_t group = 1;
};

// A batch of matrices: dims {B, H, rows, cols} with element strides. A
// transposed matrix is the same memory with the last two strides swapped,
// and a head-split activation (B*T, H*d) is dims {B, H, T, d} with strides
// {T*ld, d, ld, 1}.
struct MatDesc {
  const float* ptr = nullptr;  // the elements, of dtype (a bf16 matrix's reinterpreted)
  std::array<int64_t, 4> dims{};
  std::array<int64_t, 4> strides{};
  // F32, or BF16 operands of a product with an f32 result where the
  // backend runs Op::GemmBf16Operands (a GPU's bf16 activations); a backend
  // refuses a dtype it does not take rather than misread the memory.
  DType dtype = DType::F32;
};

struct GemmAttr {
  float alpha = 1.f;  // 1 with a bias (ops::matmul refuses the pair)
  bool accumulate = false;            // dst += alpha * a @ b (gradient accumulation)
  const float* bias = nullptr;        // (cols) added to every row
  Activation act = Activation::None;  // applied after the bias
  // What the product runs in: f32, or bf16 (mixed-precision training: bf16
  // operands, f32 accumulation and result). Products against prepared
  // weights (Backend::prepare_weight) run in the weight's own.
  // Attention's batched products (varying_shape) always run in f32.
  ComputeType compute = ComputeType::F32;
  // The shape changes from call to call (attention's batched products):
  // prefer a plan that serves any shape to one built per shape.
  bool varying_shape = false;
};

// What Backend::prepare_weight reads: b (K, N), the transpose of a Linear
// layer's W (N, K) (or its gathered rows), in f32 at b.ptr, or as int8
// values s8 at b's dims and strides with a scale per column (an output
// channel) and b.ptr null; the compute type its products run in; and
// whether their inputs are mostly zeros (a ReLU's output: about nine in ten
// hidden units of a trained FFN), which a backend may skip, row by row, so
// that no row's result depends on its batch.
struct WeightSource {
  MatDesc b;
  const int8_t* s8 = nullptr;
  const float* scales = nullptr;
  ComputeType compute = ComputeType::F32;
  bool sparse_input = false;
};

// A weight prepared by its backend (Backend::prepare_weight); the model
// owns it beside the weight's value (model/params.h).
class PreparedWeight {
 public:
  virtual ~PreparedWeight() = default;
  // Bytes of memory it holds of its own.
  virtual int64_t bytes() const = 0;
  // Whether its products read the source (which must then outlive it) or
  // a copy of their own.
  virtual bool reads_source() const = 0;
  // The form its products run on, in a few words ("f32 rows, packed").
  virtual std::string form() const = 0;
};

// Backend::prepare_weight's default: the source itself, multiplied by
// gemm in its compute type at every product.
struct SourceWeight final : PreparedWeight {
  explicit SourceWeight(const WeightSource& w) : source(w) {}
  int64_t bytes() const override { return 0; }
  bool reads_source() const override { return true; }
  std::string form() const override { return std::string(compute_type_name(source.compute)) + " source"; }
  WeightSource source;
};

// The ops of this interface, for the capability query (ggml's supports_op):
// what a caller asks a backend before it relies on one. Gemm covers
// products with constant weights in any compute type, Embedding an int8
// table (ComputeType::INT8); Elementwise is add, scale, copies and gathers.
enum class Op : uint8_t {
  Gemm,
  LinearBackward,
  Softmax,
  SoftmaxBackward,
  AddMask,
  Attend,
  Masks,
  LayerNorm,
  LayerNormBackward,
  Elementwise,
  Dropout,
  Activate,
  ColumnSums,
  LogAddExp,
  Embedding,
  EmbeddingBackward,
  Xent,
  Adam,
  SumSquares,
  Pick,
  SampleTokens,
  TopkLogSoftmax,
  GemmBf16Operands,  // products of bf16 matrices (MatDesc::dtype), f32 results
};
constexpr int kNumOps = static_cast<int>(Op::GemmBf16Operands) + 1;
const char* op_name(Op op);  // "layer_norm_backward"

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string version() const = 0;
  // The arithmetic this backend runs, in one line: every choice of kernel
  // and precision it makes, fixed for the process (CPU: cpu/numerics.h).
  virtual std::string numerics() const = 0;
  virtual void set_num_threads(int n) = 0;  // 0: all cores (a per-thread setting)
  virtual int num_threads() const = 0;
  // Primitives (GEMM plans, kernels' launch set-ups) built so far by every
  // thread: a warm hot loop must build none.
  virtual int64_t primitives_created() const = 0;

  // Memory. Allocations are aligned for the device's widest loads.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  // `bytes` of zeros, all of which the caller will use (Tensor's
  // constructor): a backend may place such a block differently (the CPU
  // gives large ones huge pages).
  virtual void* alloc_zeroed(size_t bytes) {
    void* p = alloc(bytes);
    zero(p, bytes);
    return p;
  }
  // p (from alloc) replaced by `bytes` whose contents are not kept: a
  // buffer that grows. A backend that can keep p's pages in the larger
  // block (the CPU's mremap) spares the new block their first touch.
  virtual void* regrow(void* p, size_t bytes) {
    free(p);
    return alloc(bytes);
  }
  virtual void to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* p, size_t bytes) = 0;
  // rows x len floats from src (rows src_ld apart) to dst (dst_ld apart).
  virtual void copy_rows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                         int64_t len) = 0;
  // The same into bf16 rows, each element rounded to nearest even (the
  // CPU's int8 decoding keeps its caches so); a backend without it throws.
  virtual void copy_rows_bf16(const float* src, int64_t src_ld, uint16_t* dst, int64_t dst_ld,
                              int64_t rows, int64_t len) = 0;
  // Row dst_idx[i] (or i, if dst_idx is null) of dst, rows dst_ld bytes
  // apart, = row idx[i] of src, rows src_ld bytes apart; `len` bytes each
  // (any element type). The rows written must not be among those read. The
  // indices are on the device (ops::RowIndices puts them there once for
  // every gather that reads them).
  virtual void gather_rows(const void* src, int64_t src_ld, const int64_t* idx, int64_t n,
                           int64_t len, void* dst, int64_t dst_ld, const int64_t* dst_idx) = 0;

  // GEMM: dst = act(alpha * a @ b (+ bias)) (+ dst).
  virtual void gemm(const MatDesc& a, const MatDesc& b, const MatDesc& dst,
                    const GemmAttr& attr) = 0;
  // A linear layer's backward pass, y = x w^T: dx = dy w (dx += when
  // accumulate_dx; none when dx is null), dw += dy^T x and, when db is
  // given, db += dy's column sums. dy (M, out), w (out, in), x (M, in) and
  // dx dense rows; compute as GemmAttr's. One call, so that a backend can
  // read dy once for both products and the bias: the CPU's bf16 products
  // round it to bf16 once.
  virtual void linear_backward(const MatDesc& dy, const MatDesc& w, const MatDesc& x,
                               const MatDesc* dx, bool accumulate_dx, const MatDesc& dw, float* db,
                               ComputeType compute) {
    GemmAttr attr;
    attr.compute = compute;
    attr.accumulate = accumulate_dx;
    if (dx) gemm(dy, w, *dx, attr);
    MatDesc dy_t = dy;
    std::swap(dy_t.dims[2], dy_t.dims[3]);
    std::swap(dy_t.strides[2], dy_t.strides[3]);
    attr.accumulate = true;
    gemm(dy_t, x, dw, attr);
    if (db) add_column_sums(dy.ptr, db, dy.dims[2], dy.dims[3]);
  }
  // A weight matrix in the form this backend multiplies by (packed,
  // converted to w.compute, quantised), made once when a model is loaded
  // for translation or scoring, or when a search gathers its shortlist's
  // rows. `reuse`, a weight prepared before and no longer needed, may lend
  // its memory (a shortlist's rows are prepared anew for every batch). The
  // default reads the source itself at every product, in w.compute.
  virtual std::shared_ptr<PreparedWeight> prepare_weight(const WeightSource& w,
                                                         std::shared_ptr<PreparedWeight> reuse) {
    (void)reuse;
    if (w.s8) throw Error("int8 weights are multiplied on the CPU only");
    return std::make_shared<SourceWeight>(w);
  }
  // dst (M, N) = act(a (M, K) w + bias): a's rows dense, dst's too.
  virtual void gemm_prepared(const MatDesc& a, const PreparedWeight& w, const MatDesc& dst,
                             const float* bias, Activation act) {
    const auto& s = dynamic_cast<const SourceWeight&>(w).source;
    GemmAttr attr;
    attr.bias = bias;
    attr.act = act;
    attr.compute = s.compute;
    gemm(a, s.b, dst, attr);
  }
  // Empty if `op` runs here with its products (Gemm, LinearBackward) or its
  // table (Embedding) in `t`, else why not ("bf16 needs a CPU with
  // AVX512-BF16 or AMX; this one has avx2"). The other ops compute in f32
  // whatever t is. Asked before a model is placed (require_compute_type), so
  // that a device that lacks an op is refused by name, not mid-run.
  virtual std::string unsupported(Op op, ComputeType t) const = 0;

  // Softmax or log-softmax over the last axis of (rows, cols).
  virtual void softmax(const float* src, float* dst, int64_t rows, int64_t cols, bool log) = 0;
  virtual void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                int64_t cols) = 0;
  // scores (B, H, T, S) += mask broadcast from mask_dims (a dim of 1 broadcasts).
  virtual void add_mask(float* scores, const std::array<int64_t, 4>& dims, const float* mask,
                        const std::array<int64_t, 4>& mask_dims) = 0;

  // Attention of a few queries per (batch, head), as a decoding step has
  // them (each hypothesis against its own cache; a sentence's beam against
  // its source), in one pass: ctx[b,h,i] = sum_j p_j v[b,h,j] with
  // p = softmax_j(scale q[b,h,i] . k[b,h,j] + mask[b,j]). Operands are 4-D
  // views (B, H, rows, width) with unit last stride; mask (B, L) or null.
  // k and v are f32, or both bf16 on a backend that runs copy_rows_bf16.
  virtual void attend(const MatDesc& q, const MatDesc& k, const MatDesc& v, const float* mask,
                      float scale, const MatDesc& ctx) = 0;

  // -1e9 where ids[i] == pad, else 0; and the (T, T) causal mask.
  virtual void padding_mask(const int32_t* ids, int64_t n, int32_t pad, float* mask) = 0;
  virtual void causal_mask(int64_t T, float* mask) = 0;

  // Layer normalisation over the last axis of (rows, D); mean and var are
  // written when given (training), for the backward pass.
  virtual void layer_norm(const float* x, const float* gamma, const float* beta, float* y,
                          float* mean, float* var, int64_t rows, int64_t D, float eps) = 0;
  // A residual and its layer norm, for decoding: sum = x + a (written where
  // sum is given; it may be x) and y = LN(x + a), each to the bit as add
  // then layer_norm compute them.
  virtual void add_layer_norm(const float* x, const float* a, const float* gamma, const float* beta,
                              float* sum, float* y, int64_t rows, int64_t D, float eps) = 0;
  // dx assigned; dgamma and dbeta accumulated.
  virtual void layer_norm_backward(const float* x, const float* dy, const float* gamma,
                                   const float* mean, const float* var, float* dx, float* dgamma,
                                   float* dbeta, int64_t rows, int64_t D, float eps) = 0;

  // Element-wise.
  virtual void add(const float* a, const float* b, float* dst, int64_t n) = 0;
  virtual void add_inplace(float* dst, const float* src, int64_t n) = 0;
  virtual void scale(float* x, int64_t n, float s) = 0;
  // Dropout from the counter hash of (seed, index): mask-free, identical on
  // every device and thread count.
  virtual void dropout(float* x, int64_t n, float p, uint64_t seed) = 0;
  // y = act(x); dy *= act'(x) (ReLU's may be given its output as x).
  virtual void activate(const float* x, float* y, int64_t n, Activation act) = 0;
  virtual void activation_backward(const float* x, float* dy, int64_t n, Activation act) = 0;
  virtual void add_column_sums(const float* src, float* dst, int64_t rows, int64_t cols) = 0;
  // dst = log(exp(dst) + exp(src)), without overflow (an ensemble's sum of
  // probabilities, in logs).
  virtual void log_add_exp(float* dst, const float* src, int64_t n) = 0;

  // out[r] = table[tokens[r]] * scale + positions[pos0 + r % T], (n, D);
  // a token id < 0 (no token: padding, a decoder's zero start) embeds as 0.
  virtual void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t D,
                         float scale, const float* positions, int64_t pos0, int64_t T,
                         float* out) = 0;
  // The same from an int8 table: row t is table[t] * row_scales[t].
  virtual void embedding_s8(const int8_t* table, const float* row_scales, const int32_t* tokens,
                            int64_t n, int64_t D, float scale, const float* positions,
                            int64_t pos0, int64_t T, float* out) = 0;
  // dtable[tokens[r]] += dy[r] * scale (ids < 0 skipped); dpositions[r % T]
  // += dy[r] (if given).
  virtual void embedding_backward(const int32_t* tokens, int64_t n, int64_t D, float scale,
                                  const float* dy, float* dtable, float* dpositions, int64_t T) = 0;

  // Label-smoothed cross-entropy of logits (N, V) against targets (pad rows
  // ignored); dlogits (optional) receives d(loss * grad_scale)/dlogits. The
  // totals over the non-pad rows (loss, nll, tokens) are added to
  // totals[0..2], three doubles on the device: a step's batches sum there,
  // and the host reads them once, after the update, instead of waiting on
  // each batch's loss between its forward and backward passes.
  virtual void xent(const float* logits, const int32_t* targets, int64_t N, int64_t V, float eps,
                    int32_t pad, float* dlogits, float grad_scale, double* totals) = 0;

  // Adam with folded bias corrections:
  // p -= step * m / (sqrt(v) * inv_sqrt_c2 + eps), with the gradient
  // clipped: where clip_sumsq (the gradient's sum of squares, a double on
  // the device) is given and its root exceeds clip_norm, each g is taken
  // times float(clip_norm / sqrt(*clip_sumsq)). The norm never has to
  // reach the host before the update.
  virtual void adam(float* p, const float* g, float* m, float* v, int64_t n, float beta1,
                    float beta2, float step, float inv_sqrt_c2, float eps,
                    const double* clip_sumsq, double clip_norm) = 0;
  // *out (a double on the device) = the sum of squares of x, in a fixed
  // order (thread-count independent).
  virtual void sum_squares(const float* x, int64_t n, double* out) = 0;

  // host_out[i] = x[i, host_cols[i]] for x (N, V); 0 where host_cols[i] is -1.
  virtual void pick(const float* x, int64_t N, int64_t V, const int32_t* host_cols,
                    float* host_out) = 0;
  // A sampling step (see ops::sample_tokens): output i from logits row
  // rows[i]; host inputs and outputs.
  virtual void sample_tokens(const float* logits, int64_t V, const int64_t* rows, int64_t n,
                             float temperature, int64_t top_k, float top_p, const double* u,
                             const int32_t* forced, const int32_t* banned, int64_t n_banned,
                             int32_t* ids, float* lp) = 0;
  // A search step, per row r of logits (rows, V), with log-probabilities
  // lp = logits - logsumexp(row) (never stored): the k largest of
  // base[r] + lp[v] over v not in `banned` (sorted, best first, ties: lower
  // id first), and lp[cols[r * n_cols + c]] in col_lp[r * n_cols + c]
  // (-inf where the column is -1). Host outputs.
  // allowed (may be null): each row may take only its group's columns, as
  // if the others were -inf; and its numbers are those of its group's
  // columns alone, in their order, whatever the other columns hold or where
  // its own lie (a shortlisted sentence's result never depends on the rest
  // of its batch).
  virtual void topk_log_softmax(const float* logits, const double* base, int64_t rows, int64_t V,
                                int64_t k, const int32_t* banned, int64_t n_banned,
                                const int32_t* cols, int64_t n_cols, double* values,
                                int32_t* indices, float* col_lp, const ColumnGroups* allowed) = 0;
};

// The backend of a device. In a build without CUDA, Device::CUDA throws
// "nmt was built without CUDA support".
Backend& backend(Device d);
// Tests only: serve device d with b from now on (null: its own backend
// again), so that a stand-in with memory the host cannot read checks on any
// machine that nothing above the seam touches a device's memory.
void install_backend_for_testing(Device d, Backend* b);
// The ops a model needs to translate (and, training, to learn).
const std::vector<Op>& ops_needed(bool training);
// "" if device d runs every op a model needs in t, else why not, by reason:
// "int8 is not implemented on CUDA (f32 and bf16 are): gemm, embedding".
std::string missing_ops(Device d, ComputeType t, bool training);
// Throws InputError unless missing_ops is "": "the cuda backend cannot run
// this model: ..." for ops the device lacks in f32, else "{compute_type} T:
// ..." for those it lacks in t.
void require_compute_type(Device d, ComputeType t, bool training = false);

// Defined by each backend: lib/cpu; for CUDA, lib/cuda/cuda_loader.cpp, which
// opens the CUDA library, or lib/cuda/no_cuda.cpp in a build without CUDA.
Backend& cpu_backend();
Backend& cuda_backend();
// For --version: "not built", "built, not loadable (why)", or the CUDA
// version and devices.
std::string cuda_build_info();

}  // namespace nmt
