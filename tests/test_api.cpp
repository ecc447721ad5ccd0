// The public API (include/nmt/): what a program gets is what `nmt
// translate` writes (its lines, a stream, n-best and jsonl), sacreBLEU's
// scores, and every failure as an api::Error naming the option by its key.
// tests/api_package.sh checks the same against the installed package.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "metrics/bleu.h"
#include "model/model_file.h"
#include "model/transformer.h"
#include "model/vocab.h"
#include "nmt/nmt.h"
#include "test_helpers.h"

namespace fs = std::filesystem;
namespace api = nmt::api;

namespace {

const std::vector<std::string> kLines = {"the red dog runs", "", "a tiny bird sings over the tree",
                                         "old cat"};

// A small untrained model with a real vocabulary, written once.
const std::string& model_path() {
  static const std::string path = [] {
    const fs::path dir = fs::temp_directory_path() / ("nmt_test_api_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::vector<std::string> text;
    for (int i = 0; i < 40; ++i)
      for (const auto& l : kLines)
        if (!l.empty()) text.push_back(l + " " + std::to_string(i % 7));
    const nmt::Vocab vocab = nmt::Vocab::train(text, 40);
    nmt::ModelConfig cfg = nmt::test::tiny_config(vocab.size());
    nmt::Transformer m(cfg);
    m.init(3);
    const std::string p = (dir / "m.nmt").string();
    nmt::save_model(p, m, vocab.bytes(), {}, false);
    return p;
  }();
  return path;
}

// What the call threw, as the api::Error it must be.
template <class F>
api::Error error_of(F&& f) {
  try {
    f();
  } catch (const api::Error& e) {
    return e;
  }
  FAIL("no api::Error thrown");
  return api::Error(api::Error::Kind::runtime, "", "");
}

}  // namespace

TEST_CASE("api: lines, a stream and a file translate alike", "[api]") {
  api::TranslateOptions o;
  o.workers = 1;
  api::Translator t({model_path()}, o);
  const std::vector<std::string> out = t.translate(kLines);
  REQUIRE(out.size() == kLines.size());
  CHECK(out[1].empty());  // an empty line in, an empty line out
  std::string joined;
  for (const auto& s : out) joined += s + "\n";

  std::string input;
  for (const auto& l : kLines) input += l + "\n";
  std::istringstream in(input);
  std::ostringstream streamed;
  t.translate(in, streamed);
  CHECK(streamed.str() == joined);
  // Batch invariance: one line at a time, the same translations.
  for (size_t i = 0; i < kLines.size(); ++i) CHECK(t.translate({kLines[i]}) == std::vector{out[i]});
  CHECK(t.translate(std::vector<std::string>{}).empty());
  CHECK(t.describe().find("beam 4") != std::string::npos);
}

TEST_CASE("api: a line's sentences translate as each does alone", "[api]") {
  api::TranslateOptions o;
  o.workers = 1;
  api::Translator lines({model_path()}, o);
  const std::vector<std::string> each = lines.translate({"the dog runs!", "old cat"});
  o.split = "sentences";
  api::Translator split({model_path()}, o);
  CHECK(split.translate({"the dog runs!  old cat"}) ==
        std::vector<std::string>{each[0] + "  " + each[1]});
  o.split = "chapters";
  CHECK(error_of([&] { api::Translator({model_path()}, o); }).option() == "split");
}

TEST_CASE("api: n-best text and jsonl, one entry per line", "[api]") {
  api::TranslateOptions o;
  o.beam = 3;
  o.n_best = 2;
  o.scores = true;
  api::Translator text({model_path()}, o);
  const auto nbest = text.translate(kLines);
  REQUIRE(nbest.size() == kLines.size());
  for (size_t i = 0; i < kLines.size(); ++i)  // two Moses n-best lines; one for an empty line
    CHECK(std::count(nbest[i].begin(), nbest[i].end(), '\n') == (kLines[i].empty() ? 0 : 1));
  o.format = api::OutputFormat::jsonl;
  o.scores = false;
  api::Translator jsonl({model_path()}, o);
  const auto out = jsonl.translate(kLines);
  REQUIRE(out.size() == kLines.size());
  for (size_t i = 0; i < out.size(); ++i) {
    CHECK(out[i].rfind("{\"line\":" + std::to_string(i + 1) + ",", 0) == 0);
    CHECK(out[i].find('\n') == std::string::npos);
  }
}

TEST_CASE("api: translate_batch gives jsonl's n-best, scores and attention as data", "[api]") {
  api::TranslateOptions o;
  o.beam = 3;
  o.n_best = 2;
  o.format = api::OutputFormat::jsonl;
  o.alignments = o.attention = true;
  api::Translator t({model_path()}, o);
  const std::vector<std::string> lines = t.translate(kLines);
  const std::vector<api::TranslationResult> results = t.translate_batch(kLines);
  REQUIRE(results.size() == kLines.size());
  for (size_t i = 0; i < kLines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    const api::TranslationResult& r = results[i];
    if (j["n_best"].empty()) {  // an empty line: one empty hypothesis
      CHECK(r.hypotheses == std::vector<std::string>{""});
      continue;
    }
    REQUIRE(r.hypotheses.size() == j["n_best"].size());
    for (size_t k = 0; k < r.hypotheses.size(); ++k) {
      CHECK(r.hypotheses[k] == j["n_best"][k]["translation"]);
      CHECK(r.scores[k] == j["n_best"][k]["score"].get<double>());
    }
    CHECK(r.logprob == j["logprob"].get<double>());
    CHECK(r.tokens == j["tokens"].get<int64_t>());
    if (j["attention"].is_null()) {
      CHECK(r.attention.empty());
      continue;
    }
    CHECK(r.source_pieces == j["attention"]["source"].get<std::vector<std::string>>());
    CHECK(r.attention.size() == j["attention"]["weights"].size());
    const std::string alignment = j["alignment"];
    CHECK(r.alignment.size() ==
          static_cast<size_t>(std::count(alignment.begin(), alignment.end(), '-')));
  }
  CHECK(results[1].hypotheses == std::vector<std::string>{""});
  CHECK(error_of([&] { t.translate_batch({"a\nb"}); }).kind() == api::Error::Kind::input);
}

TEST_CASE("api: translate_batch from several threads at once, beside the other calls", "[api]") {
  api::TranslateOptions o;
  o.workers = 2;
  api::Translator t({model_path()}, o);
  const std::vector<api::TranslationResult> want = t.translate_batch(kLines);
  const std::vector<std::string> want_lines = t.translate(kLines);
  std::vector<std::vector<api::TranslationResult>> got(4);
  std::vector<std::vector<std::string>> got_lines(2);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      for (int round = 0; round < 3; ++round) got[i] = t.translate_batch(kLines);
    });
  for (size_t i = 0; i < got_lines.size(); ++i)
    threads.emplace_back([&, i] { got_lines[i] = t.translate(kLines); });
  for (std::thread& th : threads) th.join();
  for (const auto& g : got) {
    REQUIRE(g.size() == want.size());
    for (size_t k = 0; k < g.size(); ++k) CHECK(g[k].hypotheses == want[k].hypotheses);
  }
  for (const auto& g : got_lines) CHECK(g == want_lines);
}

TEST_CASE("api: a file translated to a file, lines counted", "[api]") {
  const fs::path dir = fs::path(model_path()).parent_path();
  const std::string in = (dir / "in.txt").string(), out = (dir / "out.txt").string();
  std::ofstream(in) << "the red dog runs\n\nold cat\n";
  api::Translator t({model_path()});
  CHECK(t.translate_file(in, out) == 3);
  std::ifstream written(out);
  std::stringstream text;
  text << written.rdbuf();
  std::string want;
  for (const std::string& l : t.translate({"the red dog runs", "", "old cat"})) want += l + "\n";
  CHECK(text.str() == want);
  // Neither the input nor the model is overwritten.
  const std::string in_err = error_of([&] { t.translate_file(in, in); }).what();
  CHECK(in_err.find("is the input file " + in + "; refusing to overwrite it") != std::string::npos);
  CHECK(error_of([&] { t.translate_file(in, model_path()); }).kind() == api::Error::Kind::usage);
}

TEST_CASE("api: errors name the option by its key, with their kind", "[api]") {
  api::TranslateOptions o;
  o.beam = 0;
  api::Error e = error_of([&] { api::Translator({model_path()}, o); });
  CHECK(e.kind() == api::Error::Kind::usage);
  CHECK(e.option() == "beam");
  CHECK(std::string(e.what()) == "beam: expected a number from 1 to 1024, got 0");

  o = {};
  o.sampling = "topk:5";
  o.beam = 2;
  e = error_of([&] { api::Translator({model_path()}, o); });
  CHECK(e.kind() == api::Error::Kind::usage);
  CHECK(std::string(e.what()) ==
        "sampling draws one token at a time: it takes beam 1 (n_best N draws N samples)");
  o.sampling = "topk:0";
  e = error_of([&] { api::Translator({model_path()}, o); });
  CHECK(std::string(e.what()).rfind("sampling topk:0: expected topk:K", 0) == 0);

  o = {};
  o.attention = true;
  e = error_of([&] { api::Translator({model_path()}, o); });
  CHECK(std::string(e.what()) == "attention writes a matrix per line; it needs format jsonl");
  o = {};
  o.n_best = 5;
  e = error_of([&] { api::Translator({model_path()}, o); });
  CHECK(std::string(e.what()) == "n_best 5 exceeds beam 4");

  o = {};
  o.workers = -1;  // checked by the service, as the command line's range is
  e = error_of([&] { api::Translator({model_path()}, o); });
  CHECK(e.kind() == api::Error::Kind::usage);
  CHECK(std::string(e.what()) == "workers: expected a number from 0 to 256, got -1");

  e = error_of([&] { api::Translator({model_path() + ".missing"}, {}); });
  CHECK(e.kind() == api::Error::Kind::input);
  CHECK(std::string(e.what()).find(".missing") != std::string::npos);
  e = error_of([&] { api::Translator(std::vector<std::string>{}, {}); });
  CHECK(e.option() == "model");

  api::Translator t({model_path()});
  e = error_of([&] { t.translate(std::vector<std::string>{"a\nb"}); });
  CHECK(std::string(e.what()) == "line 1 holds a line break; give each line on its own");
  e = error_of([&] { t.translate_file(model_path() + ".none", std::cout); });
  CHECK(e.kind() == api::Error::Kind::input);

  // Moved from, a translator says so instead of crashing.
  api::Translator moved = std::move(t);
  CHECK(moved.translate({"old cat"}).size() == 1);
  e = error_of([&] { t.translate({"old cat"}); });
  CHECK(std::string(e.what()) == "this Translator was moved from");
  e = error_of([&] { t.describe(); });
  CHECK(e.kind() == api::Error::Kind::usage);
}

TEST_CASE("api: corpus scores are sacreBLEU's, errors included", "[api]") {
  const std::vector<std::string> hyps = {"the cat sat on the mat", "a dog runs"};
  const std::vector<std::vector<std::string>> refs = {{"the cat sat on a mat", "the dog runs"}};
  const api::MetricScore s = api::corpus_score(api::Metric::bleu, hyps, refs);
  const nmt::metrics::BleuScore want = nmt::metrics::corpus_bleu(hyps, refs);
  CHECK(s.score == want.score);
  CHECK(s.line == want.line());
  CHECK(s.signature == want.signature());
  CHECK(api::corpus_score(api::Metric::chrf, hyps, refs).line.rfind("chrF2|nrefs:1", 0) == 0);
  CHECK(api::corpus_score(api::Metric::ter, hyps, refs).line.rfind("TER|nrefs:1", 0) == 0);

  api::MetricOptions bad;
  bad.tokenize = "nope";
  api::Error e = error_of([&] { api::corpus_score(api::Metric::bleu, hyps, refs, bad); });
  CHECK(e.kind() == api::Error::Kind::input);
  e = error_of([&] { api::corpus_score(api::Metric::bleu, {"one"}, refs); });
  CHECK(std::string(e.what()).find("line count mismatch") != std::string::npos);
}

TEST_CASE("api: training options are checked before any work", "[api]") {
  api::TrainSpec spec;
  spec.training_json = "{not json";
  api::Error e = error_of([&] { api::train(spec); });
  CHECK(e.kind() == api::Error::Kind::usage);
  CHECK(e.option() == "training_json");
  spec.training_json = R"({"max_steps": -3})";
  e = error_of([&] { api::train(spec); });
  CHECK(std::string(e.what()).find("max_steps") != std::string::npos);
  spec.training_json = "{}";
  spec.config = "no-such-config";
  e = error_of([&] { api::train(spec); });
  CHECK(std::string(e.what()).find("config not found: no-such-config") != std::string::npos);
}

TEST_CASE("api: distillation's options and inputs are checked before any work", "[api]") {
  api::DistillSpec spec;
  spec.teachers = {model_path()};
  spec.train_src = spec.train_tgt = model_path();  // any file: refused before it is read
  spec.out = (std::filesystem::temp_directory_path() / "nmt_api_distill.nmt").string();
  spec.original = "sometimes";
  api::Error e = error_of([&] { api::distill(spec); });
  CHECK(e.kind() == api::Error::Kind::usage);
  CHECK(std::string(e.what()) == "original: auto, mix or none, not 'sometimes'");
  spec.original = "auto";
  e = error_of([&] { api::distill(spec); });  // no budget
  CHECK(e.kind() == api::Error::Kind::usage);
  CHECK(std::string(e.what()).rfind("max_minutes: ", 0) == 0);
  spec.max_minutes = 1;
  spec.teachers = {"no-such-teacher.nmt"};
  e = error_of([&] { api::distill(spec); });
  CHECK(e.kind() == api::Error::Kind::input);
  CHECK(std::string(e.what()).find("no-such-teacher.nmt") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(spec.out + ".distill"));
}

TEST_CASE("api: forced scores, as TSV rows or JSON lines", "[api]") {
  const std::vector<std::string> src = {"the red dog runs", "old cat"},
                                 tgt = {"a tiny bird", "the tree sings over"};
  api::Scorer tsv({model_path()});
  const auto rows = tsv.score(src, tgt);
  REQUIRE(rows.size() == 2);
  api::ScoreOptions o;
  o.jsonl = true;
  o.word_scores = true;
  api::Scorer jsonl({model_path()}, o);
  const auto lines = jsonl.score(src, tgt);
  REQUIRE(lines.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    INFO(rows[i]);
    CHECK(std::count(rows[i].begin(), rows[i].end(), '\t') == 3);
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    CHECK(j["line"] == i + 1);
    double sum = 0;
    for (double lp : j["token_logprobs"]) sum += lp;
    CHECK(j["logprob"].get<double>() == Approx(sum).epsilon(1e-5));
    CHECK(j["tokens"] == j["pieces"].size());
    // The TSV row's first column is the same log-probability.
    CHECK(std::stod(rows[i].substr(0, rows[i].find('\t'))) ==
          Approx(j["logprob"].get<double>()).margin(1e-6));
  }
  api::Error e = error_of([&] { tsv.score(src, {"one"}); });
  CHECK(std::string(e.what()) == "source has 2 lines but target has 1");
  o = {};
  o.batch_tokens = 0;
  e = error_of([&] { api::Scorer({model_path()}, o); });
  CHECK(e.option() == "batch_tokens");
}
