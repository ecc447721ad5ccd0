// `nmt score -m MODEL`: what the score subcommand hands to model scoring
// (teacher-forced log-probabilities of --tgt given --src). cmd_score.cpp
// parses the options into ModelScoreArgs; run_model_score reads the pairs
// and prints what the library's ScoringService computes.
#pragma once

#include <string>
#include <vector>

namespace nmt::app {

struct ModelScoreArgs {
  std::vector<std::string> models;  // -m: model files; several score as an ensemble
  std::string src;                  // --src: source sentences, one per line ("-" = stdin)
  std::string tgt;                  // --tgt: target sentences, line-aligned with src
  bool word_scores = false;         // --word-scores: also print per-token log-probabilities
  bool summary = false;             // --summary: print corpus totals (log-prob, perplexity) only
  std::string format = "text";      // --output-format: text (TSV, header first) or jsonl
  bool no_header = false;           // --no-header: TSV without its header line
  double alpha = 0.6;               // --alpha: exponent of the GNMT length penalty in "score"
  int batch_tokens = 4096;          // --batch-tokens: batch budget in target tokens
  int threads = 0;                  // --threads: CPU threads; 0 = all cores
  std::string compute;              // --compute-type: empty = the model file's
  std::string device = "cpu";       // --device
  bool progress = false;            // --progress: plain progress lines where stderr is no terminal
};

// Runs model scoring and prints its results; errors are thrown as
// nmt::Error like everywhere else in app/.
void run_model_score(const ModelScoreArgs& args);

}  // namespace nmt::app
