// `nmt shortlist` in the library: a vocabulary shortlist for any model (one
// that nmt train made without it, or an imported one), built from parallel
// text, measured on a validation set if one is given, and written with the
// model into a new file. Messages name options by key ({valid_src}).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/shortlist.h"

namespace nmt {

struct ShortlistJob {
  std::string model, out;
  std::vector<std::string> src, tgt;  // several corpora, line-aligned pairwise
  std::string valid_src, valid_tgt;   // both, or neither
  std::string valid_tokenize = "13a";
  ShortlistOptions table;
  int beam = 4;  // of the measurement
};

// Checks the job (UsageError for options that do not go together,
// InputError for paths), reads and encodes the text with the model's
// vocabularies (refusing text the model cannot read), builds the table,
// measures it and writes job.out; log gets one line per step, without
// "\n", warn the readers' warnings.
void add_shortlist(const ShortlistJob& job, const std::function<void(const std::string&)>& log,
                   const std::function<void(const std::string&)>& warn);

}  // namespace nmt
