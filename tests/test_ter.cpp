// TER against sacreBLEU 2.6.0: every TER-only case of
// tests/fixtures/sacrebleu-ter/cases.txt computed through the library and
// formatted as sacrebleu printed it (text line, JSON, -sl, -b), to the
// digit; the tercom tokeniser and the shift search on cases whose answers
// sacreBLEU's own functions gave; hostile input. (The same cases run
// through the binary, with BLEU and chrF beside TER, in cli_score_ter.sh.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/text_file.h"
#include "metrics/ngrams.h"
#include "metrics/ter.h"
#include "metrics/tokenizers.h"

#ifndef NMT_SOURCE_DIR
#define NMT_SOURCE_DIR "."
#endif

namespace {

using nmt::metrics::TerOptions;

#ifndef NMT_TER_INPUTS_DIR
#define NMT_TER_INPUTS_DIR "."
#endif

std::string fixture_dir() { return std::string(NMT_SOURCE_DIR) + "/tests/fixtures/sacrebleu-ter/"; }
// The files cases.txt names, made from ../shared/data at configure time by
// the fixture folder's make_inputs.py (tests/CMakeLists.txt).
std::string inputs_dir() { return std::string(NMT_TER_INPUTS_DIR) + "/"; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// As `nmt score` reads text: ill-formed UTF-8 replaced, lines right-stripped.
std::vector<std::string> read_fixture(const std::string& name, int* warnings = nullptr) {
  nmt::io::TextChecks checks;
  int count = 0;
  checks.warn = [&count](const std::string&) { ++count; };
  std::vector<std::string> lines = nmt::io::read_lines(inputs_dir() + name, checks);
  for (std::string& l : lines) l.resize(nmt::metrics::rstrip_whitespace(l).size());
  if (warnings) *warnings = count;
  return lines;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

struct Case {
  std::string name;
  std::vector<std::string> refs;
  std::string hyp;
  TerOptions opt;
  bool sentence_level = false, score_only = false, json = true, ter_only = true;
  int width = 1;  // sacreBLEU's defaults: JSON, one decimal
};

// A sacrebleu command line from cases.txt (the nmt column when there is one,
// so that hostile-bad-utf8 reads the file with invalid bytes).
Case parse_case(const std::string& line) {
  std::vector<std::string> cols;
  std::size_t start = 0;
  for (std::size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
    cols.push_back(line.substr(start, tab - start));
  cols.push_back(line.substr(start));
  Case c;
  c.name = cols.at(0);
  const std::vector<std::string> args = split_words(cols.size() > 2 ? cols[2] : cols.at(1));
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-i") {
      c.hyp = args.at(++i);
    } else if (a == "-m" || a == "--metrics") {
      c.ter_only = args.at(i + 1) == "ter" && (i + 2 == args.size() || args[i + 2][0] == '-');
      while (i + 1 < args.size() && args[i + 1][0] != '-') ++i;
    } else if (a == "-f") {
      c.json = args.at(++i) == "json";
    } else if (a == "-w") {
      c.width = std::stoi(args.at(++i));
    } else if (a == "-sl") {
      c.sentence_level = true;
    } else if (a == "-b") {
      c.score_only = true;
    } else if (a == "--ter-case-sensitive") {
      c.opt.case_sensitive = true;
    } else if (a == "--ter-normalized") {
      c.opt.normalized = true;
    } else if (a == "--ter-no-punct") {
      c.opt.no_punct = true;
    } else if (a == "--ter-asian-support") {
      c.opt.asian_support = true;
    } else {
      REQUIRE(a[0] != '-');
      c.refs.push_back(a);
    }
  }
  return c;
}

// What sacrebleu prints for one score (sentence lines are always text).
std::string render(const nmt::metrics::TerScore& s, const Case& c, bool sentence) {
  if (c.score_only) return nmt::metrics::format_fixed(s.score, c.width);
  if (c.json && !sentence) return s.to_json(c.width).dump(1);
  return s.line(c.width);
}

}  // namespace

TEST_CASE("TER: every sacreBLEU fixture case is reproduced", "[metrics][ter]") {
  std::istringstream cases(slurp(fixture_dir() + "cases.txt"));
  int checked = 0;
  for (std::string line; std::getline(cases, line);) {
    if (line.empty() || line[0] == '#') continue;
    const Case c = parse_case(line);
    if (!c.ter_only) continue;  // bleu chrf ter together: cli_score_ter.sh
    INFO("case " << c.name);
    const std::vector<std::string> hyps = read_fixture(c.hyp);
    std::vector<std::vector<std::string>> refs;
    for (const std::string& r : c.refs) refs.push_back(read_fixture(r));
    std::string got;
    if (c.sentence_level) {
      std::vector<std::string> seg(refs.size());
      for (std::size_t i = 0; i < hyps.size(); ++i) {
        for (std::size_t r = 0; r < refs.size(); ++r) seg[r] = refs[r][i];
        got += render(nmt::metrics::sentence_ter(hyps[i], seg, c.opt), c, true) + "\n";
      }
    } else {
      got = render(nmt::metrics::corpus_ter(hyps, refs, c.opt), c, false) + "\n";
    }
    CHECK(got == slurp(fixture_dir() + "expected/" + c.name + ".out"));
    ++checked;
  }
  CHECK(checked >= 35);
}

TEST_CASE("TER: the tercom tokeniser as sacreBLEU's TercomTokenizer", "[metrics][ter]") {
  // Expected strings printed by sacreBLEU 2.6.0's TercomTokenizer.
  TerOptions norm;
  norm.normalized = true;
  CHECK(nmt::metrics::tokenize_tercom("He said: &quot;It's John's 3.5-ton car, isn't it?&quot;  ",
                                      norm) ==
        "he said : \" it 's john 's 3.5 - ton car , isn't it ? \"");
  CHECK(nmt::metrics::tokenize_tercom("x.,y 1.5, -2 a-b 3-4", norm) ==
        "x . , y 1.5 , -2 a-b 3 - 4");
  TerOptions punct;
  punct.no_punct = true;
  punct.case_sensitive = true;
  CHECK(nmt::metrics::tokenize_tercom("He said: &quot;It's John's 3.5-ton car, isn't it?&quot;",
                                      punct) ==
        "He said &quotIt's John's 35-ton car isn't it&quot");
  TerOptions asian_norm;
  asian_norm.normalized = true;
  asian_norm.asian_support = true;
  CHECK(nmt::metrics::tokenize_tercom("我们去北京，好吗？（是的）ＡＢ", asian_norm) ==
        "我 们 去 北 京 ， 好 吗 ？ （ 是 的 ） ａｂ");
  TerOptions asian_punct;
  asian_punct.no_punct = true;
  asian_punct.asian_support = true;
  CHECK(nmt::metrics::tokenize_tercom("我们去北京，好吗？（是的）。", asian_punct) ==
        "我们去北京好吗是的");
  // Asian support alone changes nothing.
  TerOptions asian;
  asian.asian_support = true;
  CHECK(nmt::metrics::tokenize_tercom("我们，好", asian) == "我们，好");
  // Python's str.lower(): final sigma, dotted I.
  CHECK(nmt::metrics::tokenize_tercom("ΣΟΦΟΣ İ", {}) == "σοφος i̇");
  CHECK(nmt::metrics::tokenize_tercom("  \t ", {}).empty());
}

TEST_CASE("TER: shift search on sacreBLEU's translation_edit_rate answers", "[metrics][ter]") {
  struct Pair {
    const char* hyp;
    const char* ref;
    int64_t edits;
  };
  // (edits, ref_len) as sacreBLEU 2.6.0's lib_ter.translation_edit_rate gave them.
  const Pair pairs[] = {
      {"b c a", "a b c", 1},
      {"a b c d e", "c d e a b", 1},
      {"", "a b", 2},
      {"a b", "", 2},
      {"the cat sat on the mat", "on the mat the cat sat", 1},
      {"a a a a a a b", "b a a a a a a", 1},
  };
  for (const Pair& p : pairs) {
    INFO(p.hyp << " | " << p.ref);
    const std::string h = p.hyp, r = p.ref;
    const auto hw = nmt::metrics::split_whitespace(h);
    const auto rw = nmt::metrics::split_whitespace(r);
    const nmt::metrics::TerEdits e = nmt::metrics::translation_edit_rate(hw, rw);
    CHECK(e.edits == p.edits);
    CHECK(e.ref_len == static_cast<int64_t>(rw.size()));
  }
}

TEST_CASE("TER: shifts never cost more than the plain edit distance", "[metrics][ter]") {
  // Against an exhaustive Levenshtein (no band): the band is wider than these
  // sentences, and every shift taken lowers the distance by more than its cost.
  std::mt19937 rng(7);
  const std::vector<std::string> vocab = {"a", "b", "c", "d", "e"};
  std::vector<std::string> storage;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::string> h(rng() % 9), r(rng() % 9);
    for (auto& w : h) w = vocab[rng() % vocab.size()];
    for (auto& w : r) w = vocab[rng() % vocab.size()];
    std::vector<std::vector<int64_t>> d(h.size() + 1, std::vector<int64_t>(r.size() + 1));
    for (std::size_t i = 0; i <= h.size(); ++i)
      for (std::size_t j = 0; j <= r.size(); ++j)
        d[i][j] = i == 0 || j == 0 ? static_cast<int64_t>(i + j)
                                   : std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                                               d[i - 1][j - 1] + (h[i - 1] == r[j - 1] ? 0 : 1)});
    const std::vector<std::string_view> hv(h.begin(), h.end()), rv(r.begin(), r.end());
    const auto e = nmt::metrics::translation_edit_rate(hv, rv);
    INFO("trial " << trial);
    if (r.empty()) {
      CHECK(e.edits == static_cast<int64_t>(h.size()));
    } else {
      CHECK(e.edits <= d[h.size()][r.size()]);
      CHECK(e.edits >=
            static_cast<int64_t>(std::max(h.size(), r.size()) - std::min(h.size(), r.size())));
    }
  }
}

TEST_CASE("TER: hostile input as sacreBLEU treats it", "[metrics][ter]") {
  using nmt::metrics::corpus_ter;
  using nmt::metrics::sentence_ter;
  // Empty hypothesis: every reference word is an insertion.
  auto s = sentence_ter("", {"ein Mann läuft"});
  CHECK(s.num_edits == 3);
  CHECK(s.score == 100.0);
  // Empty reference, non-empty hypothesis: sacreBLEU's 1.0 (100), every word an edit.
  s = sentence_ter("ein Mann läuft", {""});
  CHECK(s.num_edits == 3);
  CHECK(s.ref_length == 0.0);
  CHECK(s.score == 100.0);
  // Both empty: 0.
  s = sentence_ter("", {""});
  CHECK(s.num_edits == 0);
  CHECK(s.score == 0.0);
  // An empty reference beside a real one still counts: length averaged over both.
  s = sentence_ter("ein hund bellt", {"", "Ein Hund bellt ."});
  CHECK(s.num_edits == 1);
  CHECK(s.ref_length == 2.0);
  CHECK(s.nrefs == 2);
  CHECK(s.score == 50.0);
  // Corpus: sum of edits over sum of average lengths.
  const auto c = corpus_ter({"a b", "x"}, {{"a b c", "y z"}, {"a b d", "x"}});
  CHECK(c.num_edits == 1);
  CHECK(c.ref_length == 4.5);
  CHECK(c.line(2) ==
        "TER|nrefs:2|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.6.0 = 22.22");
  // Line counts and references.
  CHECK_THROWS_AS(corpus_ter({"a", "b"}, {{"a"}}), nmt::InputError);
  CHECK_THROWS_AS(corpus_ter({"a"}, {}), nmt::InputError);
  CHECK_THROWS_AS(sentence_ter("a", {}), nmt::InputError);
  // Ill-formed UTF-8 is read as U+FFFD, as in the text sacreBLEU was given.
  int warnings = 0;
  CHECK(read_fixture("hostile-bad.hyp", &warnings) == read_fixture("hostile-fffd.hyp"));
  CHECK(warnings == 1);
}
