// A model file opened for use: config, vocabulary and Transformer weights.
#pragma once

#include <memory>
#include <string>

#include "model/config.h"
#include "model/transformer.h"
#include "model/vocab.h"

namespace nmt {

struct LoadedModel {
  ModelConfig config;
  Vocab vocab;
  std::unique_ptr<Transformer> net;
  ComputeType compute = ComputeType::F32;
};

// Throws InputError naming the file for anything missing, truncated or wrong.
// compute: "f32", "bf16" or "int8"; empty: the file's ("int8" for a file that
// nmt quantize wrote, else "f32"). A compute type this CPU cannot run is an
// InputError that says why.
LoadedModel load_model(const std::string& path, const std::string& compute = "");

}  // namespace nmt
