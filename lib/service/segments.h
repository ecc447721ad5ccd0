// A line of a document as the segments a model translates: its sentences
// (ICU's sentence break rules for the source language, with that language's
// abbreviations, "Mr." or "z. B.", not taken for sentence ends), and any
// sentence longer than the model takes cut at clause boundaries into pieces
// it can take. What lies between segments is kept, so that their
// translations join into a line laid out as the source was.
#pragma once

#include <unicode/uversion.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

U_NAMESPACE_BEGIN
class BreakIterator;
U_NAMESPACE_END

namespace nmt {

struct Segment {
  std::string text;   // without white space around it
  std::string after;  // what follows it: white space, or nothing
};

struct Segmented {
  std::string lead;               // white space before the first segment
  std::vector<Segment> segments;  // in order; none for a blank line
};

class SentenceSplitter {
 public:
  // language: a BCP 47 code ("de", "en-GB", "zh"); its sentence rules and
  // abbreviations where ICU has them, the root rules otherwise. Throws
  // InputError naming the key source_language for a code ICU cannot read.
  explicit SentenceSplitter(const std::string& language);
  ~SentenceSplitter();
  SentenceSplitter(const SentenceSplitter&) = delete;
  SentenceSplitter& operator=(const SentenceSplitter&) = delete;

  // The line's sentences. Ill-formed UTF-8 is not expected (the reader
  // replaced it).
  Segmented split(const std::string& line) const;

 private:
  std::unique_ptr<icu::BreakIterator> sentences_;
  std::vector<std::string> abbreviations_;  // besides ICU's
};

// The whole line as one segment, its surrounding white space kept apart.
Segmented whole_line(const std::string& line);

// A text the model cannot take (fits(text) false) as pieces it can: cut
// after semicolons, then colons, then commas (their CJK forms too), then at
// white space, then between characters, each level only where the one
// before leaves a piece too long; neighbouring parts are joined again while
// they fit. A text that fits is one piece.
std::vector<Segment> pieces_that_fit(const Segment& text,
                                     const std::function<bool(const std::string&)>& fits);

// The translations of a line's segments (one each) joined with the
// source's white space: between two segments, what the source had, except
// that a space is added where the source had none (sentences of Chinese or
// Japanese) and the translations on both sides are not such text, and
// dropped where both are. starts, when given, receives where each
// translation starts in what is returned.
std::string join_segments(const Segmented& source, const std::vector<std::string>& translations,
                          std::vector<size_t>* starts = nullptr);

// Whether a text starts or ends with a character of a script written
// without spaces between words (Han, Hiragana, Katakana, Thai, ...) or CJK
// punctuation.
bool starts_unspaced(const std::string& text);
bool ends_unspaced(const std::string& text);

}  // namespace nmt
