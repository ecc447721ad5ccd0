// HTML documents and fragments (service/html_document.h) on any bytes.
// Properties: the lines grouped into fragments give back the input; a
// document that parses, written back over an identity translation and over
// one whose alignment is reversed, is well formed again, and the first
// holds the same text (where there is no code, which the second moves over
// other words); nothing else is thrown than InputError.
#include <cctype>
#include <string>
#include <vector>

#include "core/error.h"
#include "service/html_document.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  nmt::HtmlFragments fragments(size ? data[0] * 16 + 1 : 1);
  std::string joined;
  bool first = true;
  auto take = [&] {
    joined += (first ? "" : "\n") + fragments.take();
    first = false;
  };
  for (size_t at = 0; at <= input.size();) {
    const size_t end = std::min(input.find('\n', at), input.size());
    if (fragments.add(input.substr(at, end - at))) take();
    at = end + 1;
  }
  if (!fragments.empty()) take();
  if (joined != input) __builtin_trap();
  // Code in part of a word is left out of the text and may stand apart
  // from words where it is written back: the text is compared without it.
  std::string lower = input;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  bool code = false;
  for (const char* tag : {"<code", "<kbd", "<samp", "<var", "translate"})
    code = code || lower.find(tag) != std::string::npos;
  try {
    const nmt::HtmlDocument d(input);
    const std::vector<std::string> flows = d.flows();
    for (const bool reverse : {false, true}) {
      std::vector<nmt::AlignedText> translations;
      for (const std::string& f : flows) {
        nmt::AlignedText t{f, nmt::words_of(f), nmt::words_of(f), {}};
        const int n = static_cast<int>(t.source_words.size());
        for (int i = 0; i < n; ++i) t.alignment.emplace_back(i, reverse ? n - 1 - i : i);
        translations.push_back(std::move(t));
      }
      const std::string out = d.render(translations);
      const nmt::HtmlDocument again(out);  // throws, and traps below, if not well formed
      if (!reverse && !code && again.flows() != flows) __builtin_trap();
    }
  } catch (const nmt::InputError&) {
    // Only the input may be malformed: the output of a well-formed one may not.
    try {
      const nmt::HtmlDocument d(input);
    } catch (const nmt::InputError&) {
      return 0;
    }
    __builtin_trap();
  }
  return 0;
}
