// What the importers share: the other tools' number formats and small
// lookups over their vocabularies.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "core/dtype.h"  // bf16_to_float
#include "core/error.h"
#include "io/text_file.h"  // is_valid_utf8

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

// Throws unless every value is finite, naming the variable as the file
// calls it: a converted model must load, and every command refuses a
// non-finite weight.
inline void check_finite(const std::vector<float>& v, const std::string& what) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw InputError(what + " holds a non-finite value (" + std::to_string(v[i]) +
                       " at element " + std::to_string(i) + ")");
}

// n bytes at p as the start of out (memcpy's pointers must not be null, and
// an empty vector's data() may be).
inline void copy_bytes(void* out, const void* p, size_t n) {
  if (n) std::memcpy(out, p, n);
}

// A vocabulary's tokens are written into translations: each must be UTF-8
// and hold nothing that a reader of lines splits at (LF, CR, VT, FF, FS, GS,
// RS, NEL, U+2028, U+2029) or that ends a C string (NUL), so that an output
// line can never become two.
// one_per_line: the file holds a token per line, which errors then name.
inline void check_tokens(const std::vector<std::string>& tokens, const std::string& path,
                         bool one_per_line) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    auto refuse = [&](const std::string& why) {
      throw InputError(path + (one_per_line ? " line " + std::to_string(i + 1) : "") +
                       ": token " + std::to_string(i) + " (\"" + t + "\") " + why);
    };
    if (!io::is_valid_utf8(t)) refuse("is not valid UTF-8");
    for (size_t k = 0; k < t.size(); ++k) {
      const auto c = static_cast<unsigned char>(t[k]);
      const bool breaks = c == 0 || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
                          (c >= 0x1c && c <= 0x1e) ||
                          (c == 0xc2 && k + 1 < t.size() && t[k + 1] == '\x85') ||
                          (c == 0xe2 && t.compare(k, 3, "\u2028") == 0) ||
                          (c == 0xe2 && t.compare(k, 3, "\u2029") == 0);
      if (breaks)
        refuse("holds a line break or NUL, which would split a translation's output line");
    }
  }
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

// The language codes a vocabulary's tokens name, by their ids: with style
// "fairseq" NLLB's eng_Latn and M2M-100's __en__, with "opus" OPUS-MT's
// >>deu<<.
inline std::map<std::string, int> language_tokens(const std::vector<std::string>& tokens,
                                                  const std::string& style) {
  static const std::regex nllb("[a-z]{3}_[A-Z][a-z]{3}"), m2m("__([a-z]{2,3}(_[a-zA-Z]+)?)__"),
      opus(">>([a-zA-Z_]{2,12})<<");
  std::map<std::string, int> out;
  std::smatch m;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    std::string code;
    if (style == "fairseq" && std::regex_match(t, nllb)) code = t;
    if (style == "fairseq" && std::regex_match(t, m, m2m)) code = m[1];
    if (style == "opus" && std::regex_match(t, m, opus)) code = m[1];
    if (!code.empty()) out.emplace(code, static_cast<int>(i));
  }
  return out;
}

}  // namespace nmt::convert
