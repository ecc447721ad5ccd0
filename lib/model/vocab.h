// A subword vocabulary: text to ids and back. nmt's own is a SentencePiece
// model trained here with the SentencePiece library (never re-implemented),
// stored inside the model file, whose ids are the model's (0 <pad>, 1 <unk>,
// 2 <s>, 3 </s>). An imported model's is a list of tokens in id order
// (Marian's vocab.yml, CTranslate2's vocabulary files): text is cut into
// pieces by a SentencePiece model when there is one, else at spaces (the
// text is already tokenised), and each piece is looked up in the list.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
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

  // From the serialized model proto (the bytes of a .model file). `what`
  // (a path, an option) names the bytes in errors.
  static Vocab from_bytes(const std::string& model_bytes, const std::string& what = "");
  // An imported vocabulary: tokens[i] is id i; spm_bytes, when not empty, the
  // SentencePiece model that cuts text into those pieces and joins them
  // back. A piece not in the list is unk_id (or, without one, an error).
  static Vocab from_tokens(std::vector<std::string> tokens, const std::string& spm_bytes,
                           int32_t unk_id, const std::string& spm_what = "");
  // Every piece of a SentencePiece model, by its ids (a vocabulary that is
  // the SentencePiece model itself, as Marian can use one).
  static std::vector<std::string> sentencepiece_pieces(const std::string& spm_bytes,
                                                       const std::string& what = "");
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
  // The text of ids: always one line (io::one_line), as a translation is.
  std::string decode(const std::vector<int32_t>& ids) const;
  std::vector<std::string> pieces(const std::vector<int32_t>& ids) const;
  int size() const;
  // The SentencePiece model's bytes (empty: a token list without one),
  // serialised again when asked: only saving a model asks, and a loaded
  // vocabulary holds the model once, not twice.
  std::string bytes() const;
  // An imported vocabulary's tokens in id order; empty for nmt's own.
  const std::vector<std::string>& tokens() const { return tokens_; }
  bool imported() const { return !tokens_.empty(); }
  // An imported vocabulary's SentencePiece model against its tokens: its
  // ordinary pieces (not control, unknown or unused ones), and those that
  // are no token, which text holding them is read as <unk> for. Empty
  // without a SentencePiece model.
  struct Coverage {
    int64_t pieces = 0;
    std::vector<std::string> outside;
  };
  Coverage tokeniser_coverage() const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  int32_t unk_ = -1;
};

}  // namespace nmt
