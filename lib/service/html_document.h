// HTML translated with its markup kept (Bergamot's method, with nmt's own
// word alignments). The text between block boundaries (p, div, li, td,
// h1-h6, br, ...) is a flow, translated on its own; block elements stay
// where they are. Inline elements (b, i, a, span, ...) are carried to the
// target words aligned with the source words they enclosed, nested as they
// were. Tags and their attributes, void elements, comments, and what is not
// translated (script, style, pre, textarea, code, kbd, samp, var, svg, math,
// and any element with translate="no") are written back byte for byte.
// Entities are decoded before translation; the translation's &, <, > and
// no-break spaces are written as entities.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nmt {

// Bytes [begin, end) of a text.
struct TextSpan {
  size_t begin = 0, end = 0;
};

// The runs of a text between white space (HTML's, and Unicode's spaces such
// as U+00A0 that SentencePiece reads as word boundaries too), offset added.
std::vector<TextSpan> words_of(const std::string& text, size_t offset = 0);

// A flow's translation and which of its words came from which source words.
struct AlignedText {
  std::string text;                            // decoded: no entities
  std::vector<TextSpan> source_words;          // in the flow's text (HtmlDocument::flows)
  std::vector<TextSpan> target_words;          // in text
  std::vector<std::pair<int, int>> alignment;  // (source word, target word)
};

class HtmlDocument {
 public:
  // Throws InputError naming what is not well formed: an end tag that
  // closes no open element, an element left open that HTML does not let
  // close by itself, a tag or comment cut off at the end.
  explicit HtmlDocument(std::string html);

  // Each flow's text: entities decoded, tags left out, white space between
  // words one space, none at either end.
  std::vector<std::string> flows() const;
  // The document with each flow (in the order of flows()) replaced by its
  // translation. Output is well formed where the input was: each inline
  // element is opened and closed once, inside its parent.
  std::string render(const std::vector<AlignedText>& translations) const;

  // An inline element of a flow, by where it stands in the flow's text.
  struct Span {
    enum Kind {
      element,   // its tags are carried to the words it enclosed
      verbatim,  // written as it was over the words its text became (code, translate="no")
      atom,      // written as it was where the words around it went (img, a comment, svg)
    };
    Kind kind = element;
    size_t begin = 0, end = 0;  // in the flow's text
    int parent = -1;            // the enclosing span, -1 for none
    bool spaced = false;        // white space before it: it belongs with the words after it
    TextSpan open, close;       // bytes of its tags (element); of all of it (verbatim, atom)
  };
  struct Flow {
    std::string text;
    std::vector<Span> spans;  // parents before children
  };
  struct Piece {
    TextSpan raw;   // bytes written as they were
    int flow = -1;  // or a flow
  };

 private:
  std::string html_;
  std::vector<Flow> flows_;
  std::vector<Piece> pieces_;  // in document order: raw bytes, or a flow
};

// Lines of a stream of HTML grouped into fragments that can be translated
// on their own: a fragment ends at the end of a line where every element it
// opened is closed (a document in one <html> element is one fragment), or
// at the first line where it cannot be well formed, or where it grows past
// max_bytes (then it is translated as text).
struct OpenElements;

class HtmlFragments {
 public:
  explicit HtmlFragments(size_t max_bytes);
  ~HtmlFragments();
  HtmlFragments(HtmlFragments&&) noexcept = default;
  HtmlFragments& operator=(HtmlFragments&&) noexcept = default;
  // Adds a line (without its "\n"); true when the fragment is complete.
  bool add(const std::string& line);
  // The fragment so far, its lines joined by "\n", and starts the next.
  std::string take();
  bool empty() const { return !started_; }

 private:
  std::string text_;
  bool started_ = false;
  size_t scanned_ = 0;                  // bytes of text_ read as whole tokens
  bool pending_ = false;                // a token from scanned_ on is not complete yet
  size_t seen_ = 0;                     // where its end may first stand
  std::unique_ptr<OpenElements> open_;  // at scanned_
  bool broken_ = false;
  size_t max_bytes_;
};

}  // namespace nmt
