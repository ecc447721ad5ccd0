// What the importers share: the other tools' number formats and small
// lookups over their vocabularies.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"  // bf16_to_float

namespace nmt::convert {

// IEEE binary16 to float, exactly (every half is a float).
inline float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while (!(m & 0x400));
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// n little-endian binary16 values (unaligned) to floats.
inline void widen_f16(const char* p, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    out[i] = half_to_float(h);
  }
}

// A vocabulary of one token per line (CR before LF dropped); with
// first_field, each line's text before a tab (SentencePiece's .vocab).
inline std::vector<std::string> token_lines(const std::string& text, bool first_field) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (first_field) line = line.substr(0, line.find('\t'));
    out.push_back(std::move(line));
    at = end + 1;
  }
  return out;
}

// --spm as given: one SentencePiece model for both sides, or the source's
// then the target's; always two (or none).
inline std::vector<std::string> spm_pair(std::vector<std::string> spm) {
  if (spm.size() == 1) spm.push_back(spm[0]);
  return spm;
}

// The id of a token in a vocabulary in id order; -1 if absent.
inline int32_t id_of(const std::vector<std::string>& tokens, const std::string& t) {
  const auto it = std::find(tokens.begin(), tokens.end(), t);
  return it == tokens.end() ? -1 : static_cast<int32_t>(it - tokens.begin());
}

// "(512, 512)" for messages.
inline std::string shape_text(const std::vector<int64_t>& s) {
  std::string o;
  for (int64_t d : s) o += (o.empty() ? "" : ", ") + std::to_string(d);
  return "(" + o + ")";
}

}  // namespace nmt::convert
