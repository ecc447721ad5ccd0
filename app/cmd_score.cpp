// `nmt score`. Metric mode reads a hypothesis file (or stdin) and one or
// more references, like the sacrebleu CLI: lines are right-stripped and
// checked for UTF-8, then BLEU or chrF is printed as sacreBLEU's text line
// followed by its signature, or as its JSON. Model mode only gathers
// options and calls run_model_score().
#include "cmd_score.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "io/text_file.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/tokenizers.h"
#include "score_model.h"

namespace nmt::app {

namespace {

struct ScoreCli {
  // metric mode
  std::string metric = "bleu";
  std::vector<std::string> refs;
  std::string hyp = "-";
  std::string tokenize = "13a";
  bool lowercase = false;
  std::string smooth_method = "exp";
  double smooth_value = 0.0;
  bool sentence_level = false;
  int chrf_char_order = 6;
  int chrf_word_order = 0;
  int chrf_beta = 2;
  bool chrf_whitespace = false;
  std::string format = "text";
  bool signature = true;
  bool score_only = false;

  // model mode
  ModelScoreArgs model;

  // Options whose presence decides or restricts the mode.
  CLI::Option* model_opt = nullptr;
  CLI::Option* smooth_value_opt = nullptr;
  std::vector<CLI::Option*> metric_only;
  std::vector<CLI::Option*> model_only;
};

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

// Reads a file as the sacrebleu CLI does (each line right-stripped), with
// ill-formed UTF-8 replaced rather than fatal, and said so on stderr.
std::vector<std::string> read_text(const std::string& path) {
  std::vector<std::string> lines = io::read_lines(path);
  std::size_t bad = 0, first_bad = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string& line = lines[i];
    if (!io::is_valid_utf8(line)) {
      if (bad++ == 0) first_bad = i + 1;
      line = io::sanitize_utf8(line);
    }
    line.resize(metrics::rstrip_whitespace(line).size());
  }
  if (bad > 0)
    std::cerr << "nmt: warning: " << display_name(path) << ": " << bad
              << " line(s) are not valid UTF-8 (first: line " << first_bad
              << "); invalid bytes were replaced with U+FFFD\n";
  return lines;
}

std::string format_score(double score) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", score);
  return buf;
}

template <typename Score>
void print_score(const Score& s, const ScoreCli& cli, bool one_line_json) {
  if (cli.format == "json")
    std::cout << (one_line_json ? s.to_json().dump() : s.to_json().dump(1)) << "\n";
  else if (cli.score_only)
    std::cout << format_score(s.score) << "\n";
  else
    std::cout << s.text() << "\n";
}

void run_metric_score(const ScoreCli& cli) {
  if (cli.refs.empty())
    throw InputError("score: give at least one reference with -r (or a model with -m)");
  int from_stdin = cli.hyp == "-";
  for (const std::string& r : cli.refs) from_stdin += r == "-";
  if (from_stdin > 1)
    throw InputError("score: only one of the hypothesis and references can be stdin");

  std::vector<std::vector<std::string>> refs;
  for (const std::string& r : cli.refs) refs.push_back(read_text(r));
  const std::vector<std::string> hyps = read_text(cli.hyp);
  // Checked here as well as in the library so the message names the files.
  for (std::size_t r = 0; r < refs.size(); ++r) {
    if (refs[r].size() != hyps.size())
      throw InputError("score: " + display_name(cli.hyp) + " has " + std::to_string(hyps.size()) +
                       " lines but reference " + display_name(cli.refs[r]) + " has " +
                       std::to_string(refs[r].size()));
  }

  std::string signature;
  if (cli.metric == "bleu") {
    metrics::BleuOptions opt;
    opt.tokenizer = metrics::parse_tokenizer(cli.tokenize);
    opt.lowercase = cli.lowercase;
    opt.smooth = metrics::parse_smoothing(cli.smooth_method);
    if (cli.smooth_value_opt->count() > 0) opt.smooth_value = cli.smooth_value;
    if (cli.sentence_level) {
      std::vector<std::string> seg_refs(refs.size());
      for (std::size_t i = 0; i < hyps.size(); ++i) {
        for (std::size_t r = 0; r < refs.size(); ++r) seg_refs[r] = refs[r][i];
        const auto s = metrics::sentence_bleu(hyps[i], seg_refs, opt);
        print_score(s, cli, true);
        signature = s.signature();
      }
    } else {
      const auto s = metrics::corpus_bleu(hyps, refs, opt);
      print_score(s, cli, false);
      signature = s.signature();
    }
  } else {
    metrics::ChrfOptions opt;
    opt.char_order = cli.chrf_char_order;
    opt.word_order = cli.chrf_word_order;
    opt.beta = cli.chrf_beta;
    opt.lowercase = cli.lowercase;
    opt.whitespace = cli.chrf_whitespace;
    if (cli.sentence_level) {
      std::vector<std::string> seg_refs(refs.size());
      for (std::size_t i = 0; i < hyps.size(); ++i) {
        for (std::size_t r = 0; r < refs.size(); ++r) seg_refs[r] = refs[r][i];
        const auto s = metrics::sentence_chrf(hyps[i], seg_refs, opt);
        print_score(s, cli, true);
        signature = s.signature();
      }
    } else {
      const auto s = metrics::corpus_chrf(hyps, refs, opt);
      print_score(s, cli, false);
      signature = s.signature();
    }
  }
  // JSON carries the signature inside; --score-only wants the number alone.
  if (cli.format == "text" && cli.signature && !cli.score_only && !signature.empty())
    std::cout << signature << "\n";
  std::cout.flush();
  if (!std::cout) throw Error("score: cannot write to stdout");
}

std::string option_names(const std::vector<CLI::Option*>& given) {
  std::string names;
  for (const CLI::Option* o : given) {
    if (!names.empty()) names += ", ";
    names += o->get_name();
  }
  return names;
}

std::vector<CLI::Option*> given(const std::vector<CLI::Option*>& opts) {
  std::vector<CLI::Option*> out;
  for (CLI::Option* o : opts)
    if (o->count() > 0) out.push_back(o);
  return out;
}

void run(const ScoreCli& cli) {
  if (cli.model_opt->count() > 0) {
    if (auto extra = given(cli.metric_only); !extra.empty())
      throw InputError("score: -m (model scoring) cannot be combined with " + option_names(extra));
    if (cli.model.src.empty() || cli.model.tgt.empty())
      throw InputError("score: -m needs both --src and --tgt");
    if (cli.model.batch_tokens <= 0)
      throw InputError("score: --batch-tokens must be positive, got " +
                       std::to_string(cli.model.batch_tokens));
    if (cli.model.threads < 0)
      throw InputError("score: --threads must be 0 (default) or positive, got " +
                       std::to_string(cli.model.threads));
    const int rc = run_model_score(cli.model);
    if (rc != 0) exit_code() = rc;
    return;
  }
  if (auto extra = given(cli.model_only); !extra.empty())
    throw InputError("score: " + option_names(extra) + " apply only to model scoring (-m MODEL)");
  run_metric_score(cli);
}

}  // namespace

void register_score(CLI::App& app) {
  auto cli = std::make_shared<ScoreCli>();
  CLI::App* cmd = app.add_subcommand(
      "score",
      "Score translations: BLEU/chrF against references (sacreBLEU 2.6.0 compatible),\n"
      "or model log-probabilities of a parallel corpus with -m");
  cmd->footer(
      "Examples:\n"
      "  nmt score -r ref.de hyp.de\n"
      "  nmt score --metric chrf --chrf-word-order 2 -r ref.de < hyp.de\n"
      "  nmt score -m model/ --src test.en --tgt test.de --summary");

  // Metric mode.
  cli->metric_only.push_back(
      cmd->add_option("--metric", cli->metric,
                      "Metric: bleu or chrf (chrF++ with --chrf-word-order 2)")
          ->check(CLI::IsMember({"bleu", "chrf"}))
          ->capture_default_str());
  // One value per -r so that a trailing HYP is not taken for a reference.
  cli->metric_only.push_back(
      cmd->add_option("-r,--ref", cli->refs, "Reference file (.gz ok); repeat -r for several")
          ->allow_extra_args(false));
  cli->metric_only.push_back(
      cmd->add_option("hyp", cli->hyp, "Hypothesis file; stdin if omitted or '-'"));
  cli->metric_only.push_back(
      cmd->add_option("--tokenize,--tok", cli->tokenize, "BLEU tokeniser: 13a, intl, none or char")
          ->check(CLI::IsMember({"13a", "intl", "none", "char"}))
          ->capture_default_str());
  cli->metric_only.push_back(
      cmd->add_flag("--lowercase,--lc", cli->lowercase, "Case-insensitive scoring"));
  cli->metric_only.push_back(cmd->add_option("--smooth-method", cli->smooth_method,
                                             "BLEU smoothing: exp, floor, add-k or none")
                                 ->check(CLI::IsMember({"exp", "floor", "add-k", "none"}))
                                 ->capture_default_str());
  cli->smooth_value_opt =
      cmd->add_option("--smooth-value", cli->smooth_value,
                      "Value for floor (default 0.1) or add-k (default 1) smoothing");
  cli->metric_only.push_back(cli->smooth_value_opt);
  cli->metric_only.push_back(cmd->add_flag(
      "--sentence-level", cli->sentence_level,
      "One score per line (BLEU with effective order, as sacreBLEU's sentence_bleu)"));
  cli->metric_only.push_back(
      cmd->add_option("--chrf-char-order", cli->chrf_char_order, "chrF character n-gram order")
          ->check(CLI::Range(1, 100))
          ->capture_default_str());
  cli->metric_only.push_back(cmd->add_option("--chrf-word-order", cli->chrf_word_order,
                                             "chrF word n-gram order (2 = chrF++)")
                                 ->check(CLI::Range(0, 100))
                                 ->capture_default_str());
  cli->metric_only.push_back(cmd->add_option("--chrf-beta", cli->chrf_beta, "chrF beta")
                                 ->check(CLI::Range(1, 100))
                                 ->capture_default_str());
  cli->metric_only.push_back(cmd->add_flag("--chrf-whitespace", cli->chrf_whitespace,
                                           "Keep whitespace in chrF character n-grams"));
  cli->metric_only.push_back(
      cmd->add_option("--format", cli->format, "Output: text (score line, then signature) or json")
          ->check(CLI::IsMember({"text", "json"}))
          ->capture_default_str());
  cli->metric_only.push_back(
      cmd->add_flag("--signature,!--no-signature", cli->signature,
                    "Print the sacreBLEU signature after the score (default)"));
  cli->metric_only.push_back(
      cmd->add_flag("-b,--score-only", cli->score_only, "Print only the score"));

  // Model mode.
  cli->model_opt =
      cmd->add_option("-m,--model", cli->model.model, "Model to score --src/--tgt with");
  cli->model_only.push_back(
      cmd->add_option("--src", cli->model.src, "Source sentences (model mode)"));
  cli->model_only.push_back(
      cmd->add_option("--tgt", cli->model.tgt, "Target sentences to score (model mode)"));
  cli->model_only.push_back(cmd->add_flag("--word-scores", cli->model.word_scores,
                                          "Also print per-token log-probabilities"));
  cli->model_only.push_back(
      cmd->add_flag("--summary", cli->model.summary, "Print corpus totals only"));
  cli->model_only.push_back(
      cmd->add_option("--batch-tokens", cli->model.batch_tokens, "Target tokens per batch")
          ->capture_default_str());
  cli->model_only.push_back(
      cmd->add_option("--threads", cli->model.threads, "CPU threads (0 = default)")
          ->capture_default_str());

  cmd->callback([cli] { run(*cli); });
}

}  // namespace nmt::app
