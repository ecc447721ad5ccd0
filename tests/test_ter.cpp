// TER against sacreBLEU 2.6.0: every TER-only case of
// tests/fixtures/sacrebleu-ter/cases.txt computed through the library and
// formatted as sacrebleu printed it (text line, JSON, -sl, -b), to the
// digit; the tercom tokeniser and the shift search on cases whose answers
// sacreBLEU's own functions gave; hostile input. (The same cases run
// through the binary, with BLEU and chrF beside TER, in cli_score_ter.sh.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
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

namespace {

// sacreBLEU 2.6.0's lib_ter.py as written (without its row cache, which
// changes no result): the whole (n+1)(m+1) table with the band left at
// infinity, the trace as a string, the shifts ranked as Python tuples.
// ter.cpp keeps only the band and searches differently; this is what it
// must equal.
namespace naive {

using Words = std::vector<int>;
constexpr int64_t kInf = 10000000000000000;  // int(1e16)

int64_t edit_distance(const Words& h, const Words& r, std::string& trace) {
  const std::size_t n = h.size(), m = r.size();
  std::vector<std::vector<std::pair<int64_t, char>>> d(
      n + 1, std::vector<std::pair<int64_t, char>>(m + 1, {kInf, 'x'}));
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = {static_cast<int64_t>(j), 'i'};
  const double ratio = n ? static_cast<double>(m) / static_cast<double>(n) : 1.0;
  const int64_t beam = 25 < ratio / 2 ? static_cast<int64_t>(std::ceil(ratio / 2 + 25)) : 25;
  for (std::size_t i = 1; i <= n; ++i) {
    const auto diag = static_cast<int64_t>(std::floor(static_cast<double>(i) * ratio));
    const int64_t min_j = std::max<int64_t>(0, diag - beam);
    int64_t max_j = std::min<int64_t>(static_cast<int64_t>(m) + 1, diag + beam);
    if (i == n) max_j = static_cast<int64_t>(m) + 1;
    for (auto j = static_cast<std::size_t>(min_j); j < static_cast<std::size_t>(max_j); ++j) {
      if (j == 0) {
        d[i][0] = {d[i - 1][0].first + 1, 'd'};
        continue;
      }
      const bool same = h[i - 1] == r[j - 1];
      const std::pair<int64_t, char> ops[] = {
          {d[i - 1][j - 1].first + (same ? 0 : 1), same ? ' ' : 's'},
          {d[i - 1][j].first + 1, 'd'},
          {d[i][j - 1].first + 1, 'i'}};
      for (const auto& op : ops)
        if (d[i][j].first > op.first) d[i][j] = op;
    }
  }
  trace.clear();
  for (std::size_t i = n, j = m; i > 0 || j > 0;) {
    const char op = d[i][j].second;
    trace.insert(trace.begin(), op);
    if (op == 's' || op == ' ') {
      --i;
      --j;
    } else if (op == 'i') {
      --j;
    } else if (op == 'd') {
      --i;
    } else {
      throw std::runtime_error("naive TER: the band lost the path");
    }
  }
  return d[n][m].first;
}

Words perform_shift(const Words& w, std::size_t start, std::size_t length, std::size_t target) {
  const auto slice = [&](std::size_t a, std::size_t b) {
    a = std::min(a, w.size());
    b = std::min(b, w.size());
    return a < b ? Words(w.begin() + static_cast<std::ptrdiff_t>(a),
                         w.begin() + static_cast<std::ptrdiff_t>(b))
                 : Words();
  };
  std::vector<Words> parts;
  if (target < start)
    parts = {slice(0, target), slice(start, start + length), slice(target, start),
             slice(start + length, w.size())};
  else if (target > start + length)
    parts = {slice(0, start), slice(start + length, target), slice(start, start + length),
             slice(target, w.size())};
  else
    parts = {slice(0, start), slice(start + length, length + target), slice(start, start + length),
             slice(length + target, w.size())};
  Words out;
  for (const Words& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

int64_t translation_edit_rate(Words h, const Words& r) {
  if (r.empty()) return static_cast<int64_t>(h.size());
  int64_t shifts = 0, checked = 0;
  std::string trace;
  for (;;) {
    // _shift
    const int64_t pre = edit_distance(h, r, trace);
    std::map<int64_t, int64_t> align;
    std::vector<int> ref_err, hyp_err;
    int64_t ph = -1, pr = -1;
    for (char op : trace) {  // the flipped trace: 'i' and 'd' swapped
      if (op == ' ' || op == 's') {
        align[++pr] = ++ph;
        hyp_err.push_back(op == 's');
        ref_err.push_back(op == 's');
      } else if (op == 'd') {  // flipped: an insertion into the hypothesis
        ++ph;
        hyp_err.push_back(1);
      } else {
        align[++pr] = ph;
        ref_err.push_back(1);
      }
    }
    const auto sum = [](const std::vector<int>& v, std::size_t a, std::size_t b) {
      int s = 0;
      for (std::size_t k = a; k < std::min(b, v.size()); ++k) s += v[k];
      return s;
    };
    bool found = false;
    std::tuple<int64_t, std::size_t, int64_t, int64_t, Words> best;
    const std::size_t n = h.size(), m = r.size();
    for (std::size_t sh = 0; sh < n && checked < 1000; ++sh)
      for (std::size_t sr = 0; sr < m && checked < 1000; ++sr) {
        if (std::max(sh, sr) - std::min(sh, sr) > 50) continue;
        for (std::size_t len = 0; h[sh + len] == r[sr + len] && len < 10 && checked < 1000;) {
          ++len;
          if (sum(hyp_err, sh, sh + len) != 0 && sum(ref_err, sr, sr + len) != 0 &&
              !(static_cast<int64_t>(sh) <= align.at(static_cast<int64_t>(sr)) &&
                align.at(static_cast<int64_t>(sr)) < static_cast<int64_t>(sh + len))) {
            int64_t prev_idx = -1;
            for (int64_t off = -1; off < static_cast<int64_t>(len); ++off) {
              const int64_t pos = static_cast<int64_t>(sr) + off;
              const int64_t idx = pos == -1 ? 0 : align.at(pos) + 1;
              if (idx == prev_idx) continue;
              prev_idx = idx;
              Words shifted = perform_shift(h, sh, len, static_cast<std::size_t>(idx));
              std::string unused;
              auto candidate = std::make_tuple(pre - edit_distance(shifted, r, unused), len,
                                               -static_cast<int64_t>(sh), -idx, shifted);
              ++checked;
              if (!found || candidate > best) {
                found = true;
                best = std::move(candidate);
              }
            }
          }
          if (sh + len == n || sr + len == m) break;
        }
      }
    const int64_t delta = found ? std::get<0>(best) : 0;
    if (checked >= 1000 || delta <= 0) break;
    ++shifts;
    h = std::get<4>(best);
  }
  return shifts + edit_distance(h, r, trace);
}

}  // namespace naive

}  // namespace

TEST_CASE("TER: the banded search equals sacreBLEU's full-table algorithm", "[metrics][ter]") {
  // Segments longer than the band (50 words) and far apart in length, where
  // the band is cut and, beyond a length ratio of 50, widened; made from
  // the reference by moving blocks, so that shifts are found and taken.
  std::mt19937 rng(11);
  const auto below = [&rng](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  int banded = 0, widened = 0, shifted = 0;
  for (int trial = 0; trial < 160; ++trial) {
    const std::size_t vocab = 2 + below(12);
    std::size_t m = below(4) == 0 ? below(12) : 20 + below(110);
    naive::Words r(m);
    for (int& w : r) w = static_cast<int>(below(vocab));
    naive::Words h = r;
    switch (trial % 4) {
      case 0:  // blocks moved, some words replaced
        for (std::size_t k = below(6); k > 0 && h.size() > 2; --k) {
          const std::size_t a = below(h.size()),
                            len = 1 + below(std::min<std::size_t>(8, h.size() - a));
          h = naive::perform_shift(h, a, len, below(h.size() + 1));
        }
        for (int& w : h)
          if (below(8) == 0) w = static_cast<int>(below(vocab));
        break;
      case 1:  // far shorter than the reference
        h.resize(std::min(h.size(), 1 + below(2)));
        break;
      case 2:  // far longer: the reference shortened
        r.resize(std::min(r.size(), 1 + below(3)));
        break;
      default:  // unrelated
        h.resize(below(130));
        for (int& w : h) w = static_cast<int>(below(vocab));
    }
    m = r.size();
    const std::size_t n = h.size();
    const double ratio = n ? static_cast<double>(m) / static_cast<double>(n) : 1.0;
    banded += m + 1 > 50;
    widened += ratio > 50;
    std::vector<std::string> hs, rs;
    for (int w : h) hs.push_back("w" + std::to_string(w));
    for (int w : r) rs.push_back("w" + std::to_string(w));
    const std::vector<std::string_view> hv(hs.begin(), hs.end()), rv(rs.begin(), rs.end());
    const int64_t want = naive::translation_edit_rate(h, r);
    std::string trace;
    shifted += !r.empty() && want < naive::edit_distance(h, r, trace);
    INFO("trial " << trial << ": " << n << " words against " << m);
    CHECK(nmt::metrics::translation_edit_rate(hv, rv).edits == want);
  }
  // The cases are what they claim to be.
  INFO(banded << " banded, " << widened << " widened, " << shifted << " shifted");
  CHECK(banded > 60);
  CHECK(widened > 10);
  CHECK(shifted > 20);
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
