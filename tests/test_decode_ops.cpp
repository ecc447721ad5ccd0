// The decoding functions of kernels/decode_ops.h, which the CUDA kernels run,
// checked on the host: against naive references in double (attention as an
// explicit softmax over every key; the top k and the draws from a full sort
// of the candidates), on the edge cases decoding meets (masked tails, -inf
// columns, ties, banned ids, k or top_k at the vocabulary's size, forced
// ids), and against the CPU backend itself, whose selections and draws
// they must reproduce. The CUDA backend is then a launch around code that
// is tested here, on a machine without a GPU.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "kernels/decode_ops.h"
#include "test_helpers.h"

using namespace nmt;
using namespace nmt::test;

namespace {

double log_sum_exp_reference(const std::vector<float>& x) {
  double mx = -1e300, z = 0;
  for (float v : x) mx = std::max(mx, double(v));
  for (float v : x) z += std::exp(double(v) - mx);
  return mx + std::log(z);
}

// ---- attend ----------------------------------------------------------------

// Operands laid out as decoding keeps them: queries dense (B, H, M, D); keys
// and values in a cache (B, cap, H, width) read as (B, H, L, width) views
// (strides over B, H, rows: cap*H*width, width, H*width); ctx (B, M, H, Dv)
// as the heads' outputs are concatenated.
struct AttendCase {
  std::string name;
  int64_t B, H, M, D, L, Dv, cap;
  float scale, q_offset;
  std::vector<int64_t> masked;  // key positions masked in every batch row
  int64_t masked_tail_from;     // keys from here on masked (batch row 1 only), or -1
  bool with_mask;
};

struct AttendData {
  AttendShape a;
  std::vector<float> q, k, v, mask, ctx;
};

// The backend's view of one operand: dims, and strides with a unit last.
MatDesc desc(const float* p, int64_t d0, int64_t d1, int64_t d2, int64_t d3, const int64_t* st) {
  MatDesc m;
  m.ptr = p;
  m.dims = {d0, d1, d2, d3};
  m.strides = {st[0], st[1], st[2], 1};
  return m;
}

AttendData make_attend(const AttendCase& c, uint32_t seed) {
  AttendData d;
  AttendShape& a = d.a;
  a.B = c.B, a.H = c.H, a.M = c.M, a.D = c.D, a.L = c.L, a.Dv = c.Dv;
  a.q[0] = c.H * c.M * c.D, a.q[1] = c.M * c.D, a.q[2] = c.D;
  a.k[0] = c.cap * c.H * c.D, a.k[1] = c.D, a.k[2] = c.H * c.D;
  a.v[0] = c.cap * c.H * c.Dv, a.v[1] = c.Dv, a.v[2] = c.H * c.Dv;
  a.ctx[0] = c.M * c.H * c.Dv, a.ctx[1] = c.Dv, a.ctx[2] = c.H * c.Dv;
  d.q = randv(c.B * c.H * c.M * c.D, seed, 1.f, c.q_offset);
  d.k = randv(c.B * c.cap * c.H * c.D, seed + 1);
  d.v = randv(c.B * c.cap * c.H * c.Dv, seed + 2);
  d.ctx.assign(c.B * c.M * c.H * c.Dv, 123.f);  // overwritten, never added to
  if (c.with_mask) {
    d.mask.assign(c.B * c.L, 0.f);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j : c.masked) d.mask[b * c.L + j] = -1e9f;
    if (c.masked_tail_from >= 0 && c.B > 1)
      for (int64_t j = c.masked_tail_from; j < c.L; ++j) d.mask[c.L + j] = -1e9f;
  }
  return d;
}

void run_attend(AttendData& d, float scale) {
  std::vector<float> s(d.a.L);
  for (int64_t i = 0; i < d.a.B * d.a.H * d.a.M; ++i)
    attend_row(d.q.data(), d.k.data(), d.v.data(), d.mask.empty() ? nullptr : d.mask.data(), scale,
               d.ctx.data(), d.a, i, s.data());
}

// ctx[b, h, i] in double: a softmax over every key, masked ones included.
std::vector<double> attend_reference(const AttendData& d, float scale) {
  const AttendShape& a = d.a;
  std::vector<double> out(d.ctx.size(), 0.0);
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.H; ++h)
      for (int64_t i = 0; i < a.M; ++i) {
        std::vector<double> s(a.L);
        double mx = -1e300;
        for (int64_t j = 0; j < a.L; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < a.D; ++x)
            dot += double(d.q[b * a.q[0] + h * a.q[1] + i * a.q[2] + x]) *
                   d.k[b * a.k[0] + h * a.k[1] + j * a.k[2] + x];
          s[j] = scale * dot + (d.mask.empty() ? 0.0 : d.mask[b * a.L + j]);
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (auto& e : s) z += e = std::exp(e - mx);
        for (int64_t x = 0; x < a.Dv; ++x) {
          double acc = 0;
          for (int64_t j = 0; j < a.L; ++j)
            acc += s[j] / z * d.v[b * a.v[0] + h * a.v[1] + j * a.v[2] + x];
          out[b * a.ctx[0] + h * a.ctx[1] + i * a.ctx[2] + x] = acc;
        }
      }
  return out;
}

std::vector<AttendCase> attend_cases() {
  return {
      {"one step, 5 keys", 2, 3, 1, 8, 5, 8, 7, 0.35f, 0.f, {}, -1, true},
      {"one key", 2, 2, 1, 4, 1, 4, 3, 0.5f, 0.f, {}, -1, true},
      {"several query rows, no mask", 1, 2, 3, 6, 9, 6, 9, 0.4f, 0.f, {}, -1, false},
      {"values wider than keys", 2, 1, 2, 3, 6, 5, 8, 0.6f, 0.f, {}, -1, true},
      {"masked inside and a masked tail", 2, 2, 1, 8, 11, 8, 12, 0.35f, 0.f, {2, 5}, 4, true},
      {"query rows and heads", 2, 2, 2, 4, 5, 4, 6, 0.5f, 0.f, {}, -1, true},
      // Scores in the hundreds: exp overflows unless the maximum comes off.
      {"large scores", 2, 2, 1, 8, 8, 8, 8, 1.f, 40.f, {}, -1, true},
      {"all masked but the first", 2, 1, 1, 4, 6, 4, 6, 0.5f, 0.f, {}, 1, true},
      // Head widths of 16, 32, 64 and 128, which the CPU runs 16 keys at a
      // time (8 with AVX2): keys across blocks, a whole block, a block's
      // last lane, a single key.
      {"32-wide heads, keys in two blocks", 2, 2, 1, 32, 17, 32, 20, 0.2f, 0.f, {3}, 16, true},
      {"64-wide heads, one full block", 2, 2, 4, 64, 16, 64, 16, 0.15f, 0.f, {}, 5, true},
      {"16-wide, three blocks, big scores", 2, 2, 1, 16, 40, 16, 41, 1.f, 12.f, {0}, 33, true},
      {"64-wide heads, one key", 2, 2, 1, 64, 1, 64, 3, 0.2f, 0.f, {}, -1, true},
      {"128-wide heads, no mask", 1, 2, 2, 128, 15, 128, 15, 0.1f, 0.f, {}, -1, false},
  };
}

TEST_CASE("attend_row against an explicit softmax(scale q k + mask) v in double", "[decode_ops]") {
  uint32_t seed = 10;
  for (const auto& c : attend_cases()) {
    INFO(c.name);
    AttendData d = make_attend(c, seed += 7);
    run_attend(d, c.scale);
    const auto ref = attend_reference(d, c.scale);
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO("element " << i << " is " << d.ctx[i] << ", reference " << ref[i]);
      REQUIRE(std::abs(d.ctx[i] - ref[i]) <= 1e-5 + 1e-5 * std::abs(ref[i]));
    }
  }
}

TEST_CASE("attend_row: a masked tail changes nothing, bit for bit, and matches the CPU",
          "[decode_ops]") {
  // Batch row 1 with keys 4.. masked equals the same keys alone: the
  // numbers of a sentence do not depend on how far its batch is padded.
  AttendCase padded{"padded", 2, 2, 1, 8, 11, 8, 11, 0.35f, 0.f, {}, 4, true};
  AttendData d = make_attend(padded, 3);
  // A cache's padding may hold anything (rows never written): never read.
  for (int64_t j = 4; j < padded.L; ++j) {
    for (int64_t x = 0; x < d.a.D * d.a.H; ++x) d.k[d.a.k[0] + j * d.a.k[2] + x] = NAN;
    for (int64_t x = 0; x < d.a.Dv * d.a.H; ++x) d.v[d.a.v[0] + j * d.a.v[2] + x] = NAN;
  }
  run_attend(d, padded.scale);
  AttendShape alone = d.a;
  alone.B = 1, alone.L = 4;
  std::vector<float> mask(4, 0.f), ctx(d.a.ctx[0], 0.f), s(4);
  for (int64_t i = 0; i < alone.H * alone.M; ++i)
    attend_row(d.q.data() + d.a.q[0], d.k.data() + d.a.k[0], d.v.data() + d.a.v[0], mask.data(),
               padded.scale, ctx.data(), alone, i, s.data());
  CHECK(std::memcmp(ctx.data(), d.ctx.data() + d.a.ctx[0], ctx.size() * sizeof(float)) == 0);

  // The CPU backend runs the same steps (its dot products in vector lanes
  // and its own exp, so only close).
  for (const auto& c : attend_cases()) {
    INFO(c.name);
    AttendData e = make_attend(c, 99);
    run_attend(e, c.scale);
    std::vector<float> cpu(e.ctx.size(), 0.f);
    const AttendShape& a = e.a;
    cpu_backend().attend(
        desc(e.q.data(), a.B, a.H, a.M, a.D, a.q), desc(e.k.data(), a.B, a.H, a.L, a.D, a.k),
        desc(e.v.data(), a.B, a.H, a.L, a.Dv, a.v), e.mask.empty() ? nullptr : e.mask.data(),
        c.scale, desc(cpu.data(), a.B, a.H, a.M, a.Dv, a.ctx));
    for (size_t i = 0; i < cpu.size(); ++i) {
      INFO("element " << i);
      REQUIRE(std::abs(e.ctx[i] - cpu[i]) <= 1e-5 + 1e-5 * std::abs(cpu[i]));
    }
  }
}

TEST_CASE("CPU attend: a masked tail changes nothing, bit for bit, at every head width",
          "[decode_ops]") {
  // The backend's own paths (16 keys at a time for widths of 16 to 128 with
  // AVX-512, 8 for 16 to 64 with AVX2, a loop otherwise): batch row 1 with
  // keys from `live` on masked, and NaN where they are, equals that row
  // alone with its `live` keys; tails inside a block and across blocks.
  for (int64_t D : {8, 16, 32, 64, 128})
    for (int64_t live : {7, 9, 17}) {
      INFO("head width " << D << ", " << live << " keys");
      AttendCase c{"padded", 2, 2, 1, D, 21, D, 21, 0.3f, 0.f, {}, live, true};
      AttendData d = make_attend(c, 5);
      for (int64_t j = live; j < c.L; ++j)
        for (int64_t x = 0; x < c.H * D; ++x)
          d.k[d.a.k[0] + j * d.a.k[2] + x] = d.v[d.a.v[0] + j * d.a.v[2] + x] = NAN;
      const AttendShape& a = d.a;
      cpu_backend().attend(desc(d.q.data(), a.B, a.H, a.M, a.D, a.q),
                           desc(d.k.data(), a.B, a.H, a.L, a.D, a.k),
                           desc(d.v.data(), a.B, a.H, a.L, a.Dv, a.v), d.mask.data(), c.scale,
                           desc(d.ctx.data(), a.B, a.H, a.M, a.Dv, a.ctx));
      std::vector<float> mask(live, 0.f), alone(a.ctx[0], 0.f);
      cpu_backend().attend(desc(d.q.data() + a.q[0], 1, a.H, a.M, a.D, a.q),
                           desc(d.k.data() + a.k[0], 1, a.H, live, a.D, a.k),
                           desc(d.v.data() + a.v[0], 1, a.H, live, a.Dv, a.v), mask.data(), c.scale,
                           desc(alone.data(), 1, a.H, a.M, a.Dv, a.ctx));
      CHECK(std::memcmp(alone.data(), d.ctx.data() + a.ctx[0], alone.size() * sizeof(float)) == 0);
      for (float x : alone) REQUIRE(std::isfinite(x));
    }
}

namespace {

// x rounded to bf16, to nearest even (no NaN or subnormal here), as bits.
uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace

TEST_CASE("CPU rows into bf16 round to nearest even, at any stride", "[decode_ops]") {
  // int8 decoding's caches (Backend::copy_rows_bf16): 40 elements a row, so
  // that a vector path of 32 and its tail both run; ties both ways.
  const int64_t rows = 3, len = 40, src_ld = 45, dst_ld = 43;
  std::vector<float> src = randv(rows * src_ld, 17);
  src[0] = 1.f + std::ldexp(1.f, -8);      // halfway: down to 1 (even)
  src[1] = 1.f + 3 * std::ldexp(1.f, -8);  // halfway: up to 1 + 2^-6 (even)
  src[2] = -src[1];
  std::vector<uint16_t> dst(rows * dst_ld, 0xabcd);
  cpu_backend().copy_rows_bf16(src.data(), src_ld, dst.data(), dst_ld, rows, len);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = 0; x < dst_ld; ++x) {
      INFO("row " << r << ", element " << x);
      REQUIRE(dst[r * dst_ld + x] == (x < len ? bf16_bits(src[r * src_ld + x]) : 0xabcd));
    }
  CHECK(bf16_to_float(dst[0]) == 1.f);
  CHECK(bf16_to_float(dst[1]) == 1.f + std::ldexp(1.f, -6));
}

TEST_CASE("CPU attend on bf16 keys and values is its f32 attend on their values, bit for bit",
          "[decode_ops]") {
  // The vector kernels widen bf16 as they load (head widths 16 to 128), the
  // loop reads a widened copy (the other widths): either way the numbers of
  // the f32 path on the same values.
  for (const auto& c : attend_cases()) {
    INFO(c.name);
    AttendData d = make_attend(c, 41);
    std::vector<uint16_t> k16(d.k.size()), v16(d.v.size());
    for (size_t i = 0; i < d.k.size(); ++i) d.k[i] = bf16_to_float(k16[i] = bf16_bits(d.k[i]));
    for (size_t i = 0; i < d.v.size(); ++i) d.v[i] = bf16_to_float(v16[i] = bf16_bits(d.v[i]));
    const AttendShape& a = d.a;
    std::vector<float> want(d.ctx.size(), 0.f), got(d.ctx.size(), 0.f);
    const float* mask = d.mask.empty() ? nullptr : d.mask.data();
    cpu_backend().attend(desc(d.q.data(), a.B, a.H, a.M, a.D, a.q),
                         desc(d.k.data(), a.B, a.H, a.L, a.D, a.k),
                         desc(d.v.data(), a.B, a.H, a.L, a.Dv, a.v), mask, c.scale,
                         desc(want.data(), a.B, a.H, a.M, a.Dv, a.ctx));
    MatDesc k = desc(reinterpret_cast<const float*>(k16.data()), a.B, a.H, a.L, a.D, a.k);
    MatDesc v = desc(reinterpret_cast<const float*>(v16.data()), a.B, a.H, a.L, a.Dv, a.v);
    k.dtype = v.dtype = DType::BF16;
    cpu_backend().attend(desc(d.q.data(), a.B, a.H, a.M, a.D, a.q), k, v, mask, c.scale,
                         desc(got.data(), a.B, a.H, a.M, a.Dv, a.ctx));
    CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("CPU attend: a NaN query gives NaN, as the loop does, at every head width",
          "[decode_ops]") {
  // A NaN in one head's query makes that head's output NaN on every path,
  // and leaves the other heads alone.
  for (int64_t D : {8, 16, 32, 64, 128}) {
    INFO("head width " << D);
    AttendCase c{"nan", 1, 2, 1, D, 5, D, 5, 0.3f, 0.f, {}, -1, true};
    AttendData d = make_attend(c, 9);
    d.q[0] = NAN;  // head 0's first element
    const AttendShape& a = d.a;
    cpu_backend().attend(desc(d.q.data(), a.B, a.H, a.M, a.D, a.q),
                         desc(d.k.data(), a.B, a.H, a.L, a.D, a.k),
                         desc(d.v.data(), a.B, a.H, a.L, a.Dv, a.v), d.mask.data(), c.scale,
                         desc(d.ctx.data(), a.B, a.H, a.M, a.Dv, a.ctx));
    for (int64_t x = 0; x < D; ++x) {
      CHECK(std::isnan(d.ctx[x]));
      CHECK(std::isfinite(d.ctx[a.ctx[1] + x]));
    }
  }
}

// ---- topk_log_softmax ---------------------------------------------------------

struct TopkResult {
  std::vector<double> values;
  std::vector<int32_t> indices;
  std::vector<float> col_lp;
};

TopkResult run_topk(const std::vector<float>& x, const std::vector<double>& base, int64_t V,
                    int64_t k, const std::vector<int32_t>& banned, const std::vector<int32_t>& cols,
                    int64_t n_cols) {
  const int64_t rows = static_cast<int64_t>(base.size());
  TopkResult r;
  r.values.assign(rows * k, 7.0);
  r.indices.assign(rows * k, 7);
  r.col_lp.assign(rows * n_cols, 7.f);
  for (int64_t i = 0; i < rows; ++i)
    topk_log_softmax_row(x.data() + i * V, base[i], V, k, banned.data(),
                         static_cast<int64_t>(banned.size()), cols.data() + i * n_cols, n_cols,
                         r.values.data() + i * k, r.indices.data() + i * k,
                         r.col_lp.data() + i * n_cols);
  return r;
}

// The reference: every id not banned, sorted by logit (ties: lower id),
// the first k, valued base + x - logsumexp in double.
void check_topk(const std::vector<float>& x, const std::vector<double>& base, int64_t V, int64_t k,
                const std::vector<int32_t>& banned, const std::vector<int32_t>& cols,
                int64_t n_cols, const TopkResult& got) {
  const int64_t rows = static_cast<int64_t>(base.size());
  for (int64_t r = 0; r < rows; ++r) {
    INFO("row " << r);
    const std::vector<float> row(x.begin() + r * V, x.begin() + (r + 1) * V);
    const double lse = log_sum_exp_reference(row);
    // x - lse in float: a few roundings at the magnitude of the logits.
    const double ulps = 4 * std::numeric_limits<float>::epsilon() * std::abs(lse);
    std::vector<int32_t> ids;
    for (int32_t v = 0; v < V; ++v)
      if (std::find(banned.begin(), banned.end(), v) == banned.end()) ids.push_back(v);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    for (int64_t j = 0; j < k; ++j) {
      INFO("slot " << j);
      const int32_t want = j < static_cast<int64_t>(ids.size()) ? ids[j] : -1;
      REQUIRE(got.indices[r * k + j] == want);
      const double value = want < 0 ? -INFINITY : base[r] + (row[want] - lse);
      if (std::isinf(value)) {
        REQUIRE(got.values[r * k + j] == value);
      } else {
        REQUIRE(std::abs(got.values[r * k + j] - value) <= 1e-5 * (1 + std::abs(value)) + ulps);
      }
    }
    for (int64_t c = 0; c < n_cols; ++c) {
      const int32_t col = cols[r * n_cols + c];
      const double want = col < 0 ? -INFINITY : row[col] - lse;
      INFO("column " << col);
      if (std::isinf(want)) {
        REQUIRE(double(got.col_lp[r * n_cols + c]) == want);
      } else {
        REQUIRE(std::abs(got.col_lp[r * n_cols + c] - want) <= 1e-5 * (1 + std::abs(want)) + ulps);
      }
    }
  }
}

// Rows that a search step meets, V columns each.
std::vector<float> topk_rows(int64_t V, uint32_t seed) {
  std::vector<float> x;
  auto add = [&](std::vector<float> row) { x.insert(x.end(), row.begin(), row.end()); };
  add(randv(V, seed, 3.f));
  add(randv(V, seed + 1, 30.f, 1000.f));
  auto ties = randv(V, seed + 2, 1.f);
  for (auto& v : ties) v = std::round(v * 2.f) / 2.f;  // many equal logits
  add(ties);
  std::vector<float> shortlist(V, -kInf);  // a shortlisted sentence's mask
  for (int64_t v = V > 1; v < V; v += 3) shortlist[v] = randv(1, seed + 3 + v)[0];
  add(shortlist);
  std::vector<float> one(V, -kInf);
  one[V - 1] = 0.5f;
  add(one);
  return x;
}

TEST_CASE("topk_log_softmax_row against a full sort in double", "[decode_ops]") {
  struct Case {
    int64_t V, k;
    std::vector<int32_t> banned;
  };
  const std::vector<Case> cases = {
      {1, 1, {}},           {7, 1, {}},       {7, 7, {}},  {40, 4, {}},       {40, 4, {0, 39}},
      {100, 12, {3, 5, 7}}, {100, 100, {50}}, {33, 8, {}}, {6, 6, {1, 2, 3}},
  };
  for (const auto& c : cases) {
    INFO("V " << c.V << ", k " << c.k << ", " << c.banned.size() << " banned");
    const auto x = topk_rows(c.V, static_cast<uint32_t>(c.V * 31 + c.k));
    const int64_t rows = static_cast<int64_t>(x.size()) / c.V;
    std::vector<double> base(rows);
    for (int64_t r = 0; r < rows; ++r) base[r] = -0.25 * r;
    const std::vector<int32_t>& banned = c.banned;
    const int64_t n_cols = 3;
    std::vector<int32_t> cols;
    for (int64_t r = 0; r < rows; ++r) {
      cols.push_back(static_cast<int32_t>(c.V - 1));
      cols.push_back(-1);
      cols.push_back(static_cast<int32_t>(r % c.V));
    }
    const auto got = run_topk(x, base, c.V, c.k, banned, cols, n_cols);
    check_topk(x, base, c.V, c.k, banned, cols, n_cols, got);
    // The first row's best banned: the selection moves on, the log-sum-exp
    // does not.
    std::vector<int32_t> best_banned = banned;
    best_banned.push_back(
        static_cast<int32_t>(std::max_element(x.begin(), x.begin() + c.V) - x.begin()));
    if (static_cast<int64_t>(best_banned.size()) < c.V) {
      const auto g2 = run_topk(x, base, c.V, c.k, best_banned, cols, n_cols);
      check_topk(x, base, c.V, c.k, best_banned, cols, n_cols, g2);
    }
  }
}

TEST_CASE("topk_log_softmax_row: -inf columns change nothing, and the CPU selects the same",
          "[decode_ops]") {
  // A shortlisted row (-inf outside the list) has exactly the numbers of
  // the list alone: its sum adds the exponentials in column order.
  const int64_t V = 50, k = 5;
  const auto list = randv(10, 8, 2.f);
  std::vector<float> wide(V, -kInf);
  std::vector<int32_t> where = {0, 3, 4, 11, 17, 20, 29, 33, 41, 49};
  for (size_t i = 0; i < where.size(); ++i) wide[where[i]] = list[i];
  const std::vector<int32_t> cols_narrow = {2, 9}, cols_wide = {4, 49};
  const auto narrow = run_topk(list, {0.5}, 10, k, {}, cols_narrow, 2);
  const auto spread = run_topk(wide, {0.5}, V, k, {}, cols_wide, 2);
  for (int64_t j = 0; j < k; ++j) {
    CHECK(spread.values[j] == narrow.values[j]);
    CHECK(spread.indices[j] == where[narrow.indices[j]]);
  }
  CHECK(spread.col_lp == narrow.col_lp);

  // Column order, as the CPU's ordered_sum: a thousand exp(-20) added after
  // exp(0) = 1 are each rounded away, so logsumexp is exactly 0 (summed from
  // the small end it would not be).
  std::vector<float> small(1001, -20.f);
  small[0] = 0.f;
  const std::vector<int32_t> col0 = {0};
  const auto first = run_topk(small, {0.0}, 1001, 1, {}, col0, 1);
  CHECK(first.col_lp[0] == 0.f);
  CHECK(first.values[0] == 0.0);
}

TEST_CASE("topk_log_softmax on the CPU: a row's allowed columns alone set its numbers",
          "[decode_ops]") {
  // Two sentences of a beam of 2, each with its own list spread over 3001
  // columns; every other column holds a logit larger than any listed one.
  // Each row's results are, to the bit, those of its list's logits side by
  // side with no list; a column outside the list reads -inf.
  const int64_t V = 3001, beam = 2, k = 4;
  const std::vector<int32_t> banned = {0, 30};
  struct {
    std::vector<int64_t> offsets{0};
    std::vector<int32_t> cols;
  } own;
  std::vector<std::vector<float>> packed;
  std::vector<float> x(2 * beam * V, 50.f);
  for (int64_t s = 0; s < 2; ++s) {
    for (int32_t i = 0; i < 1000; ++i)
      own.cols.push_back(i * 3 + static_cast<int32_t>(s) * (i % 3 == 1));
    own.offsets.push_back(static_cast<int64_t>(own.cols.size()));
  }
  for (int64_t r = 0; r < 2 * beam; ++r) {
    const int64_t s = r / beam;
    packed.push_back(randv(1000, 40 + static_cast<uint32_t>(r), 3.f));
    for (int64_t i = 0; i < 1000; ++i) x[r * V + own.cols[s * 1000 + i]] = packed[r][i];
  }
  // Columns: one listed, one not.
  std::vector<int32_t> cols;
  for (int64_t r = 0; r < 2 * beam; ++r)
    cols.push_back(own.cols[(r / beam) * 1000 + 7]), cols.push_back(1);
  const std::vector<double> base = {0.5, -1.0, 2.0, 0.0};
  TopkResult got;
  got.values.resize(2 * beam * k), got.indices.resize(2 * beam * k),
      got.col_lp.resize(2 * beam * 2);
  const ColumnGroups groups{own.offsets.data(), own.cols.data(), beam};
  cpu_backend().topk_log_softmax(x.data(), base.data(), 2 * beam, V, k, banned.data(), 2,
                                 cols.data(), 2, got.values.data(), got.indices.data(),
                                 got.col_lp.data(), &groups);
  for (int64_t r = 0; r < 2 * beam; ++r) {
    INFO("row " << r);
    const int32_t* id = own.cols.data() + (r / beam) * 1000;
    // The list's own positions of the banned ids and of column 7.
    std::vector<int32_t> banned_at;
    for (int32_t b : banned) {
      const int32_t* p = std::lower_bound(id, id + 1000, b);
      if (p != id + 1000 && *p == b) banned_at.push_back(static_cast<int32_t>(p - id));
    }
    REQUIRE(!banned_at.empty());  // column 0 is every list's first
    const int32_t col7 = 7;
    double value[k];
    int32_t index[k];
    float col_lp = 0;
    cpu_backend().topk_log_softmax(packed[r].data(), &base[r], 1, 1000, k, banned_at.data(),
                                   static_cast<int64_t>(banned_at.size()), &col7, 1, value, index,
                                   &col_lp, nullptr);
    for (int64_t j = 0; j < k; ++j) {
      CHECK(got.values[r * k + j] == value[j]);
      CHECK(got.indices[r * k + j] == id[index[j]]);
    }
    CHECK(got.col_lp[r * 2] == col_lp);
    CHECK(got.col_lp[r * 2 + 1] == -kInf);
    // And against the reference over the row with -inf outside its list.
    std::vector<float> masked(V, -kInf);
    for (int64_t i = 0; i < 1000; ++i) masked[id[i]] = packed[r][i];
    const std::vector<int32_t> row_cols(cols.begin() + r * 2, cols.begin() + r * 2 + 2);
    TopkResult one;
    one.values.assign(got.values.begin() + r * k, got.values.begin() + (r + 1) * k);
    one.indices.assign(got.indices.begin() + r * k, got.indices.begin() + (r + 1) * k);
    one.col_lp.assign(got.col_lp.begin() + r * 2, got.col_lp.begin() + r * 2 + 2);
    check_topk(masked, {base[r]}, V, k, banned, row_cols, 2, one);
  }
  // A NaN among a row's own logits makes its sum NaN; one outside changes nothing.
  x[own.cols[500]] = NAN;
  x[1] = NAN;
  cpu_backend().topk_log_softmax(x.data(), base.data(), 2 * beam, V, k, banned.data(), 2,
                                 cols.data(), 2, got.values.data(), got.indices.data(),
                                 got.col_lp.data(), &groups);
  CHECK(std::isnan(got.col_lp[0]));
  CHECK(!std::isnan(got.col_lp[2 * 2]));
}

TEST_CASE("topk_log_softmax on the CPU against the one-thread row", "[decode_ops]") {
  // The CPU backend: the same ids (its sums in vector lanes and its own exp
  // give values equal within rounding).
  for (int64_t Vc : {7, 40, 100, 300}) {
    const auto x = topk_rows(Vc, static_cast<uint32_t>(Vc));
    const int64_t rows = static_cast<int64_t>(x.size()) / Vc;
    std::vector<double> base(rows, 1.5);
    const std::vector<int32_t> banned = {2}, cols(rows, 0);
    const int64_t kc = std::min<int64_t>(Vc - 1, 9);
    const auto got = run_topk(x, base, Vc, kc, banned, cols, 1);
    {
      INFO("V " << Vc);
      TopkResult cpu;
      cpu.values.resize(rows * kc), cpu.indices.resize(rows * kc), cpu.col_lp.resize(rows);
      cpu_backend().topk_log_softmax(x.data(), base.data(), rows, Vc, kc, banned.data(), 1,
                                     cols.data(), 1, cpu.values.data(), cpu.indices.data(),
                                     cpu.col_lp.data(), nullptr);
      REQUIRE(got.indices == cpu.indices);
      for (size_t i = 0; i < cpu.values.size(); ++i) {
        if (std::isinf(cpu.values[i])) {
          REQUIRE(got.values[i] == cpu.values[i]);
        } else {
          REQUIRE(std::abs(got.values[i] - cpu.values[i]) <= 1e-4 * (1 + std::abs(cpu.values[i])));
        }
      }
    }
  }
}

// ---- sample_tokens ---------------------------------------------------------

TEST_CASE("sort_candidates orders as std::sort by (logit desc, id asc)", "[decode_ops]") {
  for (int64_t n : {0, 1, 2, 3, 17, 200}) {
    INFO("n " << n);
    auto val = randv(n, static_cast<uint32_t>(n) + 5, 1.f);
    for (auto& v : val) v = std::round(v * 3.f) / 3.f;  // ties
    if (n > 4) val[1] = val[3] = -kInf;
    std::vector<int32_t> id(n);
    std::iota(id.begin(), id.end(), 0);
    std::mt19937 g(1);
    std::vector<size_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g);
    std::vector<float> sv(n);
    std::vector<int32_t> si(n);
    for (int64_t i = 0; i < n; ++i) sv[i] = val[perm[i]], si[i] = id[perm[i]];
    std::vector<int32_t> want = id;
    std::sort(want.begin(), want.end(),
              [&](int32_t a, int32_t b) { return val[a] != val[b] ? val[a] > val[b] : a < b; });
    sort_candidates(sv.data(), si.data(), n);
    REQUIRE(si == want);
  }
}

struct SampleCase {
  float temperature;
  int64_t top_k;
  float top_p;
  std::vector<int32_t> banned;
};

// The candidates in the order the draw walks them, with their
// probabilities in double: the top_k (sorted) or the nucleus (sorted), or
// every id not banned in id order when neither limits them.
std::vector<std::pair<int32_t, double>> sample_reference(const std::vector<float>& x,
                                                         const SampleCase& c) {
  const int64_t V = static_cast<int64_t>(x.size());
  std::vector<int32_t> ids;
  for (int32_t v = 0; v < V; ++v)
    if (std::find(c.banned.begin(), c.banned.end(), v) == c.banned.end()) ids.push_back(v);
  const bool limit_k = c.top_k > 0 && c.top_k < static_cast<int64_t>(ids.size());
  const bool streamed = c.top_k > 0 && c.top_k <= 64 && c.top_k < V;
  if (limit_k || streamed || c.top_p < 1.f)
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  if (limit_k) ids.resize(c.top_k);
  double zmax = -1e300;
  for (int32_t v : ids) zmax = std::max(zmax, double(x[v]) / c.temperature);
  std::vector<std::pair<int32_t, double>> out;
  double total = 0;
  for (int32_t v : ids) {
    out.push_back({v, std::exp(double(x[v]) / c.temperature - zmax)});
    total += out.back().second;
  }
  if (c.top_p < 1.f && c.top_k == 0) {
    double acc = 0;
    size_t keep = 0;
    while (keep < out.size()) {
      acc += out[keep++].second;
      if (acc >= c.top_p * total) break;
    }
    out.resize(keep);
    total = acc;
  }
  for (auto& e : out) e.second /= total;
  return out;
}

TEST_CASE("sample_row draws each candidate from the middle of its interval", "[decode_ops]") {
  const std::vector<SampleCase> cases = {
      {1.f, 0, 1.f, {}},   {0.7f, 0, 1.f, {4}},     {2.f, 3, 1.f, {}},      {1.f, 1, 1.f, {}},
      {1.f, 0, 0.9f, {}},  {0.5f, 0, 0.3f, {0, 1}}, {1.f, 64, 1.f, {}},     {1.f, 65, 1.f, {2}},
      {1.f, 200, 1.f, {}}, {1.f, 200, 0.8f, {}},    {1.3f, 120, 0.5f, {7}}, {1.f, 5, 0.5f, {}},
      {0.5f, 0, 1.f, {}},
  };
  for (int64_t V : {3, 80, 150}) {
    auto rows = std::vector<std::vector<float>>{randv(V, 40 + V, 2.f), randv(V, 41 + V, 1.f)};
    for (auto& v : rows[1]) v = std::round(v * 2.f) / 2.f;  // ties
    std::vector<float> shortlist(V, -kInf);
    for (int64_t v = 0; v < V; v += 2) shortlist[v] = randv(1, 7 + v, 2.f)[0];
    rows.push_back(shortlist);
    // Tempered by 0.5, logits near 100 overflow exp unless the tempered
    // maximum comes off.
    rows.push_back(randv(V, 42 + V, 2.f, 100.f));
    for (const auto& x : rows)
      for (const auto& c : cases) {
        INFO("V " << V << ", t " << c.temperature << ", top_k " << c.top_k << ", top_p " << c.top_p
                  << ", " << c.banned.size() << " banned");
        const auto ref = sample_reference(x, c);
        const double lse = log_sum_exp_reference(x);
        SampleParams p;
        p.inv_t = 1.f / c.temperature, p.top_k = c.top_k, p.top_p = c.top_p;
        p.banned = c.banned.data(), p.n_banned = static_cast<int64_t>(c.banned.size());
        std::vector<float> cv(V);
        std::vector<int32_t> ci(V);
        double acc = 0;
        int drawn = 0;
        for (const auto& [id, prob] : ref) {
          const double u = acc + prob / 2;
          acc += prob;
          if (prob < 1e-5) continue;  // too narrow to hit from outside float rounding
          INFO("candidate " << id << ", probability " << prob << ", u " << u);
          float lp = 0.f;
          REQUIRE(sample_row(x.data(), V, p, u, -1, cv.data(), ci.data(), &lp) == id);
          REQUIRE(std::abs(lp - (x[id] - lse)) <= 1e-5 * (1 + std::abs(x[id] - lse)));
          ++drawn;
        }
        CHECK(drawn > 0);
      }
  }
}

TEST_CASE("sample_row: forced ids, everything banned, and the CPU's draws", "[decode_ops]") {
  const int64_t V = 20;
  const auto x = randv(V, 5, 2.f);
  const double lse = log_sum_exp_reference(x);
  SampleParams p;
  std::vector<float> cv(V);
  std::vector<int32_t> ci(V);
  float lp = 0.f;
  REQUIRE(sample_row(x.data(), V, p, 0.99, 13, cv.data(), ci.data(), &lp) == 13);
  CHECK(std::abs(lp - (x[13] - lse)) <= 1e-5);
  std::vector<int32_t> all(V);
  std::iota(all.begin(), all.end(), 0);
  p.banned = all.data(), p.n_banned = V;
  for (int64_t top_k : {0, 3}) {
    p.top_k = top_k;
    CHECK(sample_row(x.data(), V, p, 0.5, -1, cv.data(), ci.data(), &lp) == 0);  // as the CPU
  }

  // The CPU backend with the same uniforms draws the same ids: many draws
  // over every path (small and large top k, nucleus, none, banned, forced).
  const std::vector<SampleCase> cases = {
      {1.f, 0, 1.f, {}},    {0.8f, 0, 0.9f, {1}}, {1.f, 10, 1.f, {}},  {1.5f, 70, 1.f, {0}},
      {1.f, 100, 0.7f, {}}, {1.f, 3, 0.5f, {}},   {0.6f, 0, 0.4f, {}},
  };
  const int64_t R = 4, Vc = 90, n = 64;
  auto logits = randv(R * Vc, 17, 2.5f);
  for (int64_t v = 0; v < Vc; v += 3) logits[3 * Vc + v] = -kInf;
  std::mt19937_64 g(3);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  for (const auto& c : cases) {
    INFO("t " << c.temperature << ", top_k " << c.top_k << ", top_p " << c.top_p);
    std::vector<int64_t> rows(n);
    std::vector<double> u(n);
    std::vector<int32_t> forced(n, -1);
    for (int64_t i = 0; i < n; ++i) rows[i] = i % R, u[i] = uni(g);
    forced[5] = 7;
    std::vector<int32_t> cpu_ids(n);
    std::vector<float> cpu_lp(n);
    cpu_backend().sample_tokens(
        logits.data(), Vc, rows.data(), n, c.temperature, c.top_k, c.top_p, u.data(), forced.data(),
        c.banned.data(), static_cast<int64_t>(c.banned.size()), cpu_ids.data(), cpu_lp.data());
    SampleParams sp;
    sp.inv_t = 1.f / c.temperature, sp.top_k = c.top_k, sp.top_p = c.top_p;
    sp.banned = c.banned.data(), sp.n_banned = static_cast<int64_t>(c.banned.size());
    std::vector<float> cv2(Vc);
    std::vector<int32_t> ci2(Vc);
    for (int64_t i = 0; i < n; ++i) {
      INFO("output " << i << ", u " << u[i]);
      float l = 0.f;
      REQUIRE(sample_row(logits.data() + rows[i] * Vc, Vc, sp, u[i], forced[i], cv2.data(),
                         ci2.data(), &l) == cpu_ids[i]);
      REQUIRE(std::abs(l - cpu_lp[i]) <= 1e-5 * (1 + std::abs(cpu_lp[i])));
    }
  }
}

}  // namespace

TEST_CASE("topk_log_softmax_row by lanes (the GPU's block per row) against a full sort",
          "[decode_ops]") {
  struct Case {
    int64_t V, k;
    std::vector<int32_t> banned;
  };
  // V below, at and far past one column per lane; k up to kLaneTopk and past it (the one-thread row).
  const std::vector<Case> cases = {
      {1, 1, {}},          {7, 4, {}},         {255, 8, {}},        {256, 16, {3}},
      {257, 8, {0, 256}},  {3000, 8, {2, 9}},  {8000, 4, {}},       {8000, 16, {7999}},
      {100, 40, {50}},     {6, 6, {1, 2, 3}},
  };
  for (const auto& c : cases)
    for (bool ordered : {true, false}) {
      INFO("V " << c.V << ", k " << c.k << ", " << c.banned.size() << " banned, ordered " << ordered);
      const auto x = topk_rows(c.V, static_cast<uint32_t>(c.V * 17 + c.k));
      const int64_t rows = static_cast<int64_t>(x.size()) / c.V, n_cols = 2;
      std::vector<double> base(rows);
      std::vector<int32_t> cols;
      for (int64_t r = 0; r < rows; ++r) {
        base[r] = -0.5 * r;
        cols.push_back(static_cast<int32_t>((r * 131) % c.V));
        cols.push_back(r % 2 ? -1 : static_cast<int32_t>(c.V - 1));
      }
      TopkResult got;
      got.values.assign(rows * c.k, 7.0);
      got.indices.assign(rows * c.k, 7);
      got.col_lp.assign(rows * n_cols, 7.f);
      for (int64_t r = 0; r < rows; ++r)
        topk_log_softmax_row_lanes(x.data() + r * c.V, base[r], c.V, c.k, c.banned.data(),
                                   static_cast<int64_t>(c.banned.size()), cols.data() + r * n_cols,
                                   n_cols, ordered, got.values.data() + r * c.k,
                                   got.indices.data() + r * c.k, got.col_lp.data() + r * n_cols);
      check_topk(x, base, c.V, c.k, c.banned, cols, n_cols, got);
      // The same ids as the one-thread row, and with ordered_sum the same values to the bit.
      const auto one = run_topk(x, base, c.V, c.k, c.banned, cols, n_cols);
      CHECK(got.indices == one.indices);
      if (ordered) {
        CHECK(got.values == one.values);
        CHECK(got.col_lp == one.col_lp);
      }
    }
}
