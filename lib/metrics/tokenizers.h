// The text preprocessing that BLEU and chrF scores depend on, reproducing
// sacreBLEU 2.6.0 byte for byte: its `13a`, `intl`, `none`, `char`, `zh`,
// `ja-mecab`, `flores101` and `flores200` tokenisers, Python's str.lower(),
// str.split() and str.rstrip(). Unicode properties come from ICU, never from
// tables of our own, so that scores follow the Unicode data the system
// ships; ja-mecab is MeCab itself and flores* SentencePiece itself, the
// libraries sacreBLEU calls.
//
// Input is expected to be UTF-8. Where code points matter (intl, char, zh,
// lowercasing) an ill-formed sequence is read as U+FFFD, as
// io::sanitize_utf8 would have made it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nmt::metrics {

enum class TokenizerKind {
  k13a,
  kIntl,
  kNone,
  kChar,
  kZh,
  kJaMecab,
  kKoMecab,  // a name only: mecab-ko and its dictionary are not in Debian
  kSpm,      // sacreBLEU's old name for flores101; its signature says flores101
  kFlores101,
  kFlores200,
  kSpBleu1K,
};

// The names in kTokenizerNames; anything else throws nmt::InputError.
TokenizerKind parse_tokenizer(std::string_view name);
// sacreBLEU's -tok choices, in its order.
inline constexpr const char* kTokenizerNames[] = {"none",      "zh",        "13a",      "intl",
                                                  "char",      "ja-mecab",  "ko-mecab", "spm",
                                                  "flores101", "flores200", "spBLEU-1K"};
// The ones a training run's validation BLEU (and nmt shortlist's) takes:
// those that need no model file (ko-mecab is a name only).
inline constexpr const char* kValidationTokenizerNames[] = {"13a", "intl",     "char",
                                                            "zh",  "ja-mecab", "none"};
// The -tok name ("ja-mecab").
const char* tokenizer_name(TokenizerKind kind);
// The signature's tok: field, as sacreBLEU writes it: the name, except
// "ja-mecab-0.996-IPA" (the linked MeCab's version).
std::string tokenizer_signature(TokenizerKind kind);
// spm, flores101, flores200 and spBLEU-1K take a SentencePiece model file
// (spm_model).
bool tokenizer_needs_spm_model(TokenizerKind kind);

// Makes the tokeniser ready, so that a missing dictionary or model is
// reported before any work: MeCab's tagger and a SentencePiece model are
// loaded once per process and kept. Throws nmt::Error for ko-mecab, for a
// missing or unusable MeCab IPA dictionary, and (nmt::InputError) for a
// flores tokeniser without a readable spm_model.
void load_tokenizer(TokenizerKind kind, const std::string& spm_model = "");

// Tokenises one line; tokens in the result are separated by single spaces.
// spm_model is the SentencePiece model file of the SentencePiece ones.
std::string tokenize(std::string_view line, TokenizerKind kind, const std::string& spm_model = "");

// mteval-v13a.pl: unescape &quot; &amp; &lt; &gt;, split off ASCII
// punctuation, split '.' and ',' unless between digits, '-' after a digit.
std::string tokenize_13a(std::string_view line);
// sacreBLEU's TokenizerRegexp, 13a's rules without its unescaping and
// padding; zh ends with it.
std::string tokenize_regexp(std::string_view s);
// mteval-v14.pl international: split off Unicode punctuation (\p{P}) unless
// next to a digit (\p{N}) on that side, and every symbol (\p{S}).
std::string tokenize_intl(std::string_view line);
// Every non-space character is a token.
std::string tokenize_char(std::string_view line);
// sacreBLEU's zh: the line stripped, each character of its CJK ranges made
// a token, then 13a's regular expressions (not its unescaping or padding).
std::string tokenize_zh(std::string_view line);
// sacreBLEU's ja-mecab: the line stripped, MeCab -Owakati with Debian's IPA
// dictionary (/var/lib/mecab/dic/ipadic-utf8), the result stripped.
std::string tokenize_ja_mecab(std::string_view line);
// sacreBLEU's spm/flores101/flores200/spBLEU-1K: SentencePiece pieces of the line
// (EncodeAsPieces) joined with spaces.
std::string tokenize_spm(std::string_view line, const std::string& spm_model);

// Where ja-mecab reads MeCab's IPA dictionary (Debian's mecab-ipadic-utf8).
inline constexpr const char* kMecabIpadicDir = "/var/lib/mecab/dic/ipadic-utf8";

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
// Python str.strip() with no argument.
std::string_view strip_whitespace(std::string_view s);

// Code points of `s` (ill-formed sequences as U+FFFD).
std::u32string decode_utf8(std::string_view s);
void append_utf8(std::string& dst, char32_t c);

}  // namespace nmt::metrics
