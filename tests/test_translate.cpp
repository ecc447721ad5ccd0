// The translation pipeline's line guarantees: one output line per input line,
// in input order, whatever the batching; empty lines give empty lines;
// invalid UTF-8 and over-long lines are reported with their line numbers.
#include <algorithm>

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
