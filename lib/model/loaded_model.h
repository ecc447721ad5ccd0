// A model file opened for use: config, vocabulary and Transformer weights.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "model/config.h"
#include "model/model_file.h"
#include "model/shortlist.h"
#include "model/transformer.h"
#include "model/vocab.h"

namespace nmt {

struct LoadedModel {
  ModelConfig config;
  Vocab vocab;  // the target's, and the source's unless source_vocab is set
  // A source vocabulary of its own (imported models: another SentencePiece
  // model, or another token list).
  std::optional<Vocab> source_vocab;
  std::unique_ptr<Transformer> net;
  ComputeType compute = ComputeType::F32;
  std::map<std::string, std::string> metadata;  // the file's, as nmt info shows it
  // The file's vocabulary shortlist (kShortlistTensor; what its training run
  // measured of it is the "shortlist" metadata), if it has one.
  std::optional<Shortlist> shortlist;

  const Vocab& src_vocab() const { return source_vocab ? *source_vocab : vocab; }
  const Vocab& tgt_vocab() const { return vocab; }
};

// Throws InputError naming the file for anything missing, truncated or wrong.
// compute: "f32", "bf16" or "int8"; empty: the file's ("int8" for a file that
// nmt quantize wrote, else "f32"). A compute type this CPU cannot run is an
// InputError that says why.
// The file is read once, so it may be a pipe (`-m <(zcat m.nmt.gz)`); sum,
// when given, gets the size and CRC-32 of its bytes.
// device: where the weights go (read on the host, then placed there once);
// everything the model lays out to translate or score follows them.
// shortlist: whether to read the file's vocabulary shortlist into
// LoadedModel::shortlist. Only a caller that uses it asks; the others leave
// it unread (and unchecked): its table is about a megabyte of a loaded int8
// transformer-base's 70.
enum class ShortlistLoad {
  Skip,
  Read,           // when the file has one (nmt info, translate --shortlist on)
  IfOnByDefault,  // only when its metadata turns it on by default (translate --shortlist auto)
};
// use: whether the weights that only products read may be held in their
// prepared form alone (ParamStore::prepare's drop_values), which a caller
// that writes the model again must not allow.
enum class WeightsUse {
  Keep,          // the model may be saved again (nmt shortlist)
  ProductsOnly,  // translation, scoring: each matrix held once, packed
};
LoadedModel load_model(const std::string& path, const std::string& compute = "",
                       FileChecksum* sum = nullptr, Device device = Device::CPU,
                       ShortlistLoad shortlist = ShortlistLoad::Skip,
                       WeightsUse use = WeightsUse::Keep);

}  // namespace nmt
