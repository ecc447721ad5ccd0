// The joint source/target subword vocabulary: a SentencePiece model, trained
// here with the SentencePiece library (never re-implemented) and stored
// inside the model file. Ids: 0 <pad>, 1 <unk>, 2 <s>, 3 </s>.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace nmt {

class Vocab {
 public:
  Vocab();
  ~Vocab();
  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;

  // From the serialized model proto (the bytes of a .model file).
  static Vocab from_bytes(const std::string& model_bytes);
  static Vocab from_file(const std::string& path);
  // Trains on the given sentences (a sample is enough; SentencePiece itself
  // samples at most input_sentence_size lines).
  static Vocab train(const std::vector<std::string>& sentences, int vocab_size,
                     const std::string& model_type = "unigram", int threads = 1);
  // The same over sentences held elsewhere (a sample of a corpus, not a copy
  // of it). character_coverage: the share of characters the pieces must
  // cover; the rest map to <unk> (SentencePiece recommends 0.9995 for
  // Chinese and Japanese, 1.0 for small character sets); below 1.0 the
  // characters left out are spelled in UTF-8 byte pieces (byte fallback),
  // so that no text becomes <unk>.
  static Vocab train(const std::vector<const std::string*>& sentences, int vocab_size,
                     double character_coverage, const std::string& model_type = "unigram",
                     int threads = 1);

  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int32_t>& ids) const;
  std::vector<std::string> pieces(const std::vector<int32_t>& ids) const;
  int size() const;
  const std::string& bytes() const { return bytes_; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string bytes_;
};

}  // namespace nmt
