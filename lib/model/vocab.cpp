#include "model/vocab.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "core/error.h"
#include "io/text_file.h"

// Exported by libsentencepiece but not declared in its installed headers:
// without it the trainer logs its whole command line to stderr before it
// reads --minloglevel.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}

namespace nmt {

namespace {

InputError not_spm(const std::string& what, const sentencepiece::util::Status& status) {
  return InputError((what.empty() ? "" : what + ": ") +
                    "invalid SentencePiece model: " + status.ToString());
}

}  // namespace

Vocab::Vocab() = default;
Vocab::~Vocab() = default;
Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;

Vocab Vocab::from_bytes(const std::string& model_bytes, const std::string& what) {
  Vocab v;
  v.sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = v.sp_->LoadFromSerializedProto(model_bytes);
  if (!status.ok()) throw not_spm(what, status);
  if (v.sp_->pad_id() != 0 || v.sp_->unk_id() != 1 || v.sp_->bos_id() != 2 || v.sp_->eos_id() != 3)
    throw InputError(
        std::string("SentencePiece model must use ids pad=0 unk=1 bos=2 eos=3 (train it with "
                    "spm_train") +
        " --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3)");
  return v;
}

std::string Vocab::bytes() const { return sp_ ? sp_->serialized_model_proto() : std::string(); }

Vocab Vocab::from_tokens(std::vector<std::string> tokens, const std::string& spm_bytes,
                         int32_t unk_id, const std::string& spm_what) {
  Vocab v;
  if (tokens.empty()) throw InputError("the vocabulary has no tokens");
  if (!spm_bytes.empty()) {
    v.sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = v.sp_->LoadFromSerializedProto(spm_bytes);
    if (!status.ok()) throw not_spm(spm_what, status);
  }
  v.ids_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    // The first of two equal tokens keeps the id, as a lookup table built
    // in order by Marian or CTranslate2 would.
    v.ids_.emplace(tokens[i], static_cast<int32_t>(i));
  if (unk_id >= static_cast<int64_t>(tokens.size()))
    throw InputError("the unknown-token id " + std::to_string(unk_id) + " is outside the " +
                     std::to_string(tokens.size()) + " tokens of the vocabulary");
  v.unk_ = unk_id;
  v.tokens_ = std::move(tokens);
  return v;
}

Vocab::Coverage Vocab::tokeniser_coverage() const {
  Coverage c;
  if (!imported() || !sp_) return c;
  for (int i = 0; i < sp_->GetPieceSize(); ++i) {
    if (sp_->IsControl(i) || sp_->IsUnknown(i) || sp_->IsUnused(i)) continue;
    ++c.pieces;
    if (!ids_.count(sp_->IdToPiece(i))) c.outside.push_back(sp_->IdToPiece(i));
  }
  return c;
}

std::vector<std::string> Vocab::sentencepiece_pieces(const std::string& spm_bytes,
                                                     const std::string& what) {
  sentencepiece::SentencePieceProcessor sp;
  const auto status = sp.LoadFromSerializedProto(spm_bytes);
  if (!status.ok()) throw not_spm(what, status);
  std::vector<std::string> out;
  out.reserve(sp.GetPieceSize());
  for (int i = 0; i < sp.GetPieceSize(); ++i) out.push_back(sp.IdToPiece(i));
  return out;
}

Vocab Vocab::from_file(const std::string& path) {
  return from_bytes(io::read_whole_file(path, "SentencePiece model"), path);
}

namespace {
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<const std::string*>& v) : v_(v) {}
  bool done() const override { return i_ >= v_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return *v_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<const std::string*>& v_;
  size_t i_ = 0;
};
}  // namespace

namespace {

// SentencePiece names its own options in its errors; nmt users set the size
// with --vocab-size, so say it that way.
InputError VocabSizeError(const std::string& spm_message, int size) {
  const std::string want = std::to_string(size);
  auto number_after = [&](const std::string& marker) -> std::string {
    const auto at = spm_message.find(marker);
    if (at == std::string::npos) return "";
    const auto b = spm_message.find_first_of("0123456789", at + marker.size());
    if (b == std::string::npos) return "";
    return spm_message.substr(b, spm_message.find_first_not_of("0123456789", b) - b);
  };
  if (std::string need = number_after(want + " vs "); !need.empty())
    return InputError("{vocab_size} " + want + " is too small for this text: it has " + need +
                      " distinct characters and special pieces; use {vocab_size} " + need +
                      " or more");
  if (std::string most = number_after("value <="); !most.empty())
    return InputError("{vocab_size} " + want + " is more than this text can fill; use " +
                      "{vocab_size} " + most + " or less");
  return InputError("SentencePiece could not train a vocabulary of " + want +
                    " pieces (change {vocab_size}): " + spm_message);
}

}  // namespace

Vocab Vocab::train(const std::vector<std::string>& sentences, int vocab_size,
                   const std::string& model_type, int threads) {
  std::vector<const std::string*> ptrs;
  ptrs.reserve(sentences.size());
  for (const std::string& s : sentences) ptrs.push_back(&s);
  return train(ptrs, vocab_size, 1.0, model_type, threads);
}

Vocab Vocab::train(const std::vector<const std::string*>& sentences, int vocab_size,
                   double character_coverage, const std::string& model_type, int threads) {
  VectorIterator it(sentences);
  std::string bytes;
  char coverage[32];
  std::snprintf(coverage, sizeof coverage, "%.6g", character_coverage);
  std::unordered_map<std::string, std::string> args = {
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", model_type},
      {"pad_id", "0"},
      {"unk_id", "1"},
      {"bos_id", "2"},
      {"eos_id", "3"},
      {"character_coverage", coverage},
      {"input_sentence_size", "1000000"},
      {"shuffle_input_sentence", "true"},
      {"hard_vocab_limit", "false"},
      {"minloglevel", "2"},
      {"num_threads", std::to_string(threads)},
  };
  // Characters below the coverage are spelled in UTF-8 byte pieces rather
  // than made <unk>.
  if (character_coverage < 1.0) args["byte_fallback"] = "true";
  sentencepiece::logging::SetMinLogLevel(2);
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &bytes);
  if (!status.ok()) throw VocabSizeError(status.ToString(), vocab_size);
  return from_bytes(bytes);
}

std::vector<int32_t> Vocab::encode(const std::string& text) const {
  if (!imported()) {
    std::vector<int> ids;
    sp_->Encode(text, &ids).IgnoreError();
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  std::vector<std::string> pieces;
  if (sp_) {
    sp_->Encode(text, &pieces).IgnoreError();
  } else {  // tokenised text: the tokens are what the spaces separate
    for (size_t i = 0; i < text.size();) {
      const size_t b = text.find_first_not_of(" \t\r\n", i);
      if (b == std::string::npos) break;
      const size_t e = std::min(text.find_first_of(" \t\r\n", b), text.size());
      pieces.push_back(text.substr(b, e - b));
      i = e;
    }
  }
  std::vector<int32_t> out;
  out.reserve(pieces.size());
  for (const std::string& p : pieces) {
    auto it = ids_.find(p);
    if (it != ids_.end()) {
      out.push_back(it->second);
    } else {
      if (unk_ < 0)
        throw InputError("\"" + p + "\" is not in the vocabulary, which has no unknown token");
      out.push_back(unk_);
    }
  }
  return out;
}

// Always one line (io::one_line): each translation is one output line.
std::string Vocab::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  if (!imported()) {
    sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &out).IgnoreError();
  } else if (sp_) {
    sp_->Decode(pieces(ids), &out).IgnoreError();
    // A token the SentencePiece model does not have (a shared vocabulary's
    // source piece) comes back as it is written: its word boundary "▁" is a
    // space; and a translation ending in a piece "▁" does not end in a
    // space. Both as Transformers' detokenisers write them.
    std::string spaced;
    for (size_t i = 0; i < out.size(); ++i)
      if (out.compare(i, 3, "\u2581") == 0)
        spaced += ' ', i += 2;
      else
        spaced += out[i];
    const size_t b = spaced.find_first_not_of(' '), e = spaced.find_last_not_of(' ');
    out = b == std::string::npos ? "" : spaced.substr(b, e - b + 1);
  } else {
    for (const std::string& t : pieces(ids)) out += (out.empty() ? "" : " ") + t;
  }
  return io::one_line(out);
}

std::vector<std::string> Vocab::pieces(const std::vector<int32_t>& ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int32_t id : ids)
    if (imported())
      out.push_back(id >= 0 && id < static_cast<int32_t>(tokens_.size()) ? tokens_[id] : "");
    else
      out.push_back(sp_->IdToPiece(id));
  return out;
}

int Vocab::size() const {
  if (imported()) return static_cast<int>(tokens_.size());
  return sp_ ? sp_->GetPieceSize() : 0;
}

}  // namespace nmt
