// The text preprocessing that BLEU and chrF scores depend on, reproducing
// sacreBLEU 2.6.0 byte for byte: its `13a`, `intl`, `none` and `char`
// tokenisers, Python's str.lower(), str.split() and str.rstrip(). Unicode
// properties come from ICU, never from tables of our own, so that scores
// follow the Unicode data the system ships.
//
// Input is expected to be UTF-8. Where code points matter (intl, char,
// lowercasing) an ill-formed sequence is read as U+FFFD, as
// io::sanitize_utf8 would have made it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nmt::metrics {

enum class TokenizerKind { k13a, kIntl, kNone, kChar };

// "13a", "intl", "none", "char"; anything else throws nmt::InputError.
TokenizerKind parse_tokenizer(std::string_view name);
const char* tokenizer_name(TokenizerKind kind);

// Tokenises one line; tokens in the result are separated by single spaces.
std::string tokenize(std::string_view line, TokenizerKind kind);

// mteval-v13a.pl: unescape &quot; &amp; &lt; &gt;, split off ASCII
// punctuation, split '.' and ',' unless between digits, '-' after a digit.
std::string tokenize_13a(std::string_view line);
// mteval-v14.pl international: split off Unicode punctuation (\p{P}) unless
// next to a digit (\p{N}) on that side, and every symbol (\p{S}).
std::string tokenize_intl(std::string_view line);
// Every non-space character is a token.
std::string tokenize_char(std::string_view line);

// Python str.lower(): ICU full case mapping in the root locale, so that
// "İ" becomes "i̇" and a word-final "Σ" becomes "ς".
std::string lowercase(std::string_view s);

// Python str.isspace() for one code point: general category Zs or bidi
// class WS, B or S. That is Unicode White_Space plus U+001C..U+001F, which
// is why u_isUWhiteSpace alone would not match.
bool is_space(char32_t c);

// Python str.split() with no argument: runs of is_space() separate tokens;
// no empty tokens. The views point into `s`.
std::vector<std::string_view> split_whitespace(std::string_view s);

// Python str.rstrip() with no argument.
std::string_view rstrip_whitespace(std::string_view s);

// Code points of `s` (ill-formed sequences as U+FFFD).
std::u32string decode_utf8(std::string_view s);
void append_utf8(std::string& dst, char32_t c);

}  // namespace nmt::metrics
