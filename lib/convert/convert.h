// Models trained by other toolkits, as ordinary .nmt files: Marian's .npz
// Transformers (OPUS-MT's among them) and CTranslate2's model.bin
// directories. Each importer maps the other tool's options onto the config
// keys of model/config.h and its parameters onto nmt's names and layouts;
// whatever it cannot represent exactly it refuses with one line naming the
// option and its value, so a converted model translates as its own tool
// does or not at all.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/vocab.h"

namespace nmt::convert {

struct Imported {
  ModelConfig config;
  // Every parameter of Transformer(config), by nmt's name, in nmt's layout
  // ((out, in) matrices), as f32.
  std::map<std::string, std::vector<float>> weights;
  Vocab vocab;                        // the target's (and the source's, unless below)
  std::optional<Vocab> source_vocab;  // a source vocabulary of its own
  // What it was converted from, for nmt info: "tool", "source", "summary"
  // and the options that mattered.
  nlohmann::json provenance = nlohmann::json::object();
  // The files it was read from (or, for a model directory, that it may have
  // read), which nmt convert's output must not replace.
  std::vector<std::string> read_from;
  // What the user should know of a conversion that went through (nmt
  // convert prints each as a warning).
  std::vector<std::string> warnings;
};

struct ConvertOptions {
  std::string from;              // "marian", "ctranslate2", "hf" or empty: detect
  std::vector<std::string> spm;  // SentencePiece models: one for both sides, or source then target
  std::vector<std::string>
      vocab;  // Marian: vocabularies, one for both sides, or source then target
};

// What `src` is: "marian" (an .npz file, or a directory holding one),
// "ctranslate2" (a directory holding model.bin) or "hf" (a directory
// holding config.json and model.safetensors or pytorch_model.bin, or their
// shards' index); throws InputError saying what was found otherwise.
std::string detect(const std::string& src);

Imported import_marian(const std::string& src, const ConvertOptions& opts);
Imported import_ctranslate2(const std::string& src, const ConvertOptions& opts);
// A Hugging Face checkpoint directory (convert/huggingface.cpp).
Imported import_huggingface(const std::string& src, const ConvertOptions& opts);

// The model at src, read by opts.from's importer (detected when empty).
// Every failure is an nmt::Error naming src: what a library under an
// importer (libzip, yaml-cpp, nlohmann::json, the standard library) throws
// is given the file's name, never passed on bare.
Imported import_model(const std::string& src, const ConvertOptions& opts);

// A SentencePiece model (spm_path) must cut text into the pieces of the
// vocabulary (vocab_path) it serves: more than a tenth of its pieces outside
// the vocabulary is another model's tokeniser, refused; fewer are warned
// about in m.warnings.
void check_tokeniser(const Vocab& v, const std::string& spm_path, const std::string& vocab_path,
                     Imported& m);

// Checks that the weights are exactly Transformer(config)'s and writes the
// model file (atomically, as nmt train writes its own).
void write_imported(const Imported& m, const std::string& out);

}  // namespace nmt::convert
