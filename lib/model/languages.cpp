#include "model/languages.h"

#include <cctype>
#include <cstring>
#include <set>

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

std::string language_of_path(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  for (const char* packed : {".gz", ".xz", ".bz2", ".zst"})
    if (name.size() > std::strlen(packed) &&
        name.compare(name.size() - std::strlen(packed), std::string::npos, packed) == 0)
      name.resize(name.size() - std::strlen(packed));
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return "";
  const std::string ext = name.substr(dot + 1);
  // A language of two or three lowercase letters, then a region or script.
  size_t n = 0;
  while (n < ext.size() && ext[n] >= 'a' && ext[n] <= 'z') ++n;
  if (n < 2 || n > 3) return "";
  // What a corpus's files are, not which language.
  static const std::set<std::string> kinds = {"txt", "tsv", "csv", "tok", "bpe", "spm", "src",
                                              "tgt", "trg", "out", "hyp", "ref", "raw", "dat",
                                              "log", "xml", "sgm", "bin", "py"};
  if (kinds.count(ext.substr(0, n))) return "";
  if (n == ext.size()) return ext;
  if ((ext[n] != '_' && ext[n] != '-') || ext.size() - n - 1 < 2 || ext.size() - n - 1 > 4)
    return "";
  for (size_t k = n + 1; k < ext.size(); ++k)
    if (!std::isalpha(static_cast<unsigned char>(ext[k]))) return "";
  return ext;
}

}  // namespace nmt
