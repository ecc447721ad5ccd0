// Beam search against exhaustive search. The other decoding tests check that
// the search is consistent (cache against recomputation, scores against
// forced decoding, beam against greedy); these check that it finds the best
// output. On random models that can emit only R tokens and </s>, every
// output of up to L tokens is scored from teacher-forced log-probabilities,
// with the length penalty written out here from its formula, and:
//  - a beam wide enough to keep every partial hypothesis returns the
//    exhaustive optimum, and its n-best list is the exhaustive ranking;
//  - beam 1 is greedy: it follows the most probable non-</s> token and ends
//    a hypothesis wherever </s> is the most probable token (or at the length
//    limit), returning the best-scoring of those endings.
//
// "Wide enough": at step t the beam holds R^t hypotheses, and the search
// keeps the K best non-</s> continuations and the </s> endings ranked above
// the K-th of them, so K = R^L + 1 keeps every real continuation and ranks
// every real ending above the K-th. The search needs 2K <= V (it looks at
// the 2K best tokens per row), so the model's vocabulary is 2K ids of which
// all but R and </s> are made impossible (log-probability about -1000); the
// test checks that bound at every prefix, so no output outside the
// enumeration can beat the ones inside it. L <= 4 because the stopping test
// looks 4 tokens ahead: up to that length its bound on what a live
// hypothesis can still score is exact, and the search must be too.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "decode/search.h"
#include "ops/ops.h"
#include "test_helpers.h"

using namespace nmt;
using namespace nmt::test;

namespace {

constexpr double kTol = 1e-4;

// ((5 + |Y|) / 6)^alpha or |Y|, |Y| counting </s>: the GNMT penalty as the
// paper writes it, independent of search.cpp's length_penalty().
double penalty(int64_t len_with_eos, const SearchOptions& o) {
  if (o.length_norm) return static_cast<double>(std::max<int64_t>(len_with_eos, 1));
  return std::pow((5.0 + static_cast<double>(len_with_eos)) / 6.0, static_cast<double>(o.alpha));
}

bool allowed(int32_t v, int R) { return v == kEos || (v >= 4 && v < 4 + R); }

// A random tiny model over V ids that can emit only </s> and ids 4 .. 3+R.
// The decoder's last layer norm gets gamma 0 and beta 1 in dimension 0, so
// that every output vector has h[0] = 1, and the output projection's rows
// put -1000 there for the other ids. The allowed rows are redrawn larger,
// so that distributions are peaked and the optimum stands out.
std::unique_ptr<Transformer> restricted_model(int R, int V, uint32_t seed, bool pre_norm) {
  ModelConfig cfg = tiny_config(V);
  cfg.tie_embeddings = false;
  cfg.norm = pre_norm ? "pre" : "post";
  auto m = std::make_unique<Transformer>(cfg);
  m->init(seed);
  ParamStore& ps = m->params();
  const std::string ln = pre_norm
                             ? std::string("decoder/final_ln")
                             : "decoder/layer_" + std::to_string(cfg.decoder_layers - 1) + "/ln3";
  const Param* g = ps.find(ln + "/gamma");
  const Param* b = ps.find(ln + "/beta");
  const Param* w = ps.find("decoder/output/weight");
  REQUIRE(g);
  REQUIRE(b);
  REQUIRE(w);
  ps.value(g).data()[0] = 0.f;
  ps.value(b).data()[0] = 1.f;
  const int64_t D = cfg.d_model;
  REQUIRE(w->shape.numel() == V * D);
  std::mt19937 gen(seed * 7919u + 1);
  std::normal_distribution<float> draw(0.f, 2.f / std::sqrt(static_cast<float>(D)));
  float* W = ps.value(w).data();  // (V, D)
  for (int32_t v = 0; v < V; ++v) {
    float* row = W + v * D;
    if (allowed(v, R))
      for (int64_t d = 0; d < D; ++d) row[d] = draw(gen);
    row[0] = allowed(v, R) ? 0.f : -1000.f;
  }
  return m;
}

struct Output {
  std::vector<int32_t> tokens;  // without </s>
  double logprob = 0;           // </s> included
  double score = 0;
};

// Every output of src the search could give: the sequences of up to L
// tokens over ids 4 .. 3+R, then </s> (at length L only </s> is possible),
// scored from one teacher-forced pass over the R^L sequences of length L
// (row t of sequence i holds the log-probabilities after its first t
// tokens). Also: the greedy reference, and the largest log-probability of
// any other id at any prefix.
struct Exhaustive {
  std::vector<Output> ranked;  // best first
  std::map<std::vector<int32_t>, double> score_of;
  Output greedy;
  double max_other = -1e300;
};

Exhaustive enumerate(const Transformer& model, const std::vector<int32_t>& src, int R, int L,
                     const SearchOptions& o) {
  const int64_t V = model.config().vocab_size, T = L + 1;
  int64_t n = 1;
  for (int i = 0; i < L; ++i) n *= R;
  // Sequence i spells i in base R, most significant digit first.
  std::vector<std::vector<int32_t>> leaves(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t x = i;
    leaves[i].assign(L, 0);
    for (int u = L - 1; u >= 0; --u, x /= R) leaves[i][u] = static_cast<int32_t>(4 + x % R);
  }
  std::vector<const std::vector<int32_t>*> ps(static_cast<size_t>(n), &src), pt;
  for (const auto& l : leaves) pt.push_back(&l);
  TokenBatch batch = make_batch(ps, pt);
  REQUIRE(batch.T == T);
  Activations acts;
  Tensor lp;
  model.forward(batch, acts, false, 0);
  ops::log_softmax(acts.logits, lp);
  auto row = [&](int64_t i, int64_t t) { return lp.data() + (i * T + t) * V; };

  Exhaustive ex;
  int64_t stride = n;  // leaves sharing a prefix of length t: a block of R^(L-t)
  for (int t = 0; t <= L; ++t) {
    for (int64_t i = 0; i < n; i += stride) {
      const float* r = row(i, t);
      Output out;
      out.tokens.assign(leaves[i].begin(), leaves[i].begin() + t);
      for (int u = 0; u < t; ++u) out.logprob += row(i, u)[leaves[i][u]];
      out.logprob += r[kEos];
      out.score = out.logprob / penalty(t + 1, o);
      ex.score_of[out.tokens] = out.score;
      ex.ranked.push_back(out);
      if (t < L)
        for (int32_t v = 0; v < V; ++v)
          if (v != kPad && v != kBos && !allowed(v, R))
            ex.max_other = std::max(ex.max_other, static_cast<double>(r[v]));
    }
    stride /= R;
    if (stride == 0) stride = 1;
  }
  std::stable_sort(ex.ranked.begin(), ex.ranked.end(),
                   [](const Output& a, const Output& b) { return a.score > b.score; });

  // Greedy: the chain of most probable non-</s> tokens (lower id on a tie,
  // as the search's top-k orders them), ending wherever </s> is the most
  // probable token, and at the length limit.
  int64_t leaf = 0, block = n;
  bool have = false;
  for (int t = 0; t <= L; ++t) {
    const float* r = row(leaf, t);
    int32_t best = -1;
    for (int32_t v = 0; v < V; ++v)
      if (v != kPad && v != kBos && v != kEos && (best < 0 || r[v] > r[best])) best = v;
    if (t == L || r[kEos] >= r[best]) {
      std::vector<int32_t> toks(leaves[leaf].begin(), leaves[leaf].begin() + t);
      const double s = ex.score_of.at(toks);
      if (!have || s > ex.greedy.score) {
        ex.greedy.tokens = toks;
        ex.greedy.score = s;
        have = true;
      }
    }
    if (t == L) break;
    REQUIRE(allowed(best, R));
    block /= R;
    leaf += (best - 4) * block;
  }
  return ex;
}

std::string spell(const std::vector<int32_t>& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.size(); ++i) s += (i ? " " : "") + std::to_string(t[i]);
  return s + "]";
}

struct Case {
  int R, L, K;  // emitted tokens, longest output, beam
};

// Checks one model (3 sources in one batch, so that sentences finish at
// different steps) against exhaustive search under four length penalties.
// Returns the lengths of the optima found, so that the caller can check
// that the cases were not all trivial.
std::set<size_t> check_against_exhaustive(const Case& c, uint32_t seed, bool pre_norm) {
  const int V = 2 * c.K;
  auto model = restricted_model(c.R, V, seed, pre_norm);
  const auto srcs = random_sequences(3, 1, 5, 4 + c.R, seed + 100);
  std::set<size_t> lengths;
  for (int p = 0; p < 4; ++p) {
    SearchOptions o;
    o.max_len_a = 0;
    o.max_len_b = c.L;
    o.alpha = p == 0 ? 0.f : p == 1 ? 0.6f : 2.f;
    o.length_norm = p == 3;
    INFO("R " << c.R << " L " << c.L << " K " << c.K << " seed " << seed
              << (pre_norm ? " pre" : " post") << "-norm, "
              << (o.length_norm ? "length normalised" : "alpha " + std::to_string(o.alpha)));
    std::vector<Exhaustive> ex;
    for (const auto& s : srcs) {
      ex.push_back(enumerate(*model, s, c.R, c.L, o));
      // No output with another id can score as well as the K best enumerated.
      REQUIRE(ex.back().max_other < -100);
      const auto& r = ex.back().ranked;
      REQUIRE(r[static_cast<size_t>(std::min<int64_t>(c.K, r.size())) - 1].score >
              ex.back().max_other / penalty(c.L + 1, o));
    }
    // The penalty here and the search's agree.
    for (int64_t len = 1; len <= c.L + 1; ++len)
      CHECK(length_penalty(len, o) == Approx(penalty(len, o)).epsilon(1e-12));

    DecodeState st;
    // 1-best and the full n-best list: the exhaustive optimum and ranking.
    const int real = static_cast<int>(ex[0].ranked.size());
    for (int n_best : {1, std::min(c.K, real)}) {
      o.beam = c.K;
      o.n_best = n_best;
      const auto hyps = search(*model, srcs, o, st);
      REQUIRE(hyps.size() == srcs.size());
      for (size_t i = 0; i < srcs.size(); ++i) {
        const auto& e = ex[i];
        INFO("source " << i << " " << spell(srcs[i]) << ", n-best " << n_best
                       << "; exhaustive optimum " << spell(e.ranked[0].tokens) << " score "
                       << e.ranked[0].score << ", runner-up " << spell(e.ranked[1].tokens)
                       << " score " << e.ranked[1].score);
        REQUIRE(static_cast<int>(hyps[i].size()) == n_best);
        const Hypothesis& h = hyps[i][0];
        INFO("beam's best " << spell(h.tokens) << " score " << h.score);
        CHECK(h.score == Approx(e.ranked[0].score).margin(kTol));
        // The same tokens, unless the runner-up ties within the tolerance.
        if (e.ranked[0].score - e.ranked[1].score > kTol) CHECK(h.tokens == e.ranked[0].tokens);
        CHECK(h.logprob / penalty(static_cast<int64_t>(h.tokens.size()) + 1, o) ==
              Approx(h.score).margin(1e-6));
        lengths.insert(e.ranked[0].tokens.size());
        // Place j of the list holds an output that ranks j-th exhaustively
        // (up to ties), each output once, and the search's score is its own.
        std::set<std::vector<int32_t>> seen;
        for (int j = 0; j < n_best; ++j) {
          const Hypothesis& hj = hyps[i][j];
          INFO("n-best " << j << ": " << spell(hj.tokens) << " score " << hj.score
                         << "; exhaustive " << j << ": " << spell(e.ranked[j].tokens) << " score "
                         << e.ranked[j].score);
          const auto it = e.score_of.find(hj.tokens);
          REQUIRE(it != e.score_of.end());
          CHECK(it->second == Approx(e.ranked[j].score).margin(kTol));
          CHECK(hj.score == Approx(it->second).margin(kTol));
          CHECK(seen.insert(hj.tokens).second);
        }
      }
    }
    // Beam 1 is greedy.
    o.beam = 1;
    o.n_best = 1;
    const auto g = search(*model, srcs, o, st);
    for (size_t i = 0; i < srcs.size(); ++i) {
      INFO("beam 1, source " << i << ": got " << spell(g[i][0].tokens) << " score " << g[i][0].score
                             << "; greedy " << spell(ex[i].greedy.tokens) << " score "
                             << ex[i].greedy.score);
      CHECK(g[i][0].tokens == ex[i].greedy.tokens);
      CHECK(g[i][0].score == Approx(ex[i].greedy.score).margin(kTol));
    }
  }
  return lengths;
}

}  // namespace

TEST_CASE("beam search wide enough to hold every hypothesis finds the exhaustive optimum",
          "[decode][exhaustive]") {
  // K = R^L + 1 is the narrowest beam that provably finds the optimum; one
  // case is wider. R^L stays below 1024, the largest beam --beam allows.
  const std::vector<Case> cases = {{3, 3, 28}, {2, 4, 17}, {4, 4, 257}, {7, 3, 344}, {3, 3, 100}};
  // One thread: the products are tiny, and the top-k over every row is most
  // of the time, which threads waiting on busy cores only slow down.
  struct Threads {
    int before = ops::num_threads();
    Threads() { ops::set_num_threads(1); }
    ~Threads() { ops::set_num_threads(before); }
  } one_thread;
  std::set<size_t> lengths;
  int n = 0;
  for (const Case& c : cases)
    for (uint32_t seed : {1u, 2u, 3u}) {
      const auto l = check_against_exhaustive(c, 1000 * c.R + 10 * c.L + seed, (n++ % 2) == 1);
      lengths.insert(l.begin(), l.end());
    }
  // Optima of several lengths: the length penalty and the stopping rule
  // were exercised, not only outputs of one length.
  INFO("lengths of the optima found: " << lengths.size());
  CHECK(lengths.size() >= 3);
}
