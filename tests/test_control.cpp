// Translation control: attention maps and word alignments, target prefixes
// and terminology constraints, on models trained here on copy and reversal
// tasks, where the right answer is known.
#include <algorithm>
#include <numeric>

#include "decode/attention_maps.h"
#include "decode/scorer.h"
#include "decode/search.h"
#include "decode/translator.h"
#include "io/text_file.h"
#include "model/loaded_model.h"
#include "model/quantise.h"
#include "plot/plot.h"
#include "test_helpers.h"

using namespace nmt;
using namespace nmt::test;

namespace {

Transformer& trained(bool reverse) {
  static Transformer* models[2] = {nullptr, nullptr};
  Transformer*& m = models[reverse ? 1 : 0];
  if (!m) {
    ModelConfig cfg = tiny_config(24);
    cfg.d_model = 32;
    cfg.d_ff = 64;
    cfg.d_k = cfg.d_v = 8;
    m = new Transformer(cfg);
    m->init(42);
    const double loss = train_copy_task(*m, 800, reverse);
    INFO((reverse ? "reversal" : "copy") << "-task loss " << loss);
    REQUIRE(loss < 0.05);
    // As loaded for translation: constant weights in the products' layout.
    prepare_for_inference(m->params(), ComputeType::F32);
  }
  return *m;
}

// Each id a word of its own, as SentencePiece would mark it.
std::vector<std::string> words(const std::vector<int32_t>& ids) {
  std::vector<std::string> p;
  for (int32_t id : ids) p.push_back("\xE2\x96\x81w" + std::to_string(id));
  return p;
}

std::vector<Hypothesis> best(const Transformer& m, const SearchRequest& rq, int beam) {
  SearchOptions o;
  o.beam = beam;
  DecodeState st;
  return search(m, std::vector<SearchRequest>{rq}, o, st)[0];
}

bool contains(const std::vector<int32_t>& out, const std::vector<int32_t>& c) {
  return std::search(out.begin(), out.end(), c.begin(), c.end()) != out.end();
}

}  // namespace

TEST_CASE("alignments of a copy model are the diagonal, of a reversal model the anti-diagonal",
          "[control]") {
  for (bool reverse : {false, true}) {
    const Transformer& m = trained(reverse);
    const auto inputs = random_sequences(20, 4, 8, 24, 99);
    int exact = 0;
    for (const auto& src : inputs) {
      std::vector<int32_t> out = src;
      if (reverse) std::reverse(out.begin(), out.end());
      Activations acts;
      // The last decoder layer (of two) attends where the copy reads from.
      const AttentionMap map = attention_map(m, src, out, AttentionKind::Cross, 1, -1, acts);
      REQUIRE(map.rows == static_cast<int64_t>(out.size()) + 1);
      REQUIRE(map.cols == static_cast<int64_t>(src.size()) + 1);
      for (int64_t r = 0; r < map.rows; ++r) {  // rows are distributions
        double sum = 0;
        for (int64_t c = 0; c < map.cols; ++c) sum += map.at(r, c);
        CHECK(sum == Approx(1.0).margin(1e-4));
      }
      std::vector<std::pair<int, int>> expected;
      const int n = static_cast<int>(src.size());
      for (int j = 0; j < n; ++j) expected.emplace_back(reverse ? n - 1 - j : j, j);
      std::sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second < b.second : a.first < b.first;
      });
      exact += word_alignment(map, words(src), words(out)) == expected;
    }
    INFO((reverse ? "reversal" : "copy") << ": " << exact << " of 20 exact");
    CHECK(exact >= 18);  // repeated ids may tie
  }
}

TEST_CASE("pieces merge into words for alignments", "[control]") {
  // Source "▁a ▁b c ▁d" is 3 words, output "▁x y ▁z" 2 words.
  AttentionMap m;
  m.rows = 4, m.cols = 5;        // with </s>
  m.w = {0,   0, .9f, 0,   .1f,  // x -> c (word 1)
         .8f, 0, 0,   .1f, .1f,  // y -> a (word 0)
         0,   0, 0,   .2f, .8f,  // z -> </s> is skipped: d (word 2)
         0,   0, 0,   0,   1};   // </s>
  const auto pairs = word_alignment(m,
                                    {"\xE2\x96\x81"
                                     "a",
                                     "\xE2\x96\x81"
                                     "b",
                                     "c",
                                     "\xE2\x96\x81"
                                     "d"},
                                    {"\xE2\x96\x81"
                                     "x",
                                     "y",
                                     "\xE2\x96\x81"
                                     "z"});
  CHECK(format_alignment(pairs) == "0-0 1-0 2-1");
}

TEST_CASE("a prefix starts the output and is scored as forced decoding", "[control]") {
  const Transformer& m = trained(false);
  const auto inputs = random_sequences(8, 4, 8, 24, 5);
  for (int beam : {1, 4}) {
    std::vector<SearchRequest> rqs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      SearchRequest rq;
      rq.src = inputs[i];
      // Prefixes the copy would not start with: the last two ids, or none.
      if (i % 3 != 2) rq.prefix = {inputs[i].back(), inputs[i][inputs[i].size() - 2]};
      rqs.push_back(rq);
    }
    SearchOptions o;
    o.beam = beam;
    DecodeState st;
    const auto batched = search(m, rqs, o, st);
    std::vector<std::vector<int32_t>> src, out;
    for (size_t i = 0; i < rqs.size(); ++i) {
      INFO("beam " << beam << " sentence " << i);
      const Hypothesis& h = batched[i][0];
      REQUIRE(h.tokens.size() >= rqs[i].prefix.size());
      CHECK(std::equal(rqs[i].prefix.begin(), rqs[i].prefix.end(), h.tokens.begin()));
      // Alone, the same result.
      const Hypothesis alone = best(m, rqs[i], beam)[0];
      CHECK(alone.tokens == h.tokens);
      CHECK(alone.logprob == h.logprob);
      src.push_back(rqs[i].src), out.push_back(h.tokens);
    }
    // The whole output's score, prefix included, equals forced decoding.
    const auto forced = score_pairs(m, src, out);
    for (size_t i = 0; i < rqs.size(); ++i)
      CHECK(batched[i][0].logprob == Approx(forced[i].total()).margin(2e-3));
  }
}

TEST_CASE("constrained beam search puts every constraint in the output", "[control]") {
  const Transformer& m = trained(false);
  const auto inputs = random_sequences(12, 4, 8, 24, 11);
  for (int beam : {1, 4, 8}) {
    std::vector<SearchRequest> rqs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      SearchRequest rq;
      rq.src = inputs[i];
      // Tokens the copy would not produce: ids not in the source.
      std::vector<int32_t> absent;
      for (int32_t v = 4; v < 24; ++v)
        if (std::find(rq.src.begin(), rq.src.end(), v) == rq.src.end()) absent.push_back(v);
      if (i % 4 != 3) rq.constraints.push_back({absent[i % absent.size()]});
      if (i % 2 == 0) rq.constraints.push_back({absent[(i + 3) % absent.size()], absent[0]});
      if (i == 5) rq.prefix = {rq.src[0]};
      rqs.push_back(rq);
    }
    SearchOptions o;
    o.beam = beam;
    DecodeState st;
    const auto batched = search(m, rqs, o, st);
    for (size_t i = 0; i < rqs.size(); ++i) {
      INFO("beam " << beam << " sentence " << i);
      const Hypothesis& h = batched[i][0];
      CHECK(h.constraints_met);
      for (const auto& c : rqs[i].constraints) CHECK(contains(h.tokens, c));
      CHECK(std::equal(rqs[i].prefix.begin(), rqs[i].prefix.end(), h.tokens.begin()));
      const Hypothesis alone = best(m, rqs[i], beam)[0];
      CHECK(alone.tokens == h.tokens);
      CHECK(alone.logprob == h.logprob);
      // Sentences without constraints are untouched by their neighbours'.
      if (rqs[i].constraints.empty() && rqs[i].prefix.empty()) CHECK(h.tokens == rqs[i].src);
    }
  }
}

TEST_CASE("constraints that cannot fit in the length limit are reported, not faked", "[control]") {
  const Transformer& m = trained(false);
  SearchRequest rq;
  rq.src = {5, 6, 7, 8};
  // 66 tokens of constraints; the model has 64 positions, so room for 63.
  const int64_t limit = m.config().max_positions - 1;
  for (int c = 0; c < 3; ++c) {
    rq.constraints.emplace_back();
    for (int i = 0; i < 22; ++i) rq.constraints.back().push_back(4 + (c * 7 + i) % 20);
  }
  SearchOptions o;
  o.beam = 4;
  DecodeState st;
  const Hypothesis h = search(m, std::vector<SearchRequest>{rq}, o, st)[0][0];
  CHECK_FALSE(h.constraints_met);
  CHECK(static_cast<int64_t>(h.tokens.size()) <= limit);
}

TEST_CASE("heat maps render as PNG, SVG and PDF, and other extensions are refused", "[control]") {
  plot::HeatMap h;
  h.title = "t";
  h.row_labels = {"Der", "Hund", "</s>"};
  h.col_labels = {"The", "dog", "</s>"};
  h.weights = {.9f, .05f, .05f, .1f, .8f, .1f, 0, .2f, .8f};
  const std::string png = plot::render(h, plot::Format::PNG);
  REQUIRE(png.size() > 33);
  CHECK(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  CHECK(png.compare(12, 4, "IHDR") == 0);
  const std::string svg = plot::render(h, plot::Format::SVG);
  CHECK(svg.compare(0, 5, "<?xml") == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(plot::render(h, plot::Format::PDF).compare(0, 5, "%PDF-") == 0);
  CHECK(plot::format_of("map.SVG") == plot::Format::SVG);
  CHECK_THROWS_WITH(plot::format_of("map.jpg"),
                    "map.jpg: the picture's format comes from its extension: .png, .svg or .pdf");
  h.weights.pop_back();
  CHECK_THROWS(plot::render(h, plot::Format::PNG));
}

TEST_CASE("the translator warns, naming the line, when constraints cannot be met, and says so",
          "[control]") {
  LoadedModel lm;
  auto lines = io::read_lines(std::string(NMT_DATA_DIR) + "/joeynmt-toy/train.en");
  lines.resize(std::min<size_t>(lines.size(), 500));
  lm.vocab = Vocab::train(lines, 200);
  lm.config = tiny_config(lm.vocab.size());
  lm.net = std::make_unique<Transformer>(lm.config);
  lm.net->init(17);
  SearchOptions o;
  o.beam = 2;
  std::vector<std::string> warnings;
  Translator tr(lm, o, 4096, [&](const std::string& w) { warnings.push_back(w); });
  std::vector<TranslationRequest> rqs(3);
  rqs[0].source = "a house";
  rqs[1].source = "the house";
  std::string too_long;  // more pieces than the model's 64 positions hold
  for (int i = 0; i < 25; ++i) too_long += (i ? " " : "") + std::string("the garden house");
  rqs[1].constraints = {too_long};
  rqs[2].source = "a garden";
  rqs[2].skip = true;
  const auto out = tr.translate(rqs, 7);
  REQUIRE(out.size() == 3);
  CHECK(out[0].constraints_met);
  CHECK_FALSE(out[1].constraints_met);
  CHECK(out[2].text.empty());
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::StartsWith("line 8: the prefix and constraints take"));
}
