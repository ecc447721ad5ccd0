// The model file: one safetensors file holding the config, the SentencePiece
// model and the named weights, so `nmt translate -m FILE` needs nothing else.
//
// Layout (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header mapping each tensor name to its
// dtype, shape and data_offsets plus a "__metadata__" map of strings, then
// the raw little-endian data. Standard tools can open the weights. Metadata:
// "format": "nmt", "format_version", "config" (JSON text). The SentencePiece
// model is the U8 tensor "vocab/sentencepiece". Checkpoints add more tensors
// (Adam moments) and metadata (training state) to the same layout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace nmt {

constexpr int kModelFormatVersion = 1;

struct NamedTensor {
  std::string name;
  Shape shape;
  const void* data = nullptr;
  DType dtype = DType::F32;  // F32 or S8 (written as safetensors' I8)
};

// The bytes after a model file's header. A regular file's are read where
// they are needed, straight into place (one copy: a model is never resident
// twice while it loads; a file cut short since it was opened is an error,
// never a fault, as a mapping's would be); a pipe's were read whole.
class FileBytes {
 public:
  uint64_t size() const { return size_; }
  // Bytes [begin, begin + n) into dst. Throws InputError naming the file if
  // it no longer holds them.
  void copy(uint64_t begin, uint64_t n, void* dst) const;
  std::string str(uint64_t begin, uint64_t n) const;
  // A pipe's bytes (or any), held here.
  void hold(std::vector<char> buffer);
  // `size` bytes of the open file `fd` from `offset` on, read when asked.
  void read_at(std::shared_ptr<const int> fd, uint64_t offset, uint64_t size, std::string path);

 private:
  std::shared_ptr<const std::vector<char>> buffer_;
  std::shared_ptr<const int> fd_;
  uint64_t offset_ = 0, size_ = 0;
  std::string path_;
};

struct FileContents {
  std::map<std::string, std::string> metadata;
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;
  };
  std::map<std::string, Entry> tensors;
  FileBytes data;  // the bytes after the header

  bool has(const std::string& name) const { return tensors.count(name) > 0; }
  // Throws InputError naming the file unless the tensor has this shape and
  // is F32, or I8 with an F32 scale per row in "NAME.scale" (an int8 model).
  void check_f32(const std::string& name, const Shape& shape) const;
  // Copies the tensor into dst as f32 (I8 rows times their scales) after
  // checking its shape, and refuses NaN and infinite values, naming it.
  void read_f32(const std::string& name, const Shape& shape, float* dst) const;
  // A (rows, cols) matrix as s8 rows and a scale per row: an I8 tensor as
  // it is (its scales checked), an F32 one rounded (model/quantise.h).
  void read_s8(const std::string& name, const Shape& shape, int8_t* dst, float* scales) const;
  std::string read_bytes(const std::string& name) const;
  std::string source;
  // A gap in the data (what a tensor missing from the header leaves),
  // thrown by check_layout() once the missing names have been looked for.
  std::string layout_error;
  void check_layout() const;
};

// Writes atomically: a temp file beside `path`, fsync, then rename, so a
// crash or full disk never leaves a half-written model in place.
void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& byte_tensors);

// Reads and validates the header and sizes before trusting anything.
FileContents read_safetensors(const std::string& path);

// A CRC-32 of a file's content, for the "checksum" metadata a checkpoint
// carries ("crc32:" and 8 hex digits): the tensor data as written (the
// tensors in order, then the byte tensors in name order), then every
// metadata key and value but "checksum" itself, in key order. It changes
// with any byte of the data and any value of the metadata, so a flipped bit,
// a truncated copy or an edited training state is caught.
std::string content_checksum(const std::map<std::string, std::string>& metadata,
                             const std::vector<NamedTensor>& tensors,
                             const std::map<std::string, std::string>& byte_tensors);
// The same checksum of a file as read.
std::string content_checksum(const FileContents& file);

class Transformer;

// A model ready to translate: config, vocabulary bytes and weights. int8
// stores every weight matrix as I8 rows with an F32 scale each ("NAME" and
// "NAME.scale", see model/quantise.h) and marks the file "quantization":
// "int8", which translation then computes in by default.
// The vocabulary tensors of a model file, by name: "vocab/sentencepiece"
// (a SentencePiece model) and, for an imported vocabulary, "vocab/tokens"
// (its tokens in id order, a JSON list); a source side of its own adds
// "vocab/source/sentencepiece" and "vocab/source/tokens".
using VocabTensors = std::map<std::string, std::string>;
class Vocab;
// Those of a loaded vocabulary (and a separate source one, when given).
VocabTensors vocab_tensors(const Vocab& vocab, const Vocab* source = nullptr);
void save_model(const std::string& path, Transformer& model, const VocabTensors& vocab,
                const std::map<std::string, std::string>& extra_metadata = {}, bool int8 = false);
// nmt's own vocabulary: one SentencePiece model.
void save_model(const std::string& path, Transformer& model, const std::string& spm_model,
                const std::map<std::string, std::string>& extra_metadata = {}, bool int8 = false);

// The size and CRC-32 (zlib's) of a model file's bytes, as they were read
// (a pipe can be read once only), for `nmt info`.
struct FileChecksum {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

// Loads config and SentencePiece bytes and makes every check a model gets
// wherever it is loaded (translate, score, info, quantize, resume): format,
// version, config, a numeric "step", a readable vocabulary exactly as large
// as the embedding (into *vocab when given; the source's into *source when
// the model has one of its own). spm_model gets "vocab/sentencepiece" (empty
// for a token list without one). The caller builds the Transformer from the
// config and then calls load_weights.
FileContents open_model(const std::string& path, ModelConfig& cfg, std::string& spm_model,
                        Vocab* vocab = nullptr, FileChecksum* sum = nullptr,
                        Vocab* source = nullptr);
// The vocabulary tensors of an opened file, and its shortlist (a table over
// the vocabulary), to write them again.
VocabTensors vocab_tensors(const FileContents& file);
void load_weights(const FileContents& file, Transformer& model, const std::string& prefix = "");

// A copy of a model file (`nmt quantize`, `nmt distill`): its weights (as
// int8 rows and scales with int8, else as they are), vocabulary, shortlist
// and what `nmt info` shows of its training, with `extra` metadata added.
// A file already in int8 is refused for an int8 copy.
void write_model_copy(const std::string& in, const std::string& out, bool int8,
                      const std::map<std::string, std::string>& extra = {});

}  // namespace nmt
