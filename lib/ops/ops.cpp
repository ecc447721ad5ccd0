#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/backend.h"
#include "core/error.h"

namespace nmt::ops {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw Error(std::string(op) + ": " + what);
}

void same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = *ts.begin();
  for (const Tensor* t : ts)
    if (t && t->device() != first->device())
      fail(op, std::string("operands on different devices (") + device_name(first->device()) +
                   " and " + device_name(t->device()) + ")");
}

void need_f32(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t && t->dtype() != DType::F32)
      fail(op, std::string("expected f32, got ") + dtype_name(t->dtype()));
}

void need_contiguous(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t && !t->contiguous()) fail(op, "expected a contiguous tensor");
}

Backend& be(const Tensor& t) { return backend(t.device()); }

// A 2-D tensor (possibly a strided view) as a batch of one matrix.
MatDesc mat(const Tensor& t, bool trans) {
  const int64_t r = t.dim(0), c = t.dim(1), sr = t.strides()[0], sc = t.strides()[1];
  MatDesc d;
  // int8 weights go as WeightSource::s8; bf16 operands as their own dtype.
  if (t.dtype() == DType::F32) d.ptr = t.data();
  if (t.dtype() == DType::BF16) d.ptr = static_cast<const float*>(t.raw()), d.dtype = DType::BF16;
  if (trans)
    d.dims = {1, 1, c, r}, d.strides = {r * c, r * c, sc, sr};
  else
    d.dims = {1, 1, r, c}, d.strides = {r * c, r * c, sr, sc};
  return d;
}

MatDesc mat4(const Tensor& t) {
  MatDesc d;
  d.ptr = static_cast<const float*>(t.raw());
  d.dtype = t.dtype();
  for (int i = 0; i < 4; ++i) d.dims[i] = t.dim(i), d.strides[i] = t.strides()[i];
  return d;
}

int64_t rows_of(const Tensor& t) { return t.ndim() ? t.numel() / t.dim(-1) : 0; }

// t as a (rows, cols) matrix: with its own strides when it is one (a strided
// view too), else its dense elements.
MatDesc mat_rows(const Tensor& t, int64_t rows, int64_t cols) {
  if (t.ndim() == 2 && t.dim(0) == rows && t.dim(1) == cols) return mat(t, false);
  return mat(t.view(Shape{rows, cols}), false);
}

}  // namespace

void set_num_threads(int n) { backend(Device::CPU).set_num_threads(n); }
int num_threads() { return backend(Device::CPU).num_threads(); }
int64_t primitives_created() { return backend(Device::CPU).primitives_created(); }

void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
            const MatmulOpts& o) {
  if (a.ndim() != 2 || b.ndim() != 2) fail("matmul", "expected 2-D tensors");
  same_device("matmul", {&a, &b, o.accumulate ? &c : nullptr, o.bias});
  if (b.dtype() == DType::S8) fail("matmul", "int8 weights are multiplied once prepared (ops::linear)");
  // bf16 operands, both of them (a GPU's bf16 activations), where the device takes them.
  const bool bf16 = a.dtype() == DType::BF16 && b.dtype() == DType::BF16;
  if (bf16) {
    const std::string why = be(a).unsupported(Op::GemmBf16Operands, o.compute);
    if (!why.empty()) fail("matmul", "bf16 operands on " + std::string(device_name(a.device())) + ": " + why);
  }
  if (o.compute == ComputeType::INT8) fail("matmul", "int8 products need prepared weights");
  need_f32("matmul", {bf16 ? nullptr : &a, bf16 ? nullptr : &b, o.bias, o.accumulate ? &c : nullptr});
  const int64_t M = trans_a ? a.dim(1) : a.dim(0), K = trans_a ? a.dim(0) : a.dim(1);
  const int64_t Kb = trans_b ? b.dim(1) : b.dim(0), N = trans_b ? b.dim(0) : b.dim(1);
  if (K != Kb)
    fail("matmul",
         "inner dimensions " + std::to_string(K) + " and " + std::to_string(Kb) + " differ");
  if (o.bias && o.bias->numel() != N) fail("matmul", "bias does not match the output width");
  // oneDNN 2 applies its output scale after the bias; the other backends
  // before it. No caller needs both, so the contract leaves it out.
  if (o.bias && o.alpha != 1.f) fail("matmul", "alpha scales a product without a bias");
  if (!o.accumulate) c.resize(Shape{M, N}, a.device());
  check_shape(c, Shape{M, N}, "matmul output");
  GemmAttr attr;
  attr.alpha = o.alpha;
  attr.accumulate = o.accumulate;
  attr.bias = o.bias ? o.bias->data() : nullptr;
  attr.act = o.act;
  attr.compute = o.compute;
  be(a).gemm(mat(a, trans_a), mat(b, trans_b), mat(c, false), attr);
}

std::shared_ptr<PreparedWeight> prepare_weight(const Tensor& w, const Tensor* scales,
                                               ComputeType compute, bool sparse_input,
                                               std::shared_ptr<PreparedWeight> reuse) {
  if (w.ndim() != 2) fail("prepare_weight", "expected a 2-D weight");
  same_device("prepare_weight", {&w, scales});
  const bool s8 = w.dtype() == DType::S8;
  if (s8 != (scales != nullptr)) fail("prepare_weight", "int8 weights, and they alone, have scales");
  if (s8 && (compute != ComputeType::INT8 || scales->numel() != w.dim(0) ||
             scales->dtype() != DType::F32))
    fail("prepare_weight", "int8 weights need one f32 scale per row and compute int8");
  if (!s8) need_f32("prepare_weight", {&w});
  const std::string why = be(w).unsupported(Op::Gemm, compute);
  if (!why.empty()) fail("prepare_weight", why);
  WeightSource src;
  src.b = mat(w, true);  // (in, out): the transpose of W
  if (s8) src.s8 = w.data_as<int8_t>(), src.scales = scales->data();
  src.compute = compute;
  src.sparse_input = sparse_input;
  return be(w).prepare_weight(src, std::move(reuse));
}

void linear(const Tensor& x, const Weight& w, Tensor& y, Activation act) {
  if (x.numel() % std::max<int64_t>(w.in, 1) != 0)
    fail("linear", "input width does not match the weight's " + std::to_string(w.in));
  const Tensor flat = x.ndim() == 2 ? Tensor() : x.view(Shape{x.numel() / w.in, w.in});
  const Tensor& x2 = x.ndim() == 2 ? x : flat;
  if (!w.prepared) {
    if (!w.value) fail("linear", "a weight with neither its value nor a prepared form");
    MatmulOpts o;
    o.bias = w.bias;
    o.act = act;
    o.compute = w.compute;
    return matmul(x2, false, *w.value, true, y, o);
  }
  same_device("linear", {&x, w.bias});
  need_f32("linear", {&x, w.bias});
  if (w.bias && w.bias->numel() != w.out) fail("linear", "bias does not match the output width");
  y.resize(Shape{x2.dim(0), w.out}, x.device());
  be(x).gemm_prepared(mat(x2, false), *w.prepared, mat(y, false), w.bias ? w.bias->data() : nullptr,
                      act);
}

void linear_backward(const Tensor& x, const Tensor& dy, const Tensor& w, Tensor* dx,
                     bool accumulate_dx, Tensor& dw, Tensor* db, ComputeType compute) {
  if (w.ndim() != 2) fail("linear_backward", "expected a 2-D weight");
  const int64_t out = w.dim(0), in = w.dim(1);
  if (dy.numel() % out != 0 || x.numel() % in != 0 || dy.numel() / out != x.numel() / in)
    fail("linear_backward", "x " + x.shape().str() + ", dy " + dy.shape().str() +
                                " and the weight " + w.shape().str() + " do not match");
  const int64_t rows = dy.numel() / out;
  same_device("linear_backward", {&x, &dy, &w, accumulate_dx ? dx : nullptr, &dw, db});
  need_f32("linear_backward", {&x, &dy, &w, dx, &dw, db});
  if (compute != ComputeType::F32 && compute != ComputeType::BF16)
    fail("linear_backward", "training products run in f32 or bf16");
  check_shape(dw, Shape{out, in}, "linear_backward's weight gradient");
  if (db) {
    check_shape(*db, Shape{out}, "linear_backward's bias gradient");
    if (!dy.contiguous()) fail("linear_backward", "a bias gradient needs a dense dy");
  }
  MatDesc dxd;
  if (dx) {
    if (!accumulate_dx) dx->resize(Shape{rows, in}, dy.device());
    if (dx->numel() != rows * in)
      fail("linear_backward", "dx " + dx->shape().str() + " does not hold " +
                                  std::to_string(rows) + " rows of " + std::to_string(in));
    dxd = mat_rows(*dx, rows, in);
  }
  be(dy).linear_backward(mat_rows(dy, rows, out), mat(w, false), mat_rows(x, rows, in),
                         dx ? &dxd : nullptr, accumulate_dx,
                         mat(dw, false), db ? db->data() : nullptr, compute);
}

void bmm(const Tensor& a, const Tensor& b, Tensor& c, float alpha, bool accumulate) {
  if (a.ndim() != 4 || b.ndim() != 4 || c.ndim() != 4) fail("bmm", "expected 4-D tensors");
  same_device("bmm", {&a, &b, &c});
  need_f32("bmm", {&a, &b, &c});
  for (int i = 0; i < 2; ++i)
    if (a.dim(i) != b.dim(i) || a.dim(i) != c.dim(i)) fail("bmm", "batch dimensions differ");
  if (a.dim(3) != b.dim(2) || a.dim(2) != c.dim(2) || b.dim(3) != c.dim(3))
    fail("bmm", "matrix dimensions " + a.shape().str() + " x " + b.shape().str() + " -> " +
                    c.shape().str() + " do not match");
  GemmAttr attr;
  attr.alpha = alpha;
  attr.accumulate = accumulate;
  attr.varying_shape = true;
  be(a).gemm(mat4(a), mat4(b), mat4(c), attr);
}

void attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, float scale,
            Tensor& ctx) {
  if (q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4 || ctx.ndim() != 4)
    fail("attend", "expected 4-D views (batch, heads, rows, width)");
  same_device("attend", {&q, &k, &v, &ctx});
  need_f32("attend", {&q, &ctx});
  // Keys and values in f32, or both in bf16 (an int8 model's decoding
  // caches) where the backend reads them.
  if (k.dtype() != v.dtype() || (k.dtype() != DType::F32 && k.dtype() != DType::BF16))
    fail("attend", std::string("keys and values must both be f32 or both bf16, got ") +
                       dtype_name(k.dtype()) + " and " + dtype_name(v.dtype()));
  for (int i = 0; i < 2; ++i)
    if (q.dim(i) != k.dim(i) || q.dim(i) != v.dim(i) || q.dim(i) != ctx.dim(i))
      fail("attend", "batch or head dimensions differ");
  if (q.dim(3) != k.dim(3) || k.dim(2) != v.dim(2) || q.dim(2) != ctx.dim(2) ||
      v.dim(3) != ctx.dim(3))
    fail("attend", "shapes " + q.shape().str() + ", " + k.shape().str() + ", " + v.shape().str() +
                       " -> " + ctx.shape().str() + " do not match");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &v, &ctx})
    if (t->strides()[3] != 1) fail("attend", "the last dimension must be contiguous");
  if (k.dim(2) < 1) fail("attend", "nothing to attend to");
  if (mask && (mask->numel() != q.dim(0) * k.dim(2) || !mask->contiguous()))
    fail("attend", "the mask must hold one (batch, key) entry each");
  be(q).attend(mat4(q), mat4(k), mat4(v), mask ? mask->data() : nullptr, scale, mat4(ctx));
}

Tensor heads(const Tensor& x, int64_t B, int64_t T, int64_t H, int64_t d, int64_t col) {
  if (x.ndim() != 2 || !x.contiguous()) fail("heads", "expected a contiguous 2-D tensor");
  const int64_t ld = x.dim(1);
  if (x.dim(0) != B * T || col + H * d > ld) fail("heads", "the heads do not fit the tensor");
  return x.strided(Shape{B, H, T, d}, {T * ld, d, ld, 1}, col);
}

Tensor transposed(const Tensor& v) {
  Shape s = v.shape();
  Strides st = v.strides();
  std::swap(s.dims[2], s.dims[3]);
  std::swap(st[2], st[3]);
  return v.strided(s, st);
}

void softmax(const Tensor& x, Tensor& y) {
  need_contiguous("softmax", {&x});
  if (&x != &y) y.resize(x.shape(), x.device());
  be(x).softmax(x.data(), y.data(), rows_of(x), x.dim(-1), false);
}

void log_softmax(const Tensor& x, Tensor& y) {
  need_contiguous("log_softmax", {&x});
  if (&x != &y) y.resize(x.shape(), x.device());
  be(x).softmax(x.data(), y.data(), rows_of(x), x.dim(-1), true);
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  if (y.shape() != dy.shape()) fail("softmax_backward", "y and dy differ in shape");
  dx.resize(y.shape(), y.device());
  be(y).softmax_backward(y.data(), dy.data(), dx.data(), rows_of(y), y.dim(-1));
}

void masked_softmax_(Tensor& scores, const Tensor* mask) {
  if (scores.ndim() != 4) fail("masked_softmax", "expected (B, H, T, S) scores");
  need_contiguous("masked_softmax", {&scores, mask});
  if (mask) {
    if (mask->ndim() != 4) fail("masked_softmax", "expected a 4-D mask");
    std::array<int64_t, 4> d, md;
    for (int i = 0; i < 4; ++i) {
      d[i] = scores.dim(i), md[i] = mask->dim(i);
      if (md[i] != 1 && md[i] != d[i])
        fail("masked_softmax",
             "mask " + mask->shape().str() + " does not broadcast to " + scores.shape().str());
    }
    be(scores).add_mask(scores.data(), d, mask->data(), md);
  }
  be(scores).softmax(scores.data(), scores.data(), rows_of(scores), scores.dim(3), false);
}

void padding_mask(const Tensor& ids, int32_t pad, Tensor& mask) {
  if (ids.dtype() != DType::I32 || mask.ndim() != 4 || mask.numel() != ids.numel())
    fail("padding_mask", "expected i32 ids and a (B,1,1,S) mask of as many entries");
  be(ids).padding_mask(ids.data_as<int32_t>(), ids.numel(), pad, mask.data());
}

void causal_mask(Tensor& mask) {
  if (mask.ndim() != 4 || mask.dim(2) != mask.dim(3)) fail("causal_mask", "expected (1,1,T,T)");
  be(mask).causal_mask(mask.dim(2), mask.data());
}

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y,
                Tensor* mean, Tensor* var) {
  const int64_t D = gamma.numel(), rows = x.numel() / D;
  if (x.dim(-1) != D) fail("layer_norm", "width does not match gamma");
  y.resize(x.shape(), x.device());
  if (mean) mean->resize(Shape{rows}, x.device()), var->resize(Shape{rows}, x.device());
  be(x).layer_norm(x.data(), gamma.data(), beta.data(), y.data(), mean ? mean->data() : nullptr,
                   var ? var->data() : nullptr, rows, D, eps);
}

void add_layer_norm(const Tensor& x, const Tensor& a, const Tensor& gamma, const Tensor& beta,
                    float eps, Tensor* sum, Tensor& y) {
  const int64_t D = gamma.numel(), rows = x.numel() / D;
  if (x.dim(-1) != D) fail("add_layer_norm", "width does not match gamma");
  if (a.numel() != x.numel()) fail("add_layer_norm", "sizes differ");
  need_contiguous("add_layer_norm", {&x, &a});
  same_device("add_layer_norm", {&x, &a, &gamma, &beta});
  if (sum && sum != &x) sum->resize(x.shape(), x.device());
  y.resize(x.shape(), x.device());
  be(x).add_layer_norm(x.data(), a.data(), gamma.data(), beta.data(), sum ? sum->data() : nullptr,
                       y.data(), rows, D, eps);
}

void layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                         const Tensor& var, float eps, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const int64_t D = gamma.numel(), rows = x.numel() / D;
  dx.resize(x.shape(), x.device());
  be(x).layer_norm_backward(x.data(), dy.data(), gamma.data(), mean.data(), var.data(), dx.data(),
                            dgamma.data(), dbeta.data(), rows, D, eps);
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  if (a.numel() != b.numel()) fail("add", "sizes differ");
  same_device("add", {&a, &b});
  out.resize(a.shape(), a.device());
  be(a).add(a.data(), b.data(), out.data(), a.numel());
}

void add_(Tensor& dst, const Tensor& src) {
  if (dst.numel() != src.numel()) fail("add_", "sizes differ");
  same_device("add_", {&dst, &src});
  be(dst).add_inplace(dst.data(), src.data(), dst.numel());
}

void add_group_rows_(Tensor& x, const Tensor& m, int64_t n) {
  need_contiguous("add_group_rows_", {&x, &m});
  same_device("add_group_rows_", {&x, &m});
  if (x.ndim() != 2 || m.ndim() != 2 || x.dim(1) != m.dim(1) || x.dim(0) != m.dim(0) * n)
    fail("add_group_rows_", "expected x (G * n, N) and m (G, N)");
  const int64_t N = x.dim(1);
  Backend& b = be(x);
  for (int64_t r = 0; r < x.dim(0); ++r) b.add_inplace(x.data() + r * N, m.data() + r / n * N, N);
}

void scale_(Tensor& x, float s) { be(x).scale(x.data(), x.numel(), s); }

void copy(const Tensor& src, Tensor& dst) {
  need_contiguous("copy", {&src});
  dst.resize(src.shape(), src.device());
  be(src).copy(dst.raw(), src.raw(), src.bytes());
}

void upload(const void* host, Tensor& dst) {
  if (!dst.contiguous()) fail("upload", "expected a contiguous tensor");
  be(dst).from_host(dst.raw(), host, dst.bytes());
}

void download(const Tensor& src, std::vector<float>& host) {
  need_contiguous("download", {&src});
  if (src.dtype() != DType::F32) fail("download", "expected an F32 tensor");
  host.resize(static_cast<size_t>(src.numel()));
  be(src).to_host(host.data(), src.raw(), src.bytes());
}

const float* host_data(const Tensor& src, std::vector<float>& staging) {
  need_contiguous("host_data", {&src});
  if (src.dtype() != DType::F32) fail("host_data", "expected an F32 tensor");
  if (src.device() == Device::CPU) return src.data();
  download(src, staging);
  return staging.data();
}

void copy_rows(const Tensor& src, Tensor& dst) {
  if (src.ndim() != 2 || dst.ndim() != 2 || src.shape() != dst.shape())
    fail("copy_rows", "expected 2-D views of one shape");
  if (src.strides()[1] != 1 || dst.strides()[1] != 1) fail("copy_rows", "rows must be contiguous");
  same_device("copy_rows", {&src, &dst});
  need_f32("copy_rows", {&src});
  if (dst.dtype() == DType::BF16) {
    be(src).copy_rows_bf16(src.data(), src.strides()[0], static_cast<uint16_t*>(dst.raw()),
                           dst.strides()[0], src.dim(0), src.dim(1));
    return;
  }
  need_f32("copy_rows", {&dst});
  be(src).copy_rows(src.data(), src.strides()[0], dst.data(), dst.strides()[0], src.dim(0),
                    src.dim(1));
}

void dropout_(Tensor& x, float p, uint64_t seed) {
  if (p <= 0.f) return;
  if (!(p < 1.f)) fail("dropout", "probability must be below 1");
  be(x).dropout(x.data(), x.numel(), p, seed);
}

void activate(const Tensor& x, Tensor& y, Activation act) {
  y.resize(x.shape(), x.device());
  be(x).activate(x.data(), y.data(), x.numel(), act);
}

void activation_backward_(const Tensor& x, Tensor& dy, Activation act) {
  if (x.numel() != dy.numel()) fail("activation_backward", "sizes differ");
  be(x).activation_backward(x.data(), dy.data(), x.numel(), act);
}

void log_add_exp_(Tensor& dst, const Tensor& src) {
  if (dst.numel() != src.numel()) fail("log_add_exp", "sizes differ");
  same_device("log_add_exp", {&dst, &src});
  need_contiguous("log_add_exp", {&dst, &src});
  be(dst).log_add_exp(dst.data(), src.data(), dst.numel());
}

void add_column_sums(const Tensor& src, Tensor& dst) {
  const int64_t cols = dst.numel();
  if (src.numel() % cols != 0) fail("add_column_sums", "widths differ");
  be(src).add_column_sums(src.data(), dst.data(), src.numel() / cols, cols);
}

void embedding(const Tensor& table, const Tensor& tokens, const Tensor& positions, int64_t pos0,
               int64_t T, float scale, Tensor& out, const Tensor* row_scales) {
  if (tokens.dtype() != DType::I32) fail("embedding", "token ids must be i32");
  same_device("embedding", {&table, &tokens, &positions});
  const int64_t V = table.dim(0), D = table.dim(1), n = tokens.numel();
  if (pos0 + T > positions.dim(0))
    throw Error("sequence of " + std::to_string(pos0 + T) + " tokens exceeds max_positions " +
                std::to_string(positions.dim(0)));
  if (tokens.device() == Device::CPU)
    for (int64_t r = 0; r < n; ++r) {
      const int32_t t = tokens.data_as<int32_t>()[r];
      if (t < -1 || t >= V)
        throw Error("token id " + std::to_string(t) + " is outside the vocabulary of " +
                    std::to_string(V));
    }
  out.resize(Shape{n, D}, table.device());
  if (table.dtype() == DType::S8) {
    if (!row_scales || row_scales->numel() != V || row_scales->dtype() != DType::F32)
      fail("embedding", "an int8 table needs an f32 scale per row");
    be(table).embedding_s8(table.data_as<int8_t>(), row_scales->data(), tokens.data_as<int32_t>(),
                           n, D, scale, positions.data(), pos0, T, out.data());
    return;
  }
  be(table).embedding(table.data(), tokens.data_as<int32_t>(), n, D, scale, positions.data(), pos0,
                      T, out.data());
}

void embedding_backward(const Tensor& tokens, const Tensor& dy, int64_t T, float scale,
                        Tensor& dtable, Tensor* dpositions) {
  const int64_t D = dtable.dim(1);
  be(dy).embedding_backward(tokens.data_as<int32_t>(), tokens.numel(), D, scale, dy.data(),
                            dtable.data(), dpositions ? dpositions->data() : nullptr, T);
}

namespace {
void need_f64(const char* op, const Tensor& t, int64_t n, const Tensor& on) {
  if (t.dtype() != DType::F64 || !t.contiguous() || t.numel() < n)
    fail(op, "expected a contiguous F64 tensor of at least " + std::to_string(n) + " elements");
  same_device(op, {&t, &on});
}
}  // namespace

void add_label_smoothed_xent(const Tensor& logits, const Tensor& targets, float eps, int32_t pad,
                             Tensor* dlogits, float grad_scale, Tensor& totals) {
  if (targets.dtype() != DType::I32) fail("xent", "targets must be i32");
  const int64_t N = logits.dim(0), V = logits.dim(1);
  if (targets.numel() != N) fail("xent", "one target per logits row expected");
  need_f64("xent", totals, 3, logits);
  if (dlogits) dlogits->resize(logits.shape(), logits.device());
  be(logits).xent(logits.data(), targets.data_as<int32_t>(), N, V, eps, pad,
                  dlogits ? dlogits->data() : nullptr, grad_scale, totals.data_as<double>());
}

LossTotals label_smoothed_xent(const Tensor& logits, const Tensor& targets, float eps, int32_t pad,
                               Tensor* dlogits, float grad_scale) {
  Tensor totals(Shape{3}, logits.device(), DType::F64);
  totals.zero();
  add_label_smoothed_xent(logits, targets, eps, pad, dlogits, grad_scale, totals);
  double t[3];
  read_f64(totals, t);
  return {t[0], t[1], static_cast<int64_t>(t[2])};
}

void read_f64(const Tensor& t, double* out) {
  if (t.dtype() != DType::F64 || !t.contiguous()) fail("read_f64", "expected a contiguous F64 tensor");
  be(t).to_host(out, t.raw(), t.bytes());
}

void adam_update(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s) {
  const int64_t n = p.numel();
  if (g.numel() != n || m.numel() != n || v.numel() != n) fail("adam", "buffer sizes differ");
  // p -= lr/c1 * m / (sqrt(v)/sqrt(c2) + eps): the corrections fold into two
  // scalars, so the loop reads each buffer once.
  const double c1 = 1.0 - std::pow(s.beta1, double(s.t));
  const double c2 = 1.0 - std::pow(s.beta2, double(s.t));
  const double* clip = nullptr;
  if (s.clip_sumsq) {
    need_f64("adam", *s.clip_sumsq, s.clip_at + 1, p);
    clip = s.clip_sumsq->data_as<double>() + s.clip_at;
  }
  be(p).adam(p.data(), g.data(), m.data(), v.data(), n, static_cast<float>(s.beta1),
             static_cast<float>(s.beta2), static_cast<float>(s.lr / c1),
             static_cast<float>(1.0 / std::sqrt(c2)), static_cast<float>(s.eps), clip,
             s.clip_norm);
}

void sum_squares(const Tensor& x, Tensor& out, int64_t at) {
  need_contiguous("sum_squares", {&x});
  need_f64("sum_squares", out, at + 1, x);
  be(x).sum_squares(x.data(), x.numel(), out.data_as<double>() + at);
}

double l2_norm(const Tensor& x) {
  Tensor s(Shape{1}, x.device(), DType::F64);
  sum_squares(x, s, 0);
  double sumsq = 0;
  read_f64(s, &sumsq);
  return std::sqrt(sumsq);
}

void ColumnLists::keep(const std::vector<int64_t>& which) {
  std::vector<int64_t>& o = spare_offsets_;
  std::vector<int32_t>& c = spare_cols_;
  o.assign(1, 0);
  c.clear();
  for (int64_t s : which) {
    if (s < 0 || s >= size()) fail("ColumnLists::keep", "no list " + std::to_string(s));
    c.insert(c.end(), cols.begin() + offsets[s], cols.begin() + offsets[s + 1]);
    o.push_back(static_cast<int64_t>(c.size()));
  }
  offsets.swap(o), cols.swap(c);
}

void topk_log_softmax(const Tensor& logits, const std::vector<double>& base, int64_t k,
                      const std::vector<int32_t>& banned, const std::vector<int32_t>& cols,
                      int64_t n_cols, std::vector<double>& values, std::vector<int32_t>& indices,
                      std::vector<float>& col_lp, const ColumnLists* allowed, int64_t group) {
  if (logits.ndim() != 2) fail("topk_log_softmax", "expected a 2-D tensor");
  need_contiguous("topk_log_softmax", {&logits});
  const int64_t rows = logits.dim(0), V = logits.dim(1);
  if (static_cast<int64_t>(base.size()) != rows)
    fail("topk_log_softmax", "one base score per row expected");
  if (k < 1 || k > V) fail("topk_log_softmax", "k must be from 1 to the vocabulary size");
  if (n_cols < 0 || static_cast<int64_t>(cols.size()) != rows * n_cols)
    fail("topk_log_softmax", "n_cols columns per row expected");
  for (int32_t col : cols)
    if (col < -1 || col >= V)
      fail("topk_log_softmax", "column " + std::to_string(col) + " out of range");
  ColumnGroups groups;
  if (allowed) {
    const int64_t n = allowed->size();
    if (group < 1 || n < 0 || n * group < rows || allowed->offsets[0] != 0 ||
        allowed->offsets.back() != static_cast<int64_t>(allowed->cols.size()))
      fail("topk_log_softmax", "expected a list of allowed columns per group of rows");
    for (int64_t s = 0; s < n; ++s) {
      const int64_t b = allowed->offsets[s], e = allowed->offsets[s + 1];
      if (e < b) fail("topk_log_softmax", "the allowed columns' offsets decrease");
      for (int64_t i = b; i < e; ++i)
        if (allowed->cols[i] < 0 || allowed->cols[i] >= V ||
            (i > b && allowed->cols[i] <= allowed->cols[i - 1]))
          fail("topk_log_softmax", "allowed columns must be ascending columns of the logits");
    }
    groups = {allowed->offsets.data(), allowed->cols.data(), group};
  }
  values.resize(rows * k);
  indices.resize(rows * k);
  col_lp.resize(rows * n_cols);
  be(logits).topk_log_softmax(logits.data(), base.data(), rows, V, k, banned.data(),
                              static_cast<int64_t>(banned.size()), cols.data(), n_cols,
                              values.data(), indices.data(), col_lp.data(),
                              allowed ? &groups : nullptr);
}

void pick(const Tensor& x, const std::vector<int32_t>& cols, std::vector<float>& out) {
  const int64_t N = x.dim(0), V = x.dim(1);
  if (static_cast<int64_t>(cols.size()) != N) fail("pick", "one column per row expected");
  for (int32_t c : cols)
    if (c < -1 || c >= V) fail("pick", "column " + std::to_string(c) + " out of range");
  out.resize(N);
  be(x).pick(x.data(), N, V, cols.data(), out.data());
}

void sample_tokens(const Tensor& logits, const std::vector<int64_t>& rows, float temperature,
                   int64_t top_k, float top_p, const std::vector<double>& u,
                   const std::vector<int32_t>& forced, const std::vector<int32_t>& banned,
                   std::vector<int32_t>& ids, std::vector<float>& lp) {
  need_contiguous("sample_tokens", {&logits});
  const int64_t R = logits.dim(0), V = logits.dim(1), n = static_cast<int64_t>(rows.size());
  if (static_cast<int64_t>(u.size()) != n || static_cast<int64_t>(forced.size()) != n)
    fail("sample_tokens", "one uniform and one forced id per output expected");
  for (int64_t r : rows)
    if (r < 0 || r >= R) fail("sample_tokens", "row " + std::to_string(r) + " out of range");
  for (int32_t f : forced)
    if (f < -1 || f >= V) fail("sample_tokens", "forced id " + std::to_string(f) + " out of range");
  if (!(temperature > 0.f) || !(top_p > 0.f && top_p <= 1.f) || top_k < 0)
    fail("sample_tokens", "temperature > 0, top_k >= 0 and top_p in (0, 1] expected");
  ids.resize(n);
  lp.resize(n);
  be(logits).sample_tokens(logits.data(), V, rows.data(), n, temperature, top_k, top_p, u.data(),
                           forced.data(), banned.data(), static_cast<int64_t>(banned.size()),
                           ids.data(), lp.data());
}

void RowIndices::assign(const std::vector<int64_t>& idx, int64_t rows, Device device) {
  for (int64_t i : idx)
    if (i < 0 || i >= rows) fail("row indices", "row " + std::to_string(i) + " out of range");
  host_.assign(idx.begin(), idx.end());
  rows_ = rows;
  device_kind_ = device;
  if (device == Device::CPU) {
    device_ = Tensor();
    return;
  }
  if (device_.dtype() != DType::I64) device_ = Tensor(Shape{0}, device, DType::I64);
  device_.resize(Shape{size()}, device);
  if (!host_.empty()) upload(host_.data(), device_);
}

const int64_t* RowIndices::data() const {
  return device_.dtype() == DType::I64 ? device_.data_as<int64_t>() : host_.data();
}

void RowOrder::plan(const std::vector<int64_t>& idx, int64_t rows, Device device) {
  n_ = static_cast<int64_t>(idx.size()), rows_ = rows;
  for (int64_t s : idx)
    if (s < 0 || s >= rows) fail("reorder", "row " + std::to_string(s) + " out of range");
  // In place: a row that keeps its own history is not touched. A source row
  // that is itself overwritten is saved first; every other source is read
  // where it is. The host's lists are per thread and only grow.
  thread_local std::vector<int64_t> slot, list, saved, from_saved, to_saved, from_cache, to_cache;
  list.assign(idx.begin(), idx.end());
  saved.clear(), from_saved.clear(), to_saved.clear(), from_cache.clear(), to_cache.clear();
  if (n_ <= rows) {
    slot.assign(rows, -1);
    for (int64_t i = 0; i < n_; ++i) {
      const int64_t s = idx[i];
      if (s == i || slot[s] >= 0) continue;
      if (s < n_ && idx[s] != s) slot[s] = static_cast<int64_t>(saved.size()), saved.push_back(s);
    }
    for (int64_t i = 0; i < n_; ++i) {
      const int64_t s = idx[i];
      if (s == i) continue;
      if (slot[s] >= 0)
        from_saved.push_back(slot[s]), to_saved.push_back(i);
      else
        from_cache.push_back(s), to_cache.push_back(i);
    }
  }
  at_[0] = 0;
  int k = 1;
  for (const auto* part : {&saved, &from_saved, &to_saved, &from_cache, &to_cache}) {
    at_[k] = static_cast<int64_t>(list.size());
    list.insert(list.end(), part->begin(), part->end());
    ++k;
  }
  at_[6] = static_cast<int64_t>(list.size());
  list_.assign(list, std::max<int64_t>(rows, 1), device);
}

void gather_rows(const Tensor& src, const RowIndices& idx, Tensor& dst) {
  need_contiguous("gather_rows", {&src});
  if (idx.rows() != src.dim(0) || idx.device() != src.device())
    fail("gather_rows", "the indices were made for another tensor");
  const int64_t row = src.dim(0) ? src.numel() / src.dim(0) : 0;
  Shape s = src.shape();
  s.dims[0] = idx.size();
  if (dst.dtype() != src.dtype() || dst.device() != src.device())
    dst = Tensor(s, src.device(), src.dtype());
  else
    dst.resize(s);
  const int64_t bytes = row * static_cast<int64_t>(dtype_size(src.dtype()));
  be(src).gather_rows(src.raw(), bytes, idx.data(), idx.size(), bytes, dst.raw(), bytes, nullptr);
}

void gather_rows(const Tensor& src, const std::vector<int64_t>& idx, Tensor& dst) {
  RowIndices i;
  i.assign(idx, src.dim(0), src.device());
  gather_rows(src, i, dst);
}

namespace {

// Rows idx (n, on the device) of a cache's first `len` positions into dst.
void gather_cache_rows(const Tensor& src, const int64_t* idx, int64_t n, int64_t len,
                       Tensor& dst) {
  const int64_t cap = src.dim(1), W = src.dim(2);
  if (dst.dtype() != src.dtype()) dst = Tensor(Shape{0}, src.device(), src.dtype());
  dst.resize(Shape{n, cap, W}, src.device());
  const int64_t e = static_cast<int64_t>(dtype_size(src.dtype()));
  be(src).gather_rows(src.raw(), cap * W * e, idx, n, len * W * e, dst.raw(), cap * W * e, nullptr);
}

}  // namespace

void gather_cache(const Tensor& src, const std::vector<int64_t>& idx, int64_t len, Tensor& dst) {
  if (src.ndim() != 3) fail("gather_cache", "expected a (N, capacity, W) cache");
  if (len > src.dim(1)) fail("gather_cache", "length exceeds the capacity");
  RowIndices i;
  i.assign(idx, src.dim(0), src.device());
  gather_cache_rows(src, i.data(), i.size(), len, dst);
}

void reorder_cache(Tensor& cache, const RowOrder& order, int64_t len, Tensor& scratch) {
  if (cache.ndim() != 3) fail("reorder_cache", "expected a (N, capacity, W) cache");
  need_contiguous("reorder_cache", {&cache});
  const int64_t N = cache.dim(0), cap = cache.dim(1), W = cache.dim(2), n = order.n_;
  if (order.rows_ != N || order.device() != cache.device())
    fail("reorder_cache", "the order was planned for another tensor");
  if (len > cap) fail("reorder_cache", "length exceeds the capacity");
  const int64_t* d = order.list_.data();  // on the cache's device
  const auto& at = order.at_;
  if (n > N) {  // more rows than before (a beam opening up): no room in place
    gather_cache_rows(cache, d, n, len, scratch);
    std::swap(cache, scratch);
    return;
  }
  // The backend counts bytes: a row is len * W elements of the cache's
  // type, held in scratch (of whatever type) as bytes.
  const int64_t e = static_cast<int64_t>(dtype_size(cache.dtype()));
  const int64_t row = len * W * e, ld = cap * W * e, saved = at[2] - at[1];
  auto& b = be(cache);
  if (saved > 0) {
    const int64_t se = static_cast<int64_t>(dtype_size(scratch.dtype()));
    const int64_t scratch_ld = std::max<int64_t>((row + se - 1) / se, 1) * se;
    scratch.resize(Shape{saved, scratch_ld / se}, cache.device());
    b.gather_rows(cache.raw(), ld, d + at[1], saved, row, scratch.raw(), scratch_ld, nullptr);
    b.gather_rows(scratch.raw(), scratch_ld, d + at[2], at[3] - at[2], row, cache.raw(), ld,
                  d + at[3]);
  }
  b.gather_rows(cache.raw(), ld, d + at[4], at[5] - at[4], row, cache.raw(), ld, d + at[5]);
  cache.resize(Shape{n, cap, W}, cache.device());
}

void reorder_cache(Tensor& cache, const std::vector<int64_t>& idx, int64_t len, Tensor& scratch) {
  if (cache.ndim() != 3) fail("reorder_cache", "expected a (N, capacity, W) cache");
  RowOrder order;
  order.plan(idx, cache.dim(0), cache.device());
  reorder_cache(cache, order, len, scratch);
}

}  // namespace nmt::ops
