// What a vocabulary shortlist costs a model: a parallel set translated with
// it and without by the Translator that `nmt translate` runs (its default
// batches and workers), and scored with BLEU. `nmt train` measures this on its
// validation set once the final weights are chosen, and `nmt shortlist` on
// any set it is given; translation uses the shortlist by default only where
// the cost was measured to be at most kMaxDefaultShortlistCost.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "decode/search.h"
#include "model/loaded_model.h"
#include "model/shortlist.h"

namespace nmt {

constexpr double kMaxDefaultShortlistCost = 0.2;  // BLEU
std::string shortlist_cost_limit();              // "0.2", for messages

struct ShortlistCost {
  double bleu_full = 0, bleu_shortlist = 0;
  double seconds_full = 0, seconds_shortlist = 0;
  int64_t sentences = 0;
  int beam = 0;
  std::string tokenizer;
  // Reference pieces that their own sentence's shortlist holds, and all.
  int64_t ref_pieces_covered = 0, ref_pieces = 0;
  double cost() const { return bleu_full - bleu_shortlist; }
  bool on_by_default() const { return cost() <= kMaxDefaultShortlistCost; }
};

// src, refs: the source lines and their reference translations; tokenizer:
// BLEU's (sacreBLEU's names).
ShortlistCost measure_shortlist(const LoadedModel& model, const Shortlist& shortlist,
                                const std::vector<std::string>& src,
                                const std::vector<std::string>& refs, SearchOptions opts,
                                const std::string& tokenizer);

// The "shortlist" metadata of a model file: the table's options and size,
// what it was built from, and the measurement (if any; its BLEU, not its
// timings, so that a run repeated gives the same file), with "default"
// saying whether translation uses it when not told (shortlist_on_by_default
// in model/shortlist.h reads that).
std::string shortlist_metadata(const Shortlist& shortlist, const std::string& built_from,
                               const ShortlistCost* cost);

}  // namespace nmt
