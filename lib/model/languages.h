// The languages of a multilingual model (ModelConfig::languages): which
// tokens a sentence is framed with for a pair of languages, and the list a
// user is shown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace nmt {

// The tokens a sentence gets for one pair of languages.
struct LanguageFraming {
  std::vector<int32_t> source_before;  // before the source's pieces
  std::vector<int32_t> source_after;   // after them (and after </s> where the model puts it there)
  std::vector<int32_t> target_given;   // the output's first tokens, given with log-probability 0

  // The source pieces a model taking `room` source tokens has room for
  // beside the language's.
  int64_t source_room(int64_t room) const {
    return room - static_cast<int64_t>(source_before.size() + source_after.size());
  }
  // A source's pieces with the language tokens around them.
  void wrap_source(std::vector<int32_t>& pieces) const {
    pieces.insert(pieces.begin(), source_before.begin(), source_before.end());
    pieces.insert(pieces.end(), source_after.begin(), source_after.end());
  }
};

// For a model of one language pair: nothing (and languages given are
// refused). For a multilingual one: the codes must be the model's; a
// missing or unknown one is refused with the list. Refusals are
// UsageErrors about the option source_lang or target_lang.
LanguageFraming language_framing(const ModelConfig& c, const std::string& source_lang,
                                 const std::string& target_lang);

// "eng_Latn fra_Latn ..." (the first `most`, then how many more).
std::string language_list(const ModelConfig& c, size_t most = 40);

// The language a corpus file's name gives, as parallel corpora are named
// (train.en.gz, news.de-en.de): its last extension, .gz aside, where it is
// a code of two or three letters (with a region: pt_BR, zh-Hans); empty
// where it names none.
std::string language_of_path(const std::string& path);

}  // namespace nmt
