// `nmt score`. Metric mode takes the sacrebleu command line: references as
// arguments (or -r), the hypothesis from -i or stdin, --metrics bleu chrf ter,
// -tok, -lc, the --chrf-* and --ter-* options, -f json|text, -w, -b, and
// prints sacreBLEU's one-line results (aligned on '=' as it aligns them) or
// its JSON. Lines are right-stripped and checked for UTF-8 as sacrebleu
// does. The one clash: -m is the model everywhere in nmt (model mode below),
// so sacreBLEU's `-m bleu chrf` is spelt --metrics here, and `-m bleu` says
// so. Model mode reads the pairs and prints what the library's
// ScoringService computes.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "io/output_file.h"
#include "io/std_streams.h"
#include "io/text_file.h"
#include "metrics/report.h"
#include "ops/ops.h"
#include "progress.h"
#include "service/report_inputs.h"
#include "service/scoring_service.h"

namespace nmt::app {

namespace {

struct ScoreCli {
  // metric mode
  std::string metric;                 // --metric: one metric
  std::vector<std::string> refs;      // positional, as sacrebleu takes them
  std::vector<std::string> ref_opts;  // -r, nmt's earlier spelling
  std::vector<std::string> inputs;    // -i
  nlohmann::json given = nlohmann::json::object();  // report_options() named, by key
  int paired_jobs = 1;                              // accepted, and without effect

  // model mode: the library's options, the files and the machine
  ScoreOptions model;
  std::string src, tgt;  // tgt empty: source<TAB>target pairs in src (or stdin)
  std::string model_format = "text", device = "cpu";
  bool no_header = false, progress = false;
  int threads = 0;

  CLI::Option* model_opt = nullptr;
  std::vector<CLI::Option*> metric_only;
  std::vector<CLI::Option*> model_only;
};

void note(const std::string& line) { std::cerr << "nmt: " << line << "\n"; }

void run_model_score(const ScoreCli& cli) {
  ops::set_num_threads(cli.threads);
  for (const auto& path : cli.model.models) io::check_input_path(path, "-m");
  if (!cli.src.empty()) io::check_input_path(cli.src, "--src");
  if (!cli.tgt.empty()) io::check_input_path(cli.tgt, "--tgt");
  ScoreOptions o = cli.model;
  o.device = open_device(cli.device);
  o.format = cli.model_format == "jsonl" ? ScoreFormat::jsonl : ScoreFormat::text;
  o.header = !cli.no_header;
  const ScoringService service(std::move(o), io::warn_on_stderr);
  std::vector<std::string> src, tgt;
  const std::string src_path = cli.src.empty() ? "-" : cli.src;
  if (!cli.tgt.empty()) {
    src = io::read_lines(src_path, service.text_checks(false));
    tgt = io::read_lines(cli.tgt, service.text_checks(false));
  } else {  // tab-separated pairs on stdin (or in --src)
    ScoringService::split_pairs(io::read_lines(src_path, service.text_checks(true)), src, tgt);
  }
  // Every line is read before scoring starts: the share done is the pairs'.
  Progress progress("nmt score -m " + cli.model.models[0], cli.progress, /*sized=*/true,
                    /*to_stdout=*/true);
  const ScoringService::Scored scored = service.score(src, tgt, [&](int64_t done, int64_t all) {
    progress.update(done, all ? static_cast<double>(done) / static_cast<double>(all) : 1.0);
  });
  progress.finish();
  service.write(scored, [](const std::string& line) {
    std::fputs(line.c_str(), stdout);
    io::check_stdout();  // a full disk stops the run at the line it struck
  });
  io::check_stdout(/*flush=*/true);
}

void run_metric_score(const ScoreCli& cli) {
  metrics::ReportOptions options;
  nlohmann::json given = cli.given;
  if (!cli.metric.empty()) given["metrics"] = {cli.metric};
  metrics::apply_report_json(given, options);
  metrics::check_report_options(options);
  prepare_report_tokenizer(options, note);
  metrics::check_resampling_memory(options);
  if (!cli.refs.empty() && !cli.ref_opts.empty())
    throw UsageError(
        "score: give the references either with -r or as arguments, not both (the hypothesis "
        "comes from -i HYP or stdin)");
  const std::vector<std::string>& refs = cli.refs.empty() ? cli.ref_opts : cli.refs;
  if (refs.empty())
    throw UsageError("score: no reference: give reference files as arguments (or a model with -m)");
  const std::vector<std::string> hyps =
      cli.inputs.empty() ? std::vector<std::string>{"-"} : cli.inputs;
  if (std::count(hyps.begin(), hyps.end(), "-") > 0 && ::isatty(STDIN_FILENO))
    throw UsageError("score: no hypothesis: give -i HYP or pipe it on stdin");
  const metrics::ReportInputs in = read_report_inputs(options, refs, hyps, note);
  metrics::write_report(options, in, std::cout, [] { io::check_stdout(); });
  io::check_stdout(/*flush=*/true);
}

std::string option_names(const std::vector<CLI::Option*>& opts) {
  std::string names;
  for (const CLI::Option* o : opts)
    if (o->count() > 0) names += (names.empty() ? "" : ", ") + o->get_name();
  return names;
}

void run(ScoreCli& cli) {
  if (cli.model_opt->count() > 0) {
    for (const std::string& m : cli.model.models)
      if ((m == "bleu" || m == "chrf" || m == "ter") && !io::file_id(m).exists)
        throw UsageError("score: -m names a model in nmt; for sacreBLEU's -m " + m +
                         " write --metrics " + m);
    if (const std::string extra = option_names(cli.metric_only); !extra.empty())
      throw UsageError("score: -m (model scoring) cannot be combined with " + extra);
    metrics::while_scoring("scoring with -m " + cli.model.models[0] + " (--batch-tokens " +
                               std::to_string(cli.model.batch_tokens) + ")",
                           [&] { run_model_score(cli); });
    return;
  }
  if (const std::string extra = option_names(cli.model_only); !extra.empty())
    throw UsageError("score: " + extra + " apply only to model scoring (-m MODEL)");
  run_metric_score(cli);
}

// CLI11's names where an option has more than its flag: sacrebleu's
// one-letter ones, and --no-signature.
std::string names_of(const std::string& key) {
  static const std::map<std::string, std::string> names = {
      {"smooth_method", "-s,--smooth-method"},
      {"format", "-f,--format"},
      {"width", "-w,--width"},
      {"signature", "--signature,!--no-signature"},
      {"score_only", "-b,--score-only"}};
  const auto it = names.find(key);
  return it == names.end() ? "" : it->second;
}

// The files, then report_options(), each gathered under its key, with the
// options sacrebleu has that change nothing here.
void add_metric_options(CLI::App* cmd, ScoreCli& cli) {
  auto add = [&](CLI::Option* o) { cli.metric_only.push_back(o); };
  add(cmd->add_option("refs", cli.refs, "Reference files (.gz ok), as sacrebleu takes them")
          ->type_name("FILE"));
  // One value per -r so that a trailing file is not taken for a reference.
  add(cmd->add_option("-r,--ref", cli.ref_opts, "Reference file; repeat -r for several")
          ->type_name("FILE")
          ->allow_extra_args(false));
  add(cmd->add_option("-i,--input", cli.inputs,
                      "Hypothesis files, one per system (the first is the baseline of a paired "
                      "test); default stdin")
          ->type_name("FILE"));
  const metrics::ReportOptions defaults;
  for (const OptionSpec<metrics::ReportOptions>& spec : metrics::report_options()) {
    if (spec.key == "paired_bs")
      add(cmd->add_flag("-q,--quiet,--no-color",
                        "Accepted for sacrebleu compatibility; nmt prints no colours"));
    if (spec.key == "confidence")
      add(cmd->add_option("--paired-jobs", cli.paired_jobs,
                          "Accepted for sacrebleu compatibility; nmt compares in one thread, "
                          "with the same results"));
    const nlohmann::json d = spec.get(defaults);
    const std::string shown = d.is_string()                   ? d.get<std::string>()
                              : d.is_array()                  ? "[" + d[0].get<std::string>() + "]"
                              : d.is_null() || d.is_boolean() ? ""
                                                              : d.dump();
    add(add_table_option(
        cmd, spec, shown, [&cli, key = spec.key](const nlohmann::json& v) { cli.given[key] = v; },
        names_of(spec.key)));
    if (spec.key == "metrics")
      add(cmd->add_option("--metric", cli.metric, "One metric: bleu, chrf or ter")
              ->check(CLI::IsMember({"bleu", "chrf", "ter"}))
              ->excludes(cli.metric_only.back()));
  }
  cmd->get_option("--paired-ar")->excludes(cmd->get_option("--paired-bs"));
}

void add_model_options(CLI::App* cmd, ScoreCli& cli) {
  auto add = [&](CLI::Option* o) { cli.model_only.push_back(o); };
  cli.model_opt = cmd->add_option("-m,--model", cli.model.models,
                                  "Model to score --src/--tgt with; several (-m a -m b) score "
                                  "as an ensemble: per token, the log of the mean of their "
                                  "probabilities")
                      ->type_name("FILE")
                      ->allow_extra_args(false);  // one file per -m
  add(cmd->add_option("--src", cli.src, "Source sentences (model mode)")->type_name("FILE"));
  add(cmd->add_option("--tgt", cli.tgt, "Target sentences to score (model mode)")
          ->type_name("FILE"));
  add(cmd->add_flag("--word-scores", cli.model.word_scores,
                    "Also print per-token log-probabilities"));
  add(cmd->add_flag("--summary", cli.model.summary, "Print corpus totals only"));
  add(cmd->add_option("--source-lang", cli.model.source_lang,
                      "A multilingual model's source language, by its code (nmt info lists them)"));
  add(cmd->add_option("--target-lang", cli.model.target_lang,
                      "A multilingual model's target language, by its code"));
  add(cmd->add_option("--output-format", cli.model_format,
                      "Model scores as text (TSV with a header) or jsonl")
          ->check(CLI::IsMember({"text", "jsonl"})));
  add(cmd->add_flag("--no-header", cli.no_header, "Leave out the TSV header line"));
  add(cmd->add_option("--alpha", cli.model.alpha,
                      "Length-penalty exponent of the normalised score, as translate --scores")
          ->check(finite_range(0, 10)));
  add(add_compute_type_option(cmd, cli.model.compute,
                              "Model mode: f32, bf16 or int8 (default: the model's)"));
  add(cmd->add_option("--batch-tokens", cli.model.batch_tokens, "Target tokens per batch")
          ->check(CLI::Range(1, 1 << 24)));
  add(add_threads_option(cmd, cli.threads));
  add(add_device_option(cmd, cli.device));
  add(cmd->add_flag("--progress", cli.progress,
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
