// BLEU and chrF against sacreBLEU 2.6.0: every case of
// data/bleu-fixtures/expected.json (corpus scores, text lines, signatures,
// sentence-level scores), plus tokeniser, UTF-8 and text-file unit cases.
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/text_file.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/report.h"
#include "metrics/tokenizers.h"

#ifndef NMT_DATA_DIR
#define NMT_DATA_DIR "../shared/data"
#endif

namespace {

using nmt::metrics::BleuOptions;
using nmt::metrics::ChrfOptions;

std::string data_dir() {
  const char* env = std::getenv("NMT_DATA_DIR");
  return env && *env ? env : NMT_DATA_DIR;
}

std::string fixtures_dir() { return data_dir() + "/bleu-fixtures"; }

nlohmann::json load_expected() {
  std::ifstream in(fixtures_dir() + "/expected.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// "nrefs:1|case:mixed|..." -> {nrefs: 1, case: mixed, ...}
std::map<std::string, std::string> parse_signature(const std::string& sig) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= sig.size()) {
    std::size_t bar = sig.find('|', start);
    std::string field =
        sig.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    std::size_t colon = field.find(':');
    out[field.substr(0, colon)] = field.substr(colon + 1);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

BleuOptions bleu_options_from(const std::map<std::string, std::string>& sig) {
  BleuOptions opt;
  opt.tokenizer = nmt::metrics::parse_tokenizer(sig.at("tok"));
  opt.lowercase = sig.at("case") == "lc";
  opt.smooth = nmt::metrics::parse_smoothing(sig.at("smooth"));
  opt.effective_order = sig.at("eff") == "yes";
  return opt;
}

ChrfOptions chrf_options_from(const std::map<std::string, std::string>& sig) {
  ChrfOptions opt;
  opt.char_order = std::stoi(sig.at("nc"));
  opt.word_order = std::stoi(sig.at("nw"));
  opt.lowercase = sig.at("case") == "lc";
  opt.whitespace = sig.at("space") == "yes";
  opt.eps_smoothing = sig.at("eff") == "no";
  return opt;
}

struct Corpus {
  std::vector<std::string> hyps;
  std::vector<std::vector<std::string>> refs;
};

Corpus load_case(const nlohmann::json& c) {
  Corpus corpus;
  const std::string dir = fixtures_dir() + "/";
  corpus.hyps = nmt::io::read_lines(dir + c.at("hyp").get<std::string>());
  for (const auto& r : c.at("refs"))
    corpus.refs.push_back(nmt::io::read_lines(dir + r.get<std::string>()));
  return corpus;
}

// expected.json rounds scores to 4 decimals.
constexpr double kTol = 0.5e-4 + 1e-9;

std::string tmp_path(const std::string& name) {
  return "/tmp/nmt_test_metrics_" + std::to_string(::getpid()) + "_" + name;
}

}  // namespace

TEST_CASE("every sacreBLEU fixture is reproduced", "[metrics][bleu][chrf]") {
  const nlohmann::json expected = load_expected();
  REQUIRE(expected.size() >= 10);
  for (const auto& c : expected) {
    const std::string name = c.at("name");
    const std::string sig_text = c.at("signature");
    const auto sig = parse_signature(sig_text);
    const Corpus corpus = load_case(c);
    INFO("case " << name);

    if (c.contains("scores")) {
      // Sentence-level BLEU of the first N lines.
      REQUIRE(sig.count("tok"));
      BleuOptions opt = bleu_options_from(sig);
      const auto& scores = c.at("scores");
      REQUIRE(corpus.hyps.size() >= scores.size());
      for (std::size_t i = 0; i < scores.size(); ++i) {
        std::vector<std::string> seg_refs;
        for (const auto& stream : corpus.refs) seg_refs.push_back(stream[i]);
        const auto s = nmt::metrics::sentence_bleu(corpus.hyps[i], seg_refs, opt);
        INFO("sentence " << i + 1);
        CHECK(s.score == Approx(scores[i].get<double>()).margin(kTol));
        CHECK(s.signature() == sig_text);
      }
      continue;
    }

    const double score = c.at("score");
    const std::string text = c.at("text");
    if (sig.count("tok")) {
      const auto s = nmt::metrics::corpus_bleu(corpus.hyps, corpus.refs, bleu_options_from(sig));
      CHECK(s.score == Approx(score).margin(kTol));
      CHECK(s.text() == text);
      CHECK(s.signature() == sig_text);
    } else {
      REQUIRE(sig.count("nc"));
      const auto s = nmt::metrics::corpus_chrf(corpus.hyps, corpus.refs, chrf_options_from(sig));
      CHECK(s.score == Approx(score).margin(kTol));
      CHECK(s.text() == text);
      CHECK(s.signature() == sig_text);
    }
  }
}

TEST_CASE("BLEU JSON matches sacrebleu --format json", "[metrics][bleu]") {
  const auto s =
      nmt::metrics::corpus_bleu({"The cat sat on the mat ."}, {{"The cat sat on a mat ."}});
  const auto j = s.to_json();
  CHECK(j.at("name") == "BLEU");
  CHECK(j.at("signature") == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  CHECK(j.at("nrefs") == "1");
  CHECK(j.at("tok") == "13a");
  CHECK(j.at("smooth") == "exp");
  CHECK(j.at("version") == "2.6.0");
  CHECK(j.at("verbose_score") == s.verbose());
  // Keys in sacreBLEU's order, indent 1 as json.dumps(indent=1) prints.
  const std::string dumped = j.dump(1);
  CHECK(dumped.rfind("{\n \"name\": \"BLEU\",\n \"score\": ", 0) == 0);
  CHECK(dumped.find("\"verbose_score\"") < dumped.find("\"nrefs\""));
}

TEST_CASE("chrF JSON and names", "[metrics][chrf]") {
  ChrfOptions opt;
  opt.word_order = 2;
  const auto s = nmt::metrics::corpus_chrf({"Hello, world!"}, {{"Hello world!"}}, opt);
  CHECK(s.name() == "chrF2++");
  const auto j = s.to_json();
  CHECK(j.at("name") == "chrF2++");
  CHECK(j.at("nw") == "2");
  CHECK(j.at("eff") == "yes");
  CHECK_FALSE(j.contains("verbose_score"));
}

TEST_CASE("BLEU edge cases follow sacreBLEU", "[metrics][bleu]") {
  SECTION("identical sentence scores 100") {
    const auto s = nmt::metrics::sentence_bleu("a b c d e", {"a b c d e"}, {});
    CHECK(s.score == Approx(100.0));
    CHECK(s.signature() == "nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.6.0");
  }
  SECTION("no match at all scores 0 with zero precisions") {
    const auto s = nmt::metrics::corpus_bleu({"x y z"}, {{"a b c"}});
    CHECK(s.score == 0.0);
    CHECK(s.text() ==
          "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 3 ref_len = 3)");
  }
  SECTION("effective order makes a short exact match 100") {
    const auto s = nmt::metrics::sentence_bleu("hello there", {"hello there"}, {});
    CHECK(s.score == Approx(100.0));
  }
  SECTION("floor and add-k signatures carry their values") {
    BleuOptions opt;
    opt.smooth = nmt::metrics::Smoothing::kFloor;
    CHECK(nmt::metrics::corpus_bleu({"a"}, {{"a"}}, opt).signature() ==
          "nrefs:1|case:mixed|eff:no|tok:13a|smooth:floor[0.10]|version:2.6.0");
    opt.smooth = nmt::metrics::Smoothing::kAddK;
    CHECK(nmt::metrics::corpus_bleu({"a"}, {{"a"}}, opt).signature() ==
          "nrefs:1|case:mixed|eff:no|tok:13a|smooth:add-k[1.00]|version:2.6.0");
    opt.smooth = nmt::metrics::Smoothing::kNone;
    CHECK(nmt::metrics::corpus_bleu({"a"}, {{"a"}}, opt).signature() ==
          "nrefs:1|case:mixed|eff:no|tok:13a|smooth:none|version:2.6.0");
  }
  SECTION("closest reference length prefers the shorter on ties") {
    // hyp 3 tokens, refs 2 and 4 tokens: both 1 away, 2 is chosen.
    const auto s = nmt::metrics::corpus_bleu({"a b c"}, {{"a b"}, {"a b c d"}});
    CHECK(s.ref_len == 2);
    CHECK(s.nrefs == 2);
  }
  SECTION("an empty reference line is skipped, giving nrefs:var") {
    const auto s = nmt::metrics::corpus_bleu({"a b", "c d"}, {{"a b", "c d"}, {"a b", ""}});
    CHECK(s.signature().rfind("nrefs:var|", 0) == 0);
  }
  SECTION("a segment without any reference is an error") {
    CHECK_THROWS_AS(nmt::metrics::corpus_bleu({"a"}, {{""}}), nmt::InputError);
  }
}

TEST_CASE("mismatched line counts are an input error naming both counts", "[metrics]") {
  const std::vector<std::string> hyps = {"a", "b", "c"};
  const std::vector<std::vector<std::string>> refs = {{"a", "b"}};
  try {
    nmt::metrics::corpus_bleu(hyps, refs);
    FAIL("no exception");
  } catch (const nmt::InputError& e) {
    CHECK(std::string(e.what()) ==
          "line count mismatch: the hypotheses have 3 lines but reference 1 has 2");
  }
  CHECK_THROWS_AS(nmt::metrics::corpus_chrf(hyps, refs), nmt::InputError);
  CHECK_THROWS_WITH(nmt::metrics::corpus_chrf(hyps, refs),
                    "line count mismatch: the hypotheses have 3 lines but reference 1 has 2");
}

TEST_CASE("13a tokeniser", "[metrics][tokenizer]") {
  using nmt::metrics::tokenize_13a;
  CHECK(tokenize_13a("Hello, world!") == "Hello , world !");
  CHECK(tokenize_13a("It costs $3,000.50 (approx.)") == "It costs $ 3,000.50 ( approx . )");
  CHECK(tokenize_13a("The year 1990.") == "The year 1990 .");
  CHECK(tokenize_13a("1990-2000") == "1990 - 2000");
  CHECK(tokenize_13a("e-mail") == "e-mail");
  CHECK(tokenize_13a("&quot;quoted&quot; &amp; &lt;tag&gt;") == "\" quoted \" & < tag >");
  CHECK(tokenize_13a("don't") == "don't");
  CHECK(tokenize_13a("a<skipped>b") == "ab");
  // Non-overlapping matches: the second '.' stays attached in the first pass
  // and only splits off in the second.
  CHECK(tokenize_13a("a..b") == "a . . b");
  CHECK(tokenize_13a("Größe: 5.") == "Größe : 5 .");
  CHECK(tokenize_13a("  many   spaces\t") == "many spaces");
}

TEST_CASE("intl tokeniser", "[metrics][tokenizer]") {
  using nmt::metrics::tokenize_intl;
  CHECK(tokenize_intl("Hello, world!") == "Hello , world !");
  // A number's final period is not split (mteval-v14 behaviour).
  CHECK(tokenize_intl("The year 1990.") == "The year 1990.");
  CHECK(tokenize_intl("3,000.50") == "3,000.50");
  CHECK(tokenize_intl("„Anführung“ – gut…") == "„ Anführung “ – gut …");
  CHECK(tokenize_intl("5€ + 3$") == "5 € + 3 $");
  CHECK(tokenize_intl("日本語。") == "日本語 。");
}

TEST_CASE("char and none tokenisers", "[metrics][tokenizer]") {
  CHECK(nmt::metrics::tokenize_char("ab c") == "a b c");
  CHECK(nmt::metrics::tokenize_char("Grüße") == "G r ü ß e");
  CHECK(nmt::metrics::tokenize(" a  b ", nmt::metrics::TokenizerKind::kNone) == " a  b ");
  CHECK_THROWS_AS(nmt::metrics::parse_tokenizer("zh-cn"), nmt::InputError);
}

// zh, ja-mecab and flores200 against sacreBLEU 2.6.0 on the files of
// tests/fixtures/sacrebleu-tok (made by make_expected.sh there): each line's
// tokens, the corpus line and every sentence-level line, to the printed digit.
// The inputs (.ref, .hyp, spm.model) are made from ../shared/data by
// make_inputs.py there, at configure time (tests/CMakeLists.txt).
namespace {

// What sacreBLEU printed: committed.
std::string tok_fixture(const std::string& name) {
  return std::string(NMT_SOURCE_DIR) + "/tests/fixtures/sacrebleu-tok/" + name;
}

// What it scored: made by make_inputs.py.
std::string tok_input(const std::string& name) {
  return std::string(NMT_TOK_INPUTS_DIR) + "/" + name;
}

std::vector<std::string> file_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFO(path);
  REQUIRE(in.good());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// sacreBLEU's tokeniser output for NAME.ref then NAME.hyp, one line each.
void check_tokens(const std::string& name, nmt::metrics::TokenizerKind kind,
                  const std::string& spm_model = "") {
  std::vector<std::string> in = file_lines(tok_input(name + ".ref"));
  for (std::string& h : file_lines(tok_input(name + ".hyp"))) in.push_back(h);
  const std::vector<std::string> want =
      file_lines(tok_fixture(name + "." + nmt::metrics::tokenizer_name(kind) + ".tok"));
  REQUIRE(want.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    INFO(name << " line " << i + 1 << ": " << in[i]);
    CHECK(nmt::metrics::tokenize(nmt::metrics::rstrip_whitespace(in[i]), kind, spm_model) ==
          want[i]);
  }
}

void check_scores(const std::string& name, nmt::metrics::TokenizerKind kind,
                  const std::string& spm_model = "") {
  const std::vector<std::string> refs = file_lines(tok_input(name + ".ref"));
  const std::vector<std::string> hyps = file_lines(tok_input(name + ".hyp"));
  const std::string tok = nmt::metrics::tokenizer_name(kind);
  BleuOptions opt;
  opt.tokenizer = kind;
  opt.spm_model = spm_model;
  CHECK(nmt::metrics::corpus_bleu(hyps, {refs}, opt).line(1) ==
        file_lines(tok_fixture(name + "." + tok + ".txt")).at(0));
  const std::vector<std::string> sl = file_lines(tok_fixture(name + "." + tok + ".sl.txt"));
  REQUIRE(sl.size() == hyps.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    INFO(name << " line " << i + 1);
    CHECK(nmt::metrics::sentence_bleu(hyps[i], {refs[i]}, opt).line(1) == sl[i]);
  }
}

}  // namespace

TEST_CASE("zh tokeniser against sacreBLEU", "[metrics][tokenizer]") {
  using nmt::metrics::tokenize_zh;
  // The ranges sacreBLEU writes as '\u20000'..'\u2a6d6' are U+2001..U+2A6D
  // (U+2000 and U+2001 are both spaces to Python's split()).
  CHECK(tokenize_zh("a\u2010b") == "a \u2010 b");
  CHECK(tokenize_zh("x\u2a6dy\u2a6ez") == "x \u2a6d y\u2a6ez");
  CHECK(tokenize_zh("\U00020000\u4e2d") == "\U00020000 \u4e2d");
  // 13a's rules without its padding: a final "." after a digit stays.
  CHECK(tokenize_zh("3.") == "3.");
  CHECK(nmt::metrics::tokenize_13a("3.") == "3 .");
  CHECK(tokenize_zh("&quot;") == "& quot ;");
  CHECK(tokenize_zh("") == "");
  CHECK(tokenize_zh(" \u3000 ") == "");
  check_tokens("zh", nmt::metrics::TokenizerKind::kZh);
  check_scores("zh", nmt::metrics::TokenizerKind::kZh);
}

TEST_CASE("ja-mecab tokeniser against sacreBLEU", "[metrics][tokenizer]") {
  CHECK(nmt::metrics::tokenizer_signature(nmt::metrics::TokenizerKind::kJaMecab) ==
        "ja-mecab-0.996-IPA");
  CHECK(nmt::metrics::tokenize_ja_mecab("") == "");
  CHECK(nmt::metrics::tokenize_ja_mecab("\u3000 ") == "");
  check_tokens("ja", nmt::metrics::TokenizerKind::kJaMecab);
  check_scores("ja", nmt::metrics::TokenizerKind::kJaMecab);
}

TEST_CASE("flores tokenisers against sacreBLEU", "[metrics][tokenizer]") {
  using nmt::metrics::TokenizerKind;
  const std::string model = tok_input("spm.model");
  CHECK(nmt::metrics::tokenizer_signature(TokenizerKind::kFlores101) == "flores101");
  CHECK(nmt::metrics::tokenizer_signature(TokenizerKind::kFlores200) == "flores200");
  CHECK(nmt::metrics::tokenizer_signature(TokenizerKind::kSpm) == "flores101");
  CHECK(nmt::metrics::tokenizer_signature(TokenizerKind::kSpBleu1K) == "spBLEU-1K");
  CHECK(nmt::metrics::tokenize("", TokenizerKind::kFlores200, model) == "");
  check_tokens("spm", TokenizerKind::kFlores200, model);
  check_scores("spm", TokenizerKind::kFlores200, model);
  CHECK_THROWS_AS(nmt::metrics::tokenize("a", TokenizerKind::kFlores200), nmt::InputError);
  CHECK_THROWS_AS(nmt::metrics::load_tokenizer(TokenizerKind::kFlores101, tok_input("zh.ref")),
                  nmt::InputError);
}

TEST_CASE("ko-mecab says what is missing", "[metrics][tokenizer]") {
  using nmt::metrics::TokenizerKind;
  CHECK(nmt::metrics::parse_tokenizer("ko-mecab") == TokenizerKind::kKoMecab);
  CHECK_THROWS_WITH(nmt::metrics::load_tokenizer(TokenizerKind::kKoMecab),
                    Catch::Contains("mecab-ko") && Catch::Contains("not in Debian"));
  CHECK_THROWS_AS(nmt::metrics::tokenize("a", TokenizerKind::kKoMecab), nmt::Error);
}

TEST_CASE("Python-compatible whitespace and case", "[metrics][tokenizer]") {
  using nmt::metrics::split_whitespace;
  // NBSP, thin space and U+001F are whitespace to Python; U+200B is not.
  const auto toks = split_whitespace(
      "a\xC2\xA0"
      "b\xE2\x80\x89"
      "c\x1F"
      "d\xE2\x80\x8B"
      "e");
  REQUIRE(toks.size() == 4);
  CHECK(toks[3] ==
        "d\xE2\x80\x8B"
        "e");
  CHECK(nmt::metrics::rstrip_whitespace("abc \xC2\xA0\t") == "abc");
  CHECK(nmt::metrics::lowercase("ÄÖÜ STRASSE") == "äöü strasse");
  CHECK(nmt::metrics::lowercase("İ") == "i\xCC\x87");
  CHECK(nmt::metrics::lowercase("ΟΔΟΣ") == "οδος");  // final sigma, as Python
}

TEST_CASE("UTF-8 validation and repair", "[io][utf8]") {
  using nmt::io::is_valid_utf8;
  using nmt::io::sanitize_utf8;
  CHECK(is_valid_utf8(""));
  CHECK(is_valid_utf8("plain ascii"));
  CHECK(is_valid_utf8("Grüße 日本 \xF0\x9F\x98\x80"));
  CHECK_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
  CHECK_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(is_valid_utf8("\xE6\x97"));          // truncated
  CHECK_FALSE(is_valid_utf8("\x80"));              // stray continuation

  bool bad = true;
  CHECK(sanitize_utf8("ok", &bad) == "ok");
  CHECK_FALSE(bad);
  CHECK(sanitize_utf8("a\xFF"
                      "b",
                      &bad) ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(bad);
  // A truncated sequence is one maximal subpart: one U+FFFD.
  CHECK(sanitize_utf8("x\xE6\x97y") == "x\xEF\xBF\xBDy");
  // Each byte of a surrogate encoding is ill-formed on its own.
  CHECK(sanitize_utf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(is_valid_utf8(sanitize_utf8("\xC0\xAF\xF4\x90\x80\x80 z")));
}

TEST_CASE("one_line: nothing a reader of lines splits or stops at survives", "[io][utf8]") {
  using nmt::io::one_line;
  CHECK(one_line("Grüße\t日本") == "Grüße\t日本");  // a tab is not a line break
  for (const std::string br : std::vector<std::string>{"\n", "\r", std::string(1, '\0'), "\v", "\f",
                                                        "\x1c", "\x1e", "\x7f", "\xc2\x85",
                                                        "\xe2\x80\xa8", "\xe2\x80\xa9", "\x1b"})
    CHECK(one_line("a" + br + "b") == "a b");
  CHECK(one_line("a\xff" "b") == "a\xEF\xBF\xBD" "b");
  CHECK(one_line("\xe2\x80\x99") == "\xe2\x80\x99");  // U+2019 is no separator
}

TEST_CASE("error messages print untrusted bytes escaped, on one line", "[io][utf8]") {
  using nmt::printable;
  CHECK(printable("plain, Grüße, 日本") == "plain, Grüße, 日本");
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(printable("a\nb\rc\td") == "a\\nb\\rc\\td");
  CHECK(printable("\x1b[31mred") == "\\x1b[31mred");
  CHECK(printable("\xc2\x9b" "1m") == "\\u009b1m");  // C1's CSI
  CHECK(printable("\xe2\x80\xa8") == "\\u2028");
  CHECK(printable("\xff\xc3") == "\\xff\\xc3");    // not UTF-8
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  // Every nmt::Error's message is printable from the start: a NUL no longer
  // ends what() early.
  const nmt::InputError e(std::string("variable a\0b\x1b is bad", 20));
  CHECK(std::string(e.what()) == "variable a\\x00b\\x1b is bad");
}

TEST_CASE("text checks: lines cut while read, UTF-8 repaired and warned about by line", "[io]") {
  // Short, long inside one read, long across many reads (1 MB, more than the
  // reader's chunk), a cut that would split a character, invalid UTF-8, and a
  // long last line without a newline.
  const std::string path = tmp_path("checks.txt");
  const std::string big(1 << 20, 'x');
  {
    std::ofstream out(path, std::ios::binary);
    out << "short\n" << std::string(40, 'a') << "\n" << big << "\n"
        << std::string(15, 'b') << "\xc3\xa9tail\n" << "bad \xff byte\n" << big;
  }
  std::vector<std::string> warnings;
  nmt::io::TextChecks checks;
  checks.max_line_bytes = 16;
  checks.why_limit = "a test";
  checks.warn = [&](const std::string& w) { warnings.push_back(w); };
  nmt::io::LineReader in(path, checks);
  std::string line;
  struct Want {
    std::string text;
    bool cut;
    std::size_t full;
  };
  const std::vector<Want> want = {{"short", false, 5},
                                  {std::string(16, 'a'), true, 40},
                                  {std::string(16, 'x'), true, big.size()},
                                  {std::string(15, 'b'), true, 21},  // not half of the é
                                  {"bad \xef\xbf\xbd byte", false, 10},
                                  {std::string(16, 'x'), true, big.size()}};
  for (const Want& w : want) {
    REQUIRE(in.next(line));
    CHECK(line == w.text);
    CHECK(in.truncated() == w.cut);
    CHECK(in.full_length() == w.full);
  }
  CHECK_FALSE(in.next(line));
  REQUIRE(warnings.size() == 5);
  CHECK(warnings[0] == path + " line 2: 40 bytes; only the first 16 are read (a test)");
  CHECK(warnings[2] == path + " line 4: 21 bytes; only the first 15 are read (a test)");
  CHECK(warnings[3] == path + " line 5: invalid UTF-8 replaced with U+FFFD");
  CHECK(warnings[4] == path + " line 6: " + std::to_string(big.size()) +
                           " bytes; only the first 16 are read (a test)");
}

TEST_CASE("text checks: a record too long to read whole is read as an empty line", "[io]") {
  const std::string path = tmp_path("records.jsonl");
  const std::string big(1 << 20, 'x');  // longer than one read
  {
    std::ofstream out(path, std::ios::binary);
    out << "{\"text\": \"a\"}\n" << std::string(40, 'b') << "\n" << big << "\nlast";
  }
  std::vector<std::string> warnings;
  nmt::io::TextChecks checks;
  checks.max_line_bytes = 16;
  checks.whole_lines = true;
  checks.why_limit = "a test";
  checks.warn = [&](const std::string& w) { warnings.push_back(w); };
  nmt::io::LineReader in(path, checks);
  std::string line;
  for (const std::string& want : {std::string("{\"text\": \"a\"}"), std::string(), std::string(),
                                  std::string("last")}) {
    REQUIRE(in.next(line));
    CHECK(line == want);
  }
  CHECK_FALSE(in.next(line));
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == path + " line 2: 40 bytes, more than the 16 a line may have (a test); " +
                           "read as an empty line");
  CHECK(warnings[1].find(path + " line 3: 1048576 bytes, more than the 16") == 0);
}

TEST_CASE("text files: plain, gzip, missing", "[io]") {
  const std::string plain = tmp_path("plain.txt");
  {
    std::ofstream out(plain, std::ios::binary);
    out << "first\nsecond\r\n\nlast without newline";
  }
  const auto lines = nmt::io::read_lines(plain);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "first");
  CHECK(lines[1] == "second\r");  // only "\n" is stripped
  CHECK(lines[2].empty());
  CHECK(lines[3] == "last without newline");

  // Gzip is recognised by content, whatever the name; two members concatenate.
  const std::string gz = tmp_path("data.txt");
  for (int member = 0; member < 2; ++member) {
    gzFile f = gzopen(gz.c_str(), member == 0 ? "wb" : "ab");
    REQUIRE(f != nullptr);
    std::string body;
    for (int i = 0; i < 20000; ++i) body += "line " + std::to_string(member * 20000 + i) + "\n";
    gzwrite(f, body.data(), static_cast<unsigned>(body.size()));
    gzclose(f);
  }
  nmt::io::LineReader reader(gz);
  std::string line;
  std::size_t n = 0;
  bool in_order = true;
  while (reader.next(line)) {
    in_order &= line == "line " + std::to_string(n);
    ++n;
  }
  CHECK(n == 40000);
  CHECK(in_order);
  CHECK(reader.line_number() == 40000);

  // The shared fixture reference is gzip too.
  CHECK(nmt::io::read_lines(data_dir() + "/multi30k/test_2016_flickr.de.gz").size() == 1000);

  const std::string empty = tmp_path("empty.txt");
  { std::ofstream out(empty); }
  CHECK(nmt::io::read_lines(empty).empty());

  try {
    nmt::io::read_lines(tmp_path("does-not-exist"));
    FAIL("no exception");
  } catch (const nmt::InputError& e) {
    CHECK(std::string(e.what()).find("cannot open") == 0);
    CHECK(std::string(e.what()).find("No such file") != std::string::npos);
  }
  CHECK_THROWS_AS(nmt::io::read_lines("/tmp"), nmt::InputError);

  // A truncated gzip file is an error, not a silently short corpus.
  const std::string truncated = tmp_path("trunc.gz");
  {
    std::ifstream in(gz, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(truncated, std::ios::binary);
    out << bytes.substr(0, bytes.size() / 3);
  }
  CHECK_THROWS_AS(nmt::io::read_lines(truncated), nmt::InputError);

  std::remove(plain.c_str());
  std::remove(gz.c_str());
  std::remove(empty.c_str());
  std::remove(truncated.c_str());
}

TEST_CASE("report options: one table reads and checks them by key, as sacrebleu's", "[metrics]") {
  using nmt::metrics::ReportOptions;
  ReportOptions o;
  nmt::metrics::apply_report_json(nlohmann::json{{"metrics", {"bleu", "chrf"}},
                                                 {"tokenize", "intl"},
                                                 {"smooth_method", "floor"},
                                                 {"smooth_value", 0.5},
                                                 {"chrf_word_order", 2},
                                                 {"ter_normalized", true},
                                                 {"format", "json"},
                                                 {"width", 3},
                                                 {"signature", false},
                                                 {"paired_ar", true}},
                                  o);
  CHECK(o.metrics == std::vector<std::string>{"bleu", "chrf"});
  CHECK(o.bleu.tokenizer == nmt::metrics::TokenizerKind::kIntl);
  CHECK(o.bleu.smooth == nmt::metrics::Smoothing::kFloor);
  CHECK(o.bleu.smooth_value == 0.5);
  CHECK(o.chrf.word_order == 2);
  CHECK(o.ter.normalized);
  CHECK(o.format == nmt::metrics::ReportFormat::json);
  CHECK(o.width == 3);
  CHECK_FALSE(o.signature);
  CHECK(o.paired == nmt::metrics::ReportTest::randomization);
  // Every option reads back what was set.
  for (const auto& spec : nmt::metrics::report_options()) {
    ReportOptions back;
    spec.set(back, spec.get(o));
    CHECK(spec.get(back) == spec.get(o));
  }

  auto refusal = [](const nlohmann::json& j) {
    ReportOptions r;
    try {
      nmt::metrics::apply_report_json(j, r);
      nmt::metrics::check_report_options(r);
    } catch (const nmt::InputError& e) {
      return nmt::message_naming(e, [](const std::string& key) { return key; });
    }
    return std::string("taken");
  };
  CHECK(refusal({{"metrics", {"bleu", "bleu"}}}) == "score: metrics names bleu twice");
  CHECK(refusal({{"metrics", {"bleu", "xyz"}}}) ==
        "metrics: expected a list of \"bleu\", \"chrf\" or \"ter\", got [\"bleu\",\"xyz\"]");
  CHECK(refusal({{"width", 11}}) == "width: expected a number from 0 to 10, got 11");
  CHECK(refusal({{"metrics", {"chrf"}}, {"lowercase", true}})
            .find("score: lowercase applies to "
                  "BLEU") == 0);
  CHECK(refusal({{"spm_model", "x.model"}}) ==
        "score: spm_model applies to -tok flores101, flores200, spm and spBLEU-1K, not -tok 13a");
  CHECK(refusal({{"tokenize", "flores200"}}).find("score: -tok flores200 needs spm_model FILE") ==
        0);
  CHECK(refusal({{"metrics", {"ter"}}, {"tokenize", "flores200"}}) == "taken");
  CHECK(refusal({{"sentence_level", true}, {"metrics", {"bleu", "ter"}}}) ==
        "score: only one metric can be used with sentence_level");
}
