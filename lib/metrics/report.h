// sacreBLEU's command-line report, byte for byte as sacrebleu 2.6.0 prints
// it: one system's results (one line per metric, aligned on '=', or JSON),
// per-sentence scores, several systems' table, and the paired significance
// tests and bootstrap confidence intervals. `nmt score` reads the files and
// the options and hands them here; so may any program.
#pragma once

#include <functional>
#include <new>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/option_spec.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/significance.h"
#include "metrics/ter.h"

namespace nmt::metrics {

enum class ReportFormat { text, json };
enum class ReportTest { none, bootstrap, randomization };  // a paired test

struct ReportOptions {
  std::vector<std::string> metrics{"bleu"};  // "bleu", "chrf", "ter", in the order given
  BleuOptions bleu;
  ChrfOptions chrf;
  TerOptions ter;
  ReportFormat format = ReportFormat::text;
  int width = 2;          // decimals of a score
  bool signature = true;  // in the text line
  bool score_only = false;
  bool sentence_level = false;  // one line per segment (one system, one metric)
  ReportTest paired = ReportTest::none;
  int paired_bs_n = 1000, paired_ar_n = 10000;
  bool confidence = false;  // a bootstrap interval for one system
  int confidence_n = 1000;
  std::set<std::string> given;  // the options the user gave, by key
};

// Every option of the report that a user sets, in the order `nmt score
// --help` lists them (core/option_spec.h).
const std::vector<OptionSpec<ReportOptions>>& report_options();
// Options by key from a JSON object, each checked (a UsageError about its
// key) and marked given.
void apply_report_json(const nlohmann::json& j, ReportOptions& o);
// Refuses (UsageError) what sacreBLEU refuses before reading a file: a
// metric named twice, several metrics sentence by sentence, lowercase
// without BLEU, a SentencePiece model without a tokeniser that takes one or
// a tokeniser that needs one without it.
void check_report_options(const ReportOptions& o);

// The streams scored: references [stream][segment], one hypothesis stream
// per system [system][segment], line-aligned; each system's name in the
// table (the first prefixed "Baseline: " in a paired test) and in messages.
struct ReportInputs {
  std::vector<std::vector<std::string>> refs;
  std::vector<std::vector<std::string>> systems;
  std::vector<std::string> names;
  std::vector<std::string> labels;
};

// The paired test the options ask for (its kind and resamples or trials).
PairedTestOptions paired_options(const ReportOptions& o);

// Refuses (UsageError) resamples or trials whose scores could take more
// memory than the machine has, before any file is read.
void check_resampling_memory(const ReportOptions& o);

// Writes the report of the inputs to out. Sentence-level, line_written is
// called after each line (so that a closed output stops the work). The
// paired tests' and intervals' seed is SACREBLEU_SEED's, as sacreBLEU's.
void write_report(const ReportOptions& o, const ReportInputs& in, std::ostream& out,
                  const std::function<void()>& line_written = {});

// Memory that runs out while scoring is told with what was being done (the
// file, the metric, the option), not as a bare "out of memory".
template <typename F>
decltype(auto) while_scoring(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw Error("score: out of memory " + what);
  }
}

}  // namespace nmt::metrics
