// Decoding: incremental search against a naive argmax loop over full
// recomputation, beam against greedy, n-best scores against forced decoding,
// and a model trained here on a copy task translating its inputs exactly.
#include <unistd.h>  // getpid

#include <algorithm>
#include <filesystem>

#include "capability.h"
#include "core/backend.h"
#include "core/memory.h"
#include "decode/ensemble.h"
#include "decode/int8_cost.h"
#include "decode/scorer.h"
#include "decode/search.h"
#include "metrics/chrf.h"
#include "model/model_file.h"
#include "model/quantise.h"
#include "ops/ops.h"
#include "test_helpers.h"

using namespace nmt;
using namespace nmt::test;

namespace {

// Greedy decoding by re-running the whole teacher-forced model on the
// growing prefix at every step: no cache anywhere.
std::vector<int32_t> naive_greedy(const Transformer& model, const std::vector<int32_t>& src,
                                  int max_out, double* logprob) {
  std::vector<int32_t> out;
  *logprob = 0;
  const ModelConfig& cfg = model.config();
  const int64_t V = cfg.vocab_size;
  Activations acts;
  Tensor lp;
  for (int t = 0; t <= max_out; ++t) {
    TokenBatch b = make_batch({&src}, {&out}, cfg);
    model.forward(b, acts, false, 0);
    ops::log_softmax(acts.logits, lp);
    const float* row = lp.data() + t * V;
    int32_t best = cfg.eos_id;
    if (t < max_out) {
      best = -1;
      for (int32_t v = 0; v < V; ++v) {
        if (v != cfg.eos_id && (v == cfg.pad_id || v == cfg.bos_id)) continue;
        if (best < 0 || row[v] > row[best]) best = v;
      }
    }
    *logprob += row[best];
    if (best == cfg.eos_id) break;
    out.push_back(best);
  }
  return out;
}

// What models imported from Marian have where the paper's differ: </s> = 0
// and no <s> or <pad>, a zero start embedding, swish, an output bias, the
// target embedding as the output projection beside a source embedding of
// its own, Marian's sinusoid layout unscaled, pre-LN without final norms.
ModelConfig marian_like(ModelConfig cfg) {
  cfg.eos_id = 0, cfg.unk_id = 1, cfg.pad_id = -1, cfg.bos_id = -1;
  cfg.decoder_start = "zero";
  cfg.activation = "swish";
  cfg.output_bias = true;
  cfg.tie_embeddings = false;
  cfg.tie_output = true;
  cfg.positional = "sinusoidal-concat";
  cfg.scale_embeddings = false;
  cfg.norm = "pre";
  cfg.final_norm = false;
  return cfg;
}

Transformer& copy_model() {
  static Transformer* model = [] {
    ModelConfig cfg = tiny_config(24);
    cfg.d_model = 32;
    cfg.d_ff = 64;
    cfg.d_k = cfg.d_v = 8;
    auto* m = new Transformer(cfg);
    m->init(42);
    const double loss = train_copy_task(*m, 800);
    INFO("copy-task loss " << loss);
    REQUIRE(loss < 0.05);
    return m;
  }();
  return *model;
}

}  // namespace

TEST_CASE("cached incremental greedy search equals full recomputation", "[decode]") {
  for (const char* norm : {"post", "pre", "marian-like"}) {
    ModelConfig cfg = tiny_config(30);
    if (norm == std::string("marian-like"))
      cfg = marian_like(cfg);
    else
      cfg.norm = norm;
    Transformer model(cfg);
    model.init(5);
    auto src = random_sequences(6, 1, 9, 30, 3);
    SearchOptions opts;
    opts.beam = 1;
    opts.max_len_a = 0;
    opts.max_len_b = 12;
    DecodeState st;
    auto hyps = search(model, src, opts, st);
    REQUIRE(hyps.size() == src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      double lp = 0;
      auto ref = naive_greedy(model, src[i], 12, &lp);
      INFO("sentence " << i << " norm " << norm);
      REQUIRE(hyps[i].size() == 1);
      CHECK(hyps[i][0].tokens == ref);
      CHECK(hyps[i][0].logprob == Approx(lp).margin(1e-4));
    }
  }
}

TEST_CASE("n-best lists are sorted and their scores match forced decoding", "[decode]") {
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(9);
  auto src = random_sequences(5, 2, 7, 30, 4);
  SearchOptions opts;
  opts.beam = 4;
  opts.n_best = 4;
  opts.max_len_a = 0;
  opts.max_len_b = 10;
  DecodeState st;
  auto hyps = search(model, src, opts, st);
  for (size_t i = 0; i < src.size(); ++i) {
    REQUIRE(hyps[i].size() == 4);
    for (size_t k = 1; k < hyps[i].size(); ++k) CHECK(hyps[i][k - 1].score >= hyps[i][k].score);
    std::vector<std::vector<int32_t>> s, t;
    for (const auto& h : hyps[i]) s.push_back(src[i]), t.push_back(h.tokens);
    auto forced = score_pairs(model, s, t);
    for (size_t k = 0; k < hyps[i].size(); ++k) {
      CHECK(forced[k].total() == Approx(hyps[i][k].logprob).margin(1e-3));
      CHECK(hyps[i][k].score ==
            Approx(hyps[i][k].logprob / length_penalty(hyps[i][k].tokens.size() + 1, opts)));
    }
  }
}

TEST_CASE("beam search scores at least as well as greedy, which is the naive argmax", "[decode]") {
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(11);
  auto src = random_sequences(8, 2, 7, 30, 5);
  SearchOptions greedy, beam4;
  greedy.beam = 1;
  beam4.beam = 4;
  for (auto* o : {&greedy, &beam4}) o->max_len_a = 0, o->max_len_b = 10, o->alpha = 0;
  DecodeState st;
  auto g = search(model, src, greedy, st);
  auto b4 = search(model, src, beam4, st);
  for (size_t i = 0; i < src.size(); ++i) {
    double lp = 0;
    CHECK(naive_greedy(model, src[i], 10, &lp) == g[i][0].tokens);
    CHECK(b4[i][0].score >= g[i][0].score - 1e-5);
  }
}

TEST_CASE("a model trained on a copy task copies its inputs exactly", "[decode]") {
  // The paper's model, and one with every feature an imported model may
  // have instead (trained with gelu: each activation trains).
  static Transformer* marian = nullptr;
  for (int variant = 0; variant < 2; ++variant) {
    if (variant == 1 && !marian) {
      ModelConfig cfg = marian_like(tiny_config(24));
      cfg.activation = "gelu";
      cfg.d_model = 32;
      cfg.d_ff = 64;
      cfg.d_k = cfg.d_v = 8;
      marian = new Transformer(cfg);
      marian->init(42);
      const double loss = train_copy_task(*marian, 800);
      INFO("copy-task loss " << loss);
      REQUIRE(loss < 0.05);
    }
    Transformer& model = variant == 0 ? copy_model() : *marian;
    auto src = random_sequences(20, 2, 8, 24, 777);  // unseen sequences
    for (int beam : {1, 4}) {
      SearchOptions opts;
      opts.beam = beam;
      DecodeState st;
      auto hyps = search(model, src, opts, st);
      int exact = 0;
      for (size_t i = 0; i < src.size(); ++i) {
        exact += hyps[i][0].tokens == src[i];
        if (hyps[i][0].tokens != src[i]) {
          std::string a, b;
          for (auto t : src[i]) a += std::to_string(t) + " ";
          for (auto t : hyps[i][0].tokens) b += std::to_string(t) + " ";
          UNSCOPED_INFO("src " << a << " got " << b);
        }
      }
      INFO("beam " << beam << ", variant " << variant);
      CHECK(exact == static_cast<int>(src.size()));
    }
  }
}

TEST_CASE("a warm decoding loop builds no primitives", "[decode]") {
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(3);
  auto src = random_sequences(4, 3, 6, 30, 8);
  SearchOptions opts;
  opts.beam = 2;
  opts.max_len_a = 0;
  opts.max_len_b = 8;
  DecodeState st;
  search(model, src, opts, st);
  const auto before = ops::primitives_created();
  search(model, src, opts, st);
  CHECK(ops::primitives_created() == before);
}

namespace {

// Real text varies batch size, source length and the rows left alive at
// each step. The warm-up sweeps those sizes with other sentences; the shapes
// it saw must cover what comes after.
void check_warm_frozen_model(ComputeType ct) {
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(5);
  prepare_for_inference(model.params(), ct);
  DecodeState st;
  SearchOptions opts;
  opts.max_len_b = 6;
  for (int beam : {1, 2})
    for (int n = 1; n <= 8; ++n)
      for (int len = 1; len <= 12; ++len) {
        opts.beam = beam;
        search(model, random_sequences(n, len, len, 30, 100 * n + len), opts, st);
      }
  const auto before = ops::primitives_created();
  for (int i = 0; i < 12; ++i) {
    opts.beam = 1 + i % 2;
    search(model, random_sequences(1 + (i * 5) % 8, 1, 12, 30, 9000 + i), opts, st);
  }
  INFO(compute_type_name(ct));
  CHECK(ops::primitives_created() == before);
}

}  // namespace

TEST_CASE("a frozen model, once warm, builds no primitives on input of other shapes (f32, int8)",
          "[decode]") {
  for (ComputeType ct : {ComputeType::F32, ComputeType::INT8}) {
    require_compute(Device::CPU, ct);
    check_warm_frozen_model(ct);
  }
}

// Tagged [bf16]: run by the ctest entry nmt_tests_bf16, skipped without bf16.
TEST_CASE("a frozen model, once warm, builds no primitives on input of other shapes (bf16)",
          "[decode][bf16]") {
  require_compute(Device::CPU, ComputeType::BF16);
  check_warm_frozen_model(ComputeType::BF16);
}

TEST_CASE("batching and finished sentences leaving the batch do not change results", "[decode]") {
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(21);
  auto src = random_sequences(9, 1, 12, 30, 31);
  for (int beam : {1, 3}) {
    SearchOptions opts;
    opts.beam = beam;
    opts.n_best = beam;
    opts.max_len_a = 1;  // sentences end at different steps, so the batch shrinks
    opts.max_len_b = 1;
    DecodeState st;
    auto together = search(model, src, opts, st);
    for (size_t i = 0; i < src.size(); ++i) {
      DecodeState alone_state;
      auto alone = search(model, {src[i]}, opts, alone_state);
      REQUIRE(alone[0].size() == together[i].size());
      for (size_t k = 0; k < alone[0].size(); ++k) {
        CHECK(alone[0][k].tokens == together[i][k].tokens);
        CHECK(alone[0][k].score == Approx(together[i][k].score).margin(1e-4));
      }
    }
  }
}

namespace {

// Hands out sentences in order: `first` of them to start each search, then
// up to the n a running search asks for, while they fit.
class QueueFeed final : public SearchFeed {
 public:
  QueueFeed(const std::vector<SearchRequest>& reqs, std::vector<std::vector<Hypothesis>>& out,
            size_t first, int64_t capacity)
      : reqs_(reqs), out_(out), first_(first), capacity_(capacity) {}
  void first(std::vector<const SearchRequest*>& reqs,
             std::vector<std::vector<Hypothesis>*>& outs) override {
    for (size_t i = 0; i < first_ && next < reqs_.size(); ++i, ++next)
      reqs.push_back(&reqs_[next]), outs.push_back(&out_[next]);
  }
  void more(int64_t n, const std::function<bool(const SearchRequest&)>& fits,
            std::vector<const SearchRequest*>& reqs,
            std::vector<std::vector<Hypothesis>*>& outs) override {
    for (; n > 0 && next < reqs_.size() && fits(reqs_[next]); --n, ++next, ++joined)
      reqs.push_back(&reqs_[next]), outs.push_back(&out_[next]);
  }
  int64_t capacity(int64_t) const override { return capacity_; }
  size_t next = 0, joined = 0;

 private:
  const std::vector<SearchRequest>& reqs_;
  std::vector<std::vector<Hypothesis>>& out_;
  size_t first_;
  int64_t capacity_;
};

}  // namespace

TEST_CASE("sentences that join a running batch decode exactly as they do alone", "[decode]") {
  ModelConfig cfg = tiny_config(30);
  Transformer a(cfg), b(cfg);
  a.init(21);
  b.init(22);
  const Ensemble pair({&a, &b});
  // Longest first, as the translator orders a window: each fits the batch
  // it joins (its source no wider, its output limit no longer).
  auto src = random_sequences(26, 1, 12, 30, 37);
  std::stable_sort(src.begin(), src.end(),
                   [](const auto& x, const auto& y) { return x.size() > y.size(); });
  std::vector<SearchRequest> reqs(src.size());
  for (size_t i = 0; i < src.size(); ++i) reqs[i].src = src[i];
  // A constraint and a prefix lengthen the output limit: a sentence whose
  // limit outgrows the running batch's caches waits for a batch of its own.
  reqs[1].constraints = {{7, 8}};
  reqs[20].prefix = {9};
  for (const Decodable* model : {static_cast<const Decodable*>(&a),
                                 static_cast<const Decodable*>(&pair)})
    for (int beam : {1, 3}) {
      SearchOptions opts;
      opts.beam = beam;
      opts.n_best = beam;
      opts.max_len_a = 1;  // outputs of many lengths: sentences end at different steps
      opts.max_len_b = 1;
      std::vector<std::vector<Hypothesis>> alone(reqs.size());
      for (size_t i = 0; i < reqs.size(); ++i) {
        DecodeState st;
        alone[i] = search(*model, std::vector<SearchRequest>{reqs[i]}, opts, st)[0];
      }
      for (size_t first : {1, 4})
        for (int64_t capacity : {2, 5, 9}) {
          INFO("beam " << beam << ", first batch " << first << ", capacity " << capacity
                       << (model == &pair ? ", ensemble" : ""));
          std::vector<std::vector<Hypothesis>> out(reqs.size());
          QueueFeed feed(reqs, out, first, capacity);
          DecodeState st;  // reused by each search, as a translator's worker reuses it
          while (feed.next < reqs.size()) search(*model, feed, opts, st);
          CHECK(feed.joined > reqs.size() / 4);
          for (size_t i = 0; i < reqs.size(); ++i) {
            INFO("sentence " << i);
            REQUIRE(out[i].size() == alone[i].size());
            for (size_t k = 0; k < out[i].size(); ++k) {
              CHECK(out[i][k].tokens == alone[i][k].tokens);
              CHECK(out[i][k].score == Approx(alone[i][k].score).margin(1e-4));
              CHECK(out[i][k].constraints_met == alone[i][k].constraints_met);
            }
          }
        }
    }
}

namespace {

SearchOptions sampling_opts(const char* kind, int k, float p, float temperature, uint64_t seed,
                            int n) {
  SearchOptions o;
  o.sampling = kind;
  o.sampling_k = k;
  o.sampling_p = p;
  o.temperature = temperature;
  o.seed = seed;
  o.n_best = n;
  o.beam = n;
  return o;
}

}  // namespace

TEST_CASE("sampling top-k with K = 1 is greedy search", "[decode][sampling]") {
  Transformer& model = copy_model();
  auto src = random_sequences(12, 2, 8, 24, 31);
  SearchOptions greedy;
  greedy.beam = 1;
  DecodeState st;
  const auto g = search(model, src, greedy, st);
  const auto s = search(model, src, sampling_opts("topk", 1, 1.f, 0.7f, 9, 2), st);
  for (size_t i = 0; i < src.size(); ++i) {
    REQUIRE(s[i].size() == 2);
    for (const Hypothesis& h : s[i]) {
      CHECK(h.tokens == g[i][0].tokens);
      CHECK(h.logprob == Approx(g[i][0].logprob).margin(1e-4));
    }
  }
}

TEST_CASE("a sample depends on the seed and its sentence, never on the batch",
          "[decode][sampling]") {
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(13);
  auto src = random_sequences(9, 1, 7, 30, 17);
  std::vector<SearchRequest> req(src.size());
  for (size_t i = 0; i < src.size(); ++i) req[i].src = src[i], req[i].sample_key = 100 + i;
  req[4].prefix = {7, 8};
  for (const char* kind : {"topk", "topp", "full"}) {
    const SearchOptions o = sampling_opts(kind, 5, 0.8f, 1.f, 42, 3);
    DecodeState st;
    const auto together = search(model, req, o, st);
    INFO(kind);
    for (size_t i = 0; i < req.size(); ++i) {
      // Alone, and behind two other sentences: the same three samples.
      const auto alone = search(model, std::vector<SearchRequest>{req[i]}, o, st);
      const auto behind = search(
          model, std::vector<SearchRequest>{req[(i + 1) % 9], req[(i + 2) % 9], req[i]}, o, st);
      REQUIRE(together[i].size() == 3);
      for (int n = 0; n < 3; ++n) {
        CHECK(alone[0][n].tokens == together[i][n].tokens);
        CHECK(behind[2][n].tokens == together[i][n].tokens);
        CHECK(alone[0][n].logprob == Approx(together[i][n].logprob).margin(1e-4));
      }
      if (i == 4)
        for (int n = 0; n < 3; ++n)
          CHECK(std::vector<int32_t>(together[4][n].tokens.begin(),
                                     together[4][n].tokens.begin() + 2) == req[4].prefix);
    }
    // The samples are scored as forced decoding scores them.
    std::vector<std::vector<int32_t>> s, t;
    for (size_t i = 0; i < req.size(); ++i)
      s.push_back(req[i].src), t.push_back(together[i][0].tokens);
    const auto forced = score_pairs(model, s, t);
    for (size_t i = 0; i < req.size(); ++i)
      CHECK(forced[i].total() == Approx(together[i][0].logprob).margin(1e-3));
    // Another seed, other draws.
    const auto other = search(model, req, sampling_opts(kind, 5, 0.8f, 1.f, 43, 3), st);
    int differ = 0;
    for (size_t i = 0; i < req.size(); ++i)
      for (int n = 0; n < 3; ++n) differ += other[i][n].tokens != together[i][n].tokens;
    CHECK(differ > 0);
  }
}

TEST_CASE("samples follow the model's distribution (chi-square), truncated as asked",
          "[decode][sampling]") {
  ModelConfig cfg = tiny_config(30);
  Transformer model(cfg);
  model.init(21);
  const std::vector<int32_t> src{5, 6, 7, 8};
  // The first output token's distribution: log-softmax of the first logits.
  Activations acts;
  const std::vector<int32_t> none;
  model.forward(make_batch({&src}, {&none}, cfg), acts, false, 0);
  Tensor lp;
  ops::log_softmax(acts.logits, lp);
  const int64_t V = cfg.vocab_size;
  struct Case {
    const char* kind;
    int k;
    float p, temperature;
  };
  for (const Case c :
       {Case{"full", 0, 1.f, 1.f}, Case{"topk", 6, 1.f, 0.7f}, Case{"topp", 0, 0.6f, 1.3f}}) {
    // Expected: tempered, without pad and bos, cut to the top k or the
    // nucleus, renormalised.
    std::vector<std::pair<double, int32_t>> w;
    for (int32_t v = 0; v < V; ++v)
      if (v != kPad && v != kBos) w.push_back({lp.data()[v] / c.temperature, v});
    std::sort(w.begin(), w.end(), [](auto& a, auto& b) { return a.first > b.first; });
    double z = 0;
    for (auto& [x, v] : w) z += std::exp(x - w[0].first);
    std::vector<double> expected(V, 0.0);
    size_t m = c.kind == std::string("topk") ? static_cast<size_t>(c.k) : w.size();
    if (c.kind == std::string("topp")) {
      double acc = 0;
      for (m = 0; m < w.size();) {
        acc += std::exp(w[m].first - w[0].first) / z;
        ++m;
        if (acc >= c.p) break;
      }
    }
    double kept = 0;
    for (size_t j = 0; j < m; ++j) kept += std::exp(w[j].first - w[0].first);
    for (size_t j = 0; j < m; ++j) expected[w[j].second] = std::exp(w[j].first - w[0].first) / kept;
    // 20 sentences x 1000 samples of one token each (the length limit is 1).
    SearchOptions o = sampling_opts(c.kind, c.k, c.p, c.temperature, 7, 1000);
    o.max_len_a = 0;
    o.max_len_b = 1;
    std::vector<SearchRequest> req(20);
    for (size_t i = 0; i < req.size(); ++i) req[i].src = src, req[i].sample_key = i;
    DecodeState st;
    const auto out = search(model, req, o, st);
    std::vector<double> count(V, 0.0);
    double total = 0;
    for (const auto& r : out)
      for (const Hypothesis& h : r) {
        // One token, or none (</s> drawn first).
        count[h.tokens.empty() ? cfg.eos_id : h.tokens[0]] += 1, total += 1;
        CHECK(h.tokens.size() <= 1);
      }
    double chi2 = 0;
    int bins = 0;
    for (int32_t v = 0; v < V; ++v) {
      if (expected[v] == 0) {
        CHECK(count[v] == 0);  // never outside the top k, the nucleus, or banned
        continue;
      }
      const double e = expected[v] * total;
      if (e < 5) continue;
      chi2 += (count[v] - e) * (count[v] - e) / e;
      ++bins;
    }
    // Far above what chance gives (mean df, sd sqrt(2 df)) if the draws were
    // from another distribution; deterministic, so never flaky.
    const double df = bins - 1;
    INFO(c.kind << ": chi-square " << chi2 << " over " << bins << " bins");
    REQUIRE(bins >= 3);
    CHECK(chi2 < df + 6 * std::sqrt(2 * df));
  }
}

namespace {

// Greedy decoding of an ensemble the naive way: every model re-run on the
// whole prefix at each step, their probabilities averaged, the argmax taken.
std::vector<int32_t> naive_ensemble_greedy(const std::vector<const Transformer*>& models,
                                           const std::vector<int32_t>& src, int max_out) {
  std::vector<int32_t> out;
  const ModelConfig& cfg = models[0]->config();
  const int64_t V = cfg.vocab_size;
  Activations acts;
  Tensor lp;
  for (int t = 0; t <= max_out; ++t) {
    std::vector<double> p(V, 0.0);
    for (const Transformer* m : models) {
      m->forward(make_batch({&src}, {&out}, cfg), acts, false, 0);
      ops::log_softmax(acts.logits, lp);
      for (int64_t v = 0; v < V; ++v) p[v] += std::exp(lp.data()[t * V + v]) / models.size();
    }
    int32_t best = cfg.eos_id;
    if (t < max_out) {
      best = -1;
      for (int32_t v = 0; v < V; ++v)
        if (v != kPad && v != kBos && (best < 0 || p[v] > p[best])) best = v;
    }
    if (best == cfg.eos_id) break;
    out.push_back(best);
  }
  return out;
}

}  // namespace

TEST_CASE("an ensemble averages its members' probabilities at every step", "[decode][ensemble]") {
  ModelConfig cfg = tiny_config(30);
  Transformer a(cfg), b(cfg);
  a.init(31);
  b.init(32);
  auto src = random_sequences(8, 2, 7, 30, 23);
  SearchOptions greedy, beam;
  greedy.beam = 1;
  greedy.max_len_a = 0, greedy.max_len_b = 9;
  beam = greedy;
  beam.beam = 4;
  DecodeState st;
  // Of one model, and of a model with itself: that model.
  for (const SearchOptions& o : {greedy, beam}) {
    const auto alone = search(a, src, o, st);
    const auto one = search(Ensemble({&a}), src, o, st);
    const auto twice = search(Ensemble({&a, &a}), src, o, st);
    for (size_t i = 0; i < src.size(); ++i) {
      CHECK(one[i][0].tokens == alone[i][0].tokens);
      CHECK(one[i][0].logprob == Approx(alone[i][0].logprob).margin(1e-4));
      CHECK(twice[i][0].tokens == alone[i][0].tokens);
      CHECK(twice[i][0].logprob == Approx(alone[i][0].logprob).margin(1e-4));
    }
  }
  // Of two: the naive average's argmax, step by step; and its beam scores
  // equal forced decoding of the pair.
  const Ensemble ab({&a, &b});
  const auto g = search(ab, src, greedy, st);
  const auto b4 = search(ab, src, beam, st);
  std::vector<std::vector<int32_t>> s, t;
  for (size_t i = 0; i < src.size(); ++i) {
    CHECK(g[i][0].tokens == naive_ensemble_greedy({&a, &b}, src[i], 9));
    s.push_back(src[i]), t.push_back(b4[i][0].tokens);
  }
  const auto forced = score_pairs({&a, &b}, s, t);
  const auto fa = score_pairs(a, s, t), fb = score_pairs(b, s, t);
  for (size_t i = 0; i < src.size(); ++i) {
    CHECK(forced[i].total() == Approx(b4[i][0].logprob).margin(1e-3));
    // Per token, the log of the mean of the two models' own probabilities.
    REQUIRE(forced[i].token_logprobs.size() == fa[i].token_logprobs.size());
    for (size_t k = 0; k < forced[i].token_logprobs.size(); ++k)
      CHECK(forced[i].token_logprobs[k] ==
            Approx(std::log(
                       (std::exp(fa[i].token_logprobs[k]) + std::exp(fb[i].token_logprobs[k])) / 2))
                .margin(1e-5));
  }
}

namespace {

// Parameter memory and the backend's packed copies of a frozen model, after
// it has translated (which packs its weights).
struct ModelMemory {
  int64_t params = 0, packed = 0;
  int64_t total() const { return params + packed; }
};

ModelMemory translate_and_measure(Transformer& model) {
  SearchOptions opts;
  opts.beam = 2;
  opts.max_len_b = 6;
  DecodeState st;
  for (int n : {1, 3, 8, 40})  // row counts from one to hundreds: every layout the primitives want
    search(model, random_sequences(n, 2, 12, model.config().vocab_size, 50 + n), opts, st);
  return {model.params().bytes(), model.params().prepared_bytes()};
}

}  // namespace

TEST_CASE("an int8 model holds no float copy of its matrices", "[decode][int8]") {
  require_compute(Device::CPU, ComputeType::INT8);
  ModelConfig cfg = tiny_config(2000);
  cfg.d_model = 128, cfg.d_ff = 512, cfg.d_k = cfg.d_v = 32, cfg.max_positions = 128;
  ModelMemory f32, int8;
  {
    Transformer model(cfg);
    model.init(11);
    const int64_t floats = model.params().bytes();
    prepare_for_inference(model.params(), ComputeType::F32);
    f32 = translate_and_measure(model);
    CHECK(f32.params == floats);
  }
  {
    Transformer model(cfg);
    model.init(11);
    prepare_for_inference(model.params(), ComputeType::INT8);
    REQUIRE(model.params().holds_int8());
    for (const Param& p : model.params().params()) {
      INFO(p.name);
      CHECK(p.value.dtype() == (p.quantisable ? DType::S8 : DType::F32));
      CHECK(p.quantisable == (p.shape.ndim == 2));  // sinusoidal positions: every matrix
    }
    int8 = translate_and_measure(model);
  }
  INFO("f32: " << f32.params << " B of weights, " << f32.packed << " B packed; int8: "
               << int8.params << " B held, " << int8.packed << " B packed");
  // s8 rows, a scale each and the f32 vectors: about a quarter.
  CHECK(int8.params <= 0.3 * f32.params);
  // The backend's copies are s8 too (on AMX machines, some weights in two
  // layouts: small row counts run on VNNI kernels, large ones on AMX); a
  // float copy of the weights would be 1x on its own.
  CHECK(int8.packed <= 0.5 * f32.params);
}

namespace {

// The bytes a store holds for its Linear layers' weights (matrices inside
// a layer: the embeddings, an untied output projection and the sinusoidal
// table are matrices too), as lay_out_int8 and add() round them.
int64_t linear_weight_bytes(const Transformer& model, bool int8) {
  int64_t n = 0;
  for (const Param& p : model.params().params()) {
    if (!p.quantisable || p.name.find("/layer_") == std::string::npos) continue;
    n += int8 ? (p.shape.numel() + 63) / 64 * 64 + (p.shape[0] + 15) / 16 * 16 * 4
              : (p.shape.numel() + 15) / 16 * 16 * 4;
  }
  return n;
}

// Searches over row counts from large to small, so that on AMX machines a
// weight first packed for large counts needs another layout for small ones.
std::vector<std::vector<Hypothesis>> search_row_counts(const Transformer& model) {
  SearchOptions opts;
  opts.beam = 2;
  opts.max_len_b = 6;
  opts.n_best = 2;
  DecodeState st;
  std::vector<std::vector<Hypothesis>> out;
  for (int n : {40, 8, 3, 1})
    for (auto& h :
         search(model, random_sequences(n, 2, 12, model.config().vocab_size, 70 + n), opts, st))
      out.push_back(std::move(h));
  return out;
}

// tied: one matrix for both embeddings and the output projection; else
// three, the output projection a matrix of its own that is no Linear and
// keeps its pages (its rows are gathered for shortlists).
void check_held_once(ComputeType ct, bool tied = true) {
  require_compute(Device::CPU, ct);
  ModelConfig cfg = tiny_config(2000);
  cfg.d_model = 128, cfg.d_ff = 512, cfg.d_k = cfg.d_v = 32, cfg.max_positions = 128;
  cfg.tie_embeddings = tied;
  Transformer kept(cfg), once(cfg);
  kept.init(13), once.init(13);
  prepare_for_inference(kept.params(), ct);
  prepare_for_inference(once.params(), ct, /*drop_values=*/true);
  const auto a = search_row_counts(kept);
  const auto b = search_row_counts(once);
  // The same translations, to the last bit of every score: both run on the
  // same prepared forms.
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    for (size_t k = 0; k < a[i].size(); ++k) {
      CHECK(a[i][k].tokens == b[i][k].tokens);
      CHECK(a[i][k].logprob == b[i][k].logprob);
    }
  }
  // The Linear weights' values are gone from the store that translates
  // only, and nothing else: their prepared forms hold them.
  for (const Param& p : once.params().params()) {
    INFO(p.name);
    const bool linear = p.quantisable && p.name.find("/layer_") != std::string::npos;
    CHECK(p.value.empty() == linear);
    const bool output = p.name == (tied               ? "embed/tokens"
                                   : cfg.tie_output ? "decoder/embed/tokens"
                                                    : "decoder/output/weight");
    CHECK((p.prepared != nullptr) == (linear || output));
  }
  const int64_t linear = linear_weight_bytes(kept, ct == ComputeType::INT8);
  REQUIRE(linear > 0);
  CHECK(once.params().bytes() == kept.params().bytes() - linear);
  CHECK(once.params().prepared_bytes() == kept.params().prepared_bytes());
  // Nor can such a model be written again by mistake (its matrices would
  // be zeros).
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("nmt_test_held_once_" + std::to_string(::getpid()) + ".nmt");
  CHECK_THROWS_WITH(save_model(file.string(), once, "", {}, ct == ComputeType::INT8),
                    Catch::Matchers::Contains("loaded for its products only"));
  CHECK_FALSE(std::filesystem::exists(file));
  std::filesystem::remove(file);
}

}  // namespace

TEST_CASE("an f32 model loaded to translate holds each matrix once", "[decode]") {
  check_held_once(ComputeType::F32);
  check_held_once(ComputeType::F32, /*tied=*/false);
}

TEST_CASE("an int8 model loaded to translate holds each matrix once", "[decode][int8]") {
  check_held_once(ComputeType::INT8);
  check_held_once(ComputeType::INT8, /*tied=*/false);
}

TEST_CASE("a bf16 model loaded to translate holds no f32 copy of its matrices", "[decode][bf16]") {
  check_held_once(ComputeType::BF16);
}

TEST_CASE("int8's cost: chrF of each weight type's translations, taken within 0.5", "[decode]") {
  const std::vector<std::string> refs = {"ein Hund läuft im Park", "zwei Kinder spielen"};
  const std::vector<std::string> int8_out = {"ein Hund rennt im Park", "zwei Kinder spielen"};
  std::vector<std::string> asked;
  const Int8Cost c = measure_int8_cost(
      [&](const std::string& compute) {
        asked.push_back(compute);
        return compute == "int8" ? int8_out : refs;
      },
      refs, 4);
  CHECK(asked == std::vector<std::string>{"f32", "int8"});
  CHECK(c.chrf_f32 == Approx(100.0));
  CHECK(c.chrf_int8 == Approx(metrics::corpus_chrf(int8_out, {refs}).score));
  CHECK(c.chrf_int8 < 99.0);
  CHECK(c.sentences == 2);
  CHECK_FALSE(c.acceptable());
  CHECK(c.describe().find("(2 validation sentences, beam 4): more than 0.5 lost") !=
        std::string::npos);

  Int8Cost edge;
  edge.chrf_f32 = 50.0, edge.chrf_int8 = 49.5, edge.sentences = 500, edge.beam = 4;
  CHECK(edge.acceptable());
  CHECK(edge.describe() ==
        "chrF 49.50 in int8 against 50.00 in f32 (500 validation sentences, beam 4)");
  edge.chrf_int8 = 49.49;
  CHECK_FALSE(edge.acceptable());

  CHECK_THROWS_WITH(
      measure_int8_cost([](const std::string&) { return std::vector<std::string>{}; }, refs, 4),
      Catch::Matchers::Contains("0 translations of 2 sentences"));
}
