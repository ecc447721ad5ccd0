#include "model/languages.h"

#include "core/error.h"

namespace nmt {

std::string language_list(const ModelConfig& c, size_t most) {
  std::string out;
  size_t n = 0;
  for (const auto& [code, id] : c.languages) {
    if (n++ == most) return out + " ... (" + std::to_string(c.languages.size()) + " in all)";
    out += (out.empty() ? "" : " ") + code;
  }
  return out;
}

LanguageFraming language_framing(const ModelConfig& c, const std::string& source_lang,
                                 const std::string& target_lang) {
  const std::string source_option = "source_lang", target_option = "target_lang";
  LanguageFraming f;
  if (c.languages.empty()) {
    if (!source_lang.empty() || !target_lang.empty())
      throw about_option<UsageError>(source_lang.empty() ? target_option : source_option,
                                     ": this model translates one language pair and has no "
                                     "language tokens");
    return f;
  }
  auto id = [&](const std::string& code, const std::string& option) {
    if (code.empty())
      throw about_option<UsageError>(
          option, ": this model is multilingual; say which language (" + language_list(c) + ")");
    const auto it = c.languages.find(code);
    if (it == c.languages.end())
      throw about_option<UsageError>(
          option,
          ": \"" + code + "\" is not one of this model's languages (" + language_list(c) + ")");
    return static_cast<int32_t>(it->second);
  };
  if (c.source_language == "before") f.source_before.push_back(id(source_lang, source_option));
  if (c.source_language == "after")
    f.source_after = {static_cast<int32_t>(c.eos_id), id(source_lang, source_option)};
  const int32_t t = id(target_lang, target_option);
  if (c.target_language == "source")
    f.source_before.push_back(t);
  else
    f.target_given.push_back(t);
  return f;
}

}  // namespace nmt
