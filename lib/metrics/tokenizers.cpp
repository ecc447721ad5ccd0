// sacreBLEU's tokenisers as explicit left-to-right scans. Each regex rule of
// the Python original is a single substitution pass whose matches do not
// overlap, so each pass below consumes exactly the characters the regex
// engine would and then resumes after them; this reproduces quirks such as
// "a.." keeping its second '.' attached in the 13a pass for '.' after a
// non-digit.
#include "metrics/tokenizers.h"

#include <mecab.h>
#include <sentencepiece_processor.h>
#include <sys/stat.h>
#include <unicode/ucasemap.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <map>
#include <memory>
#include <mutex>

#include "core/dynlib.h"
#include "core/error.h"

namespace nmt::metrics {

namespace {

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

// Decodes the code point at s[i] and advances i past it (one maximal
// ill-formed subpart at a time, read as U+FFFD).
char32_t next_code_point(std::string_view s, int32_t& i) {
  UChar32 c;
  U8_NEXT_OR_FFFD(reinterpret_cast<const uint8_t*>(s.data()), i, static_cast<int32_t>(s.size()), c);
  return static_cast<char32_t>(c);
}

// Joins the whitespace-separated tokens of `s` with single spaces, which is
// how every sacreBLEU tokeniser ends (' '.join(line.split())).
std::string normalize_spaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::string_view tok : split_whitespace(s)) {
    if (!out.empty()) out += ' ';
    out.append(tok);
  }
  return out;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string::size_type pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

// mteval's first 13a rule: these ASCII characters always stand alone.
bool is_13a_isolated(unsigned char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

bool has_category(char32_t c, uint32_t mask) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & mask) != 0;
}
bool is_punct(char32_t c) { return has_category(c, U_GC_P_MASK); }
bool is_symbol(char32_t c) { return has_category(c, U_GC_S_MASK); }
bool is_number(char32_t c) { return has_category(c, U_GC_N_MASK); }

}  // namespace

TokenizerKind parse_tokenizer(std::string_view name) {
  if (name == "13a") return TokenizerKind::k13a;
  if (name == "intl") return TokenizerKind::kIntl;
  if (name == "none") return TokenizerKind::kNone;
  if (name == "char") return TokenizerKind::kChar;
  if (name == "zh") return TokenizerKind::kZh;
  if (name == "ja-mecab") return TokenizerKind::kJaMecab;
  if (name == "ko-mecab") return TokenizerKind::kKoMecab;
  if (name == "spm") return TokenizerKind::kSpm;
  if (name == "flores101") return TokenizerKind::kFlores101;
  if (name == "flores200") return TokenizerKind::kFlores200;
  if (name == "spBLEU-1K") return TokenizerKind::kSpBleu1K;
  std::string names;
  for (const char* n : kTokenizerNames) names += std::string(names.empty() ? "" : ", ") + n;
  throw InputError("unknown tokenizer '" + std::string(name) + "': expected one of " + names);
}

const char* tokenizer_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::k13a:
      return "13a";
    case TokenizerKind::kIntl:
      return "intl";
    case TokenizerKind::kNone:
      return "none";
    case TokenizerKind::kChar:
      return "char";
    case TokenizerKind::kZh:
      return "zh";
    case TokenizerKind::kJaMecab:
      return "ja-mecab";
    case TokenizerKind::kKoMecab:
      return "ko-mecab";
    case TokenizerKind::kSpm:
      return "spm";
    case TokenizerKind::kFlores101:
      return "flores101";
    case TokenizerKind::kFlores200:
      return "flores200";
    case TokenizerKind::kSpBleu1K:
      return "spBLEU-1K";
  }
  return "?";
}

bool tokenizer_needs_spm_model(TokenizerKind kind) {
  return kind == TokenizerKind::kSpm || kind == TokenizerKind::kFlores101 ||
         kind == TokenizerKind::kFlores200 || kind == TokenizerKind::kSpBleu1K;
}

std::string tokenize(std::string_view line, TokenizerKind kind, const std::string& spm_model) {
  switch (kind) {
    case TokenizerKind::k13a:
      return tokenize_13a(line);
    case TokenizerKind::kIntl:
      return tokenize_intl(line);
    case TokenizerKind::kNone:
      return std::string(line);
    case TokenizerKind::kChar:
      return tokenize_char(line);
    case TokenizerKind::kZh:
      return tokenize_zh(line);
    case TokenizerKind::kJaMecab:
      return tokenize_ja_mecab(line);
    case TokenizerKind::kKoMecab:
      load_tokenizer(kind);  // throws: says what is missing
      break;
    case TokenizerKind::kSpm:
    case TokenizerKind::kFlores101:
    case TokenizerKind::kFlores200:
    case TokenizerKind::kSpBleu1K:
      return tokenize_spm(line, spm_model);
  }
  return std::string(line);
}

// Every rule below looks at ASCII characters only ([0-9], '.', ',', '-' and
// the isolated set), and UTF-8 never puts ASCII bytes inside a multi-byte
// character, so scanning bytes gives the same matches as scanning code
// points.
std::string tokenize_13a(std::string_view line) {
  std::string s(line);
  replace_all(s, "<skipped>", "");
  replace_all(s, "-\n", "");
  replace_all(s, "\n", " ");
  if (s.find('&') != std::string::npos) {
    // Sequential, as in mteval: "&amp;quot;" becomes "&quot;", not '"'.
    replace_all(s, "&quot;", "\"");
    replace_all(s, "&amp;", "&");
    replace_all(s, "&lt;", "<");
    replace_all(s, "&gt;", ">");
  }

  // Padding with spaces lets a final "." after a number split off (mteval
  // v13a does the same; the intl and zh tokenisers do not).
  return tokenize_regexp(" " + s + " ");
}

// sacreBLEU's TokenizerRegexp, the part 13a and zh share.
std::string tokenize_regexp(std::string_view s) {
  std::string a;
  a.reserve(s.size() * 2 + 2);
  for (char c : s) {
    if (is_13a_isolated(static_cast<unsigned char>(c))) {
      a += ' ';
      a += c;
      a += ' ';
    } else {
      a += c;
    }
  }

  auto is_dot_comma = [](char c) { return c == '.' || c == ','; };
  std::string b;
  b.reserve(a.size() * 2);
  // ([^0-9])([.,]) -> "\1 \2 "
  for (std::size_t i = 0; i < a.size();) {
    if (i + 1 < a.size() && !is_ascii_digit(a[i]) && is_dot_comma(a[i + 1])) {
      b += a[i];
      b += ' ';
      b += a[i + 1];
      b += ' ';
      i += 2;
    } else {
      b += a[i++];
    }
  }
  a.clear();
  // ([.,])([^0-9]) -> " \1 \2"
  for (std::size_t i = 0; i < b.size();) {
    if (i + 1 < b.size() && is_dot_comma(b[i]) && !is_ascii_digit(b[i + 1])) {
      a += ' ';
      a += b[i];
      a += ' ';
      a += b[i + 1];
      i += 2;
    } else {
      a += b[i++];
    }
  }
  b.clear();
  // ([0-9])(-) -> "\1 \2 "
  for (std::size_t i = 0; i < a.size();) {
    if (i + 1 < a.size() && is_ascii_digit(a[i]) && a[i + 1] == '-') {
      b += a[i];
      b += " - ";
      i += 2;
    } else {
      b += a[i++];
    }
  }
  return normalize_spaces(b);
}

// sacreBLEU's _UCODE_RANGES. Two of its ranges are written '\u20000' ..
// '\u2a6d6' and '\u2f800' .. '\u2fa1d': Python reads each as two
// characters ('\u2000' then '0'), so comparing one character against them
// takes in U+2001..U+2A6D and U+2F81..U+2FA1 (inside the Kangxi radicals
// anyway), and no character outside the BMP. That is what sacreBLEU does,
// so it is what this table says.
namespace {
bool is_zh_split(char32_t c) {
  static constexpr char32_t kRanges[][2] = {
      {0x3400, 0x4db5}, {0x4e00, 0x9fa5}, {0x9fa6, 0x9fbb}, {0xf900, 0xfa2d}, {0xfa30, 0xfa6a},
      {0xfa70, 0xfad9}, {0x2001, 0x2a6d}, {0x2f81, 0x2fa1}, {0xff00, 0xffef}, {0x2e80, 0x2eff},
      {0x3000, 0x303f}, {0x31c0, 0x31ef}, {0x2f00, 0x2fdf}, {0x2ff0, 0x2fff}, {0x3100, 0x312f},
      {0x31a0, 0x31bf}, {0xfe10, 0xfe1f}, {0xfe30, 0xfe4f}, {0x2600, 0x26ff}, {0x2700, 0x27bf},
      {0x3200, 0x32ff}, {0x3300, 0x33ff}};
  if (c < 0x2001) return false;
  for (const auto& r : kRanges)
    if (c >= r[0] && c <= r[1]) return true;
  return false;
}
}  // namespace

std::string tokenize_zh(std::string_view line) {
  const std::string_view s = strip_whitespace(line);
  std::string padded;
  padded.reserve(s.size() * 2);
  const auto n = static_cast<int32_t>(s.size());
  int32_t i = 0;
  while (i < n) {
    const int32_t start = i;
    const char32_t c = next_code_point(s, i);
    const std::string_view bytes = s.substr(start, static_cast<std::size_t>(i - start));
    if (is_zh_split(c)) {
      padded += ' ';
      padded.append(bytes);
      padded += ' ';
    } else {
      padded.append(bytes);
    }
  }
  return tokenize_regexp(padded);
}

std::string tokenize_intl(std::string_view line) {
  std::u32string s = decode_utf8(line);
  std::u32string t;
  t.reserve(s.size() * 2);
  // (\P{N})(\p{P}) -> "\1 \2 "
  for (std::size_t i = 0; i < s.size();) {
    if (i + 1 < s.size() && !is_number(s[i]) && is_punct(s[i + 1])) {
      t += s[i];
      t += U' ';
      t += s[i + 1];
      t += U' ';
      i += 2;
    } else {
      t += s[i++];
    }
  }
  s.clear();
  // (\p{P})(\P{N}) -> " \1 \2"
  for (std::size_t i = 0; i < t.size();) {
    if (i + 1 < t.size() && is_punct(t[i]) && !is_number(t[i + 1])) {
      s += U' ';
      s += t[i];
      s += U' ';
      s += t[i + 1];
      i += 2;
    } else {
      s += t[i++];
    }
  }
  // (\p{S}) -> " \1 ", then collapse whitespace.
  std::string out;
  out.reserve(s.size() * 2);
  for (char32_t c : s) {
    if (is_symbol(c)) {
      out += ' ';
      append_utf8(out, c);
      out += ' ';
    } else {
      append_utf8(out, c);
    }
  }
  return normalize_spaces(out);
}

std::string tokenize_char(std::string_view line) {
  std::string out;
  out.reserve(line.size() * 2);
  int32_t i = 0;
  const auto n = static_cast<int32_t>(line.size());
  while (i < n) {
    int32_t start = i;
    char32_t c = next_code_point(line, i);
    if (is_space(c)) continue;
    if (!out.empty()) out += ' ';
    out.append(line.data() + start, static_cast<std::size_t>(i - start));
  }
  return out;
}

std::string lowercase(std::string_view s) {
  // ASCII-only text (most of it) needs no ICU round trip.
  bool ascii = true;
  for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    std::string out(s);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  // A UCaseMap is cheap to use but not to open, and not safe to share.
  thread_local std::unique_ptr<UCaseMap, decltype(&ucasemap_close)> map(nullptr, &ucasemap_close);
  UErrorCode err = U_ZERO_ERROR;
  if (!map) {
    map.reset(ucasemap_open("", 0, &err));  // "" = root locale, like Python
    if (U_FAILURE(err)) throw Error(std::string("ICU ucasemap_open failed: ") + u_errorName(err));
  }
  // Full case mapping can grow a string (e.g. U+0130 -> "i" + U+0307).
  std::string out(s.size() + 16, '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    err = U_ZERO_ERROR;
    int32_t len = ucasemap_utf8ToLower(map.get(), &out[0], static_cast<int32_t>(out.size()),
                                       s.data(), static_cast<int32_t>(s.size()), &err);
    if (err == U_BUFFER_OVERFLOW_ERROR) {
      out.resize(static_cast<std::size_t>(len));
      continue;
    }
    if (U_FAILURE(err)) throw Error(std::string("ICU lowercasing failed: ") + u_errorName(err));
    out.resize(static_cast<std::size_t>(len));
    return out;
  }
  throw Error("ICU lowercasing failed: buffer size changed between calls");
}

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
  const auto uc = static_cast<UChar32>(c);
  if (u_charType(uc) == U_SPACE_SEPARATOR) return true;
  const UCharDirection dir = u_charDirection(uc);
  return dir == U_WHITE_SPACE_NEUTRAL || dir == U_BLOCK_SEPARATOR || dir == U_SEGMENT_SEPARATOR;
}

std::vector<std::string_view> split_whitespace(std::string_view s) {
  std::vector<std::string_view> tokens;
  const auto n = static_cast<int32_t>(s.size());
  int32_t i = 0;
  int32_t start = -1;  // start of the current token, -1 between tokens
  while (i < n) {
    int32_t here = i;
    char32_t c;
    if (static_cast<unsigned char>(s[i]) < 0x80)
      c = static_cast<unsigned char>(s[i++]);
    else
      c = next_code_point(s, i);
    if (is_space(c)) {
      if (start >= 0) tokens.push_back(s.substr(start, here - start));
      start = -1;
    } else if (start < 0) {
      start = here;
    }
  }
  if (start >= 0) tokens.push_back(s.substr(start));
  return tokens;
}

std::string_view rstrip_whitespace(std::string_view s) {
  const auto n = static_cast<int32_t>(s.size());
  int32_t i = 0;
  int32_t end = 0;  // end of the last non-space character
  while (i < n) {
    char32_t c = next_code_point(s, i);
    if (!is_space(c)) end = i;
  }
  return s.substr(0, end);
}

std::string_view strip_whitespace(std::string_view s) {
  s = rstrip_whitespace(s);
  const auto n = static_cast<int32_t>(s.size());
  int32_t i = 0;
  while (i < n) {
    int32_t here = i;
    if (!is_space(next_code_point(s, i))) return s.substr(here);
  }
  return s.substr(s.size());
}

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto n = static_cast<int32_t>(s.size());
  int32_t i = 0;
  while (i < n) out += next_code_point(s, i);
  return out;
}

void append_utf8(std::string& dst, char32_t c) {
  if (c < 0x80) {
    dst += static_cast<char>(c);
    return;
  }
  uint8_t buf[U8_MAX_LENGTH];
  int32_t len = 0;
  UBool bad = false;
  U8_APPEND(buf, len, U8_MAX_LENGTH, static_cast<UChar32>(c), bad);
  if (bad) {
    dst += "\xEF\xBF\xBD";
    return;
  }
  dst.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(len));
}

// MeCab and SentencePiece: loaded once per process (loading the IPA
// dictionary takes longer than tokenising a test set), kept to the end.
namespace {

// sacreBLEU checks the dictionary by its entry count: pip's ipadic has
// 392,126 entries, Debian's mecab-ipadic-utf8 392,127 (one more word).
constexpr unsigned kIpadicSizes[] = {392126, 392127};

// MeCab's C API, from libmecab.so.2 when -tok ja-mecab is first used
// (core/dynlib.h).
#define NMT_MECAB_FUNCTIONS(X) \
  X(mecab_new2)                \
  X(mecab_destroy)             \
  X(mecab_sparse_tostr)        \
  X(mecab_strerror)            \
  X(mecab_dictionary_info)     \
  X(mecab_version)
NMT_DYNLIB_TABLE(MecabApi, NMT_MECAB_FUNCTIONS);

const MecabApi& mecab_api() {
  return open_library<MecabApi>(NMT_MECAB_SONAME, "-tok ja-mecab", "libmecab2");
}

class Mecab {
 public:
  static Mecab& get() {
    static Mecab m;  // thread-safe initialisation; throws again on the next call if it failed
    return m;
  }
  std::string parse(std::string_view line) {
    // MeCab reads a C string, as the Python binding passes it: text after
    // a NUL byte is not seen.
    const std::string text(line.substr(0, line.find('\0')));
    std::lock_guard<std::mutex> lock(mu_);  // a Tagger keeps one lattice
    const char* out = api_.mecab_sparse_tostr(tagger_.get(), text.c_str());
    if (out == nullptr)
      throw Error(std::string("MeCab could not parse a line: ") +
                  api_.mecab_strerror(tagger_.get()));
    return std::string(out);
  }

 private:
  Mecab() {
    struct stat st {};
    const std::string sys_dic = std::string(kMecabIpadicDir) + "/sys.dic";
    if (::stat(sys_dic.c_str(), &st) != 0)
      throw Error(std::string("-tok ja-mecab needs MeCab's IPA dictionary in ") + kMecabIpadicDir +
                  " (Debian package mecab-ipadic-utf8), and " + sys_dic + " is not there");
    // An empty resource file: nothing from a user's mecabrc (such as a user
    // dictionary, which sacreBLEU refuses) changes the result.
    const std::string args = std::string("-r /dev/null -d ") + kMecabIpadicDir + " -Owakati";
    tagger_ = {api_.mecab_new2(args.c_str()), api_.mecab_destroy};
    if (!tagger_)
      throw Error(std::string("-tok ja-mecab: MeCab could not load ") + kMecabIpadicDir + ": " +
                  api_.mecab_strerror(nullptr));
    const mecab_dictionary_info_t* d = api_.mecab_dictionary_info(tagger_.get());
    bool ipa = false;
    for (unsigned n : kIpadicSizes) ipa |= d != nullptr && d->size == n;
    if (!ipa || d->next != nullptr)
      throw Error(std::string("-tok ja-mecab: ") + kMecabIpadicDir +
                  " is not MeCab's IPA dictionary alone (" +
                  (d ? std::to_string(d->size) : std::string("no")) +
                  " entries; sacreBLEU expects 392,126 or Debian's 392,127)");
  }
  const MecabApi& api_ = mecab_api();
  std::unique_ptr<mecab_t, decltype(&::mecab_destroy)> tagger_{nullptr, nullptr};
  std::mutex mu_;
};

// SentencePiece models by path; Encode is const and thread-safe.
const sentencepiece::SentencePieceProcessor& spm_processor(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<sentencepiece::SentencePieceProcessor>> models;
  std::lock_guard<std::mutex> lock(mu);
  auto it = models.find(path);
  if (it != models.end()) return *it->second;
  if (path.empty())
    throw InputError(
        "the SentencePiece tokenisers (spm, flores101, flores200, spBLEU-1K) need a model file "
        "({spm_model} FILE)");
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->Load(path);
  if (!status.ok())
    throw InputError("{spm_model} " + path + ": not a SentencePiece model (" + status.ToString() +
                     ")");
  return *models.emplace(path, std::move(sp)).first->second;
}

}  // namespace

std::string tokenize_ja_mecab(std::string_view line) {
  return std::string(strip_whitespace(Mecab::get().parse(strip_whitespace(line))));
}

std::string tokenize_spm(std::string_view line, const std::string& spm_model) {
  std::vector<std::string> pieces;
  const auto status = spm_processor(spm_model).Encode(std::string(line), &pieces);
  if (!status.ok()) throw Error("SentencePiece could not encode a line: " + status.ToString());
  std::string out;
  for (const std::string& p : pieces) {
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

void load_tokenizer(TokenizerKind kind, const std::string& spm_model) {
  switch (kind) {
    case TokenizerKind::kJaMecab:
      Mecab::get();
      return;
    case TokenizerKind::kKoMecab:
      throw Error(
          "-tok ko-mecab needs mecab-ko and its dictionary mecab-ko-dic, which are not in Debian "
          "and not in this build of nmt");
    case TokenizerKind::kSpm:
    case TokenizerKind::kFlores101:
    case TokenizerKind::kFlores200:
    case TokenizerKind::kSpBleu1K:
      spm_processor(spm_model);
      return;
    default:
      return;
  }
}

std::string tokenizer_signature(TokenizerKind kind) {
  // sacreBLEU: tagger.version() + "-IPA", the library's version.
  if (kind == TokenizerKind::kJaMecab)
    return std::string("ja-mecab-") + mecab_api().mecab_version() + "-IPA";
  if (kind == TokenizerKind::kSpm) return "flores101";  // sacreBLEU's SPM_MODELS["spm"]
  return tokenizer_name(kind);
}

}  // namespace nmt::metrics
