#include "convert/convert.h"

#include <filesystem>
#include <new>

#include "convert/formats.h"
#include "core/error.h"
#include "model/model_file.h"
#include "model/transformer.h"

namespace nmt::convert {

namespace fs = std::filesystem;

std::string detect(const std::string& src) {
  std::error_code ec;
  const fs::file_status st = fs::status(src, ec);
  if (ec || !fs::exists(st)) throw InputError(src + ": no such file or directory");
  if (fs::is_directory(st)) {
    if (fs::exists(fs::path(src) / "model.bin", ec)) return "ctranslate2";
    if (fs::exists(fs::path(src) / "config.json", ec))
      for (const char* w : {"model.safetensors", "model.safetensors.index.json",
                            "pytorch_model.bin", "pytorch_model.bin.index.json"})
        if (fs::exists(fs::path(src) / w, ec)) return "hf";
    for (const auto& e : fs::directory_iterator(src, ec))
      if (e.path().extension() == ".npz") return "marian";
    throw InputError(src +
                     ": neither a CTranslate2 model (model.bin), a Hugging Face one "
                     "(config.json and model.safetensors or pytorch_model.bin) nor a Marian one "
                     "(.npz) is in this directory");
  }
  if (fs::path(src).extension() == ".npz") return "marian";
  if (fs::path(src).filename() == "model.bin")
    throw InputError(src + ": give CTranslate2's model directory, not its model.bin");
  throw InputError(src +
                   ": not a Marian .npz model, nor a CTranslate2 or Hugging Face model "
                   "directory ({from} marian|ctranslate2|hf says which)");
}

Imported import_model(const std::string& src, const ConvertOptions& opts) {
  const std::string from = opts.from.empty() ? detect(src) : opts.from;
  try {
    if (from == "marian") return import_marian(src, opts);
    if (from == "ctranslate2") return import_ctranslate2(src, opts);
    if (from == "hf") return import_huggingface(src, opts);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw InputError(src + ": out of memory while reading the model");
  } catch (const std::exception& e) {
    throw InputError(src + ": cannot be read as a " + from + " model: " + e.what());
  }
  throw InputError(src + ": unknown model format " + from);
}

void check_tokeniser(const Vocab& v, const std::string& spm_path, const std::string& vocab_path,
                     Imported& m) {
  const Vocab::Coverage c = v.tokeniser_coverage();
  if (c.outside.empty()) return;
  const std::string what = spm_path + ": " + std::to_string(c.outside.size()) + " of its " +
                           std::to_string(c.pieces) + " pieces are not tokens of " + vocab_path +
                           " (\"" + c.outside[0] + "\"" + (c.outside.size() > 1 ? ", ..." : "") +
                           ")";
  if (static_cast<int64_t>(c.outside.size()) * 10 > c.pieces)
    throw InputError(what + ": it is not the tokeniser this model was trained with");
  m.warnings.push_back(what + "; text holding them is read as <unk>");
}

void write_imported(const Imported& m, const std::string& out) {
  // The checks every model file's config gets, before anything is written:
  // an importer's mapping may have produced what nmt would refuse to load.
  config_from_json(config_to_json(m.config),
                   m.provenance.value("source", std::string("the model")) + " (converted config)");
  Transformer net(m.config);
  net.init(0);
  ParamStore& ps = net.params();
  for (const Param& p : ps.params()) {
    auto it = m.weights.find(p.name);
    if (it == m.weights.end()) throw Error("convert: the importer left " + p.name + " unset");
    if (static_cast<int64_t>(it->second.size()) != p.shape.numel())
      throw Error("convert: " + p.name + " has " + std::to_string(it->second.size()) +
                  " values for shape " + p.shape.str());
    // The importers check what they read by the source's names; this is
    // what they computed (position tables, zero biases) too.
    check_finite(it->second, "convert: " + p.name);
    Tensor v = ps.value(&p);
    std::copy(it->second.begin(), it->second.end(), v.data());
  }
  for (const auto& [name, values] : m.weights)
    if (!ps.find(name))
      throw Error("convert: the importer set " + name + ", which the model lacks");
  std::map<std::string, std::string> meta = {
      {"imported_from", m.provenance.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)}};
  save_model(out, net, vocab_tensors(m.vocab, m.source_vocab ? &*m.source_vocab : nullptr), meta);
}

}  // namespace nmt::convert
