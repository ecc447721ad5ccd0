// `nmt score`. Metric mode takes the sacrebleu command line: references as
// arguments (or -r), the hypothesis from -i or stdin, --metrics bleu chrf,
// -tok, -lc, -f json|text, -w, -b, and prints sacreBLEU's one-line result or
// its JSON. Lines are right-stripped and checked for UTF-8 as sacrebleu
// does. The one clash: -m is the model everywhere in nmt (model mode below),
// so sacreBLEU's `-m bleu chrf` is spelt --metrics here, and `-m bleu` says
// so. Model mode only gathers options and calls run_model_score().
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "io/output_file.h"
#include "io/std_streams.h"
#include "io/text_file.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/ngrams.h"
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
  std::string format = "text";
  int width = 2;
  bool signature = true;
  bool score_only = false;

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
  std::vector<std::string> lines = io::read_lines(path, checks);
  for (std::string& line : lines) line.resize(metrics::rstrip_whitespace(line).size());
  return lines;
}

// What the metrics compute on: the reference streams and the hypotheses.
struct Inputs {
  std::vector<std::string> ref_paths;
  std::string hyp_path;
  std::vector<std::vector<std::string>> refs;
  std::vector<std::string> hyps;
};

Inputs read_inputs(const ScoreCli& cli) {
  Inputs in;
  if (!cli.refs.empty() && !cli.ref_opts.empty())
    throw UsageError(
        "score: give the references either with -r or as arguments, not both (the hypothesis "
        "comes from -i HYP or stdin)");
  in.ref_paths = cli.refs.empty() ? cli.ref_opts : cli.refs;
  if (in.ref_paths.empty())
    throw UsageError("score: no reference: give reference files as arguments (or a model with -m)");
  if (cli.inputs.size() > 1)
    throw UsageError("score: -i takes one hypothesis file; score several systems one at a time");
  in.hyp_path = cli.inputs.empty() ? "-" : cli.inputs[0];
  if (in.hyp_path == "-" && ::isatty(STDIN_FILENO))
    throw UsageError("score: no hypothesis: give -i HYP or pipe it on stdin");
  for (const std::string& r : in.ref_paths) io::check_input_path(r, "reference");
  io::check_input_path(in.hyp_path, "-i");
  for (const std::string& r : in.ref_paths) {
    if (r == "-") throw UsageError("score: a reference cannot be stdin (stdin is the hypothesis)");
    if (in.hyp_path != "-" && io::file_id(r) == io::file_id(in.hyp_path))
      std::cerr << "nmt: warning: the hypothesis " << in.hyp_path
                << " is also given as a reference\n";
  }
  for (const std::string& r : in.ref_paths) in.refs.push_back(read_text(r, "reference"));
  in.hyps = read_text(in.hyp_path, "-i");
  // Checked here as well as in the library so the message names the files.
  for (std::size_t r = 0; r < in.refs.size(); ++r)
    if (in.refs[r].size() != in.hyps.size())
      throw InputError("score: " + display_name(in.hyp_path) + " has " +
                       std::to_string(in.hyps.size()) + " lines but reference " +
                       display_name(in.ref_paths[r]) + " has " + std::to_string(in.refs[r].size()));
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

// One result as sacrebleu prints it: the score alone (-b), the JSON object,
// the one-line text with the signature inside, or without it.
template <typename Score>
std::string render(const Score& s, const ScoreCli& cli, bool one_line_json) {
  if (cli.score_only) return metrics::format_fixed(s.score, cli.width);
  if (cli.format == "json") return s.to_json(cli.width).dump(one_line_json ? -1 : 1);
  return cli.signature ? s.line(cli.width) : s.text(cli.width);
}

void print_sentence_scores(const ScoreCli& cli, const Inputs& in) {
  std::vector<std::string> seg_refs(in.refs.size());
  for (std::size_t i = 0; i < in.hyps.size(); ++i) {
    for (std::size_t r = 0; r < in.refs.size(); ++r) seg_refs[r] = in.refs[r][i];
    if (cli.metrics[0] == "bleu")
      std::cout << render(metrics::sentence_bleu(in.hyps[i], seg_refs, bleu_options(cli)), cli,
                          true)
                << "\n";
    else
      std::cout << render(metrics::sentence_chrf(in.hyps[i], seg_refs, chrf_options(cli)), cli,
                          true)
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
    if (m == "ter")
      throw UsageError("score: TER is not implemented in nmt; use --metrics bleu chrf");
    if (std::find(seen.begin(), seen.end(), m) != seen.end())
      throw UsageError("score: --metrics names " + m + " twice");
    seen.push_back(m);
  }
  if (cli.sentence_level && cli.metrics.size() > 1)
    throw UsageError("score: only one metric can be used with --sentence-level");
  const bool has_bleu = std::find(seen.begin(), seen.end(), "bleu") != seen.end();
  if (cli.lowercase_opt->count() > 0 && !has_bleu)
    throw UsageError(
        "score: -lc/--lowercase applies to BLEU, as in sacreBLEU; for chrF use --chrf-lowercase");
  check_tokenizer(cli, has_bleu);
}

void run_metric_score(const ScoreCli& cli) {
  check_metric_options(cli);
  const Inputs in = read_inputs(cli);
  if (cli.sentence_level) {
    print_sentence_scores(cli, in);
  } else {
    // sacrebleu's order (sorted by name) and its list form for JSON.
    std::vector<std::string> results;
    std::vector<std::string> names = cli.metrics;
    std::sort(names.begin(), names.end());
    for (const std::string& m : names) {
      if (m == "bleu")
        results.push_back(
            render(metrics::corpus_bleu(in.hyps, in.refs, bleu_options(cli)), cli, false));
      else
        results.push_back(
            render(metrics::corpus_chrf(in.hyps, in.refs, chrf_options(cli)), cli, false));
    }
    const bool json_list = cli.format == "json" && !cli.score_only && results.size() > 1;
    if (json_list) std::cout << "[\n";
    for (std::size_t i = 0; i < results.size(); ++i)
      std::cout << results[i] << (json_list && i + 1 < results.size() ? ",\n" : "\n");
    if (json_list) std::cout << "]\n";
  }
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
    const std::string& m = cli.model.model;
    if ((m == "bleu" || m == "chrf" || m == "ter") && !io::file_id(m).exists)
      throw UsageError("score: -m names a model in nmt; for sacreBLEU's -m " + m +
                       " write --metrics " + m);
    if (const std::string extra = option_names(cli.metric_only); !extra.empty())
      throw UsageError("score: -m (model scoring) cannot be combined with " + extra);
    if (cli.model.batch_tokens <= 0)
      throw UsageError("score: --batch-tokens must be positive, got " +
                       std::to_string(cli.model.batch_tokens));
    const int rc = run_model_score(cli.model);
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
  add(cmd->add_option("-i,--input", cli.inputs, "Hypothesis file; default stdin"));
  cli.metrics_opt =
      cmd->add_option("--metrics", cli.metrics,
                      "Metrics: bleu, chrf or both (sacrebleu's -m; -m is the model in nmt)")
          ->check(CLI::IsMember({"bleu", "chrf", "ter"}))
          ->expected(1, 3);
  add(cli.metrics_opt);
  add(cmd->add_option("--metric", cli.metric, "One metric, bleu or chrf")
          ->check(CLI::IsMember({"bleu", "chrf", "ter"}))
          ->excludes(cli.metrics_opt));
  add(cmd->add_option("--tokenize", cli.tokenize,
                      "BLEU tokeniser (-tok): 13a, intl, none, char, zh, ja-mecab, flores101, "
                      "flores200, spm (= flores101), spBLEU-1K; ko-mecab is refused (mecab-ko is "
                      "not in Debian). ja-mecab (" +
                          metrics::tokenizer_signature(metrics::TokenizerKind::kJaMecab) +
                          ") is MeCab -Owakati with Debian's IPA dictionary (" +
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
  add(cmd->add_option("-f,--format", cli.format,
                      "text: sacrebleu's one-line result; json: its JSON (sacrebleu's default)")
          ->check(CLI::IsMember({"text", "json"})));
  add(cmd->add_option("-w,--width", cli.width, "Decimals of the score (sacrebleu's default is 1)")
          ->check(CLI::Range(0, 10)));
  add(cmd->add_flag("--signature,!--no-signature", cli.signature,
                    "Put the sacreBLEU signature in the text line"));
  add(cmd->add_flag("-b,--score-only", cli.score_only, "Print only the score"));
  add(cmd->add_flag("-q,--quiet,--no-color", "Accepted for sacrebleu compatibility; no effect"));
}

void add_model_options(CLI::App* cmd, ScoreCli& cli) {
  auto add = [&](CLI::Option* o) { cli.model_only.push_back(o); };
  cli.model_opt = cmd->add_option("-m,--model", cli.model.model, "Model to score --src/--tgt with");
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
}

}  // namespace

void register_score(CLI::App& app) {
  auto cli = std::make_shared<ScoreCli>();
  CLI::App* cmd = app.add_subcommand(
      "score",
      "Score translations: BLEU/chrF against references with sacrebleu's command line\n"
      "(sacreBLEU 2.6.0 numbers), or model log-probabilities of a parallel corpus with -m");
  cmd->footer(
      "-m is the model, as everywhere in nmt; sacrebleu's -m (metrics) is --metrics.\n"
      "Examples:\n"
      "  nmt score ref.de -i hyp.de\n"
      "  nmt score ref.de ref2.de --metrics bleu chrf -tok intl -lc -f json < hyp.de\n"
      "  nmt score -m model.nmt --src test.en --tgt test.de --summary");
  add_metric_options(cmd, *cli);
  add_model_options(cmd, *cli);
  cmd->callback([cli] { run(*cli); });
}

}  // namespace nmt::app
