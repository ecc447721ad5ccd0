// One sentence's attention as a picture, as `nmt attention` draws it: the
// sentence translated (or the given target taken as its translation), the
// teacher-forced pass over the pair, and the chosen layer's matrix (one
// head's or their mean) as a heat map with the pieces on both axes.
#pragma once

#include <string>

#include "decode/attention_maps.h"
#include "decode/search.h"
#include "model/loaded_model.h"
#include "plot/plot.h"

namespace nmt {

struct AttentionRequest {
  std::string sentence;  // the source text
  std::string target;    // its translation to draw; empty: the model's own
  AttentionKind kind = AttentionKind::Cross;
  int layer = 0;         // from 1; 0: the second-to-last
  int head = 0;          // from 1; 0: the mean of the heads
  SearchOptions search;  // of the model's own translation
};

struct AttentionPicture {
  plot::HeatMap map;        // titled, labelled, weights filled in
  std::string translation;  // the target drawn, as text
};

// Throws InputError where the sentence or {target} is longer than the
// model takes.
AttentionPicture attention_picture(const LoadedModel& model, const AttentionRequest& r);

}  // namespace nmt
