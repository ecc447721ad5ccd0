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
#include "io/output_file.h"
#include "io/std_streams.h"
#include "io/text_file.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/report.h"
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

// Reads a file as the sacrebleu CLI does (each line right-stripped), with
// ill-formed UTF-8 replaced rather than fatal, and said so on stderr by line,
// as every nmt command reads text.
std::vector<std::string> read_text(const std::string& path, const std::string& option) {
  io::check_input_path(path, option);
  io::TextChecks checks;
  checks.warn = io::warn_on_stderr;
  std::vector<std::string> lines =
      metrics::while_scoring("reading " + display_name(path), [&] { return io::read_lines(path, checks); });
  for (std::string& line : lines) line.resize(metrics::rstrip_whitespace(line).size());
  return lines;
}

// What the metrics compute on: the reference streams and one hypothesis
// stream per system, named as sacreBLEU names them (the path as given; the
// first prefixed "Baseline: " in a paired test).
struct Inputs {
  std::vector<std::string> ref_paths;
  std::vector<std::string> hyp_paths;
  metrics::ReportInputs report;  // what they hold, and the systems' names
};

bool paired_mode(const ScoreCli& cli) { return cli.paired_bs || cli.paired_ar; }

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
  for (const std::string& r : in.ref_paths) in.report.refs.push_back(read_text(r, "reference"));
  for (const std::string& h : in.hyp_paths) {
    in.report.systems.push_back(read_text(h, "-i"));
    in.report.names.push_back(h);
    in.report.labels.push_back(display_name(h));
    // sacreBLEU refuses an empty system too ("contains no sentence").
    if (in.report.systems.back().empty())
      throw InputError("score: " + display_name(h) + " has no lines: nothing to score");
    // Checked here as well as in the library so the message names the files.
    for (std::size_t r = 0; r < in.report.refs.size(); ++r)
      if (in.report.refs[r].size() != in.report.systems.back().size())
        throw InputError("score: " + display_name(h) + " has " +
                         std::to_string(in.report.systems.back().size()) + " lines but reference " +
                         display_name(in.ref_paths[r]) + " has " +
                         std::to_string(in.report.refs[r].size()));
  }
  if (paired_mode(cli)) in.report.names[0] = "Baseline: " + in.report.names[0];
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

metrics::ReportOptions report_options(const ScoreCli& cli) {
  metrics::ReportOptions o;
  o.metrics = cli.metrics;
  o.bleu = bleu_options(cli);
  o.chrf = chrf_options(cli);
  o.ter = cli.ter;
  o.format = cli.format == "json" ? metrics::ReportFormat::json : metrics::ReportFormat::text;
  o.width = cli.width;
  o.signature = cli.signature;
  o.score_only = cli.score_only;
  o.sentence_level = cli.sentence_level;
  o.paired = cli.paired_bs   ? metrics::ReportTest::bootstrap
             : cli.paired_ar ? metrics::ReportTest::randomization
                             : metrics::ReportTest::none;
  o.paired_bs_n = cli.paired_bs_n;
  o.paired_ar_n = cli.paired_ar_n;
  o.confidence = cli.confidence;
  o.confidence_n = cli.confidence_n;
  return o;
}

void run_metric_score(const ScoreCli& cli) {
  check_metric_options(cli);
  const metrics::ReportOptions options = report_options(cli);
  metrics::check_resampling_memory(options);
  const Inputs in = read_inputs(cli);
  metrics::write_report(options, in.report, std::cout, [] { io::check_stdout(); });
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
    metrics::while_scoring("scoring with -m " + cli.model.models[0] + " (--batch-tokens " +
                               std::to_string(cli.model.batch_tokens) + ")",
                           [&] { run_model_score(cli.model); });
    return;
  }
  if (const std::string extra = option_names(cli.model_only); !extra.empty())
    throw UsageError("score: " + extra + " apply only to model scoring (-m MODEL)");
  run_metric_score(cli);
}

void add_test_options(CLI::App* cmd, ScoreCli& cli);

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
  add_test_options(cmd, cli);
}

// sacreBLEU's paired tests and confidence interval.
void add_test_options(CLI::App* cmd, ScoreCli& cli) {
  auto add = [&](CLI::Option* o) { cli.metric_only.push_back(o); };
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
