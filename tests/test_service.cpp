// The translation service's line formats (service/requests.h): requests
// from text, tsv and jsonl lines, malformed lines skipped with a warning
// that names the line, fields cut at a character's start; results as text,
// scores, alignments, Moses n-best lines and jsonl. `nmt translate` runs
// through the same functions (the CLI tests check it end to end).
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/languages.h"
#include "service/requests.h"
#include "service/translation_service.h"

using namespace nmt;

namespace {

struct Warnings {
  std::vector<std::string> said;
  LineWarning sink() {
    return [this](int64_t line, const std::string& what) {
      said.push_back(std::to_string(line) + ": " + what);
    };
  }
};

TranslationRequest parse(const std::string& line, InputFormat f, Warnings& w,
                         size_t max_bytes = 0) {
  RequestFormat rf;
  rf.format = f;
  rf.max_text_bytes = max_bytes;
  rf.why_limit = "the model takes at most 3 subwords";
  return parse_request(line, rf, 7, w.sink());
}

}  // namespace

TEST_CASE("requests: text, tsv and jsonl lines, and the lines that do not parse", "[service]") {
  Warnings w;
  TranslationRequest r = parse("a\tb {\"text\"}", InputFormat::text, w);
  CHECK(r.source == "a\tb {\"text\"}");
  CHECK(!r.skip);

  r = parse("Ein Hund.\tA dog", InputFormat::tsv, w);
  CHECK(r.source == "Ein Hund.");
  CHECK(r.prefix == "A dog");
  r = parse("no tab here", InputFormat::tsv, w);
  CHECK(r.skip);
  REQUIRE(w.said.size() == 1);
  CHECK(w.said[0].rfind("7: no TAB", 0) == 0);
  CHECK(w.said[0].find("an empty line is written instead") != std::string::npos);

  r = parse(R"({"text": "Hallo", "prefix": "Hel", "constraints": ["world", "x"]})",
            InputFormat::jsonl, w);
  CHECK(!r.skip);
  CHECK(r.source == "Hallo");
  CHECK(r.prefix == "Hel");
  CHECK(r.constraints == std::vector<std::string>{"world", "x"});
  r = parse("   ", InputFormat::jsonl, w);  // empty in, empty out, no warning
  CHECK(!r.skip);
  CHECK(r.source.empty());
  const size_t before = w.said.size();
  for (const char* bad : {R"({"text": 3})", R"(["text"])", R"({"txt": "a"})", "{\"text\": \"a\"",
                          R"({"text": "a", "constraints": [1]})", R"({"prefix": "a"})",
                          R"({"text": " ", "prefix": "a"})"}) {
    INFO(bad);
    CHECK(parse(bad, InputFormat::jsonl, w).skip);
  }
  CHECK(w.said.size() == before + 7);
  CHECK(w.said.back().find("the source is empty, so its prefix is not used") !=
        std::string::npos);
}

TEST_CASE("requests: a long field is cut at a character's start, with a warning", "[service]") {
  Warnings w;
  // "ü" is two bytes: a cut at 4 bytes would split the second one.
  TranslationRequest r = parse(R"({"text": "aüü", "prefix": "xy"})", InputFormat::jsonl, w, 4);
  CHECK(r.source == "aü");
  CHECK(r.prefix == "xy");
  REQUIRE(w.said.size() == 1);
  CHECK(w.said[0] ==
        "7: \"text\" is 5 bytes; only the first 3 are read (the model takes at most 3 subwords)");
}

TEST_CASE("results: text, scores, alignments, n-best lines and jsonl", "[service]") {
  TranslationResult r;
  r.text = "a ||| b";
  r.score = -0.5;
  r.logprob = -1.5;
  r.tokens = 3;
  r.alignment = {{0, 0}, {1, 2}};
  r.n_best = {{"a ||| b", -0.5}, {"c", -0.75}};
  ResultFormat f;
  CHECK(format_results({r}, f, 1) == "a ||| b\n");
  f.scores = true;
  CHECK(format_results({r}, f, 1) == "-0.500000\ta ||| b\n");
  f.scores = false;
  f.alignments = true;
  CHECK(format_results({r}, f, 1) == "a &#124;&#124;&#124; b ||| 0-0 1-2\n");
  f.alignments = false;
  f.n_best = 2;
  CHECK(format_results({r, r}, f, 4) ==
        "4 ||| a &#124;&#124;&#124; b ||| -0.500000\n4 ||| c ||| -0.750000\n"
        "5 ||| a &#124;&#124;&#124; b ||| -0.500000\n5 ||| c ||| -0.750000\n");
  f.format = OutputFormat::jsonl;
  f.alignments = true;
  const std::string line = format_results({r}, f, 9);
  REQUIRE(line.back() == '\n');
  const auto j = nlohmann::json::parse(line);
  CHECK(j["line"] == 9);
  CHECK(j["translation"] == "a ||| b");
  CHECK(j["tokens"] == 3);
  CHECK(j["alignment"] == "0-0 1-2");
  CHECK(j["n_best"].size() == 2);
  CHECK(!j.contains("constraints_met"));
}

TEST_CASE("formats: an unknown one is refused by its option's key", "[service]") {
  CHECK(parse_input_format("tsv") == InputFormat::tsv);
  CHECK(parse_output_format("jsonl") == OutputFormat::jsonl);
  try {
    parse_input_format("csv");
    FAIL("csv was taken");
  } catch (const InputError& e) {
    CHECK(e.option() == "input_format");
    CHECK(std::string(e.what()) == "csv is not text, tsv or jsonl");
  }
}

TEST_CASE("errors name options by key, written as each caller names them", "[service]") {
  auto flag = [](const std::string& key) {
    std::string f = "--" + key;
    std::replace(f.begin(), f.end(), '_', '-');
    return f;
  };
  auto key = [](const std::string& k) { return k; };
  const UsageError e = about_option<UsageError>("n_best", "5 exceeds {beam} 4");
  CHECK(message_naming(e, flag) == "--n-best 5 exceeds --beam 4");
  CHECK(message_naming(e, key) == "n_best 5 exceeds beam 4");
  CHECK(message_naming(about_option<InputError>("beam", ": expected 1 to 1024"), flag) ==
        "--beam: expected 1 to 1024");
  // Only {lowercase_key} is an option: JSON, empty braces and other text stay.
  const Error plain("{\"text\": 1} {} {Beam} {a b} {valid_src} {x");
  CHECK(message_naming(plain, flag) == "{\"text\": 1} {} {Beam} {a b} --valid-src {x");
}

TEST_CASE("translation options: one table reads, writes and checks them by key", "[service]") {
  TranslateOptions t;
  apply_translate_json(nlohmann::json{{"beam", 6},
                                      {"alpha", 1.5},
                                      {"sampling", "topk:10"},
                                      {"format", "jsonl"},
                                      {"batching", "continuous"},
                                      {"shortlist", "off"},
                                      {"scores", true}},
                       t);
  CHECK(t.search.beam == 6);
  CHECK(t.search.alpha == 1.5f);
  CHECK(t.search.sampling == "topk");
  CHECK(t.search.sampling_k == 10);
  CHECK(t.output.format == OutputFormat::jsonl);
  CHECK(t.continuous);
  CHECK(t.shortlist == ShortlistUse::off);
  CHECK(t.output.scores);
  CHECK(t.given == std::set<std::string>{"alpha", "batching", "beam", "format", "sampling",
                                         "scores", "shortlist"});
  // Written back as read, and every option of the table is there.
  const nlohmann::json j = translate_options_json(t);
  CHECK(j.size() == translate_options().size());
  CHECK(j["sampling"] == "topk:10");
  CHECK(j["batching"] == "continuous");
  TranslateOptions back;
  apply_translate_json(j, back);
  CHECK(translate_options_json(back) == j);

  auto refusal = [](const nlohmann::json& j) {
    TranslateOptions o;
    o.models = {"m.nmt"};
    try {
      apply_translate_json(j, o);
      check_options(o);
    } catch (const InputError& e) {
      return message_naming(e, [](const std::string& key) { return key; });
    }
    return std::string("taken");
  };
  CHECK(refusal({{"beem", 4}}) == "unknown translation option \"beem\" (did you mean beam?)");
  CHECK(refusal({{"beam", 0}}) == "beam: expected a number from 1 to 1024, got 0");
  CHECK(refusal({{"window", 0}}) == "window: expected a number from 1 to 1048576, got 0");
  CHECK(refusal({{"format", "xml"}}) ==
        "format: expected \"text\", \"jsonl\" or \"html\", got \"xml\"");
  CHECK(refusal({{"sampling_temperature", 0.0}}) ==
        "sampling_temperature: expected a number in (0, 100], got 0");
  CHECK(refusal({{"seed", -1}}) ==
        "seed: expected a whole number from 0 to 18446744073709551615, got -1");
  // Meaningful only together: a seed without sampling is a mistake to say.
  CHECK(refusal({{"seed", 3}}) == "seed means nothing without sampling");
  CHECK(refusal({{"seed", 3}, {"sampling", "full"}}) == "taken");
  CHECK(refusal({{"sampling", "full"}, {"beam", 4}}) ==
        "sampling draws one token at a time: it takes beam 1 (n_best N draws N samples)");
}

TEST_CASE("language_of_path: the language a corpus file's name gives", "[service]") {
  CHECK(language_of_path("train.en") == "en");
  CHECK(language_of_path("data/train.de.gz") == "de");
  CHECK(language_of_path("/x/news.de-en.de") == "de");
  CHECK(language_of_path("corpus.zh_Hans") == "zh_Hans");
  CHECK(language_of_path("a.pt-BR.xz") == "pt-BR");
  CHECK(language_of_path("kab.ber") == "ber");
  // What names a file's kind, or nothing a language's code looks like.
  for (const char* none : {"train.txt", "train.src", "test.tok.gz", "train", "en", ".en",
                           "a.english", "a.EN", "a.e", "a.en-1", "dir.en/train"})
    CHECK(language_of_path(none) == "");
}
