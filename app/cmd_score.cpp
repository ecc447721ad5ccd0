// `nmt score`. Metric mode takes the sacrebleu command line: references as
// arguments (or -r), the hypothesis from -i or stdin, --metrics bleu chrf ter,
// -tok, -lc, the --chrf-* and --ter-* options, -f json|text, -w, -b, and
// prints sacreBLEU's one-line results (aligned on '=' as it aligns them) or
// its JSON. Lines are right-stripped and checked for UTF-8 as sacrebleu
// does. The one clash: -m is the model everywhere in nmt (model mode below),
// so sacreBLEU's `-m bleu chrf` is spelt --metrics here, and `-m bleu` says
// so. Model mode only gathers options and calls run_model_score().
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <iostream>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/memory.h"
#include "io/output_file.h"
#include "io/std_streams.h"
#include "io/text_file.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/ngrams.h"
#include "metrics/numpy_random.h"
#include "metrics/report_table.h"
#include "metrics/significance.h"
#include "metrics/stats_metric.h"
#include "metrics/ter.h"
#include "metrics/tokenizers.h"
#include "score_model.h"

namespace nmt::app {

namespace {

struct ScoreCli {
  // metric mode
  std::vector<std::string> metrics{"bleu"};
  std::string metric;                 // --metric: one metric
  std::vector<std::string> refs;      // positional, as sacrebleu takes them
  std::vector<std::string> ref_opts;  // -r, nmt's earlier spelling
  std::vector<std::string> inputs;    // -i
  std::string tokenize = "13a";
  std::string spm_model;  // spm, flores101, flores200, spBLEU-1K
  bool lowercase = false;
  bool chrf_lowercase = false;
  std::string smooth_method = "exp";
  double smooth_value = 0.0;
  bool sentence_level = false;
  int chrf_char_order = 6;
  int chrf_word_order = 0;
  int chrf_beta = 2;
  bool chrf_whitespace = false;
  metrics::TerOptions ter;
  std::string format = "text";
  int width = 2;
  bool signature = true;
  bool score_only = false;
  // sacreBLEU's significance and confidence options
  bool paired_bs = false;
  bool paired_ar = false;
  int paired_bs_n = 1000;
  int paired_ar_n = 10000;
  int paired_jobs = 1;
  bool confidence = false;
  int confidence_n = 1000;

  // model mode
  ModelScoreArgs model;

  CLI::Option* model_opt = nullptr;
  CLI::Option* metrics_opt = nullptr;
  CLI::Option* smooth_value_opt = nullptr;
  CLI::Option* lowercase_opt = nullptr;
  std::vector<CLI::Option*> metric_only;
  std::vector<CLI::Option*> model_only;
};

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

// Memory that runs out is told with what was being done (the file, the
// metric, the option), not as a bare "out of memory".
template <typename F>
decltype(auto) doing(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw Error("score: out of memory " + what);
  }
}

std::string metric_name(const std::string& key) {
  return key == "bleu" ? "BLEU" : key == "ter" ? "TER" : "chrF";
}

// Reads a file as the sacrebleu CLI does (each line right-stripped), with
// ill-formed UTF-8 replaced rather than fatal, and said so on stderr by line,
// as every nmt command reads text.
std::vector<std::string> read_text(const std::string& path, const std::string& option) {
  io::check_input_path(path, option);
  io::TextChecks checks;
  checks.warn = io::warn_on_stderr;
  std::vector<std::string> lines =
      doing("reading " + display_name(path), [&] { return io::read_lines(path, checks); });
  for (std::string& line : lines) line.resize(metrics::rstrip_whitespace(line).size());
  return lines;
}

// What the metrics compute on: the reference streams and one hypothesis
// stream per system, named as sacreBLEU names them (the path as given; the
// first prefixed "Baseline: " in a paired test).
struct Inputs {
  std::vector<std::string> ref_paths;
  std::vector<std::string> hyp_paths;
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> refs;
  std::vector<std::vector<std::string>> systems;
};

bool paired_mode(const ScoreCli& cli) { return cli.paired_bs || cli.paired_ar; }

metrics::PairedTestOptions paired_options(const ScoreCli& cli) {
  metrics::PairedTestOptions opt;
  opt.kind =
      cli.paired_bs ? metrics::PairedTestKind::kBootstrap : metrics::PairedTestKind::kRandomization;
  opt.n_samples = cli.paired_bs ? cli.paired_bs_n : cli.paired_ar_n;
  return opt;
}

// The option that sets the number of resamples or trials.
std::string resampling_option(const ScoreCli& cli) {
  return cli.paired_bs ? "--paired-bs-n" : cli.paired_ar ? "--paired-ar-n" : "--confidence-n";
}

// Each resample or trial keeps its scores (8 bytes per metric, and per
// system for the bootstrap) for the interval's sort and the p-value; the
// draws themselves are made a block at a time. A count whose scores could
// take more than the machine has is refused before any file is read, as
// --beam is in translate.
void check_resampling_memory(const ScoreCli& cli) {
  const uint64_t phys = physical_memory_bytes();
  double bytes = 0;
  int n = 0;
  if (paired_mode(cli)) {
    const metrics::PairedTestOptions opt = paired_options(cli);
    n = metrics::paired_test_samples(opt.kind, opt.n_samples);
    bytes = metrics::paired_test_bytes(opt, cli.metrics.size());
  } else if (cli.confidence) {
    n = cli.confidence_n;
    bytes = metrics::confidence_interval_bytes(n);
  }
  if (phys == 0 || bytes <= static_cast<double>(phys)) return;
  std::string metric_list;
  for (const std::string& m : cli.metrics) metric_list += " " + m;
  const auto most =
      static_cast<long long>(static_cast<double>(n) * static_cast<double>(phys) / bytes);
  throw UsageError(
      "score: " + resampling_option(cli) + " " + std::to_string(n) + " needs " + gigabytes(bytes) +
      " to keep the scores of its " + (cli.paired_ar ? "trials" : "resamples") + " (" +
      std::to_string(static_cast<long long>(bytes / n)) + " bytes each with --metrics" +
      metric_list + "), more than this machine's " + gigabytes(static_cast<double>(phys)) +
      "; expected at most " + std::to_string(most));
}

Inputs read_inputs(const ScoreCli& cli) {
  Inputs in;
  if (!cli.refs.empty() && !cli.ref_opts.empty())
    throw UsageError(
        "score: give the references either with -r or as arguments, not both (the hypothesis "
        "comes from -i HYP or stdin)");
  in.ref_paths = cli.refs.empty() ? cli.ref_opts : cli.refs;
  if (in.ref_paths.empty())
    throw UsageError("score: no reference: give reference files as arguments (or a model with -m)");
  const std::vector<std::string> given =
      cli.inputs.empty() ? std::vector<std::string>{"-"} : cli.inputs;
  // sacreBLEU: a file given again as the baseline is skipped in a paired
  // test; any other repeated name is an error.
  for (const std::string& path : given) {
    if (std::find(in.hyp_paths.begin(), in.hyp_paths.end(), path) != in.hyp_paths.end()) {
      if (paired_mode(cli) && path == in.hyp_paths[0]) {
        std::cerr << "nmt: note: ignoring " << path << " as it was also given as the baseline\n";
        continue;
      }
      throw InputError("score: -i names " + path +
                       " twice; each system needs its own file name, which names it");
    }
    in.hyp_paths.push_back(path);
  }
  const std::size_t n_sys = in.hyp_paths.size();
  if (std::count(in.hyp_paths.begin(), in.hyp_paths.end(), "-") > 0 && ::isatty(STDIN_FILENO))
    throw UsageError("score: no hypothesis: give -i HYP or pipe it on stdin");
  // sacreBLEU's checks, in its order, before any file is read.
  if (cli.sentence_level && n_sys > 1)
    throw UsageError("score: only one system can be evaluated with --sentence-level");
  if (cli.sentence_level && (cli.confidence || paired_mode(cli)))
    throw UsageError("score: statistical tests are unavailable with --sentence-level");
  if (paired_mode(cli) && n_sys == 1)
    throw UsageError(
        "score: paired tests require multiple input systems given to --input (-i): the first is "
        "the baseline");
  if (n_sys > 1 && cli.confidence)
    throw UsageError(
        "score: --confidence is for one system; use --paired-bs or --paired-ar for several");
  for (const std::string& r : in.ref_paths) io::check_input_path(r, "reference");
  for (const std::string& h : in.hyp_paths) io::check_input_path(h, "-i");
  for (const std::string& r : in.ref_paths) {
    if (r == "-") throw UsageError("score: a reference cannot be stdin (stdin is the hypothesis)");
    for (const std::string& h : in.hyp_paths)
      if (h != "-" && io::file_id(r) == io::file_id(h))
        std::cerr << "nmt: warning: the hypothesis " << h << " is also given as a reference\n";
  }
  for (const std::string& r : in.ref_paths) in.refs.push_back(read_text(r, "reference"));
  for (const std::string& h : in.hyp_paths) {
    in.systems.push_back(read_text(h, "-i"));
    in.names.push_back(h);
    // sacreBLEU refuses an empty system too ("contains no sentence").
    if (in.systems.back().empty())
      throw InputError("score: " + display_name(h) + " has no lines: nothing to score");
    // Checked here as well as in the library so the message names the files.
    for (std::size_t r = 0; r < in.refs.size(); ++r)
      if (in.refs[r].size() != in.systems.back().size())
        throw InputError("score: " + display_name(h) + " has " +
                         std::to_string(in.systems.back().size()) + " lines but reference " +
                         display_name(in.ref_paths[r]) + " has " +
                         std::to_string(in.refs[r].size()));
  }
  if (paired_mode(cli)) in.names[0] = "Baseline: " + in.names[0];
  return in;
}

metrics::BleuOptions bleu_options(const ScoreCli& cli) {
  metrics::BleuOptions opt;
  opt.tokenizer = metrics::parse_tokenizer(cli.tokenize);
  opt.spm_model = cli.spm_model;
  opt.lowercase = cli.lowercase;
  opt.smooth = metrics::parse_smoothing(cli.smooth_method);
  if (cli.smooth_value_opt->count() > 0) opt.smooth_value = cli.smooth_value;
  return opt;
}

metrics::ChrfOptions chrf_options(const ScoreCli& cli) {
  metrics::ChrfOptions opt;
  opt.char_order = cli.chrf_char_order;
  opt.word_order = cli.chrf_word_order;
  opt.beta = cli.chrf_beta;
  opt.lowercase = cli.chrf_lowercase;
  opt.whitespace = cli.chrf_whitespace;
  return opt;
}

metrics::TerOptions ter_options(const ScoreCli& cli) { return cli.ter; }

// One result as sacrebleu prints it: the score alone (-b), the JSON object,
// the one-line text with the signature inside, or without it.
template <typename Score>
std::string render(const Score& s, const ScoreCli& cli, bool one_line_json) {
  if (cli.score_only) return metrics::format_fixed(s.score, cli.width);
  if (cli.format == "json") return s.to_json(cli.width).dump(one_line_json ? -1 : 1);
  return cli.signature ? s.line(cli.width) : s.text(cli.width);
}

std::string sentence_result(const ScoreCli& cli, const std::string& hyp,
                            const std::vector<std::string>& refs) {
  if (cli.metrics[0] == "bleu")
    return render(metrics::sentence_bleu(hyp, refs, bleu_options(cli)), cli, true);
  if (cli.metrics[0] == "ter")
    return render(metrics::sentence_ter(hyp, refs, ter_options(cli)), cli, true);
  return render(metrics::sentence_chrf(hyp, refs, chrf_options(cli)), cli, true);
}

void print_sentence_scores(const ScoreCli& cli, const Inputs& in) {
  const std::vector<std::string>& hyps = in.systems[0];
  std::vector<std::string> seg_refs(in.refs.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < in.refs.size(); ++r) seg_refs[r] = in.refs[r][i];
    std::cout << doing("computing " + metric_name(cli.metrics[0]) + " of " +
                           display_name(in.hyp_paths[0]) + " line " + std::to_string(i + 1),
                       [&] { return sentence_result(cli, hyps[i], seg_refs); })
              << "\n";
    io::check_stdout();
  }
}

// The tokeniser serves BLEU only (chrF has its own), and is made ready, as
// sacreBLEU builds it, only when BLEU is computed: before any file is read.
void check_tokenizer(const ScoreCli& cli, bool has_bleu) {
  const metrics::TokenizerKind kind = metrics::parse_tokenizer(cli.tokenize);
  const bool spm = metrics::tokenizer_needs_spm_model(kind);
  if (!cli.spm_model.empty() && !spm)
    throw UsageError(
        "score: --spm-model applies to -tok flores101, flores200, spm and spBLEU-1K, not -tok " +
        cli.tokenize);
  if (!has_bleu) return;
  if (spm && cli.spm_model.empty()) {
    // What sacreBLEU's SPM_MODELS downloads, and where it keeps it.
    const char* what = "FLORES-101";
    const char* file = "sacrebleu_tokenizer_spm.model";
    const char* url =
        "https://dl.fbaipublicfiles.com/fairseq/models/flores/sacrebleu_tokenizer_spm.model";
    if (kind == metrics::TokenizerKind::kFlores200) {
      what = "FLORES-200";
      file = "flores200sacrebleuspm";
      url = "https://tinyurl.com/flores200sacrebleuspm";
    } else if (kind == metrics::TokenizerKind::kSpBleu1K) {
      what = "spBLEU-1K";
      file = "spbleu-1k_tokenizer_spm.model";
      url = "https://www.dlnlp.ai/spBLEU-1K/spbleu-1k_tokenizer_spm.model";
    }
    throw UsageError("score: -tok " + cli.tokenize + " needs --spm-model FILE: the " + what +
                     " SentencePiece model (sacreBLEU downloads it as ~/.sacrebleu/models/" + file +
                     " from " + url + ")");
  }
  if (kind == metrics::TokenizerKind::kSpm)
    std::cerr << "nmt: warning: -tok spm is sacreBLEU's old name for flores101 (the signature "
                 "says flores101)\n";
  if (spm) io::check_input_path(cli.spm_model, "--spm-model");
  metrics::load_tokenizer(kind, cli.spm_model);
}

void check_metric_options(const ScoreCli& cli) {
  std::vector<std::string> seen;
  for (const std::string& m : cli.metrics) {
    if (std::find(seen.begin(), seen.end(), m) != seen.end())
      throw UsageError("score: --metrics names " + m + " twice");
    seen.push_back(m);
  }
  if (cli.sentence_level && cli.metrics.size() > 1)
    throw UsageError("score: only one metric can be used with --sentence-level");
  const bool has_bleu = std::find(seen.begin(), seen.end(), "bleu") != seen.end();
  if (cli.lowercase_opt->count() > 0 && !has_bleu)
    throw UsageError(
        "score: -lc/--lowercase applies to BLEU, as in sacreBLEU; for chrF use --chrf-lowercase "
        "(TER is case-insensitive unless --ter-case-sensitive)");
  check_tokenizer(cli, has_bleu);
}

// A metric of the command line as the multi-system and statistical modes
// use it: the statistics seam, and its printed name, signature and verbose
// part for summed statistics.
struct MetricRun {
  std::string key;  // "bleu", "chrf", "ter"
  std::unique_ptr<metrics::StatsMetric> seam;
  metrics::BleuOptions bleu;
  metrics::ChrfOptions chrf;
  metrics::TerOptions ter;
  int nrefs = 1;  // reference streams (TER's average reference length)
};

struct Printed {
  std::string name;  // "BLEU", "chrF2", "TER"
  double score = 0.0;
  std::string signature;
  std::string verbose;  // BLEU's precisions and lengths; empty for chrF and TER
};

MetricRun make_metric(const std::string& key, const ScoreCli& cli, int nrefs) {
  MetricRun m;
  m.key = key;
  m.nrefs = nrefs;
  if (key == "bleu") {
    m.bleu = bleu_options(cli);
    m.seam = metrics::bleu_stats_metric(m.bleu);
  } else if (key == "ter") {
    m.ter = ter_options(cli);
    m.seam = metrics::ter_stats_metric(m.ter, nrefs);
  } else {
    m.chrf = chrf_options(cli);
    m.seam = metrics::chrf_stats_metric(m.chrf);
  }
  return m;
}

// The metric's statistics for one system and the printed result of them.
struct SystemStats {
  metrics::SegmentStats stats;
  Printed printed;
};

SystemStats system_stats(const MetricRun& m, const std::vector<std::string>& hyps,
                         const std::vector<std::vector<std::string>>& refs) {
  SystemStats out;
  out.stats = m.seam->segment_stats(hyps, refs);
  const int nrefs = out.stats.nrefs;
  const std::vector<int64_t> sums = out.stats.sums();
  if (m.key == "bleu") {
    std::array<int64_t, metrics::kBleuMaxOrder> correct{}, total{};
    for (int n = 0; n < metrics::kBleuMaxOrder; ++n) {
      correct[n] = sums[2 + n];
      total[n] = sums[2 + metrics::kBleuMaxOrder + n];
    }
    metrics::BleuScore s = metrics::bleu_from_stats(correct, total, sums[0], sums[1], m.bleu);
    s.nrefs = nrefs;
    out.printed = {"BLEU", s.score, s.signature(), s.verbose()};
  } else if (m.key == "ter") {
    const metrics::TerScore s = metrics::ter_score_from_stats(sums.data(), m.nrefs, m.ter);
    out.printed = {"TER", s.score, s.signature(), ""};
  } else {
    metrics::ChrfScore s;
    s.options = m.chrf;
    s.nrefs = nrefs;
    s.score = metrics::chrf_from_stats(sums.data(), m.chrf);
    out.printed = {s.name(), s.score, s.signature(), ""};
  }
  return out;
}

// The printed result of one system's corpus score, as corpus_score gives
// it in sacreBLEU's table of several systems.
Printed corpus_printed(const ScoreCli& cli, const std::string& key,
                       const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs) {
  if (key == "bleu") {
    const metrics::BleuScore s = metrics::corpus_bleu(hyps, refs, bleu_options(cli));
    return {"BLEU", s.score, s.signature(), s.verbose()};
  }
  if (key == "ter") {
    const metrics::TerScore s = metrics::corpus_ter(hyps, refs, ter_options(cli));
    return {"TER", s.score, s.signature(), ""};
  }
  const metrics::ChrfScore s = metrics::corpus_chrf(hyps, refs, chrf_options(cli));
  return {s.name(), s.score, s.signature(), ""};
}

// sacreBLEU's Signature puts bs, ar and seed right after nrefs.
std::string with_test_fields(const std::string& sig, const std::string& fields) {
  const std::size_t bar = sig.find('|');
  if (bar == std::string::npos) return sig + "|" + fields;
  return sig.substr(0, bar + 1) + fields + sig.substr(bar);
}

// Score.format(width, score_only, signature, is_json) with a bootstrap
// interval where one was estimated (shown only for a mean above 0).
std::string format_score(const Printed& p, const std::string& sig, const ScoreCli& cli,
                         const std::optional<metrics::MeanCi>& ci) {
  std::string sc = metrics::format_fixed(p.score, cli.width);
  std::string conf;
  if (ci && ci->mean > 0) {
    conf = "μ = " + metrics::format_fixed(ci->mean, cli.width) + " ± " +
           metrics::format_fixed(ci->ci, cli.width);
    sc += " (" + conf + ")";
  }
  if (cli.score_only) return sc;
  if (cli.format == "json") {
    nlohmann::ordered_json d;
    d["name"] = p.name;
    d["score"] = std::stod(metrics::format_fixed(p.score, cli.width));
    d["signature"] = sig;
    if (!conf.empty()) {
      d["confidence_mean"] = std::stod(metrics::format_fixed(ci->mean, cli.width));
      d["confidence_var"] = std::stod(metrics::format_fixed(ci->ci, cli.width));
      d["confidence"] = conf;
    }
    if (!p.verbose.empty()) d["verbose_score"] = p.verbose;
    std::size_t b = 0;
    while (b <= sig.size()) {
      std::size_t e = sig.find('|', b);
      if (e == std::string::npos) e = sig.size();
      const std::string field = sig.substr(b, e - b);
      const std::size_t colon = field.find(':');
      d[field.substr(0, colon)] = field.substr(colon + 1);
      b = e + 1;
    }
    return d.dump(1);
  }
  std::string line = cli.signature ? p.name + "|" + sig : p.name;
  line += " = " + sc;
  if (!p.verbose.empty()) line += " " + p.verbose;
  return line;
}

// print_single_results: a JSON list for several metrics (bare -b scores
// too, as sacreBLEU joins them); text lines aligned on their '=' (lines
// without one, from -b, printed as they are).
void print_single_results(const std::vector<std::string>& results, const ScoreCli& cli) {
  if (cli.format == "json" && results.size() > 1) {
    std::cout << "[\n";
    for (std::size_t i = 0; i < results.size(); ++i)
      std::cout << results[i] << (i + 1 < results.size() ? ",\n" : "\n");
    std::cout << "]\n";
    return;
  }
  if (results.size() == 1 || cli.format == "json") {
    for (const std::string& r : results) std::cout << r << "\n";
    return;
  }
  std::vector<std::size_t> lens;
  for (const std::string& line : results) {
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0)
      std::cout << line << "\n";
    else
      lens.push_back(eq - 1);
  }
  if (lens.empty()) return;
  const std::size_t w = *std::max_element(lens.begin(), lens.end());
  for (std::size_t i = 0; i < lens.size(); ++i)
    std::cout << std::string(w - lens[i], ' ') << results[i] << "\n";
}

std::vector<std::string> sorted_metrics(const ScoreCli& cli) {
  std::vector<std::string> names = cli.metrics;
  std::sort(names.begin(), names.end());
  return names;
}

std::string corpus_result(const ScoreCli& cli, const std::string& metric, const Inputs& in) {
  const std::vector<std::string>& hyps = in.systems[0];
  if (metric == "bleu")
    return render(metrics::corpus_bleu(hyps, in.refs, bleu_options(cli)), cli, false);
  if (metric == "ter")
    return render(metrics::corpus_ter(hyps, in.refs, ter_options(cli)), cli, false);
  return render(metrics::corpus_chrf(hyps, in.refs, chrf_options(cli)), cli, false);
}

void run_single_system(const ScoreCli& cli, const Inputs& in) {
  std::vector<std::string> results;
  const bool ci = cli.confidence && cli.confidence_n > 1;
  const metrics::numpy_random::Seed seed =
      ci ? metrics::numpy_random::seed_from_environment() : metrics::numpy_random::Seed{};
  for (const std::string& m : sorted_metrics(cli)) {
    const std::string computing =
        "computing " + metric_name(m) + " of " + display_name(in.hyp_paths[0]);
    if (!ci) {  // the plain path, as before several systems were taken
      results.push_back(doing(computing, [&] { return corpus_result(cli, m, in); }));
      continue;
    }
    const MetricRun run = make_metric(m, cli, static_cast<int>(in.refs.size()));
    const SystemStats s =
        doing(computing, [&] { return system_stats(run, in.systems[0], in.refs); });
    const metrics::MeanCi interval = doing(
        "resampling for --confidence-n " + std::to_string(cli.confidence_n),
        [&] { return metrics::confidence_interval(*run.seam, s.stats, cli.confidence_n, seed); });
    const std::string sig = with_test_fields(
        s.printed.signature, "bs:" + std::to_string(cli.confidence_n) + "|seed:" + seed.text);
    results.push_back(format_score(s.printed, sig, cli, interval));
  }
  print_single_results(results, cli);
}

// print_results_table: the JSON list, or tabulate's grid, the paired test's
// explanation and the signatures.
std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void print_table(const ScoreCli& cli, const std::vector<std::string>& names,
                 const std::vector<std::string>& titles,
                 const std::vector<std::vector<std::string>>& cells,  // [m][s], text
                 const std::vector<std::string>& metric_names,
                 const std::vector<std::string>& signatures) {
  std::vector<std::string> headers{"System"};
  headers.insert(headers.end(), titles.begin(), titles.end());
  std::vector<std::vector<std::string>> columns{names};
  columns.insert(columns.end(), cells.begin(), cells.end());
  std::cout << metrics::fancy_grid(headers, columns, cli.width) << "\n\n";
  if (paired_mode(cli)) {
    const std::string msg = cli.paired_bs
                                ? "Paired bootstrap resampling test with " +
                                      std::to_string(cli.paired_bs_n) + " resampling trials"
                                : "Paired approximate randomization test with " +
                                      std::to_string(cli.paired_ar_n) + " trials";
    const std::string dashes(msg.size(), '-');
    std::cout << dashes << "\n" << msg << "\n" << dashes << "\n";
    std::cout << " - Each system is pairwise compared to " << names[0] << ".\n";
    if (cli.paired_bs)
      std::cout << "   Actual system score / bootstrap estimated true mean / 95% CI are provided "
                   "for each metric.\n";
    else
      std::cout << "   Actual system score is provided for each metric.\n";
    std::cout
        << "\n"
        << " - Null hypothesis: the system and the baseline translations are essentially\n"
        << "   generated by the same underlying process. For a given system and the baseline,\n"
        << "   the p-value is roughly the probability of the absolute score difference (delta)\n"
        << "   or higher occurring due to chance, under the assumption that the null hypothesis "
           "is correct.\n"
        << "\n"
        << " - Assuming a significance threshold of 0.05, the null hypothesis can be rejected\n"
        << "   for p-values < 0.05 (marked with \"*\"). This means that the delta is unlikely to "
           "be attributed\n"
        << "   to chance, hence the system is significantly \"different\" than the baseline.\n"
        << "   Otherwise, the p-values are highlighted in red.\n"
        << "\n"
        << " - NOTE: Significance does not tell whether a system is \"better\" than the baseline "
           "but rather\n"
        << "   emphasizes the \"difference\" of the systems in terms of the replicability of the "
           "delta.\n"
        << "\n";
  }
  std::cout << "-----------------\nMetric signatures\n-----------------\n";
  for (std::size_t m = 0; m < metric_names.size(); ++m) {
    std::string name = metric_names[m];
    const std::size_t cp = code_points(name);
    if (cp < 10) name += std::string(10 - cp, ' ');
    std::cout << " - " << name << " " << signatures[m] << "\n";
  }
}

void run_several_systems(const ScoreCli& cli, const Inputs& in) {
  const std::size_t n_sys = in.systems.size();
  // Paired tests keep the command line's metric order, the table sorts.
  const std::vector<std::string> keys = paired_mode(cli) ? cli.metrics : sorted_metrics(cli);
  // Per-segment statistics only where the paired tests resample them: the
  // table alone needs each corpus score, and rows as wide as chrF's orders
  // (up to 600 numbers a line) for every system would cost lines x orders.
  std::vector<MetricRun> runs;
  std::vector<std::vector<Printed>> printed(keys.size());            // [m][s]
  std::vector<std::vector<metrics::SegmentStats>> seg(keys.size());  // [m][s], paired tests
  for (std::size_t m = 0; m < keys.size(); ++m) {
    runs.push_back(make_metric(keys[m], cli, static_cast<int>(in.refs.size())));
    for (std::size_t s = 0; s < n_sys; ++s)
      doing("computing " + metric_name(keys[m]) + " of " + display_name(in.hyp_paths[s]), [&] {
        if (!paired_mode(cli)) {
          printed[m].push_back(corpus_printed(cli, keys[m], in.systems[s], in.refs));
          return;
        }
        SystemStats st = system_stats(runs[m], in.systems[s], in.refs);
        printed[m].push_back(std::move(st.printed));
        seg[m].push_back(std::move(st.stats));
      });
  }
  std::vector<std::string> metric_names, signatures;
  std::vector<std::vector<std::string>> cells(keys.size());
  for (std::size_t m = 0; m < keys.size(); ++m) {
    metric_names.push_back(printed[m][0].name);
    signatures.push_back(printed[m][0].signature);
  }

  if (!paired_mode(cli)) {
    for (std::size_t m = 0; m < keys.size(); ++m)
      for (std::size_t s = 0; s < n_sys; ++s)
        cells[m].push_back(metrics::format_fixed(printed[m][s].score, cli.width));
    if (cli.format == "json") {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (std::size_t s = 0; s < n_sys; ++s) {
        nlohmann::ordered_json v;
        v["system"] = in.names[s];
        for (std::size_t m = 0; m < keys.size(); ++m) v[metric_names[m]] = cells[m][s];
        list.push_back(v);
      }
      std::cout << metrics::python_json_dumps(list, 4) << "\n";
      return;
    }
    print_table(cli, in.names, metric_names, cells, metric_names, signatures);
    return;
  }

  metrics::PairedTestOptions opt = paired_options(cli);
  opt.seed = metrics::numpy_random::seed_from_environment();
  const int n = metrics::paired_test_samples(opt.kind, opt.n_samples);
  std::vector<const metrics::StatsMetric*> seams;
  for (std::size_t m = 0; m < keys.size(); ++m) {
    seams.push_back(runs[m].seam.get());
    signatures[m] =
        with_test_fields(signatures[m], (cli.paired_bs ? "bs:" : "ar:") + std::to_string(n) +
                                            "|seed:" + opt.seed.text);
  }
  const std::vector<std::vector<metrics::TestResult>> results =
      doing("resampling for " + resampling_option(cli) + " " + std::to_string(n),
            [&] { return metrics::paired_test(seams, seg, opt); });

  if (cli.format == "json") {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (std::size_t s = 0; s < n_sys; ++s) {
      nlohmann::ordered_json v;
      v["system"] = in.names[s];
      for (std::size_t m = 0; m < keys.size(); ++m) {
        const metrics::TestResult& r = results[m][s];
        nlohmann::ordered_json d;
        d["score"] = r.score;
        d["p_value"] = r.p_value ? nlohmann::ordered_json(*r.p_value) : nullptr;
        d["mean"] = r.mean ? nlohmann::ordered_json(*r.mean) : nullptr;
        d["ci"] = r.ci ? nlohmann::ordered_json(*r.ci) : nullptr;
        v[metric_names[m]] = d;
      }
      list.push_back(v);
    }
    std::cout << metrics::python_json_dumps(list, 4) << "\n";
    return;
  }
  // _format_score_lines: "score (mean ± ci)" and the p-value on a line of
  // its own; a column with any interval is titled so, and the titles after it.
  bool is_bootstrap = false;
  for (std::size_t m = 0; m < keys.size(); ++m) {
    for (const metrics::TestResult& r : results[m]) {
      std::string c = metrics::format_fixed(r.score, cli.width);
      if (r.mean) {
        is_bootstrap = true;
        c += " (" + metrics::format_fixed(*r.mean, cli.width) + " ± " +
             metrics::format_fixed(*r.ci, cli.width) + ")";
      }
      if (r.p_value)
        c +=
            "\n(p = " + metrics::format_fixed(*r.p_value, 4) + ")" + (*r.p_value > 0.05 ? "" : "*");
      cells[m].push_back(c);
    }
    if (is_bootstrap) metric_names[m] += " (μ ± 95% CI)";
  }
  std::vector<std::string> sig_names;
  for (std::size_t m = 0; m < keys.size(); ++m) sig_names.push_back(printed[m][0].name);
  print_table(cli, in.names, metric_names, cells, sig_names, signatures);
}

void run_metric_score(const ScoreCli& cli) {
  check_metric_options(cli);
  check_resampling_memory(cli);
  const Inputs in = read_inputs(cli);
  if (cli.sentence_level)
    print_sentence_scores(cli, in);
  else if (in.systems.size() == 1)
    run_single_system(cli, in);
  else
    run_several_systems(cli, in);
  io::check_stdout(/*flush=*/true);
}

std::string option_names(const std::vector<CLI::Option*>& opts) {
  std::string names;
  for (const CLI::Option* o : opts)
    if (o->count() > 0) names += (names.empty() ? "" : ", ") + o->get_name();
  return names;
}

void run(ScoreCli& cli) {
  if (!cli.metric.empty()) cli.metrics = {cli.metric};
  if (cli.model_opt->count() > 0) {
    for (const std::string& m : cli.model.models)
      if ((m == "bleu" || m == "chrf" || m == "ter") && !io::file_id(m).exists)
        throw UsageError("score: -m names a model in nmt; for sacreBLEU's -m " + m +
                         " write --metrics " + m);
    if (const std::string extra = option_names(cli.metric_only); !extra.empty())
      throw UsageError("score: -m (model scoring) cannot be combined with " + extra);
    if (cli.model.batch_tokens <= 0)
      throw UsageError("score: --batch-tokens must be positive, got " +
                       std::to_string(cli.model.batch_tokens));
    const int rc = doing("scoring with -m " + cli.model.models[0] + " (--batch-tokens " +
                             std::to_string(cli.model.batch_tokens) + ")",
                         [&] { return run_model_score(cli.model); });
    if (rc != 0) exit_code() = rc;
    return;
  }
  if (const std::string extra = option_names(cli.model_only); !extra.empty())
    throw UsageError("score: " + extra + " apply only to model scoring (-m MODEL)");
  run_metric_score(cli);
}

void add_metric_options(CLI::App* cmd, ScoreCli& cli) {
  auto add = [&](CLI::Option* o) { cli.metric_only.push_back(o); };
  add(cmd->add_option("refs", cli.refs, "Reference files (.gz ok), as sacrebleu takes them"));
  // One value per -r so that a trailing file is not taken for a reference.
  add(cmd->add_option("-r,--ref", cli.ref_opts, "Reference file; repeat -r for several")
          ->allow_extra_args(false));
  add(cmd->add_option("-i,--input", cli.inputs,
                      "Hypothesis files, one per system (the first is the baseline of a paired "
                      "test); default stdin"));
  cli.metrics_opt =
      cmd->add_option("--metrics", cli.metrics,
                      "Metrics: any of bleu, chrf, ter (sacrebleu's -m; -m is the model in nmt)")
          ->check(CLI::IsMember({"bleu", "chrf", "ter"}))
          ->expected(1, 3);
  add(cli.metrics_opt);
  add(cmd->add_option("--metric", cli.metric, "One metric: bleu, chrf or ter")
          ->check(CLI::IsMember({"bleu", "chrf", "ter"}))
          ->excludes(cli.metrics_opt));
  add(cmd->add_option("--tokenize", cli.tokenize,
                      std::string("BLEU tokeniser (-tok): 13a, intl, none, char, zh, ja-mecab, "
                                  "flores101, flores200, spm (= flores101), spBLEU-1K; ko-mecab is "
                                  "refused (mecab-ko is not in Debian). ja-mecab is MeCab -Owakati "
                                  "with Debian's IPA dictionary (") +
                          metrics::kMecabIpadicDir +
                          ", 392,127 entries): sacreBLEU's numbers as it tokenises with that "
                          "dictionary, though sacreBLEU's own size check accepts only pip's "
                          "392,126. The SentencePiece ones need --spm-model")
          ->check(CLI::IsMember(std::vector<std::string>(std::begin(metrics::kTokenizerNames),
                                                         std::end(metrics::kTokenizerNames)))));
  add(cmd->add_option("--spm-model", cli.spm_model,
                      "SentencePiece model for -tok flores101, flores200, spm, spBLEU-1K "
                      "(sacreBLEU downloads it: FLORES-101 sacrebleu_tokenizer_spm.model, "
                      "FLORES-200 flores200sacrebleuspm, spBLEU-1K "
                      "spbleu-1k_tokenizer_spm.model; nmt takes the file)"));
  cli.lowercase_opt = cmd->add_flag("--lowercase", cli.lowercase, "Case-insensitive BLEU (-lc)");
  add(cli.lowercase_opt);
  add(cmd->add_option("-s,--smooth-method", cli.smooth_method,
                      "BLEU smoothing: exp, floor, add-k or none")
          ->check(CLI::IsMember({"exp", "floor", "add-k", "none"})));
  cli.smooth_value_opt =
      cmd->add_option("--smooth-value", cli.smooth_value,
                      "Value for floor (0.1 if not given) or add-k (1) smoothing (-sv)")
          ->check(finite_range(0, 1e6));
  add(cli.smooth_value_opt);
  add(cmd->add_flag("--sentence-level", cli.sentence_level,
                    "One score per line (BLEU with effective order, as sentence_bleu) (-sl)"));
  add(cmd->add_option("--chrf-char-order", cli.chrf_char_order, "chrF character n-gram order (-cc)")
          ->check(CLI::Range(1, 100)));
  add(cmd->add_option("--chrf-word-order", cli.chrf_word_order,
                      "chrF word n-gram order, 2 = chrF++ (-cw)")
          ->check(CLI::Range(0, 100)));
  add(cmd->add_option("--chrf-beta", cli.chrf_beta, "chrF beta")->check(CLI::Range(1, 100)));
  add(cmd->add_flag("--chrf-whitespace", cli.chrf_whitespace,
                    "Keep whitespace in chrF character n-grams"));
  add(cmd->add_flag("--chrf-lowercase", cli.chrf_lowercase, "Case-insensitive chrF"));
  add(cmd->add_flag("--ter-case-sensitive", cli.ter.case_sensitive,
                    "Case-sensitive TER (TER lowercases by default)"));
  add(cmd->add_flag("--ter-asian-support", cli.ter.asian_support,
                    "TER: split CJK characters (with --ter-normalized) and remove CJK "
                    "punctuation (with --ter-no-punct)"));
  add(cmd->add_flag("--ter-no-punct", cli.ter.no_punct, "TER: remove punctuation"));
  add(cmd->add_flag("--ter-normalized", cli.ter.normalized,
                    "TER: tercom's normalisation and punctuation tokenisation"));
  add(cmd->add_option("-f,--format", cli.format,
                      "text: sacrebleu's one-line result; json: its JSON (sacrebleu's default)")
          ->check(CLI::IsMember({"text", "json"})));
  add(cmd->add_option("-w,--width", cli.width, "Decimals of the score (sacrebleu's default is 1)")
          ->check(CLI::Range(0, 10)));
  add(cmd->add_flag("--signature,!--no-signature", cli.signature,
                    "Put the sacreBLEU signature in the text line"));
  add(cmd->add_flag("-b,--score-only", cli.score_only, "Print only the score"));
  add(cmd->add_flag("-q,--quiet,--no-color",
                    "Accepted for sacrebleu compatibility; nmt prints no colours"));
  CLI::Option* bs = cmd->add_flag("--paired-bs", cli.paired_bs,
                                  "Paired bootstrap resampling test of each -i system against the "
                                  "first (-pbs); SACREBLEU_SEED seeds it (default 12345, none)");
  CLI::Option* ar = cmd->add_flag("--paired-ar", cli.paired_ar,
                                  "Paired approximate randomization test against the first -i "
                                  "system (-par)")
                        ->excludes(bs);
  add(bs);
  add(ar);
  add(cmd->add_option("--paired-bs-n", cli.paired_bs_n,
                      "Bootstrap resamples of --paired-bs; 0 or less: 1000 (-pbsn)"));
  add(cmd->add_option("--paired-ar-n", cli.paired_ar_n,
                      "Trials of --paired-ar; 0 or less: 10000 (-parn)"));
  add(cmd->add_option("--paired-jobs", cli.paired_jobs,
                      "Accepted for sacrebleu compatibility; nmt compares in one thread, with "
                      "the same results"));
  add(cmd->add_flag("--confidence", cli.confidence,
                    "Bootstrap 95% confidence interval of one system (-ci)"));
  add(cmd->add_option("--confidence-n", cli.confidence_n,
                      "Bootstrap resamples of --confidence; 1 or less: no interval (-cin)"));
}

void add_model_options(CLI::App* cmd, ScoreCli& cli) {
  auto add = [&](CLI::Option* o) { cli.model_only.push_back(o); };
  cli.model_opt = cmd->add_option("-m,--model", cli.model.models,
                                  "Model to score --src/--tgt with; several (-m a -m b) score "
                                  "as an ensemble: per token, the log of the mean of their "
                                  "probabilities")
                      ->allow_extra_args(false);  // one file per -m
  add(cmd->add_option("--src", cli.model.src, "Source sentences (model mode)"));
  add(cmd->add_option("--tgt", cli.model.tgt, "Target sentences to score (model mode)"));
  add(cmd->add_flag("--word-scores", cli.model.word_scores,
                    "Also print per-token log-probabilities"));
  add(cmd->add_flag("--summary", cli.model.summary, "Print corpus totals only"));
  add(cmd->add_option("--output-format", cli.model.format,
                      "Model scores as text (TSV with a header) or jsonl")
          ->check(CLI::IsMember({"text", "jsonl"})));
  add(cmd->add_flag("--no-header", cli.model.no_header, "Leave out the TSV header line"));
  add(cmd->add_option("--alpha", cli.model.alpha,
                      "Length-penalty exponent of the normalised score, as translate --scores")
          ->check(finite_range(0, 10)));
  add(add_compute_type_option(cmd, cli.model.compute,
                              "Model mode: f32, bf16 or int8 (default: the model's)"));
  add(cmd->add_option("--batch-tokens", cli.model.batch_tokens, "Target tokens per batch")
          ->check(CLI::Range(1, 1 << 24)));
  add(add_threads_option(cmd, cli.model.threads));
  add(add_device_option(cmd, cli.model.device));
  add(cmd->add_flag("--progress", cli.model.progress,
                    "Print a progress line every 10 s on stderr (on a terminal a live line is "
                    "shown anyway)"));
}

}  // namespace

void register_score(CLI::App& app) {
  auto cli = std::make_shared<ScoreCli>();
  CLI::App* cmd = app.add_subcommand(
      "score",
      "Score translations: BLEU/chrF/TER against references with sacrebleu's command line\n"
      "(sacreBLEU 2.6.0 numbers), or model log-probabilities of a parallel corpus with -m");
  cmd->footer(
      "-m is the model, as everywhere in nmt; sacrebleu's -m (metrics) is --metrics.\n"
      "Examples:\n"
      "  nmt score ref.de -i hyp.de\n"
      "  nmt score ref.de ref2.de --metrics bleu chrf -tok intl -lc -f json < hyp.de\n"
      "  nmt score ref.zh -i hyp.zh --metrics ter --ter-normalized --ter-asian-support\n"
      "  nmt score ref.de -i base.de new.de --paired-bs --metrics bleu chrf   # base.de: the "
      "baseline\n"
      "  nmt score ref.de -i hyp.de -ci                  # SACREBLEU_SEED seeds the resamples\n"
      "  nmt score -m model.nmt --src test.en --tgt test.de --summary");
  add_metric_options(cmd, *cli);
  add_model_options(cmd, *cli);
  cmd->callback([cli] { run(*cli); });
}

}  // namespace nmt::app
