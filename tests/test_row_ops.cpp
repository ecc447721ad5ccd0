// The row functions of kernels/row_ops.h, which the CUDA kernels run, checked
// on the host: against naive reference loops in double (the parity
// harness's, tests/backend_ops.cpp), on edge cases a GPU run would meet
// (one column, masked tails, -inf, large magnitudes, pad rows), and each
// backward function against central differences of its forward function.
// The CUDA backend is then a launch around code that is tested here, on a
// machine without a GPU.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "kernels/row_ops.h"
#include "test_helpers.h"

using namespace nmt;
using namespace nmt::test;

namespace {

// ||a - ref|| / max(||ref||, 1) over the finite references; an infinite
// reference must be matched exactly, and NaN never passes.
void expect_close(const std::vector<float>& a, const std::vector<double>& ref, double tol,
                  const std::string& what) {
  REQUIRE(a.size() == ref.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(what << ": element " << i << " is " << a[i] << ", reference " << ref[i]);
    if (std::isinf(ref[i])) {
      REQUIRE(double(a[i]) == ref[i]);
      continue;
    }
    REQUIRE(std::isfinite(a[i]));
    diff += (a[i] - ref[i]) * (a[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  const double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1.0);
  INFO(what << ": relative error " << rel << " (tolerance " << tol << ")");
  CHECK(rel <= tol);
}

// |a - ref| <= atol + rtol |ref| at every element, infinities matched
// exactly: a masked column's -1e9 would drown the other columns in a norm.
void expect_near(const std::vector<float>& a, const std::vector<double>& ref, double atol,
                 double rtol, const std::string& what) {
  REQUIRE(a.size() == ref.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(what << ": element " << i << " is " << a[i] << ", reference " << ref[i]);
    if (std::isinf(ref[i])) {
      REQUIRE(double(a[i]) == ref[i]);
      continue;
    }
    REQUIRE(std::isfinite(a[i]));
    REQUIRE(std::abs(a[i] - ref[i]) <= atol + rtol * std::abs(ref[i]));
  }
}

// Central differences of loss() with respect to each of x[0..n), in float
// steps of h (the row functions compute in float).
std::vector<double> numeric_gradient(const std::function<double()>& loss, float* x, int64_t n,
                                     float h) {
  std::vector<double> g(n);
  for (int64_t i = 0; i < n; ++i) {
    const float old = x[i];
    x[i] = old + h;
    const double up = loss();
    x[i] = old - h;
    const double down = loss();
    x[i] = old;
    g[i] = (up - down) / (2.0 * h);
  }
  return g;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

// A softmax row's reference in double: probabilities or log-probabilities.
std::vector<double> softmax_reference(const std::vector<float>& x, bool log) {
  double mx = -1e300, z = 0;
  for (float v : x) mx = std::max(mx, double(v));
  for (float v : x) z += std::exp(v - mx);
  std::vector<double> r(x.size());
  for (size_t c = 0; c < x.size(); ++c)
    r[c] = log ? x[c] - mx - std::log(z) : std::exp(x[c] - mx) / z;
  return r;
}

// dx of softmax(x) against dy in double: the parity harness's reference,
// from the exact probabilities.
std::vector<double> softmax_backward_reference(const std::vector<float>& x,
                                               const std::vector<float>& dy) {
  const auto p = softmax_reference(x, false);
  double pdy = 0;
  for (size_t c = 0; c < x.size(); ++c) pdy += p[c] * dy[c];
  std::vector<double> ref(x.size());
  for (size_t c = 0; c < x.size(); ++c) ref[c] = p[c] * (dy[c] - pdy);
  return ref;
}

// The rows a softmax meets: random, large magnitudes, a single finite
// value among -inf (a shortlist's mask), and masked tails (-1e9 added).
std::vector<std::pair<std::string, std::vector<float>>> softmax_inputs(int64_t cols) {
  std::vector<std::pair<std::string, std::vector<float>>> rows;
  rows.push_back({"random", randv(cols, 1, 3.f)});
  rows.push_back({"large", randv(cols, 2, 30.f, 1000.f)});
  rows.push_back({"large negative", randv(cols, 3, 30.f, -1000.f)});
  std::vector<float> one(cols, -kInf);
  one[cols / 2] = 2.5f;
  rows.push_back({"all -inf but one", one});
  auto tail = randv(cols, 4, 2.f);
  for (int64_t c = cols / 2 + 1; c < cols; ++c) tail[c] += -1e9f;
  rows.push_back({"masked tail", tail});
  auto inner = randv(cols, 5, 2.f);
  if (cols > 2) inner[1] += -1e9f;  // masked, but not at the end: summed as a 0
  rows.push_back({"masked inside", inner});
  return rows;
}

const int64_t kCols[] = {1, 2, 7, 100, 1025, 3000};

}  // namespace

TEST_CASE("exp_approx: within 1.5 ulp of exp over its range, 0 below it, saturated above",
          "[row_ops]") {
  // Two million points spread evenly from -86 to 88, and the edges.
  float worst_at = 0;
  double worst = 0;
  constexpr int kPoints = 2000000;
  for (int i = 0; i <= kPoints; ++i) {
    const float x = -86.f + 174.f * static_cast<float>(i) / kPoints;
    const double ref = std::exp(static_cast<double>(x));
    const double ulp = std::nextafter(static_cast<float>(ref), INFINITY) - static_cast<float>(ref);
    const double err = std::abs(exp_approx(x) - ref) / ulp;
    if (err > worst) worst = err, worst_at = x;
  }
  INFO("worst error " << worst << " ulp at x = " << worst_at);
  CHECK(worst <= 1.5);
  for (float x = -87.5f; x < -86.f; x += 1e-3f) {
    CHECK(exp_approx(x) >= 0.f);
    CHECK(exp_approx(x) <= std::exp(-86.f));
  }
  CHECK(exp_approx(0.f) == 1.f);
  CHECK(exp_approx(-INFINITY) == 0.f);
  CHECK(exp_approx(-100.f) == 0.f);
  CHECK(exp_approx(1000.f) == exp_approx(88.37626f));
  CHECK(std::isfinite(exp_approx(INFINITY)));
  CHECK(std::isnan(exp_approx(NAN)));
}

TEST_CASE("softmax_row and log-softmax against double references", "[row_ops]") {
  for (int64_t cols : kCols)
    for (const auto& [name, x] : softmax_inputs(cols))
      for (bool log : {false, true}) {
        const std::string what =
            std::string(log ? "log_softmax " : "softmax ") + name + " cols " + std::to_string(cols);
        std::vector<float> y(cols, 123.f);
        softmax_row(x.data(), y.data(), cols, log);
        // A log-probability is x - (max + log z): its rounding scales with
        // the unmasked inputs' magnitude.
        double mag = 1;
        for (float v : x)
          if (std::isfinite(v) && v > kMaskedScore) mag = std::max(mag, double(std::abs(v)));
        expect_near(y, softmax_reference(x, log), log ? 2e-6 * mag : 1e-7, 2e-5, what);
        // In place, as masked_softmax_ runs it: the same numbers.
        std::vector<float> z = x;
        softmax_row(z.data(), z.data(), cols, log);
        CHECK(z == y);
      }
}

TEST_CASE("softmax_row gives masked tails exactly 0 and a fully masked row its first column",
          "[row_ops]") {
  // Exactly 0 (not summed as exp(-1e9)): the CPU's loop does the same, so a
  // padded batch's rows match the unpadded ones bit for bit.
  auto x = randv(9, 6);
  for (int64_t c = 5; c < 9; ++c) x[c] += -1e9f;
  std::vector<float> y(9), y5(5);
  softmax_row(x.data(), y.data(), 9, false);
  softmax_row(x.data(), y5.data(), 5, false);
  for (int64_t c = 0; c < 5; ++c) CHECK(y[c] == y5[c]);
  for (int64_t c = 5; c < 9; ++c) CHECK(y[c] == 0.f);
  // Every column masked: the CPU's loop keeps one column.
  std::vector<float> all(6, -1e9f), p(6);
  CHECK(unmasked_length(all.data(), 6) == 1);
  softmax_row(all.data(), p.data(), 6, false);
  CHECK(p == std::vector<float>{1.f, 0.f, 0.f, 0.f, 0.f, 0.f});
  // One column: probability 1, log-probability 0.
  const float one = 42.f;
  float q = 0;
  softmax_row(&one, &q, 1, false);
  CHECK(q == 1.f);
  softmax_row(&one, &q, 1, true);
  CHECK(q == 0.f);
}

TEST_CASE("softmax backward rows: reference formula and finite differences", "[row_ops]") {
  for (int64_t cols : {1, 2, 7, 64, 300}) {
    const std::string what = "softmax_backward cols " + std::to_string(cols);
    auto x = randv(cols, 11, 2.f), dy = randv(cols, 12);
    std::vector<float> y(cols), dx(cols, 99.f);
    softmax_row(x.data(), y.data(), cols, false);
    softmax_backward_row(y.data(), dy.data(), dx.data(), cols);
    expect_close(dx, softmax_backward_reference(x, dy), 1e-5, what);
    // d/dx of L = sum(dy * forward(x)), the forward being softmax_row itself.
    std::vector<float> out(cols);
    auto loss = [&] {
      softmax_row(x.data(), out.data(), cols, false);
      return dot(out, dy);
    };
    expect_close(dx, numeric_gradient(loss, x.data(), cols, 1e-2f), 2e-3,
                 what + " (finite differences)");
  }
}

TEST_CASE("mask_index broadcasts padding, causal and full masks as add_mask does", "[row_ops]") {
  const int64_t B = 2, H = 3, T = 4, S = 5;
  const int64_t dims[4] = {B, H, T, S};
  const std::vector<std::array<int64_t, 4>> masks = {{B, 1, 1, S}, {1, 1, T, S}, {B, H, T, S},
                                                     {B, 1, T, 1}, {1, H, 1, S}, {1, 1, 1, 1}};
  for (const auto& md : masks) {
    const int64_t mn = md[0] * md[1] * md[2] * md[3];
    auto mask = randv(mn, 21);
    auto scores = randv(B * H * T * S, 22);
    const MaskBroadcast m = mask_broadcast(dims, md.data());
    std::vector<float> got = scores;
    for (int64_t i = 0; i < B * H * T * S; ++i) got[i] += mask[mask_index(m, i)];
    std::vector<double> ref(scores.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t s = 0; s < S; ++s) {
            const int64_t i = ((b * H + h) * T + t) * S + s;
            const int64_t j = (((md[0] == 1 ? 0 : b) * md[1] + (md[1] == 1 ? 0 : h)) * md[2] +
                               (md[2] == 1 ? 0 : t)) *
                                  md[3] +
                              (md[3] == 1 ? 0 : s);
            ref[i] = scores[i] + mask[j];  // the float sum: the same bits expected
          }
    expect_close(got, ref, 0,
                 "mask " + std::to_string(md[0]) + "x" + std::to_string(md[1]) + "x" +
                     std::to_string(md[2]) + "x" + std::to_string(md[3]));
  }
}

namespace {

struct LnRef {
  std::vector<double> y, dx, dgamma, dbeta;
  std::vector<double> mean, var;
};

// Layer norm of (rows, D) and its backward pass, in double (the parity
// harness's loops), parameter gradients accumulated onto dg0 and db0.
LnRef layer_norm_reference(const std::vector<float>& X, const std::vector<float>& G,
                           const std::vector<float>& Bv, const std::vector<float>& dY,
                           const std::vector<float>& dg0, const std::vector<float>& db0,
                           int64_t rows, int64_t D, float eps) {
  LnRef r;
  r.y.resize(rows * D), r.dx.resize(rows * D);
  r.dgamma.assign(dg0.begin(), dg0.end()), r.dbeta.assign(db0.begin(), db0.end());
  for (int64_t i = 0; i < rows; ++i) {
    double mu = 0, v = 0;
    for (int64_t k = 0; k < D; ++k) mu += X[i * D + k];
    mu /= D;
    for (int64_t k = 0; k < D; ++k) v += (X[i * D + k] - mu) * (X[i * D + k] - mu);
    v /= D;
    r.mean.push_back(mu), r.var.push_back(v);
    const double rs = 1 / std::sqrt(v + eps);
    double mg = 0, mgx = 0;
    for (int64_t k = 0; k < D; ++k) {
      const double xh = (X[i * D + k] - mu) * rs, gk = dY[i * D + k] * G[k];
      r.y[i * D + k] = xh * G[k] + Bv[k];
      mg += gk / D, mgx += gk * xh / D;
      r.dgamma[k] += dY[i * D + k] * xh;
      r.dbeta[k] += dY[i * D + k];
    }
    for (int64_t k = 0; k < D; ++k) {
      const double xh = (X[i * D + k] - mu) * rs;
      r.dx[i * D + k] = rs * (dY[i * D + k] * G[k] - mg - xh * mgx);
    }
  }
  return r;
}

}  // namespace

namespace {

// A layer norm's rows and parameter gradients computed one way: the
// one-thread rows and columns (the CPU's order), or the GPU's lanes and
// row chunks.
struct LnWay {
  const char* name;
  void (*forward)(const float*, const float*, const float*, float*, float*, float*, int64_t, float);
  void (*backward)(const float*, const float*, const float*, float, float, float*, int64_t, float);
  // dgamma and dbeta accumulated over (rows, D).
  void (*params)(const float*, const float*, const float*, const float*, int64_t, int64_t, float,
                 float*, float*);
};

void params_by_columns(const float* x, const float* dy, const float* mean, const float* var,
                       int64_t rows, int64_t D, float eps, float* dg, float* db) {
  for (int64_t k = 0; k < D; ++k) layer_norm_param_grads_col(x, dy, mean, var, rows, D, eps, k, dg, db);
}

// As the GPU's two launches: a partial sum per (chunk, column), then the
// chunks in order, added to what was there.
void params_by_chunks(const float* x, const float* dy, const float* mean, const float* var,
                      int64_t rows, int64_t D, float eps, float* dg, float* db) {
  const int64_t chunks = column_chunks(rows);
  std::vector<float> pg(chunks * D), pb(chunks * D);
  for (int64_t ch = 0; ch < chunks; ++ch)
    for (int64_t k = 0; k < D; ++k)
      layer_norm_param_grads_chunk(x, dy, mean, var, rows, D, eps, k, ch, &pg[ch * D + k],
                                   &pb[ch * D + k]);
  for (int64_t k = 0; k < D; ++k) {
    dg[k] += sum_column_chunks(pg.data(), chunks, D, k);
    db[k] += sum_column_chunks(pb.data(), chunks, D, k);
  }
}

const LnWay kOneThread = {"layer_norm", layer_norm_row, layer_norm_backward_row, params_by_columns};
const LnWay kLanes = {"lanes layer_norm", layer_norm_row_lanes, layer_norm_backward_row_lanes,
                      params_by_chunks};

struct LnCase {
  int64_t rows, D;
  float scale, offset;
};

void check_layer_norm(const LnWay& way, LnCase c, uint32_t seed) {
  const std::string what = std::string(way.name) + " rows " + std::to_string(c.rows) + " D " +
                           std::to_string(c.D) + " offset " + std::to_string(c.offset);
  const int64_t rows = c.rows, D = c.D;
  const float eps = 1e-6f;
  auto X = randv(rows * D, seed, c.scale, c.offset), G = randv(D, seed + 1),
       Bv = randv(D, seed + 2), dY = randv(rows * D, seed + 3), dG0 = randv(D, seed + 4),
       dB0 = randv(D, seed + 5);
  const LnRef ref = layer_norm_reference(X, G, Bv, dY, dG0, dB0, rows, D, eps);
  std::vector<float> y(rows * D), y2(rows * D), mean(rows), var(rows), dx(rows * D, 7.f);
  for (int64_t r = 0; r < rows; ++r) {
    way.forward(&X[r * D], G.data(), Bv.data(), &y[r * D], &mean[r], &var[r], D, eps);
    way.forward(&X[r * D], G.data(), Bv.data(), &y2[r * D], nullptr, nullptr, D, eps);
  }
  // The offset costs the float mean a few ulps of 1000 in every x - mean.
  const double tol = c.offset != 0 ? 2e-3 : 2e-5;
  expect_close(y, ref.y, tol, what + " y");
  CHECK(y2 == y);
  expect_close(mean, ref.mean, 1e-6, what + " mean");
  expect_close(var, ref.var, c.offset != 0 ? 1e-3 : 1e-5, what + " var");
  for (int64_t r = 0; r < rows; ++r)
    way.backward(&X[r * D], &dY[r * D], G.data(), mean[r], var[r], &dx[r * D], D, eps);
  std::vector<float> dg = dG0, db = dB0;
  way.params(X.data(), dY.data(), mean.data(), var.data(), rows, D, eps, dg.data(), db.data());
  expect_close(dx, ref.dx, c.offset != 0 ? 5e-3 : 1e-4, what + " dx");
  expect_close(dg, ref.dgamma, c.offset != 0 ? 2e-3 : 2e-5, what + " dgamma (accumulated)");
  expect_close(db, ref.dbeta, 1e-6, what + " dbeta (accumulated)");
}

}  // namespace

TEST_CASE("layer_norm_row and its backward rows against double references", "[row_ops]") {
  // D = 1: every x is its own mean, so y = beta and only eps keeps rstd finite.
  for (LnCase c : {LnCase{1, 1, 1.f, 0.f}, LnCase{3, 4, 2.f, 0.f}, LnCase{7, 16, 2.f, 0.f},
                   LnCase{5, 512, 1.f, 0.f}, LnCase{4, 64, 0.5f, 1000.f}})
    check_layer_norm(kOneThread, c, 1);
}

TEST_CASE("layer norm backward rows match finite differences of layer_norm_row", "[row_ops]") {
  for (auto [rows, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {3, 5}, {4, 32}}) {
    const std::string what = "layer_norm rows " + std::to_string(rows) + " D " + std::to_string(D);
    const float eps = 1e-5f;
    auto X = randv(rows * D, 31, 2.f), G = randv(D, 32), Bv = randv(D, 33), R = randv(rows * D, 34);
    std::vector<float> y(rows * D), mean(rows), var(rows);
    auto loss = [&] {
      for (int64_t r = 0; r < rows; ++r)
        layer_norm_row(&X[r * D], G.data(), Bv.data(), &y[r * D], nullptr, nullptr, D, eps);
      return dot(y, R);
    };
    for (int64_t r = 0; r < rows; ++r)
      layer_norm_row(&X[r * D], G.data(), Bv.data(), &y[r * D], &mean[r], &var[r], D, eps);
    std::vector<float> dx(rows * D), dg(D, 0.f), db(D, 0.f);
    for (int64_t r = 0; r < rows; ++r)
      layer_norm_backward_row(&X[r * D], &R[r * D], G.data(), mean[r], var[r], &dx[r * D], D, eps);
    for (int64_t k = 0; k < D; ++k)
      layer_norm_param_grads_col(X.data(), R.data(), mean.data(), var.data(), rows, D, eps, k,
                                 dg.data(), db.data());
    expect_close(dx, numeric_gradient(loss, X.data(), rows * D, 1e-2f), 5e-3, what + " dx");
    expect_close(dg, numeric_gradient(loss, G.data(), D, 1e-2f), 2e-3, what + " dgamma");
    expect_close(db, numeric_gradient(loss, Bv.data(), D, 1e-2f), 2e-3, what + " dbeta");
  }
}

TEST_CASE("embedding_backward_cols: repeated and absent tokens, any column split", "[row_ops]") {
  const int64_t V = 11, D = 37, T = 4, n = 12, P = 6;
  const float scale = 2.5f;
  // Repeats on purpose; -1 is no token (padding, a decoder's zero start).
  const std::vector<int32_t> tok = {1, 4, 4, 0, 10, -1, 2, 2, 7, 7, 7, 0};
  auto dY = randv(n * D, 41), dE0 = randv(V * D, 42), dP0 = randv(P * D, 43);
  std::vector<double> rE(dE0.begin(), dE0.end()), rP(dP0.begin(), dP0.end());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t d = 0; d < D; ++d) {
      if (tok[r] >= 0) rE[tok[r] * D + d] += double(dY[r * D + d]) * scale;
      rP[(r % T) * D + d] += dY[r * D + d];
    }
  std::vector<float> dE = dE0, dP = dP0;
  embedding_backward_cols(tok.data(), n, D, scale, dY.data(), dE.data(), dP.data(), T, 0, D);
  expect_close(dE, rE, 1e-6, "embedding_backward table");
  expect_close(dP, rP, 1e-6, "embedding_backward positions");
  // One column per thread (the CUDA launch) or slices of 32 (the CPU's):
  // each float sees the same additions in the same order.
  for (int64_t width : {1, 5, 32}) {
    std::vector<float> e = dE0, p = dP0;
    for (int64_t i0 = 0; i0 < D; i0 += width)
      embedding_backward_cols(tok.data(), n, D, scale, dY.data(), e.data(), p.data(), T, i0,
                              std::min(D, i0 + width));
    CHECK(e == dE);
    CHECK(p == dP);
  }
  // Without positions: the table alone.
  std::vector<float> e = dE0;
  embedding_backward_cols(tok.data(), n, D, scale, dY.data(), e.data(), nullptr, T, 0, D);
  CHECK(e == dE);
}

namespace {

// A row's label-smoothed cross-entropy in double: loss, nll and gradient.
XentRow xent_reference(const std::vector<float>& x, int32_t target, float eps, float grad_scale,
                       std::vector<double>& g) {
  const int64_t V = static_cast<int64_t>(x.size());
  double mx = -1e300, z = 0, sum = 0;
  for (float v : x) mx = std::max(mx, double(v));
  for (float v : x) z += std::exp(v - mx), sum += v;
  const double lz = mx + std::log(z), lp = x[target] - lz;
  XentRow r;
  r.nll = -lp;
  r.loss = -(1 - eps) * lp - eps * (sum / V - lz);
  r.tokens = 1;
  g.resize(V);
  for (int64_t v = 0; v < V; ++v)
    g[v] = (std::exp(x[v] - lz) - eps / V - (v == target) * (1 - eps)) * grad_scale;
  return r;
}

using XentFn = XentRow (*)(const float*, int32_t, int32_t, int64_t, float, float*, float);

// One row of random logits (scale around offset) through fn, checked
// against the double reference; x, target and the gradient g come back.
XentRow check_xent_row(XentFn fn, const char* name, int64_t V, float scale, float offset,
                       uint32_t seed, float eps, float grad_scale, std::vector<float>& x,
                       int32_t& target, std::vector<float>& g) {
  const std::string what = std::string(name) + " V " + std::to_string(V) + " offset " +
                           std::to_string(offset);
  x = randv(V, seed, scale, offset);
  target = static_cast<int32_t>((V * 7 + 1) / 3 % V);
  std::vector<double> rg;
  const XentRow ref = xent_reference(x, target, eps, grad_scale, rg);
  g.assign(V, 5.f);
  const XentRow got = fn(x.data(), target, -1, V, eps, g.data(), grad_scale);
  CHECK(got.tokens == 1);
  // x - logz is rounded to float's ulp of x: relative to the offset.
  const double margin = 1e-6 * std::max(1.f, offset);
  CHECK(got.nll == Approx(ref.nll).epsilon(1e-6).margin(margin));
  CHECK(got.loss == Approx(ref.loss).epsilon(1e-6).margin(margin));
  expect_close(g, rg, 1e-5, what + " gradient");
  return got;
}

}  // namespace

TEST_CASE("xent_row: loss, nll and gradient against double references; pad rows", "[row_ops]") {
  const float eps = 0.1f, grad_scale = 1.f / 7;
  for (int64_t V : {1, 2, 5, 37, 1024, 1025, 3000}) {
    for (auto [scale, offset] : std::vector<std::pair<float, float>>{{2.f, 0.f}, {20.f, 1000.f}}) {
      std::vector<float> x, g;
      int32_t target;
      const XentRow got =
          check_xent_row(xent_row, "xent", V, scale, offset, 51, eps, grad_scale, x, target, g);
      // Without a gradient, the same totals; with it in place of x, the same gradient.
      const XentRow bare = xent_row(x.data(), target, -1, V, eps, nullptr, grad_scale);
      CHECK((bare.loss == got.loss && bare.nll == got.nll));
      std::vector<float> inplace = x;
      xent_row(inplace.data(), target, -1, V, eps, inplace.data(), grad_scale);
      CHECK(inplace == g);
    }
    // A pad row: no token, no loss, and a zero gradient over whatever was there.
    auto x = randv(V, 52);
    std::vector<float> g(V, 5.f);
    const XentRow pad = xent_row(x.data(), 0, 0, V, eps, g.data(), grad_scale);
    CHECK((pad.tokens == 0 && pad.loss == 0 && pad.nll == 0));
    CHECK(g == std::vector<float>(V, 0.f));
  }
}

TEST_CASE("xent_row's gradient matches finite differences of its loss", "[row_ops]") {
  for (int64_t V : {2, 9, 50}) {
    const float eps = 0.1f, grad_scale = 0.5f;
    auto x = randv(V, 61, 2.f);
    const int32_t target = static_cast<int32_t>(V / 2);
    std::vector<float> g(V);
    xent_row(x.data(), target, -1, V, eps, g.data(), grad_scale);
    auto loss = [&] {
      return grad_scale * xent_row(x.data(), target, -1, V, eps, nullptr, 1).loss;
    };
    expect_close(g, numeric_gradient(loss, x.data(), V, 1e-2f), 2e-3,
                 "xent V " + std::to_string(V) + " (finite differences)");
  }
}

TEST_CASE("xent_sum totals rows in order, pad rows counting nothing", "[row_ops]") {
  const int64_t N = 9, V = 13;
  const float eps = 0.1f;
  auto X = randv(N * V, 71, 2.f);
  std::vector<int32_t> tgt(N);
  for (int64_t i = 0; i < N; ++i) tgt[i] = i % 4 == 3 ? 0 : int32_t((i * 7 + 1) % V);
  std::vector<XentRow> rows(N);
  double loss = 0, nll = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < N; ++i) {
    rows[i] = xent_row(&X[i * V], tgt[i], 0, V, eps, nullptr, 1.f);
    if (tgt[i] == 0) continue;
    std::vector<double> g;
    const XentRow r = xent_reference(std::vector<float>(X.begin() + i * V, X.begin() + (i + 1) * V),
                                     tgt[i], eps, 1.f, g);
    loss += r.loss, nll += r.nll, ++tokens;
  }
  const XentRow t = xent_sum(rows.data(), N);
  CHECK(t.tokens == tokens);
  CHECK(t.loss == Approx(loss).epsilon(1e-6));
  CHECK(t.nll == Approx(nll).epsilon(1e-6));
  CHECK(xent_sum(rows.data(), 0).tokens == 0);
}

TEST_CASE("sum of squares in chunks: the CPU's order, whatever the length", "[row_ops]") {
  for (int64_t n : {1, 100, 16383, 16384, 16385, 50000}) {
    auto x = randv(n, 81, 3.f);
    const int64_t chunks = (n + kSumSquaresChunk - 1) / kSumSquaresChunk;
    std::vector<double> parts(chunks);
    for (int64_t c = 0; c < chunks; ++c) parts[c] = sum_squares_chunk(x.data(), n, c);
    const double got = sum_in_order(parts.data(), chunks);
    // The CPU backend itself, which must agree exactly.
    double cpu = 0;
    cpu_backend().sum_squares(x.data(), n, &cpu);
    CHECK(got == cpu);
    long double exact = 0;
    for (float v : x) exact += static_cast<long double>(v) * v;
    CHECK(got == Approx(static_cast<double>(exact)).epsilon(1e-12));
  }
  CHECK(sum_in_order(nullptr, 0) == 0);
}

TEST_CASE("pick_value: the column asked for, 0 for none", "[row_ops]") {
  const std::vector<float> row = {0.5f, -2.f, 7.f};
  CHECK(pick_value(row.data(), 0) == 0.5f);
  CHECK(pick_value(row.data(), 2) == 7.f);
  CHECK(pick_value(row.data(), -1) == 0.f);
}

namespace {

// A (rows, cols) row-major matrix as a GEMM operand.
MatDesc dense(const float* p, int64_t rows, int64_t cols) {
  MatDesc d;
  d.ptr = p;
  d.dims = {1, 1, rows, cols};
  d.strides = {rows * cols, rows * cols, cols, 1};
  return d;
}

}  // namespace

TEST_CASE("gemm_epilogue: bias and activation as the CPU's fused GEMM applies them", "[row_ops]") {
  const int64_t M = 7, K = 13, N = 9;
  const auto a = randv(M * K, 91), b = randv(K * N, 92), bias = randv(N, 93),
             prior = randv(M * N, 94);
  Backend& cpu = cpu_backend();
  // The bare product, which the CUDA backend's cuBLAS call gives.
  std::vector<float> p(M * N);
  cpu.gemm(dense(a.data(), M, K), dense(b.data(), K, N), dense(p.data(), M, N), GemmAttr{});
  for (Activation act : {Activation::None, Activation::Relu, Activation::Swish, Activation::Gelu,
                         Activation::GeluTanh})
    for (bool with_bias : {false, true})
      for (bool accumulate : {false, true}) {
        INFO("activation " << static_cast<int>(act) << ", bias " << with_bias << ", accumulate "
                           << accumulate);
        GemmAttr attr;
        attr.bias = with_bias ? bias.data() : nullptr;
        attr.act = act;
        attr.accumulate = accumulate;
        std::vector<float> fused = prior;
        cpu.gemm(dense(a.data(), M, K), dense(b.data(), K, N), dense(fused.data(), M, N), attr);
        for (int64_t r = 0; r < M; ++r)
          for (int64_t c = 0; c < N; ++c) {
            const float got = gemm_epilogue(p[r * N + c], attr.bias, c, act,
                                            accumulate ? prior[r * N + c] : 0.f);
            REQUIRE(got == Approx(fused[r * N + c]).margin(1e-5).epsilon(1e-5));
          }
      }
}

TEST_CASE("gather_byte moves the bytes the CPU's gather_rows moves", "[row_ops]") {
  const int64_t rows = 11, src_ld = 40, dst_ld = 48, len = 37;  // bytes, unaligned rows
  std::vector<char> src(rows * src_ld);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  const std::vector<int64_t> idx = {4, 4, 0, 10, 7}, dst_idx = {6, 1, 3, 0, 9};
  const int64_t n = static_cast<int64_t>(idx.size());
  for (bool scatter : {false, true}) {
    INFO("dst_idx given: " << scatter);
    std::vector<char> want(rows * dst_ld, 'x'), got(rows * dst_ld, 'x');
    const int64_t* di = scatter ? dst_idx.data() : nullptr;
    cpu_backend().gather_rows(src.data(), src_ld, idx.data(), n, len, want.data(), dst_ld, di);
    for (int64_t e = 0; e < n * len; ++e) {
      int64_t from, to;
      gather_byte(e, len, idx.data(), src_ld, di, dst_ld, &from, &to);
      got[to] = src[from];
    }
    CHECK(got == want);
  }
}

TEST_CASE("softmax and log-softmax by lanes (the GPU's wide rows) against double references",
          "[row_ops]") {
  for (int64_t cols : {int64_t{1}, int64_t{7}, int64_t{255}, int64_t{256}, int64_t{257},
                       int64_t{3000}, int64_t{8000}})
    for (const auto& [name, x] : softmax_inputs(cols))
      for (bool log : {false, true}) {
        const std::string what = std::string(log ? "lanes log_softmax " : "lanes softmax ") +
                                 name + " cols " + std::to_string(cols);
        std::vector<float> y(cols, 123.f), one(cols);
        softmax_row_lanes(x.data(), y.data(), cols, log);
        double mag = 1;
        for (float v : x)
          if (std::isfinite(v) && v > kMaskedScore) mag = std::max(mag, double(std::abs(v)));
        expect_near(y, softmax_reference(x, log), log ? 2e-6 * mag : 1e-7, 2e-5, what);
        // The masked tail exactly 0, as the one-thread row and the CPU give it.
        softmax_row(x.data(), one.data(), cols, log);
        for (int64_t c = 0; c < cols; ++c)
          if (one[c] == 0.f) CHECK(y[c] == 0.f);
        std::vector<float> z = x;  // in place
        softmax_row_lanes(z.data(), z.data(), cols, log);
        CHECK(z == y);
      }
}

TEST_CASE("xent by lanes (the GPU's wide rows): loss, nll and gradient as xent_row's",
          "[row_ops]") {
  const float eps = 0.1f, grad_scale = 1.f / 7;
  for (int64_t V : {1, 5, 256, 257, 3000, 8000}) {
    for (auto [scale, offset] : std::vector<std::pair<float, float>>{{2.f, 0.f}, {20.f, 1000.f}}) {
      std::vector<float> x, g;
      int32_t target;
      check_xent_row(xent_row_lanes, "lanes xent", V, scale, offset, 53, eps, grad_scale, x,
                     target, g);
    }
  }
  auto x = randv(300, 54);
  std::vector<float> g(300, 5.f);
  const XentRow pad = xent_row_lanes(x.data(), 0, 0, 300, eps, g.data(), grad_scale);
  CHECK((pad.tokens == 0 && pad.loss == 0 && pad.nll == 0));
  CHECK(g == std::vector<float>(300, 0.f));
}

TEST_CASE("layer norm by lanes and its parameter gradients by row chunks against double references",
          "[row_ops]") {
  // D from 1 to several columns per lane; rows past one chunk and a ragged last chunk.
  for (LnCase c : {LnCase{1, 1, 1.f, 0.f}, LnCase{3, 7, 2.f, 0.f}, LnCase{300, 16, 2.f, 0.f},
                   LnCase{5, 512, 1.f, 0.f}, LnCase{2, 1000, 1.f, 0.f},
                   LnCase{513, 64, 0.5f, 1000.f}})
    check_layer_norm(kLanes, c, 61);
}

TEST_CASE("softmax backward by lanes against the reference formulas", "[row_ops]") {
  for (int64_t cols : {int64_t{1}, int64_t{7}, int64_t{256}, int64_t{257}, int64_t{3000}}) {
    const std::string what = "lanes softmax_backward cols " + std::to_string(cols);
    auto x = randv(cols, 71, 2.f), dy = randv(cols, 72);
    std::vector<float> y(cols), dx(cols, 99.f);
    softmax_row(x.data(), y.data(), cols, false);
    softmax_backward_row_lanes(y.data(), dy.data(), dx.data(), cols);
    expect_close(dx, softmax_backward_reference(x, dy), 1e-5, what);
    std::vector<float> in_place = dy;  // dx may be dy, as the ops tier calls it
    softmax_backward_row_lanes(y.data(), in_place.data(), in_place.data(), cols);
    CHECK(in_place == dx);
  }
}

TEST_CASE("column sums by row chunks: the CPU's add_column_sums to rounding", "[row_ops]") {
  for (int64_t rows : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257}, int64_t{1000}}) {
    const int64_t cols = 37;
    INFO("rows " << rows);
    auto src = randv(rows * cols, 81, 2.f), dst0 = randv(cols, 82);
    std::vector<float> want = dst0;
    cpu_backend().add_column_sums(src.data(), want.data(), rows, cols);
    const int64_t chunks = column_chunks(rows);
    REQUIRE(chunks == (rows + 255) / 256);
    std::vector<float> parts(chunks * cols);
    for (int64_t ch = 0; ch < chunks; ++ch)
      for (int64_t c = 0; c < cols; ++c)
        parts[ch * cols + c] = column_sum_chunk(src.data(), rows, cols, c, ch);
    std::vector<float> got = dst0;
    std::vector<double> ref(cols);
    for (int64_t c = 0; c < cols; ++c) {
      got[c] += sum_column_chunks(parts.data(), chunks, cols, c);
      ref[c] = dst0[c];
      for (int64_t r = 0; r < rows; ++r) ref[c] += src[r * cols + c];
    }
    expect_close(got, ref, 1e-6, "chunked column sums");
    std::vector<double> cpu(want.begin(), want.end());
    expect_close(got, cpu, 1e-6, "chunked column sums against the CPU");
  }
}

TEST_CASE("embedding gradient by sorted token runs and by positions: the CPU's sums exactly",
          "[row_ops]") {
  // The GPU's grouping: a stable sort of the rows by id, a run per id, a
  // thread per column of a run; positions each walk their own rows.
  for (int64_t n : {int64_t{1}, int64_t{12}, int64_t{700}}) {
    INFO("rows " << n);
    const int64_t V = 23, D = 37, T = 7, P = 9;
    const float scale = 2.5f;
    std::vector<int32_t> tok(n);
    for (int64_t r = 0; r < n; ++r) tok[r] = r % 11 == 5 ? -1 : static_cast<int32_t>((r * r + 3) % V);
    auto dY = randv(n * D, 91), dE0 = randv(V * D, 92), dP0 = randv(P * D, 93);
    // The one-thread-per-column function (the same roundings: only the
    // grouping differs), and the CPU backend to rounding (whether a multiply
    // and add fuse is the compiler's choice there).
    std::vector<float> want_e = dE0, want_p = dP0, cpu_e = dE0, cpu_p = dP0;
    embedding_backward_cols(tok.data(), n, D, scale, dY.data(), want_e.data(), want_p.data(), T,
                            0, D);
    cpu_backend().embedding_backward(tok.data(), n, D, scale, dY.data(), cpu_e.data(),
                                     cpu_p.data(), T);
    std::vector<int32_t> rows(n);
    std::iota(rows.begin(), rows.end(), 0);
    std::stable_sort(rows.begin(), rows.end(), [&](int32_t a, int32_t b) { return tok[a] < tok[b]; });
    std::vector<float> e = dE0, p = dP0;
    for (int64_t k = 0; k < n;) {
      int64_t end = k;
      while (end < n && tok[rows[end]] == tok[rows[k]]) ++end;
      if (tok[rows[k]] >= 0)
        for (int64_t i = 0; i < D; ++i)
          embedding_backward_token(rows.data() + k, end - k, dY.data(), D, scale,
                                   e.data() + static_cast<int64_t>(tok[rows[k]]) * D, i);
      k = end;
    }
    for (int64_t pos = 0; pos < std::min(n, T); ++pos)
      for (int64_t i = 0; i < D; ++i) embedding_backward_position(dY.data(), n, D, T, pos, p.data(), i);
    CHECK(e == want_e);
    CHECK(p == want_p);
    expect_close(e, std::vector<double>(cpu_e.begin(), cpu_e.end()), 1e-6, "against the CPU");
    expect_close(p, std::vector<double>(cpu_p.begin(), cpu_p.end()), 1e-6, "against the CPU");
  }
}
