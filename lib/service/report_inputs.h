// The files of a sacreBLEU report read as the sacrebleu command line reads
// them: sacreBLEU's refusals in its order, before any file is read; each
// line right-stripped; ill-formed UTF-8 replaced with a warning by line; a
// system given again as the baseline of a paired test skipped, with a note.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "metrics/report.h"

namespace nmt {

// The BLEU tokeniser made ready, as sacreBLEU builds it, only when BLEU is
// computed (its SentencePiece model file checked and read); "-tok spm", the
// old name of flores101, is noted. Throws InputError about {spm_model}.
void prepare_report_tokenizer(const metrics::ReportOptions& o,
                              const std::function<void(const std::string&)>& note);

// refs: the reference files; hyps: one hypothesis file per system ("-":
// standard input), named in the report as given. note: warnings and notes,
// one line each (without "nmt: ").
metrics::ReportInputs read_report_inputs(const metrics::ReportOptions& o,
                                         const std::vector<std::string>& refs,
                                         const std::vector<std::string>& hyps,
                                         const std::function<void(const std::string&)>& note);

}  // namespace nmt
