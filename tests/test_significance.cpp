// numpy's generator as nmt reproduces it, against numbers numpy 1.24.2
// printed, and sacreBLEU 2.6.0's significance tests and intervals on the
// BLEU, chrF and TER statistics seam, against the JSON sacreBLEU printed for
// tests/fixtures/sacrebleu-sig (see its README.md). The command line's
// tables are checked by tests/cli_score_sig.sh.
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/text_file.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/numpy_random.h"
#include "metrics/report_table.h"
#include "metrics/significance.h"
#include "metrics/stats_metric.h"
#include "metrics/ter.h"

#ifndef NMT_SOURCE_DIR
#define NMT_SOURCE_DIR "."
#endif
// The inputs (ref.de, sysA.de, ...), made from ../shared/data by
// tests/fixtures/sacrebleu-sig/make_inputs.py when CMake configures the build.
#ifndef NMT_SIG_INPUTS_DIR
#define NMT_SIG_INPUTS_DIR "sacrebleu-sig-inputs"
#endif

namespace {

namespace npr = nmt::metrics::numpy_random;
using nmt::metrics::SegmentStats;

std::string fixture(const std::string& name) {
  return std::string(NMT_SOURCE_DIR) + "/tests/fixtures/sacrebleu-sig/" + name;
}

std::vector<std::string> lines_of(const std::string& name) {
  return nmt::io::read_lines(std::string(NMT_SIG_INPUTS_DIR) + "/" + name);
}

nlohmann::json expected_json(const std::string& name) {
  std::ifstream in(fixture("expected/" + name + ".out"));
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

}  // namespace

// /usr/bin/python3 -c 'from numpy.random import SeedSequence as S
// for s in [0, 12345, 2**40 + 7]: print([int(x) for x in S(s).generate_state(8)])'
TEST_CASE("SeedSequence.generate_state matches numpy", "[metrics][significance][rng]") {
  using W = std::vector<uint32_t>;
  CHECK(npr::seed_sequence_state({0}, 8) == W{2968811710, 3677149159, 745650761, 2884920346,
                                              2642120001, 549907821, 574372308, 742431198});
  CHECK(npr::seed_sequence_state({12345}, 8) == W{2688385916, 3048105090, 4196366895, 3152189807,
                                                  924159892, 1692637855, 2685664627, 1052446614});
  // 2**40 + 7: two words, least significant first.
  CHECK(npr::seed_sequence_state({7, 256}, 8) == W{238885397, 226915041, 1322230113, 2599373530,
                                                   2212210947, 2577144891, 231252758, 1082730460});
}

// /usr/bin/python3 -c 'from numpy.random import PCG64
// for s in [12345, 42]: print([int(x) for x in PCG64(s).random_raw(3)])'
TEST_CASE("PCG64 raw outputs match numpy", "[metrics][significance][rng]") {
  npr::Pcg64 a(12345);
  CHECK(a.next_u64() == 4193609425186963869ULL);
  CHECK(a.next_u64() == 5843160025838961886ULL);
  CHECK(a.next_u64() == 14708796524633321433ULL);
  npr::Pcg64 b(42);
  CHECK(b.next_u64() == 14276969152011380360ULL);
  CHECK(b.next_u64() == 8095878257575067585ULL);
  CHECK(b.next_u64() == 15838336090824644132ULL);
}

// /usr/bin/python3 -c 'import numpy as np
// for s, n in [(12345, 1000), (12345, 3), (7, 2**31 + 5), (1, 2**32), (2, 2**33 + 1)]:
//     print([int(x) for x in np.random.default_rng(s).choice(n, size=6, replace=True)])'
TEST_CASE("choice(n, replace=True) matches numpy over 32- and 64-bit ranges",
          "[metrics][significance][rng]") {
  auto draw = [](uint64_t seed, uint64_t n) {
    npr::Pcg64 rng(seed);
    std::vector<int64_t> out(6);
    rng.integers(n, out.size(), out.data());
    return out;
  };
  using V = std::vector<int64_t>;
  CHECK(draw(12345, 1000) == V{699, 227, 788, 316, 204, 797});
  CHECK(draw(12345, 3) == V{2, 0, 2, 0, 0, 2});
  // Near half of the 32-bit draws are rejected for this range.
  CHECK(draw(7, (1ULL << 31) + 5) ==
        V{1342382295, 1469265229, 1241873587, 483628758, 119253154, 1875941743});
  CHECK(draw(1, 1ULL << 32) ==
        V{2032329983, 2198257139, 3243419750, 4082210491, 149690573, 619160822});
  CHECK(draw(2, (1ULL << 33) + 1) ==
        V{2247231121, 2564019398, 6994145855, 789551930, 5154824267, 6258287272});
  npr::Pcg64 one(5);
  int64_t z[3];
  one.integers(1, 3, z);  // a range of one value draws nothing
  CHECK((z[0] == 0 && z[2] == 0));
  CHECK(one.next_u64() == npr::Pcg64(5).next_u64());
}

// /usr/bin/python3 -c 'import numpy as np; rng = np.random.default_rng(12345)
// b = rng.integers(2, size=20, dtype=bool); c = rng.choice(10, size=3)
// print("".join("1" if x else "0" for x in b), [int(x) for x in c])'
// (and size=40 for the second case)
TEST_CASE("integers(2, dtype=bool) uses one bit per value and keeps the spare 32 bits",
          "[metrics][significance][rng]") {
  auto run = [](std::size_t n_bools) {
    npr::Pcg64 rng(12345);
    std::vector<uint8_t> b(n_bools);
    rng.bools(b.size(), b.data());
    std::string bits;
    for (uint8_t x : b) bits += x ? '1' : '0';
    std::vector<int64_t> c(3);
    rng.integers(10, c.size(), c.data());
    return std::make_pair(bits, c);
  };
  // 20 bools take one 32-bit draw: choice starts on the upper half of that 64-bit output.
  CHECK(run(20) ==
        std::make_pair(std::string("10111001100000111111"), std::vector<int64_t>{2, 7, 3}));
  CHECK(run(40) == std::make_pair(std::string("1011100110000011111111110100110110110001"),
                                  std::vector<int64_t>{7, 3, 2}));
}

TEST_CASE("SACREBLEU_SEED is read as sacreBLEU reads it", "[metrics][significance][rng]") {
  CHECK(npr::parse_seed(nullptr).value == 12345u);
  CHECK(npr::parse_seed(nullptr).text == "12345");
  CHECK(!npr::parse_seed("None").value.has_value());
  CHECK(npr::parse_seed("NONE").text == "none");
  CHECK(npr::parse_seed(" +7 ").value == 7u);
  CHECK(npr::parse_seed("1_000").text == "1000");
  CHECK_THROWS_AS(npr::parse_seed("-1"), nmt::InputError);
  CHECK_THROWS_AS(npr::parse_seed("12a"), nmt::InputError);
  CHECK_THROWS_AS(npr::parse_seed(""), nmt::InputError);
}

// /usr/bin/python3 -c 'import numpy as np; print(np.sum(np.arange(10000) * 0.1 + 1 / 3).hex())'
TEST_CASE("numpy_sum sums as numpy does (pairwise within 8192-element buffers)",
          "[metrics][significance]") {
  std::vector<double> v(10000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) * 0.1 + 1.0 / 3.0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", nmt::metrics::numpy_sum(v.data(), v.size()));
  CHECK(std::string(buf) == "0x1.3159455555556p+22");
}

namespace {

struct Systems {
  std::vector<std::vector<std::string>> refs;
  std::vector<std::vector<std::string>> hyps;
};

Systems load(const std::vector<std::string>& names) {
  Systems s;
  s.refs.push_back(lines_of("ref.de"));
  for (const std::string& n : names) s.hyps.push_back(lines_of(n));
  return s;
}

// results[m][s] against sacreBLEU's JSON list, every double to the last bit.
void check_against(const std::vector<std::vector<nmt::metrics::TestResult>>& results,
                   const std::vector<std::string>& metric_names, const nlohmann::json& expected) {
  REQUIRE(expected.size() == results[0].size());
  for (std::size_t m = 0; m < metric_names.size(); ++m)
    for (std::size_t s = 0; s < expected.size(); ++s) {
      INFO(metric_names[m] << " system " << s);
      const nlohmann::json& e = expected[s][metric_names[m]];
      const nmt::metrics::TestResult& r = results[m][s];
      CHECK(r.score == e["score"].get<double>());
      CHECK(r.p_value.has_value() == !e["p_value"].is_null());
      if (r.p_value && !e["p_value"].is_null()) CHECK(*r.p_value == e["p_value"].get<double>());
      CHECK(r.mean.has_value() == !e["mean"].is_null());
      if (r.mean && !e["mean"].is_null()) CHECK(*r.mean == e["mean"].get<double>());
      if (r.ci && !e["ci"].is_null()) CHECK(*r.ci == e["ci"].get<double>());
    }
}

std::vector<std::vector<nmt::metrics::TestResult>> run_test(
    const Systems& sys, const std::vector<const nmt::metrics::StatsMetric*>& metrics,
    const nmt::metrics::PairedTestOptions& opt) {
  std::vector<std::vector<SegmentStats>> stats(metrics.size());
  for (std::size_t m = 0; m < metrics.size(); ++m)
    for (const auto& h : sys.hyps) stats[m].push_back(metrics[m]->segment_stats(h, sys.refs));
  return nmt::metrics::paired_test(metrics, stats, opt);
}

}  // namespace

TEST_CASE("paired bootstrap equals sacreBLEU's to the last bit", "[metrics][significance]") {
  const Systems sys = load({"sysA.de", "sysB.de", "sysC.de"});
  const auto bleu = nmt::metrics::bleu_stats_metric({});
  const auto chrf = nmt::metrics::chrf_stats_metric({});
  nmt::metrics::PairedTestOptions opt;
  opt.kind = nmt::metrics::PairedTestKind::kBootstrap;
  SECTION("100 resamples, chrF then BLEU") {
    opt.n_samples = 100;
    check_against(run_test(sys, {chrf.get(), bleu.get()}, opt), {"chrF2", "BLEU"},
                  expected_json("bs100_json"));
  }
  SECTION("the default 1000 resamples") {
    check_against(run_test(sys, {bleu.get(), chrf.get()}, opt), {"BLEU", "chrF2"},
                  expected_json("bs1000_json"));
  }
  SECTION("SACREBLEU_SEED=7, 150 resamples") {
    opt.n_samples = 150;
    opt.seed = npr::parse_seed("7");
    const Systems two = load({"sysA.de", "sysB.de"});
    check_against(run_test(two, {chrf.get(), bleu.get()}, opt), {"chrF2", "BLEU"},
                  expected_json("bs150_seed7_json"));
  }
  SECTION("chrF++ and add-k 0.5 (float32 arithmetic on the resampled sums)") {
    opt.n_samples = 200;
    nmt::metrics::BleuOptions bo;
    bo.smooth = nmt::metrics::Smoothing::kAddK;
    bo.smooth_value = 0.5;
    nmt::metrics::ChrfOptions co;
    co.word_order = 2;
    const auto b = nmt::metrics::bleu_stats_metric(bo);
    const auto c = nmt::metrics::chrf_stats_metric(co);
    const Systems two = load({"sysA.de", "sysB.de"});
    check_against(run_test(two, {b.get(), c.get()}, opt), {"BLEU", "chrF2++"},
                  expected_json("bs200_chrfpp_addk_json"));
  }
  SECTION("TER then BLEU, 100 resamples (TER divides the float32 sums in float32)") {
    opt.n_samples = 100;
    const auto ter = nmt::metrics::ter_stats_metric({}, 1);
    check_against(run_test(sys, {ter.get(), bleu.get()}, opt), {"TER", "BLEU"},
                  expected_json("bs100_ter_json"));
  }
}

TEST_CASE("approximate randomization equals sacreBLEU's to the last bit",
          "[metrics][significance]") {
  const auto bleu = nmt::metrics::bleu_stats_metric({});
  const auto chrf = nmt::metrics::chrf_stats_metric({});
  nmt::metrics::PairedTestOptions opt;
  opt.kind = nmt::metrics::PairedTestKind::kRandomization;
  SECTION("200 trials, three systems") {
    opt.n_samples = 200;
    check_against(run_test(load({"sysA.de", "sysB.de", "sysC.de"}), {bleu.get(), chrf.get()}, opt),
                  {"BLEU", "chrF2"}, expected_json("ar200_json"));
  }
  SECTION("the default 10000 trials") {
    check_against(run_test(load({"sysA.de", "sysB.de"}), {bleu.get(), chrf.get()}, opt),
                  {"BLEU", "chrF2"}, expected_json("ar10000_json"));
  }
  SECTION("add-k 0.5: the added value is cut to the int64 sums") {
    opt.n_samples = 150;
    nmt::metrics::BleuOptions bo;
    bo.smooth = nmt::metrics::Smoothing::kAddK;
    bo.smooth_value = 0.5;
    const auto b = nmt::metrics::bleu_stats_metric(bo);
    check_against(run_test(load({"sysA.de", "sysB.de"}), {b.get()}, opt), {"BLEU"},
                  expected_json("ar150_addk_json"));
  }
}

TEST_CASE("resampling a block at a time draws what one call draws", "[metrics][significance]") {
  // Blocks of one resample (and 32 trials), of a few, and ones that end
  // inside a resample's or a trial's worth of values, against the same
  // sacreBLEU numbers as above: the 400 lines' resamples and trials are
  // drawn in 1000 calls, or 5, or 13.
  const auto bleu = nmt::metrics::bleu_stats_metric({});
  const auto chrf = nmt::metrics::chrf_stats_metric({});
  const Systems three = load({"sysA.de", "sysB.de", "sysC.de"});
  for (const std::size_t block : {std::size_t{1}, std::size_t{90000}, std::size_t{33000}}) {
    INFO("blocks of " << block << " values");
    nmt::metrics::PairedTestOptions opt;
    opt.block_values = block;
    opt.kind = nmt::metrics::PairedTestKind::kBootstrap;
    check_against(run_test(three, {bleu.get(), chrf.get()}, opt), {"BLEU", "chrF2"},
                  expected_json("bs1000_json"));
    opt.kind = nmt::metrics::PairedTestKind::kRandomization;
    opt.n_samples = 200;
    check_against(run_test(three, {bleu.get(), chrf.get()}, opt), {"BLEU", "chrF2"},
                  expected_json("ar200_json"));
    // The interval's resamples follow the trials' masks in the same generator.
    opt.n_ar_confidence = 100;
    const auto r = run_test(load({"sysA.de", "sysB.de"}), {bleu.get()}, opt);
    CHECK(r[0][1].p_value == 0.17412935323383086);
    CHECK(r[0][1].mean == 29.35952144114485);
    CHECK(r[0][1].ci == 2.241020771105479);
    // One system's interval (--confidence), against the single call.
    const SegmentStats st = bleu->segment_stats(three.hyps[0], three.refs);
    const nmt::metrics::MeanCi whole =
        nmt::metrics::confidence_interval(*bleu, st, 1000, npr::parse_seed("12345"), 1 << 30);
    const nmt::metrics::MeanCi blocks =
        nmt::metrics::confidence_interval(*bleu, st, 1000, npr::parse_seed("12345"), block);
    CHECK(blocks.mean == whole.mean);
    CHECK(blocks.ci == whole.ci);
  }
}

TEST_CASE("summed statistics give the corpus scores", "[metrics][significance]") {
  const Systems sys = load({"sysC.de"});
  nmt::metrics::ChrfOptions co;
  co.word_order = 2;
  const auto chrf = nmt::metrics::chrf_stats_metric(co);
  const auto bleu = nmt::metrics::bleu_stats_metric({});
  CHECK(nmt::metrics::corpus_score(*chrf, chrf->segment_stats(sys.hyps[0], sys.refs)) ==
        nmt::metrics::corpus_chrf(sys.hyps[0], sys.refs, co).score);
  CHECK(nmt::metrics::corpus_score(*bleu, bleu->segment_stats(sys.hyps[0], sys.refs)) ==
        nmt::metrics::corpus_bleu(sys.hyps[0], sys.refs).score);
  // TER's rows keep the summed reference lengths; over 1, 2 or 4 references
  // (a power of two) dividing after summing is sacreBLEU's float sum exactly.
  std::vector<std::vector<std::string>> refs = sys.refs;
  for (const char* extra : {"sysA.de", "sysB.de", "sysC.de"}) {
    refs.push_back(lines_of(extra));
    if (refs.size() == 3) continue;
    INFO(refs.size() << " references");
    const auto ter = nmt::metrics::ter_stats_metric({}, static_cast<int>(refs.size()));
    const SegmentStats st = ter->segment_stats(sys.hyps[0], refs);
    CHECK(st.nrefs == static_cast<int>(refs.size()));
    CHECK(nmt::metrics::corpus_score(*ter, st) ==
          nmt::metrics::corpus_ter(sys.hyps[0], refs).score);
  }
  const auto ter1 = nmt::metrics::ter_stats_metric({}, 1);
  CHECK_THROWS_AS(ter1->segment_stats(sys.hyps[0], refs), nmt::InputError);
}

TEST_CASE("paired tests refuse what sacreBLEU cannot compare", "[metrics][significance]") {
  const Systems sys = load({"sysA.de", "short.de"});
  const auto bleu = nmt::metrics::bleu_stats_metric({});
  nmt::metrics::PairedTestOptions opt;
  std::vector<std::vector<SegmentStats>> one{{bleu->segment_stats(sys.hyps[0], sys.refs)}};
  CHECK_THROWS_AS(nmt::metrics::paired_test({bleu.get()}, one, opt), nmt::InputError);
  CHECK_THROWS_AS(bleu->segment_stats(sys.hyps[1], sys.refs), nmt::InputError);
}

// /usr/bin/python3 -c 'for v in [1e-05, 0.1, 100.0, 1/10001, 1e16, 123456789012345678.0,
//     0.0001, 52.48340563462774, -2.5, 1.0/3]: print(repr(v))'
TEST_CASE("python_float_repr writes floats as Python's repr", "[metrics][significance]") {
  using nmt::metrics::python_float_repr;
  CHECK(python_float_repr(1e-05) == "1e-05");
  CHECK(python_float_repr(0.1) == "0.1");
  CHECK(python_float_repr(100.0) == "100.0");
  CHECK(python_float_repr(1.0 / 10001) == "9.999000099990002e-05");
  CHECK(python_float_repr(1e16) == "1e+16");
  CHECK(python_float_repr(123456789012345678.0) == "1.2345678901234568e+17");
  CHECK(python_float_repr(0.0001) == "0.0001");
  // nlohmann's dump writes 52.483405634627744 for this double.
  CHECK(python_float_repr(52.48340563462774) == "52.48340563462774");
  CHECK(python_float_repr(-2.5) == "-2.5");
  CHECK(python_float_repr(1.0 / 3) == "0.3333333333333333");
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  j.push_back({{"system", "é"}, {"p_value", nullptr}, {"x", {}}});
  CHECK(nmt::metrics::python_json_dumps(j, 4) ==
        "[\n    {\n        \"system\": \"\\u00e9\",\n        \"p_value\": null,\n"
        "        \"x\": null\n    }\n]");
}

// tabulate 0.8.9: a right-aligned first column, centred others, numeric
// strings re-formatted with floatfmt, multi-line cells line by line.
TEST_CASE("fancy_grid lays out a table as tabulate does", "[metrics][significance]") {
  const std::string t = nmt::metrics::fancy_grid(
      {"System", "BLEU"}, {{"a", "Baseline: b"}, {"29.55", "3\n(p = 0.5)"}}, 1);
  // /usr/bin/python3 -c "from tabulate import tabulate; print(repr(tabulate({'System':
  //   ['a', 'Baseline: b'], 'BLEU': ['29.55', '3\\n(p = 0.5)']}, headers='keys',
  //   tablefmt='fancy_grid', colalign=('right',), stralign='center', numalign='center',
  //   floatfmt='.1f')))"
  CHECK(t ==
        "╒═════════════╤═══════════╕\n│      System │   BLEU    │\n╞═════════════╪═══════════╡\n"
        "│           a │   29.55   │\n├─────────────┼───────────┤\n│ Baseline: b │     3     │\n"
        "│             │ (p = 0.5) │\n╘═════════════╧═══════════╛");
}

// Not on sacreBLEU's command line, but in its API: AR with a bootstrap
// interval too (the resample indices drawn after the swap masks).
// (in a folder of inputs made by tests/fixtures/sacrebleu-sig/make_inputs.py, with
// $SACREBLEU_DIR a sacreBLEU 2.6.0 set up as that folder's README describes)
// PYTHONPATH=$SACREBLEU_DIR python3 -c "
// from sacrebleu.metrics import BLEU; from sacrebleu.significance import PairedTest
// ref = [open('ref.de').read().splitlines()]
// sy = [(n, open(n).read().splitlines()) for n in ['sysA.de', 'sysB.de']]
// _, s = PairedTest(sy, {'BLEU': BLEU(references=ref)}, references=None, test_type='ar',
//                   n_samples=200, n_ar_confidence=100)()
// for r in s['BLEU']: print(repr(r.score), repr(r.p_value), repr(r.mean), repr(r.ci))"
TEST_CASE("approximate randomization with an interval (sacreBLEU's API)",
          "[metrics][significance]") {
  const auto bleu = nmt::metrics::bleu_stats_metric({});
  nmt::metrics::PairedTestOptions opt;
  opt.kind = nmt::metrics::PairedTestKind::kRandomization;
  opt.n_samples = 200;
  opt.n_ar_confidence = 100;
  const auto r = run_test(load({"sysA.de", "sysB.de"}), {bleu.get()}, opt);
  CHECK(r[0][0].score == 29.554094099613017);
  CHECK(!r[0][0].p_value);
  CHECK(r[0][0].mean == 29.412168824270143);
  CHECK(r[0][0].ci == 2.102251748523244);
  CHECK(r[0][1].score == 29.477299558844404);
  CHECK(r[0][1].p_value == 0.17412935323383086);
  CHECK(r[0][1].mean == 29.35952144114485);
  CHECK(r[0][1].ci == 2.241020771105479);
}
