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
};

// Throws InputError naming the file for anything missing, truncated or wrong.
LoadedModel load_model(const std::string& path);

}  // namespace nmt
