// N-gram counting shared by BLEU and chrF. N-grams are views into integer
// strings (code points for characters, interned ids for words), counted
// through sorted vectors: exact, and light on allocation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nmt::metrics {

using Ngram = std::u32string_view;
using NgramCounts = std::vector<std::pair<Ngram, int64_t>>;  // sorted by n-gram

inline NgramCounts count_ngrams(const std::u32string& seq, std::size_t n) {
  NgramCounts out;
  if (seq.size() < n) return out;
  std::vector<Ngram> grams;
  grams.reserve(seq.size() - n + 1);
  for (std::size_t i = 0; i + n <= seq.size(); ++i) grams.emplace_back(seq.data() + i, n);
  std::sort(grams.begin(), grams.end());
  for (const Ngram& g : grams) {
    if (!out.empty() && out.back().first == g)
      ++out.back().second;
    else
      out.emplace_back(g, 1);
  }
  return out;
}

// printf-style fixed decimals, as sacreBLEU formats its scores.
inline std::string format_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace nmt::metrics
