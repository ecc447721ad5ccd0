#include "model/model_info.h"

#include <cstdio>

#include "core/backend.h"
#include "core/device.h"
#include "core/memory.h"
#include "io/json.h"
#include "io/text_file.h"
#include "model/loaded_model.h"
#include "model/model_file.h"
#include "model/shortlist.h"
#include "model/transformer.h"
#include "model/vocab.h"

namespace nmt {

// A short, stable sample of the vocabulary: pieces spread over the id range.
namespace {

nlohmann::json sample_pieces(const Vocab& v, int n) {
  nlohmann::json out = nlohmann::json::array();
  const int size = v.size();
  for (int k = 0; k < n && size > 4; ++k) {
    const int32_t id = 4 + static_cast<int32_t>((int64_t(size - 4) * k) / n);
    out.push_back(v.pieces({id})[0]);
  }
  return out;
}

}  // namespace

nlohmann::ordered_json model_info(const std::string& path) {
  io::check_input_path(path, "model");
  FileChecksum sum;
  const uint64_t before = anonymous_resident_bytes();
  LoadedModel m = load_model(path, "", &sum, Device::CPU,
                             ShortlistLoad::Read);  // every check a translation would make
  const uint64_t after = anonymous_resident_bytes();
  nlohmann::ordered_json j;
  j["file"] = path;
  j["bytes"] = sum.bytes;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", sum.crc32);
  j["crc32"] = hex;
  j["format"] = "safetensors, nmt format " + m.metadata.at("format_version");
  j["weights"] = compute_type_name(m.compute);
  j["config"] = config_to_json(m.config);
  j["parameters"] = m.net->parameter_count();
  // What the model holds once loaded, as this process saw its anonymous
  // resident memory grow: the weights as read (int8 rows, or floats),
  // vocabulary and shortlist; not the program's and libraries' pages, which
  // every model shares, nor the packed copies that products make later.
  if (before > 0 && after >= before) j["loaded_bytes"] = after - before;
  auto vocab_json = [](const Vocab& v) {
    return nlohmann::ordered_json{
        {"pieces", v.size()},
        {"kind", !v.imported()       ? "sentencepiece"
                 : v.bytes().empty() ? "tokens (tokenised text, split at spaces)"
                                     : "tokens, cut by a SentencePiece model"},
        {"sample", sample_pieces(v, 12)}};
  };
  j["vocabulary"] = vocab_json(m.tgt_vocab());
  if (m.source_vocab) j["source_vocabulary"] = vocab_json(*m.source_vocab);
  if (auto it = m.metadata.find("imported_from"); it != m.metadata.end())
    j["imported_from"] = io::parse_json(it->second, path + " (imported_from)");
  auto meta_json = [&](const char* key) -> nlohmann::json {
    auto it = m.metadata.find(key);
    if (it == m.metadata.end()) return nullptr;
    return io::parse_json(it->second, path + " (" + key + ")");
  };
  // open_model has checked that it is a number.
  if (auto it = m.metadata.find("step"); it != m.metadata.end()) j["step"] = std::stoll(it->second);
  if (auto o = meta_json("training_options"); !o.is_null()) j["training_options"] = o;
  if (auto d = meta_json("training_data"); !d.is_null()) j["training_data"] = d;
  if (auto s = meta_json("training_state"); !s.is_null()) j["checkpoint"] = s;
  if (auto r = meta_json("recipe"); !r.is_null()) j["recipe"] = r;
  if (m.shortlist) {
    nlohmann::json sl = meta_json("shortlist");
    if (!sl.is_object()) sl = nlohmann::json::object();
    sl["entries"] = m.shortlist->entries();
    sl["default"] = shortlist_on_by_default(m.metadata);
    j["shortlist"] = sl;
  }
  // How this machine computes with it (every model there alike).
  j["numerics"] = backend(Device::CPU).numerics();
  return j;
}

}  // namespace nmt
