#include "service/segments.h"

#include <unicode/brkiter.h>
#include <unicode/filteredbrk.h>
#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include <algorithm>

#include "core/error.h"

namespace nmt {

namespace {

UChar32 first_char(const std::string& s) {
  if (s.empty()) return U_SENTINEL;
  UChar32 c = 0;
  int32_t i = 0;
  U8_NEXT(s.data(), i, static_cast<int32_t>(s.size()), c);
  return c;
}

UChar32 last_char(const std::string& s) {
  if (s.empty()) return U_SENTINEL;
  UChar32 c = 0;
  int32_t i = static_cast<int32_t>(s.size());
  U8_PREV(s.data(), 0, i, c);
  return c;
}

bool unspaced(UChar32 c) {
  if (c < 0) return false;
  if ((c >= 0x3000 && c <= 0x303F) || (c >= 0xFF00 && c <= 0xFFEF)) return true;  // CJK punctuation
  UErrorCode st = U_ZERO_ERROR;
  switch (uscript_getScript(c, &st)) {
    case USCRIPT_HAN:
    case USCRIPT_HIRAGANA:
    case USCRIPT_KATAKANA:
    case USCRIPT_THAI:
    case USCRIPT_LAO:
    case USCRIPT_KHMER:
    case USCRIPT_MYANMAR:
      return true;
    default:
      return false;
  }
}

// Where the white space at the end of [begin, end) of s starts.
size_t trim_end(const std::string& s, size_t begin, size_t end) {
  int32_t i = static_cast<int32_t>(end);
  while (i > static_cast<int32_t>(begin)) {
    int32_t j = i;
    UChar32 c = 0;
    U8_PREV(s.data(), static_cast<int32_t>(begin), j, c);
    if (c < 0 || !u_isUWhiteSpace(c)) break;
    i = j;
  }
  return static_cast<size_t>(i);
}

// Where the white space at the start of [begin, end) of s ends.
size_t trim_start(const std::string& s, size_t begin, size_t end) {
  int32_t i = static_cast<int32_t>(begin);
  while (i < static_cast<int32_t>(end)) {
    int32_t j = i;
    UChar32 c = 0;
    U8_NEXT(s.data(), j, static_cast<int32_t>(end), c);
    if (c < 0 || !u_isUWhiteSpace(c)) break;
    i = j;
  }
  return static_cast<size_t>(i);
}

// The parts of a segment cut after every character that `cut_after`
// accepts and at white space (which goes to the part before as `after`);
// level 4 cuts between any two characters.
std::vector<Segment> cut(const Segment& s, int level) {
  auto boundary = [level](UChar32 c) {
    switch (level) {
      case 0:
        return c == ';' || c == 0xFF1B;
      case 1:
        return c == ':' || c == 0xFF1A;
      case 2:
        return c == ',' || c == 0xFF0C || c == 0x3001;
      default:
        return false;
    }
  };
  const std::string& t = s.text;
  const int32_t n = static_cast<int32_t>(t.size());
  std::vector<Segment> parts;
  size_t start = 0;
  for (int32_t i = 0; i < n;) {
    UChar32 c = 0;
    U8_NEXT(t.data(), i, n, c);
    const bool space = c >= 0 && u_isUWhiteSpace(c);
    size_t end = static_cast<size_t>(i);  // the part ends here, white space follows
    // ASCII punctuation ends a clause where a space follows ("12,000" and
    // ',"' go on); the CJK forms are followed by none.
    const bool spaced = c < 0x80 && c != U_SENTINEL;
    if (level == 3 && space)
      end = trim_end(t, start, static_cast<size_t>(i));
    else if (!(level == 4 || (boundary(c) && (!spaced || trim_start(t, end, t.size()) > end))))
      continue;
    const size_t next = trim_start(t, static_cast<size_t>(i), t.size());
    if (end == start || next >= t.size()) continue;  // no part before, or none after
    parts.push_back({t.substr(start, end - start), t.substr(end, next - end)});
    start = next;
    i = static_cast<int32_t>(next);
  }
  parts.push_back({t.substr(start), s.after});
  return parts;
}

std::vector<Segment> fit(const Segment& s, int level,
                         const std::function<bool(const std::string&)>& fits) {
  if (level > 4 || fits(s.text)) return {s};
  std::vector<Segment> parts = cut(s, level);
  if (parts.size() == 1) return fit(s, level + 1, fits);
  // Neighbours joined again while the model takes them.
  std::vector<Segment> joined{parts[0]};
  for (size_t i = 1; i < parts.size(); ++i) {
    Segment& last = joined.back();
    std::string both = last.text + last.after + parts[i].text;
    if (fits(both)) {
      last.text = std::move(both);
      last.after = parts[i].after;
    } else {
      joined.push_back(parts[i]);
    }
  }
  std::vector<Segment> out;
  for (const Segment& p : joined)
    for (Segment& q : fit(p, level + 1, fits)) out.push_back(std::move(q));
  return out;
}

// Abbreviations that ICU 72's lists lack (its English one has "Mr." but not
// "Dr."; its German one cannot take "z." beside its own "z.B.") and that
// come before a capital: a sentence does not end at them.
std::vector<std::string> more_abbreviations(const std::string& language) {
  if (language == "de")
    return {"z.",    "d.",    "u.",    "o.",    "s.",   "v.",   "i.",   "Dr.",  "Prof.",
            "Hr.",   "Fr.",   "Nr.",   "St.",   "Str.", "ca.",  "bzw.", "vgl.", "ggf.",
            "evtl.", "inkl.", "zzgl.", "bzgl.", "Abb.", "Kap.", "Tel.", "Mio.", "Mrd."};
  if (language == "en")
    return {"Dr.", "St.",  "Jr.",   "Sr.", "Prof.", "Gen.", "Gov.", "Sen.", "Rep.",
            "Lt.", "Col.", "Capt.", "No.", "vs.",   "Fig.", "cf.",  "e.g.", "approx."};
  if (language == "fr")
    return {"M.", "MM.", "Mme.", "Mlle.", "Dr.", "Pr.", "St.", "Ste.", "cf.", "p.", "env."};
  return {};
}

}  // namespace

SentenceSplitter::SentenceSplitter(const std::string& language) {
  UErrorCode st = U_ZERO_ERROR;
  const icu::Locale locale = icu::Locale::forLanguageTag(language, st);
  if (U_FAILURE(st) || locale.isBogus())
    throw about_option<InputError>("source_language",
                                   language + " is not a language code (de, en-GB, zh-Hans)");
  std::unique_ptr<icu::BreakIterator> rules(icu::BreakIterator::createSentenceInstance(locale, st));
  std::unique_ptr<icu::FilteredBreakIteratorBuilder> abbreviations(
      icu::FilteredBreakIteratorBuilder::createInstance(locale, st));
  if (st == U_MISSING_RESOURCE_ERROR) {  // ICU lists none for the language (zh, ja)
    st = U_ZERO_ERROR;
    abbreviations.reset(icu::FilteredBreakIteratorBuilder::createInstance(st));
  }
  if (U_FAILURE(st) || !rules || !abbreviations)
    throw Error(std::string("ICU's sentence rules could not be loaded: ") + u_errorName(st));
  sentences_.reset(abbreviations->wrapIteratorWithFilter(rules.release(), st));
  if (U_FAILURE(st) || !sentences_)
    throw Error(std::string("ICU's sentence rules could not be loaded: ") + u_errorName(st));
  abbreviations_ = more_abbreviations(locale.getLanguage());
}

SentenceSplitter::~SentenceSplitter() = default;

Segmented SentenceSplitter::split(const std::string& line) const {
  Segmented out;
  const size_t begin = trim_start(line, 0, line.size());
  out.lead = line.substr(0, begin);
  if (begin == line.size()) return out;
  UErrorCode st = U_ZERO_ERROR;
  UText* text = utext_openUTF8(nullptr, line.data(), static_cast<int64_t>(line.size()), &st);
  std::unique_ptr<icu::BreakIterator> it(sentences_->clone());
  it->setText(text, st);
  if (U_FAILURE(st)) {
    utext_close(text);
    return whole_line(line);
  }
  // A boundary is a UTF-8 byte offset: the text is UTF-8.
  size_t start = begin;
  for (int32_t b = it->following(static_cast<int32_t>(begin)); b != icu::BreakIterator::DONE;
       b = it->next()) {
    const size_t end = static_cast<size_t>(b);
    const size_t text_end = trim_end(line, start, end);
    if (text_end > start)
      out.segments.push_back(
          {line.substr(start, text_end - start), line.substr(text_end, end - text_end)});
    else if (!out.segments.empty())
      out.segments.back().after += line.substr(start, end - start);
    start = end;
  }
  utext_close(text);
  // A sentence that ends in one of the abbreviations ICU's list lacks goes
  // on into the next.
  for (size_t i = 0; i + 1 < out.segments.size();) {
    Segment& s = out.segments[i];
    const size_t word = s.text.find_last_of(" \t");
    const std::string last = s.text.substr(word == std::string::npos ? 0 : word + 1);
    if (std::find(abbreviations_.begin(), abbreviations_.end(), last) == abbreviations_.end()) {
      ++i;
      continue;
    }
    s.text += s.after + out.segments[i + 1].text;
    s.after = out.segments[i + 1].after;
    out.segments.erase(out.segments.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
  return out;
}

Segmented whole_line(const std::string& line) {
  Segmented out;
  const size_t begin = trim_start(line, 0, line.size());
  out.lead = line.substr(0, begin);
  if (begin == line.size()) return out;
  const size_t end = trim_end(line, begin, line.size());
  out.segments.push_back({line.substr(begin, end - begin), line.substr(end)});
  return out;
}

std::vector<Segment> pieces_that_fit(const Segment& text,
                                     const std::function<bool(const std::string&)>& fits) {
  return fit(text, 0, fits);
}

bool starts_unspaced(const std::string& text) { return unspaced(first_char(text)); }
bool ends_unspaced(const std::string& text) { return unspaced(last_char(text)); }

std::string join_segments(const Segmented& source, const std::vector<std::string>& translations,
                          std::vector<size_t>* starts) {
  std::string out = source.lead;
  const size_t n = std::min(source.segments.size(), translations.size());
  if (starts) starts->clear();
  for (size_t i = 0; i < n; ++i) {
    if (starts) starts->push_back(out.size());
    out += translations[i];
    std::string sep = source.segments[i].after;
    if (i + 1 < n && !translations[i].empty() && !translations[i + 1].empty()) {
      const bool both = ends_unspaced(translations[i]) && starts_unspaced(translations[i + 1]);
      if (both && sep.find_first_not_of(" \t") == std::string::npos)
        sep.clear();
      else if (!both && sep.empty())
        sep = " ";
    }
    out += sep;
  }
  return out;
}

}  // namespace nmt
