// The translation pipeline's line guarantees: one output line per input line,
// in input order, whatever the batching; empty lines give empty lines;
// invalid UTF-8 and over-long lines are reported with their line numbers.
#include <algorithm>
#include <sstream>
#include <thread>

#include "decode/translator.h"
#include "io/text_file.h"
#include "model/loaded_model.h"
#include "test_helpers.h"

using namespace nmt;
using namespace nmt::test;

namespace {

LoadedModel& random_model() {
  static LoadedModel* m = [] {
    auto* lm = new LoadedModel;
    auto lines = io::read_lines(std::string(NMT_DATA_DIR) + "/joeynmt-toy/train.en");
    lines.resize(std::min<size_t>(lines.size(), 500));
    lm->vocab = Vocab::train(lines, 200);
    lm->config = tiny_config(lm->vocab.size());
    lm->config.max_positions = 40;
    lm->net = std::make_unique<Transformer>(lm->config);
    lm->net->init(17);
    return lm;
  }();
  return *m;
}

}  // namespace

TEST_CASE("one output per input line, in order, whatever the batching", "[translate]") {
  LoadedModel& m = random_model();
  std::vector<std::string> lines = {"A man in a blue shirt.",
                                    "",
                                    "Two dogs play in the snow near a tree.",
                                    "   ",
                                    "Hi.",
                                    "",
                                    "A very long sentence about a woman who is riding a bike "
                                    "down the street on a sunny day.",
                                    "Children."};
  SearchOptions opts;
  opts.beam = 2;
  opts.max_len_a = 0;
  opts.max_len_b = 6;
  Translator big(m, opts, 100000), tiny(m, opts, 12);
  const auto a = big.translate(lines);
  const auto b = tiny.translate(lines);  // forces a batch per sentence or two
  REQUIRE(a.size() == lines.size());
  REQUIRE(b.size() == lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO("line " << i);
    CHECK(a[i].text == b[i].text);
    const auto alone = big.translate({lines[i]});
    CHECK(alone[0].text == a[i].text);
    if (lines[i].find_first_not_of(' ') == std::string::npos) CHECK(a[i].text.empty());
  }
  CHECK(big.translate(std::vector<std::string>{}).empty());
  auto blank = big.translate({"", "", ""});
  CHECK(blank.size() == 3);
}

TEST_CASE("invalid UTF-8 and over-long lines are warned about by line number", "[translate]") {
  LoadedModel& m = random_model();
  std::vector<std::string> warnings;
  SearchOptions opts;
  opts.beam = 1;
  opts.max_len_a = 0;
  opts.max_len_b = 3;
  Translator tr(m, opts, 4096, [&](const std::string& w) { warnings.push_back(w); });
  std::string long_line;
  for (int i = 0; i < 80; ++i) long_line += "word ";
  const auto out = tr.translate({"fine", "bad \xff\xfe bytes", long_line}, 10);
  REQUIRE(out.size() == 3);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "line 11: invalid UTF-8 replaced with U+FFFD");
  CHECK_THAT(warnings[1],
             Catch::StartsWith("line 12: ") &&
                 Catch::EndsWith(" subwords exceed the model's limit of " +
                                 std::to_string(m.config.max_positions - 1) + "; truncated"));
}

TEST_CASE("continuous batching translates as static batches do, whatever the batch, order or workers",
          "[translate]") {
  LoadedModel& m = random_model();
  auto lines = io::read_lines(std::string(NMT_DATA_DIR) + "/joeynmt-toy/train.en");
  lines.erase(lines.begin(), lines.begin() + std::min<size_t>(lines.size(), 500));
  lines.resize(std::min<size_t>(lines.size(), 80));
  // Cut to 4-7 words: widths within about twice each other, so that sentences
  // finish at different steps and others can take their places.
  for (size_t i = 0; i < lines.size(); ++i) {
    std::istringstream in(lines[i]);
    std::string word, cut;
    for (size_t w = 0; w < 4 + (i * 7) % 4 && in >> word; ++w) cut += (w ? " " : "") + word;
    lines[i] = cut;
  }
  lines.push_back("");
  SearchOptions opts;
  opts.beam = 2;
  opts.max_len_a = 0.5f;  // an untrained model runs to its limit: many output lengths
  opts.max_len_b = 2;
  Translator fixed(m, opts, 100000, {}, 1, 1);  // static batches, the default
  const auto want = fixed.translate(lines);
  CHECK(fixed.joined() == 0);
  // Reversed and interleaved: the window's order is its own (longest first).
  std::vector<size_t> order;
  for (size_t i = 0; i < lines.size(); i += 2) order.push_back(lines.size() - 1 - i);
  for (size_t i = 1; i < lines.size(); i += 2) order.push_back(lines.size() - 1 - i);
  std::vector<std::string> shuffled;
  for (size_t i : order) shuffled.push_back(lines[i]);
  for (int64_t batch_tokens : {16, 60, 250})
    for (int workers : {1, 2}) {
      INFO("batch tokens " << batch_tokens << ", workers " << workers);
      Translator tr(m, opts, batch_tokens, {}, workers, 1);
      tr.set_continuous(true);
      const auto got = tr.translate(shuffled);
      REQUIRE(got.size() == lines.size());
      for (size_t k = 0; k < order.size(); ++k) {
        INFO("line " << order[k]);
        CHECK(got[k].text == want[order[k]].text);
        CHECK(got[k].score == Approx(want[order[k]].score).margin(1e-4));
      }
      // With 16 tokens a batch holds one sentence or two: nothing can join.
      if (batch_tokens > 16) CHECK(tr.joined() > 0);
      Translator off(m, opts, batch_tokens, {}, workers, 1);
      const auto same = off.translate(shuffled);
      for (size_t k = 0; k < order.size(); ++k) CHECK(same[k].text == got[k].text);
      CHECK(off.joined() == 0);
    }
}

TEST_CASE("windows given from several threads at once translate as each does alone",
          "[translate]") {
  LoadedModel& m = random_model();
  auto lines = io::read_lines(std::string(NMT_DATA_DIR) + "/joeynmt-toy/train.en");
  lines.resize(std::min<size_t>(lines.size(), 96));
  SearchOptions opts;
  opts.beam = 2;
  opts.max_len_a = 0.5f;
  opts.max_len_b = 2;
  Translator alone(m, opts, 100000, {}, 1, 1);
  const auto want = alone.translate(lines);
  for (bool continuous : {false, true}) {
    INFO("continuous " << continuous);
    // Small batches, so that each window has several and the windows'
    // batches interleave among the workers.
    Translator shared(m, opts, 40, {}, 3, 1);
    shared.set_continuous(continuous);
    constexpr size_t kThreads = 6;
    std::vector<std::vector<TranslationResult>> got(kThreads);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        // Thread t's windows: every kThreads-th line from t, a few at a time.
        for (size_t at = t; at < lines.size(); at += kThreads * 4) {
          std::vector<std::string> window;
          for (size_t i = at; i < std::min(lines.size(), at + kThreads * 4); i += kThreads)
            window.push_back(lines[i]);
          for (auto& r : shared.translate(window)) got[t].push_back(std::move(r));
        }
      });
    for (auto& th : threads) th.join();
    shared.wait_for_idle_worker();  // returns: every window is done
    for (size_t t = 0; t < kThreads; ++t)
      for (size_t k = 0; k < got[t].size(); ++k) {
        const size_t i = t + k * kThreads;
        INFO("line " << i);
        REQUIRE(i < want.size());
        CHECK(got[t][k].text == want[i].text);
        CHECK(got[t][k].score == Approx(want[i].score).margin(1e-4));
      }
  }
}
