#include "service/report_inputs.h"

#include <algorithm>

#include "core/error.h"
#include "io/output_file.h"
#include "io/text_file.h"
#include "metrics/tokenizers.h"

namespace nmt {

namespace {

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

std::vector<std::string> read_text(const std::string& path, const std::string& option) {
  io::check_input_path(path, option);
  io::TextChecks checks;
  checks.warn = io::warn_on_stderr;
  std::vector<std::string> lines = metrics::while_scoring(
      "reading " + display_name(path), [&] { return io::read_lines(path, checks); });
  for (std::string& line : lines) line.resize(metrics::rstrip_whitespace(line).size());
  return lines;
}

// sacreBLEU's checks of the systems against the options, in its order.
void check_systems(const metrics::ReportOptions& o, size_t n_sys) {
  const bool paired = o.paired != metrics::ReportTest::none;
  if (o.sentence_level && n_sys > 1)
    throw UsageError("score: only one system can be evaluated with {sentence_level}");
  if (o.sentence_level && (o.confidence || paired))
    throw UsageError("score: statistical tests are unavailable with {sentence_level}");
  if (paired && n_sys == 1)
    throw UsageError(
        "score: paired tests require multiple input systems given to --input (-i): the first is "
        "the baseline");
  if (n_sys > 1 && o.confidence)
    throw UsageError(
        "score: {confidence} is for one system; use {paired_bs} or {paired_ar} for several");
}

}  // namespace

void prepare_report_tokenizer(const metrics::ReportOptions& o,
                              const std::function<void(const std::string&)>& note) {
  if (std::find(o.metrics.begin(), o.metrics.end(), "bleu") == o.metrics.end()) return;
  const metrics::TokenizerKind kind = o.bleu.tokenizer;
  if (kind == metrics::TokenizerKind::kSpm)
    note(
        "warning: -tok spm is sacreBLEU's old name for flores101 (the signature says "
        "flores101)");
  if (metrics::tokenizer_needs_spm_model(kind))
    io::check_input_path(o.bleu.spm_model, "{spm_model}");
  metrics::load_tokenizer(kind, o.bleu.spm_model);
}

metrics::ReportInputs read_report_inputs(const metrics::ReportOptions& o,
                                         const std::vector<std::string>& refs,
                                         const std::vector<std::string>& given,
                                         const std::function<void(const std::string&)>& note) {
  const bool paired = o.paired != metrics::ReportTest::none;
  // sacreBLEU: a file given again as the baseline is skipped in a paired
  // test; any other repeated name is an error.
  std::vector<std::string> hyps;
  for (const std::string& path : given) {
    if (std::find(hyps.begin(), hyps.end(), path) != hyps.end()) {
      if (paired && path == hyps[0]) {
        note("note: ignoring " + path + " as it was also given as the baseline");
        continue;
      }
      throw InputError("score: {input} names " + path +
                       " twice; each system needs its own file name, which names it");
    }
    hyps.push_back(path);
  }
  check_systems(o, hyps.size());
  for (const std::string& r : refs) io::check_input_path(r, "reference");
  for (const std::string& h : hyps) io::check_input_path(h, "{input}");
  for (const std::string& r : refs) {
    if (r == "-") throw UsageError("score: a reference cannot be stdin (stdin is the hypothesis)");
    for (const std::string& h : hyps)
      if (h != "-" && io::file_id(r) == io::file_id(h))
        note("warning: the hypothesis " + h + " is also given as a reference");
  }
  metrics::ReportInputs in;
  for (const std::string& r : refs) in.refs.push_back(read_text(r, "reference"));
  for (const std::string& h : hyps) {
    in.systems.push_back(read_text(h, "{input}"));
    in.names.push_back(h);
    in.labels.push_back(display_name(h));
    // sacreBLEU refuses an empty system too ("contains no sentence").
    if (in.systems.back().empty())
      throw InputError("score: " + display_name(h) + " has no lines: nothing to score");
    // Checked here as well as in the report so the message names the files.
    for (size_t r = 0; r < in.refs.size(); ++r)
      if (in.refs[r].size() != in.systems.back().size())
        throw InputError("score: " + display_name(h) + " has " +
                         std::to_string(in.systems.back().size()) + " lines but reference " +
                         display_name(refs[r]) + " has " + std::to_string(in.refs[r].size()));
  }
  if (paired) in.names[0] = "Baseline: " + in.names[0];
  return in;
}

}  // namespace nmt
