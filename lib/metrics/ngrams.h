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

// The n-grams of one call all have length n, so packing each element into a
// fixed-width slot, first element highest, orders the keys exactly as the
// sequences compare: sorting 128-bit integers instead of char32 strings
// gives the same counts in the same order, several times faster (chrF's
// character 6-grams of a news sentence).
inline NgramCounts count_ngrams(const std::u32string& seq, std::size_t n) {
  NgramCounts out;
  if (seq.size() < n || n == 0) return out;
  const std::size_t count = seq.size() - n + 1;
  char32_t max_el = 0;
  for (char32_t c : seq) max_el = std::max(max_el, c);
  const unsigned slot = max_el < (1u << 21) ? 21 : 32;
  if (n * slot <= 128) {
    struct Keyed {
      unsigned __int128 key;
      std::size_t pos;
    };
    std::vector<Keyed> keys(count);
    for (std::size_t i = 0; i < count; ++i) {
      unsigned __int128 k = 0;
      for (std::size_t j = 0; j < n; ++j) k = (k << slot) | seq[i + j];
      keys[i] = {k, i};
    }
    std::sort(keys.begin(), keys.end(),
              [](const Keyed& a, const Keyed& b) { return a.key < b.key; });
    for (std::size_t i = 0; i < count; ++i) {
      if (i > 0 && keys[i].key == keys[i - 1].key)
        ++out.back().second;
      else
        out.emplace_back(Ngram(seq.data() + keys[i].pos, n), 1);
    }
    return out;
  }
  std::vector<Ngram> grams;
  grams.reserve(count);
  for (std::size_t i = 0; i < count; ++i) grams.emplace_back(seq.data() + i, n);
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
