// The BLEU and chrF tokenisers and scorers on arbitrary hypothesis and
// reference text (split at the first newline), every tokeniser, cased and
// lowercased. Scores must be numbers in [0, 100].
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "io/text_file.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/tokenizers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto nl = text.find('\n');
  const std::string hyp = nmt::io::sanitize_utf8(text.substr(0, nl));
  const std::string ref =
      nmt::io::sanitize_utf8(nl == std::string::npos ? "" : text.substr(nl + 1));
  // Scores are percentages; exp(log(...)) may overshoot 100 in the last bit.
  auto check = [](double s) {
    if (!(s >= 0 && s <= 100 + 1e-9)) {
      std::fprintf(stderr, "score out of range: %.17g\n", s);
      __builtin_trap();
    }
  };
  try {
    for (const char* tok : {"13a", "intl", "none", "char", "zh"})
      for (bool lc : {false, true}) {
        nmt::metrics::BleuOptions o;
        o.tokenizer = nmt::metrics::parse_tokenizer(tok);
        o.lowercase = lc;
        if (!ref.empty()) check(nmt::metrics::sentence_bleu(hyp, {ref}, o).score);
      }
    for (int words : {0, 2}) {
      nmt::metrics::ChrfOptions o;
      o.word_order = words;
      if (!ref.empty()) check(nmt::metrics::sentence_chrf(hyp, {ref}, o).score);
    }
  } catch (const nmt::Error&) {
  }
  return 0;
}
