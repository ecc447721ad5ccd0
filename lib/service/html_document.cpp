#include "service/html_document.h"

#include <libxml/HTMLparser.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <string_view>

#include "core/error.h"

namespace nmt {

namespace {

using Names = std::initializer_list<std::string_view>;

bool one_of(std::string_view name, Names names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool html_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Elements without content or end tag.
bool is_void(std::string_view n) {
  return one_of(n, {"area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link",
                    "meta", "param", "source", "track", "wbr"});
}
// Elements whose content is text up to their end tag, tags included.
bool is_raw_text(std::string_view n) {
  return one_of(n,
                {"script", "style", "xmp", "iframe", "noembed", "noframes", "title", "textarea"});
}
// Elements whose end tag HTML lets the next tag or the end imply.
bool optional_end(std::string_view n) {
  return one_of(n, {"p",      "li",       "dt",    "dd",    "tr",    "td",       "th",
                    "option", "optgroup", "thead", "tbody", "tfoot", "colgroup", "caption",
                    "rb",     "rt",       "rtc",   "rp",    "html",  "head",     "body"});
}
// Elements that end a run of text: what is on either side is translated apart.
bool is_block(std::string_view n) {
  return one_of(
      n, {"address", "article",  "aside",    "blockquote", "body",       "br",      "caption",
          "center",  "col",      "colgroup", "dd",         "details",    "dialog",  "dir",
          "div",     "dl",       "dt",       "fieldset",   "figcaption", "figure",  "footer",
          "form",    "frameset", "h1",       "h2",         "h3",         "h4",      "h5",
          "h6",      "head",     "header",   "hgroup",     "hr",         "html",    "legend",
          "li",      "main",     "menu",     "nav",        "noscript",   "ol",      "optgroup",
          "option",  "p",        "pre",      "section",    "select",     "summary", "table",
          "tbody",   "td",       "template", "tfoot",      "th",         "thead",   "title",
          "tr",      "ul",       "area",     "base",       "link",       "meta",    "param",
          "source",  "track",    "video",    "audio",      "canvas",     "object",  "script",
          "style",   "textarea", "xmp",      "iframe",     "noembed",    "noframes"});
}
// Start tags that close an open <p>.
bool closes_p(std::string_view n) {
  return one_of(n, {"address", "article", "aside", "blockquote", "details",    "dialog", "div",
                    "dl",      "dd",      "dt",    "fieldset",   "figcaption", "figure", "footer",
                    "form",    "h1",      "h2",    "h3",         "h4",         "h5",     "h6",
                    "header",  "hgroup",  "hr",    "li",         "main",       "menu",   "nav",
                    "ol",      "p",       "pre",   "section",    "table",      "ul"});
}

// How many of the innermost open elements HTML closes before a start tag
// of `name` (<li> closes an open <li>, <div> an open <p>).
size_t implied_ends(const std::vector<std::string>& open, std::string_view name) {
  size_t top = open.size();
  auto pop_if = [&](Names names) {
    if (top > 0 && one_of(open[top - 1], names)) --top;
  };
  if (closes_p(name)) pop_if({"p"});
  if (name == "li") pop_if({"li"});
  if (name == "dt" || name == "dd") pop_if({"dt", "dd"});
  if (one_of(name, {"td", "th", "tr", "thead", "tbody", "tfoot"})) pop_if({"td", "th"});
  if (one_of(name, {"tr", "thead", "tbody", "tfoot"})) pop_if({"tr"});
  if (one_of(name, {"thead", "tbody", "tfoot"})) pop_if({"thead", "tbody", "tfoot"});
  if (name == "option" || name == "optgroup") pop_if({"option"});
  if (name == "optgroup") pop_if({"optgroup"});
  if (one_of(name, {"rb", "rt", "rtc", "rp"})) pop_if({"rb", "rt", "rp"});
  if (name == "body") pop_if({"head"});
  return open.size() - top;
}

// How many of the innermost open elements an end tag of `name` closes:
// its element and those inside it whose end HTML implies; 0 if it closes
// none (it is not open, or an element inside it needs its own end tag).
size_t closed_by_end(const std::vector<std::string>& open, std::string_view name) {
  for (size_t i = open.size(); i-- > 0;) {
    if (open[i] == name) return open.size() - i;
    if (!optional_end(open[i])) return 0;
  }
  return 0;
}

enum class TokenKind { text, start, end, comment, incomplete };

struct Token {
  TokenKind kind = TokenKind::text;
  size_t begin = 0, end = 0;
  std::string name;  // of a start or end tag, in lower case
  bool self_closing = false, no_translate = false;
};

}  // namespace

// The elements open at a point of a document, innermost last, as its tags
// open and close them; and the raw-text element (script, style, ...) the
// next token stands in, if any.
struct OpenElements {
  std::vector<std::string> names;
  std::string raw;

  // A start tag: how many of the innermost elements HTML closes before it;
  // `opened`, whether it stays open (not void or self-closing).
  size_t start(const Token& t, bool& opened) {
    const size_t k = implied_ends(names, t.name);
    names.resize(names.size() - k);
    opened = !is_void(t.name) && !t.self_closing;
    if (opened) {
      names.push_back(t.name);
      if (is_raw_text(t.name)) raw = t.name;
    }
    return k;
  }
  // An end tag: how many of the innermost elements it closes, its own last;
  // 0 where it closes none (not well formed).
  size_t end(const Token& t) {
    const size_t k = closed_by_end(names, t.name);
    names.resize(names.size() - k);
    raw.clear();
    return k;
  }
};

namespace {

bool markup_at(const std::string& s, size_t i) {
  if (s[i] != '<' || i + 1 >= s.size()) return false;
  const char c = s[i + 1];
  return ascii_alpha(c) || c == '!' || c == '?' ||
         (c == '/' && i + 2 < s.size() && ascii_alpha(s[i + 2]));
}

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// A start or end tag at s[at] == '<': its name, attributes and end.
Token read_tag(const std::string& s, size_t at) {
  Token t;
  t.begin = at;
  const size_t n = s.size();
  size_t i = at + 1;
  t.kind = TokenKind::start;
  if (s[i] == '/') {
    t.kind = TokenKind::end;
    ++i;
  }
  while (i < n && !html_space(s[i]) && s[i] != '/' && s[i] != '>') t.name += lower(s[i++]);
  for (;;) {
    while (i < n && (html_space(s[i]) || s[i] == '/')) {
      t.self_closing = s[i] == '/';
      ++i;
    }
    if (i >= n) return {TokenKind::incomplete, at, n, "", false, false};
    if (s[i] == '>') break;
    t.self_closing = false;
    const size_t name_at = i;
    while (i < n && !html_space(s[i]) && s[i] != '/' && s[i] != '>' &&
           (s[i] != '=' || i == name_at))
      ++i;
    const std::string_view attr(s.data() + name_at, i - name_at);
    while (i < n && html_space(s[i])) ++i;
    if (i < n && s[i] == '=') {
      ++i;
      while (i < n && html_space(s[i])) ++i;
      size_t value_at = i, value_end = i;
      if (i < n && (s[i] == '"' || s[i] == '\'')) {
        const size_t close = s.find(s[i], i + 1);
        if (close == std::string::npos) return {TokenKind::incomplete, at, n, "", false, false};
        value_at = i + 1;
        value_end = close;
        i = close + 1;
      } else {
        while (i < n && !html_space(s[i]) && s[i] != '>') ++i;
        value_end = i;
      }
      if (iequal(attr, "translate") &&
          iequal(std::string_view(s.data() + value_at, value_end - value_at), "no"))
        t.no_translate = true;
    }
  }
  t.end = i + 1;
  return t;
}

// The token at s[at]; raw: the raw-text element it stands in, or "".
// seen: where a comment's or raw text's end may first stand (a stream read
// before up to there found none), so that reading on costs the new bytes.
Token next_token(const std::string& s, size_t at, const std::string& raw, size_t seen = 0) {
  const size_t n = s.size();
  Token t;
  t.begin = at;
  if (!raw.empty()) {
    // Text up to the element's end tag ("</script" and a space, / or >);
    // without one yet, the text up to where it could begin.
    size_t p = std::max(at, seen);
    for (;; p += 2) {
      p = s.find("</", p);
      const size_t after = p + 2 + raw.size();
      if (p == std::string::npos || after >= n) {
        const size_t keep = std::min(n - at, raw.size() + 3);
        if (n - keep > at) return {TokenKind::text, at, n - keep, "", false, false};
        return {TokenKind::incomplete, at, n, "", false, false};
      }
      if (iequal(std::string_view(s.data() + p + 2, raw.size()), raw) &&
          (html_space(s[after]) || s[after] == '/' || s[after] == '>'))
        break;
    }
    if (p > at) {
      t.end = p;
      return t;
    }
  }
  if (markup_at(s, at)) {
    auto until = [&](std::string_view close, size_t from) {
      const size_t e = s.find(close, std::max(from, seen));
      if (e == std::string::npos) return Token{TokenKind::incomplete, at, n, "", false, false};
      return Token{TokenKind::comment, at, e + close.size(), "", false, false};
    };
    if (s.compare(at, 4, "<!--") == 0) {
      if (s.compare(at + 4, 1, ">") == 0) return until(">", at + 4);
      if (s.compare(at + 4, 2, "->") == 0) return until(">", at + 5);
      return until("-->", at + 4);
    }
    if (s.compare(at, 9, "<![CDATA[") == 0) return until("]]>", at + 9);
    if (s[at + 1] == '!' || s[at + 1] == '?') return until(">", at + 2);
    return read_tag(s, at);
  }
  size_t e = at + 1;
  while (e < n && !markup_at(s, e)) ++e;
  t.end = e;
  return t;
}

void append_utf8(std::string& out, UChar32 c) {
  if (c <= 0 || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
  char buf[4];
  int32_t len = 0;
  U8_APPEND_UNSAFE(buf, len, c);
  out.append(buf, static_cast<size_t>(len));
}

// Character data with its references decoded: &amp; &#233; &#xE9; and
// HTML 4's named entities (libxml2's table); anything else stays as it is.
std::string decode_entities(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    // A reference is at most 32 bytes long: the search for its ';' stops there.
    const size_t semi =
        raw[i] == '&' ? raw.substr(0, i + 34).find(';', i + 1) : std::string_view::npos;
    if (semi == std::string_view::npos) {
      out += raw[i++];
      continue;
    }
    const std::string name(raw.substr(i + 1, semi - i - 1));
    UChar32 c = -1;
    if (name.size() > 1 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      const std::string digits = name.substr(hex ? 2 : 1);
      const char* ok = hex ? "0123456789abcdefABCDEF" : "0123456789";
      if (!digits.empty() && digits.size() <= 8 &&
          digits.find_first_not_of(ok) == std::string::npos)
        c = static_cast<UChar32>(std::stoul(digits, nullptr, hex ? 16 : 10));
    } else if (const htmlEntityDesc* e =
                   htmlEntityLookup(reinterpret_cast<const xmlChar*>(name.c_str()))) {
      c = static_cast<UChar32>(e->value);
    }
    if (c < 0) {
      out += raw[i++];
      continue;
    }
    append_utf8(out, c);
    i = semi + 1;
  }
  return out;
}

bool punctuation(UChar32 c) { return c >= 0 && u_ispunct(c); }

// Bytes of punctuation at the start (or the end) of [b, e) of s.
size_t punct_run(const std::string& s, size_t b, size_t e, bool from_end) {
  int32_t i = static_cast<int32_t>(from_end ? e : b);
  const int32_t lo = static_cast<int32_t>(b), hi = static_cast<int32_t>(e);
  while (from_end ? i > lo : i < hi) {
    int32_t j = i;
    UChar32 c = 0;
    if (from_end)
      U8_PREV(s.data(), lo, j, c);
    else
      U8_NEXT(s.data(), j, hi, c);
    if (!punctuation(c)) break;
    i = j;
  }
  return from_end ? e - static_cast<size_t>(i) : static_cast<size_t>(i) - b;
}

}  // namespace

std::vector<TextSpan> words_of(const std::string& text, size_t offset) {
  std::vector<TextSpan> words;
  const int32_t n = static_cast<int32_t>(text.size());
  size_t start = std::string::npos;
  for (int32_t i = 0; i < n;) {
    const int32_t at = i;
    UChar32 c = 0;
    U8_NEXT(text.data(), i, n, c);
    const bool space = c >= 0 && (u_isUWhiteSpace(c) || c == 0xA0 || c == 0x202F);
    if (space && start != std::string::npos) {
      words.push_back({offset + start, offset + static_cast<size_t>(at)});
      start = std::string::npos;
    } else if (!space && start == std::string::npos) {
      start = static_cast<size_t>(at);
    }
  }
  if (start != std::string::npos) words.push_back({offset + start, offset + text.size()});
  return words;
}

namespace {

// Text as HTML character data: &, <, > and U+00A0 as entities.
void append_escaped(std::string& out, std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '\xC2' && i + 1 < text.size() && text[i + 1] == '\xA0') {
      out += "&nbsp;";
      ++i;
    } else {
      out += c;
    }
  }
}

}  // namespace

// ---- Reading: tokens into a tree, the tree into raw pieces and flows ----

namespace {

struct Node {
  enum Kind { root, element, text, comment } kind = root;
  std::string name;
  TextSpan open, close;  // the start tag (or the text, the comment) and the end tag
  size_t outer_end = 0;  // where the element ends, its end tag included
  bool no_translate = false, raw = false, has_block = false;
  std::vector<int> children;
};

std::string where(size_t at) { return "at byte " + std::to_string(at + 1); }

// An element holding a block (an <a> around a <div>) is a block itself;
// svg and math hold no HTML blocks. Children come after their parents.
void mark_blocks(std::vector<Node>& nodes) {
  for (size_t i = nodes.size(); i-- > 1;)
    for (const int c : nodes[i].children) {
      const Node& ch = nodes[static_cast<size_t>(c)];
      if (ch.kind == Node::element && !one_of(ch.name, {"svg", "math"}) &&
          (is_block(ch.name) || ch.has_block))
        nodes[i].has_block = true;
    }
}

std::vector<Node> parse(const std::string& html) {
  std::vector<Node> nodes(1);
  std::vector<int> stack{0};  // the nodes of open.names, after the root
  OpenElements open;
  auto close = [&](size_t end) {
    nodes[static_cast<size_t>(stack.back())].outer_end = end;
    stack.pop_back();
  };
  auto add = [&](Node n) {
    nodes.push_back(std::move(n));
    const int id = static_cast<int>(nodes.size() - 1);
    nodes[static_cast<size_t>(stack.back())].children.push_back(id);
    return id;
  };
  for (size_t at = 0; at < html.size();) {
    const Token t = next_token(html, at, open.raw);
    switch (t.kind) {
      case TokenKind::incomplete:
        throw InputError(open.raw.empty() ? "a tag or comment " + where(at) + " is never closed"
                                          : "<" + open.raw + "> is never closed");
      case TokenKind::text:
      case TokenKind::comment: {
        Node n;
        n.kind = t.kind == TokenKind::text ? Node::text : Node::comment;
        n.open = {t.begin, t.end};
        n.raw = !open.raw.empty();
        add(std::move(n));
        break;
      }
      case TokenKind::start: {
        bool opened = false;
        for (size_t k = open.start(t, opened); k > 0; --k) close(t.begin);
        Node n;
        n.kind = Node::element;
        n.name = t.name;
        n.open = {t.begin, t.end};
        n.close = {t.end, t.end};
        n.no_translate = t.no_translate;
        n.outer_end = t.end;
        const int id = add(std::move(n));
        if (opened) stack.push_back(id);
        break;
      }
      case TokenKind::end: {
        const std::string inner = open.names.empty() ? "" : open.names.back();
        const size_t k = open.end(t);
        if (k == 0)
          throw InputError(
              "</" + t.name + "> " + where(t.begin) +
              (inner.empty() ? " closes no open element" : " does not close <" + inner + ">"));
        for (size_t j = 1; j < k; ++j) close(t.begin);
        nodes[static_cast<size_t>(stack.back())].close = {t.begin, t.end};
        close(t.end);
        break;
      }
    }
    at = t.end;
  }
  while (stack.size() > 1) {
    const Node& n = nodes[static_cast<size_t>(stack.back())];
    if (!optional_end(n.name))
      throw InputError("<" + n.name + "> " + where(n.open.begin) + " is never closed");
    close(html.size());
  }
  mark_blocks(nodes);
  return nodes;
}

enum class Role { block, kept_block, element, verbatim, atom };

Role role_of(const Node& n) {
  if (one_of(n.name, {"svg", "math"})) return Role::atom;
  // Raw text other than a title is script, style or a form's text.
  const bool kept = n.no_translate || (is_raw_text(n.name) && n.name != "title") ||
                    one_of(n.name, {"pre", "template"});
  if (is_block(n.name) || n.has_block) return kept ? Role::kept_block : Role::block;
  if (kept || one_of(n.name, {"code", "kbd", "samp", "var"})) return Role::verbatim;
  if (is_void(n.name)) return Role::atom;
  return Role::element;
}

// Walks the tree into pieces: raw bytes, and flows of text with their spans.
class Reader {
 public:
  Reader(const std::string& html, const std::vector<Node>& nodes,
         std::vector<HtmlDocument::Flow>& flows, std::vector<HtmlDocument::Piece>& pieces)
      : html_(html), nodes_(nodes), flows_(flows), pieces_(pieces) {}

  void walk(int id) {
    for (const int c : node(id).children) {
      const Node& n = node(c);
      if (n.kind == Node::text) {
        text(n);
        continue;
      }
      if (n.kind == Node::comment) {
        if (open_)
          atom(n.open);
        else
          raw(n.open);
        continue;
      }
      switch (role_of(n)) {
        case Role::block:
          end_flow();
          raw(n.open);
          walk(c);
          end_flow();
          raw(n.close);
          break;
        case Role::kept_block:
          end_flow();
          raw({n.open.begin, n.outer_end});
          break;
        case Role::atom:
          atom({n.open.begin, n.outer_end});
          break;
        case Role::verbatim: {
          const size_t s = begin_span(HtmlDocument::Span::verbatim, {n.open.begin, n.outer_end});
          words(c);
          end_span(s);
          break;
        }
        case Role::element: {
          const size_t s = begin_span(HtmlDocument::Span::element, n.open);
          walk(c);
          end_span(s);
          flow().spans[s].close = n.close;
          if (n.close.end > n.close.begin) took(n.close.end);
          break;
        }
      }
    }
  }

  void end_flow() {
    if (!open_) return;
    HtmlDocument::Flow& f = flow();
    unglue_code(f);
    const size_t end = tail_ != std::string::npos ? tail_ : last_;
    if (f.text.empty()) {
      flows_.pop_back();
      raw({first_, end});
    } else {
      pieces_.push_back({{first_, end}, static_cast<int>(flows_.size() - 1)});
    }
    if (tail_ != std::string::npos) raw({tail_, last_});
    open_ = false;
  }

 private:
  const Node& node(int id) const { return nodes_[static_cast<size_t>(id)]; }

  // Code that is part of a word ("<code>printf</code>s") cannot take the
  // place of whole target words: its text is not translated at all, and it
  // is written as it was where the words beside it went.
  static void unglue_code(HtmlDocument::Flow& f) {
    std::vector<TextSpan> cut;
    for (HtmlDocument::Span& s : f.spans) {
      if (s.kind != HtmlDocument::Span::verbatim || !glued(f.text, s.begin, s.end)) continue;
      size_t b = s.begin;
      while (b < s.end && html_space(f.text[b])) ++b;  // the space before it stays
      cut.push_back({b, s.end});
      s.kind = HtmlDocument::Span::atom;
    }
    if (cut.empty()) return;
    erase(f, cut);
    // What is left is spaced as the rest: one space between words.
    cut.clear();
    for (size_t i = 0; i < f.text.size(); ++i)
      if (f.text[i] == ' ' && (i == 0 || i + 1 == f.text.size() || f.text[i + 1] == ' '))
        cut.push_back({i, i + 1});
    erase(f, cut);
  }

  // Bytes out of a flow's text (disjoint spans, in order), its spans moved
  // to match: in time linear in the flow, however many.
  static void erase(HtmlDocument::Flow& f, const std::vector<TextSpan>& cut) {
    std::vector<size_t> removed_before{0};  // bytes removed by the first k cuts
    std::string text;
    size_t at = 0;
    for (const TextSpan& c : cut) {
      text.append(f.text, at, c.begin - at);
      at = c.end;
      removed_before.push_back(removed_before.back() + c.end - c.begin);
    }
    text.append(f.text, at, std::string::npos);
    f.text = std::move(text);
    auto moved = [&](size_t pos) {
      // Cuts ending at or before pos move it back by their length; one that
      // holds pos moves it to where that cut began.
      const size_t k = static_cast<size_t>(
          std::upper_bound(cut.begin(), cut.end(), pos,
                           [](size_t p, const TextSpan& c) { return p < c.end; }) -
          cut.begin());
      if (k < cut.size() && cut[k].begin < pos) return cut[k].begin - removed_before[k];
      return pos - removed_before[k];
    };
    for (HtmlDocument::Span& o : f.spans) {
      o.begin = moved(o.begin);
      o.end = moved(o.end);
    }
  }

  // Whether [b, e) of text joins a word on either side with more than
  // punctuation.
  static bool glued(const std::string& text, size_t b, size_t e) {
    while (b < e && html_space(text[b])) ++b;  // a space before it comes with its text
    size_t l = b, r = e;
    while (l > 0 && !html_space(text[l - 1])) --l;
    while (r < text.size() && !html_space(text[r])) ++r;
    return punct_run(text, l, b, false) < b - l || punct_run(text, e, r, true) < r - e;
  }
  HtmlDocument::Flow& flow() { return flows_.back(); }

  void raw(TextSpan s) {
    if (s.end <= s.begin) return;
    if (!pieces_.empty() && pieces_.back().flow < 0 && pieces_.back().raw.end == s.begin)
      pieces_.back().raw.end = s.end;
    else
      pieces_.push_back({s, -1});
  }

  void start_flow(size_t at) {
    if (open_) return;
    flows_.emplace_back();
    open_ = true;
    first_ = last_ = at;
    space_ = false;
    current_ = -1;
  }

  // A token added to the flow: white space before it is no longer its tail.
  void took(size_t end) {
    last_ = end;
    tail_ = std::string::npos;
  }

  void text(const Node& n) {
    size_t b = n.open.begin;
    if (!open_) {
      // White space before a flow is written as it was, not translated.
      while (b < n.open.end && html_space(html_[b])) ++b;
      raw({n.open.begin, b});
      if (b == n.open.end) return;
      start_flow(b);
    }
    append(decode_entities(std::string_view(html_.data() + b, n.open.end - b)));
    size_t t = n.open.end;
    while (t > b && html_space(html_[t - 1])) --t;
    took(n.open.end);
    if (t < n.open.end) tail_ = t;
  }

  // Text into the flow, runs of white space one space, none at its start.
  void append(const std::string& text) {
    std::string& out = flow().text;
    for (const char c : text) {
      if (html_space(c)) {
        space_ = true;
        continue;
      }
      if (space_ && !out.empty()) out += ' ';
      space_ = false;
      out += c;
    }
  }

  // The text of an element's descendants (verbatim: read by the model, not written).
  void words(int id) {
    for (const int c : node(id).children) {
      const Node& n = node(c);
      if (n.kind == Node::text && !n.raw)
        append(decode_entities(
            std::string_view(html_.data() + n.open.begin, n.open.end - n.open.begin)));
      else if (n.kind == Node::element && !one_of(n.name, {"svg", "math"}))
        words(c);
    }
  }

  size_t begin_span(HtmlDocument::Span::Kind kind, TextSpan bytes) {
    start_flow(bytes.begin);
    HtmlDocument::Span s;
    s.kind = kind;
    s.begin = flow().text.size();
    s.parent = current_;
    s.spaced = space_;
    s.open = bytes;
    flow().spans.push_back(s);
    took(bytes.end);
    const size_t id = flow().spans.size() - 1;
    if (kind == HtmlDocument::Span::element) current_ = static_cast<int>(id);
    return id;
  }

  void end_span(size_t id) {
    HtmlDocument::Span& s = flow().spans[id];
    s.end = flow().text.size();
    if (s.kind == HtmlDocument::Span::element) current_ = s.parent;
  }

  void atom(TextSpan bytes) { end_span(begin_span(HtmlDocument::Span::atom, bytes)); }

  const std::string& html_;
  const std::vector<Node>& nodes_;
  std::vector<HtmlDocument::Flow>& flows_;
  std::vector<HtmlDocument::Piece>& pieces_;
  bool open_ = false, space_ = false;
  size_t first_ = 0, last_ = 0;      // the open flow's bytes
  size_t tail_ = std::string::npos;  // where white space ending it starts
  int current_ = -1;                 // the innermost open element span
};

}  // namespace

HtmlDocument::HtmlDocument(std::string html) : html_(std::move(html)) {
  const std::vector<Node> nodes = parse(html_);
  Reader reader(html_, nodes, flows_, pieces_);
  reader.walk(0);
  reader.end_flow();
}

std::vector<std::string> HtmlDocument::flows() const {
  std::vector<std::string> texts;
  texts.reserve(flows_.size());
  for (const Flow& f : flows_) texts.push_back(f.text);
  return texts;
}

// ---- Writing: each span's place in the translation, then the markup ----

namespace {

struct Placed {
  size_t open = 0, close = 0;  // in the translation
  std::vector<size_t> children;
};

// Over ranges of words, in log time: the least of their first aligned
// target words (kNone if none is aligned) and the greatest of their last.
class AlignedRange {
 public:
  AlignedRange(const std::vector<int>& first, const std::vector<int>& last)
      : n_(first.size()), min_(2 * n_), max_(2 * n_) {
    for (size_t i = 0; i < n_; ++i) {
      min_[n_ + i] = first[i] < 0 ? kNone : first[i];
      max_[n_ + i] = last[i];
    }
    for (size_t i = n_; i-- > 1;) {
      min_[i] = std::min(min_[2 * i], min_[2 * i + 1]);
      max_[i] = std::max(max_[2 * i], max_[2 * i + 1]);
    }
  }
  std::pair<int, int> over(size_t b, size_t e) const {
    int lo = kNone, hi = -1;
    for (b += n_, e += n_; b < e; b /= 2, e /= 2) {
      if (b & 1) lo = std::min(lo, min_[b]), hi = std::max(hi, max_[b]), ++b;
      if (e & 1) --e, lo = std::min(lo, min_[e]), hi = std::max(hi, max_[e]);
    }
    return {lo, hi};
  }
  static constexpr int kNone = std::numeric_limits<int>::max();

 private:
  size_t n_;
  std::vector<int> min_, max_;
};

class Placer {
 public:
  Placer(const HtmlDocument::Flow& f, const AlignedText& t)
      : f_(f), t_(t), first_(aligned(t, true)), last_(aligned(t, false)), range_(first_, last_) {
    // The aligned word at or after each word, and at or before it.
    const size_t n = first_.size();
    next_.assign(n + 1, n);
    prev_.assign(n, -1);
    for (size_t w = n; w-- > 0;) next_[w] = first_[w] >= 0 ? w : next_[w + 1];
    for (size_t w = 0; w < n; ++w)
      prev_[w] = first_[w] >= 0 ? static_cast<int64_t>(w) : w ? prev_[w - 1] : -1;
  }

  // Where a span goes: around the target words aligned with the source
  // words it holds, or, holding none, where the words around it went.
  Placed place(const HtmlDocument::Span& s) const {
    const auto& src = t_.source_words;
    // The source words it overlaps: [w0, w1).
    const size_t w0 = static_cast<size_t>(
        std::upper_bound(src.begin(), src.end(), s.begin,
                         [](size_t at, const TextSpan& w) { return at < w.end; }) -
        src.begin());
    const size_t w1 = s.begin < s.end ? after(s.end) : w0;
    const size_t first_word = w0 < w1 ? next_[w0] : src.size();
    if (first_word >= w1) {
      const size_t at = anchor(s.begin, s.spaced);
      return {at, at, {}};
    }
    const size_t last_word = static_cast<size_t>(prev_[w1 - 1]);
    const auto [lo, hi] = range_.over(w0, w1);
    const TextSpan a = t_.target_words[static_cast<size_t>(lo)];
    const TextSpan b = t_.target_words[static_cast<size_t>(hi)];
    Placed p{a.begin, b.end, {}};
    const TextSpan sf = src[first_word], sl = src[last_word];
    // Punctuation at either end of the target words (a sentence's stop
    // after the last) is the span's only where the span's own text has
    // some there.
    const size_t held_b = std::max(s.begin, sf.begin), held_e = std::min(s.end, sl.end);
    if (punct_run(f_.text, held_b, held_e, false) == 0) {
      const size_t run = punct_run(t_.text, a.begin, a.end, false);
      if (run < a.end - a.begin) p.open += run;
    }
    if (punct_run(f_.text, held_b, held_e, true) == 0) {
      const size_t run = punct_run(t_.text, b.begin, b.end, true);
      if (run < b.end - b.begin) p.close -= run;
    }
    if (p.close < p.open) p.close = p.open;
    return p;
  }

 private:
  // Before the translation of the first aligned source word from `at` on,
  // or after that of the last before it; the other way round where the
  // span stood against the word before it ("word<img>").
  size_t anchor(size_t at, bool with_next) const {
    const size_t w = after(at);  // the first word starting at or after `at`
    const size_t next = next_[w];
    const int64_t prev = w > 0 ? prev_[w - 1] : -1;
    for (int pass = 0; pass < 2; ++pass) {
      if (with_next == (pass == 0)) {
        if (next < first_.size()) return t_.target_words[static_cast<size_t>(first_[next])].begin;
      } else if (prev >= 0) {
        return t_.target_words[static_cast<size_t>(last_[static_cast<size_t>(prev)])].end;
      }
    }
    return at == 0 ? 0 : t_.text.size();
  }

  // The first source word that starts at or after `at`.
  size_t after(size_t at) const {
    const auto& src = t_.source_words;
    return static_cast<size_t>(
        std::lower_bound(src.begin(), src.end(), at,
                         [](const TextSpan& w, size_t a) { return w.begin < a; }) -
        src.begin());
  }

  // Each source word's first (or last) aligned target word, -1 for none.
  static std::vector<int> aligned(const AlignedText& t, bool first) {
    const size_t ns = t.source_words.size(), nt = t.target_words.size();
    std::vector<int> v(ns, -1);
    for (const auto& [s, w] : t.alignment) {
      if (s < 0 || w < 0 || static_cast<size_t>(s) >= ns || static_cast<size_t>(w) >= nt) continue;
      int& x = v[static_cast<size_t>(s)];
      x = x < 0 ? w : first ? std::min(x, w) : std::max(x, w);
    }
    return v;
  }

  const HtmlDocument::Flow& f_;
  const AlignedText& t_;
  std::vector<int> first_, last_;  // of each source word's target words
  AlignedRange range_;
  std::vector<size_t> next_;       // the first aligned word from w on
  std::vector<int64_t> prev_;      // the last aligned word up to w
};

}  // namespace

std::string HtmlDocument::render(const std::vector<AlignedText>& translations) const {
  if (translations.size() != flows_.size())
    throw Error("an HTML document of " + std::to_string(flows_.size()) + " flows was given " +
                std::to_string(translations.size()) + " translations");
  std::string out;
  out.reserve(html_.size() * 2);
  for (const Piece& piece : pieces_) {
    if (piece.flow < 0) {
      out.append(html_, piece.raw.begin, piece.raw.end - piece.raw.begin);
      continue;
    }
    const Flow& f = flows_[static_cast<size_t>(piece.flow)];
    const AlignedText& t = translations[static_cast<size_t>(piece.flow)];
    const Placer placer(f, t);
    std::vector<Placed> placed;
    placed.reserve(f.spans.size() + 1);
    for (const Span& s : f.spans) placed.push_back(placer.place(s));
    Placed root{0, t.text.size(), {}};
    for (size_t i = 0; i < f.spans.size(); ++i)
      (f.spans[i].parent < 0 ? root : placed[static_cast<size_t>(f.spans[i].parent)])
          .children.push_back(i);
    // Parents first (spans are listed so): each child inside its parent,
    // after the sibling before it in the translation's order.
    auto nest = [&](Placed& parent) {
      std::stable_sort(parent.children.begin(), parent.children.end(),
                       [&](size_t a, size_t b) { return placed[a].open < placed[b].open; });
      size_t cursor = parent.open;
      for (const size_t c : parent.children) {
        Placed& p = placed[c];
        p.open = std::min(std::max(p.open, cursor), parent.close);
        p.close = std::min(std::max(p.close, p.open), parent.close);
        cursor = p.close;
      }
    };
    nest(root);
    for (size_t i = 0; i < f.spans.size(); ++i) nest(placed[i]);
    auto bytes = [&](TextSpan s) {
      return std::string_view(html_.data() + s.begin, s.end - s.begin);
    };
    const std::string_view text = t.text;
    auto emit = [&](auto&& self, const Placed& p, const Span* s) -> void {
      if (s && s->kind != Span::element) {
        out += bytes(s->open);
        return;
      }
      if (s) out += bytes(s->open);
      size_t at = p.open;
      for (const size_t c : p.children) {
        append_escaped(out, text.substr(at, placed[c].open - at));
        self(self, placed[c], &f.spans[c]);
        at = placed[c].close;
      }
      append_escaped(out, text.substr(at, p.close - at));
      if (s) out += bytes(s->close);
    };
    emit(emit, root, nullptr);
  }
  return out;
}

// ---- Fragments of a stream ----

bool HtmlFragments::add(const std::string& line) {
  if (started_) text_ += '\n';
  text_ += line;
  started_ = true;
  // A token left open ends only with a '>': without one, nothing to read.
  if (pending_ && line.find('>') == std::string::npos) return text_.size() > max_bytes_;
  pending_ = false;
  while (!broken_ && scanned_ < text_.size()) {
    const Token t = next_token(text_, scanned_, open_->raw, seen_);
    if (t.kind == TokenKind::incomplete) {
      pending_ = true;
      seen_ = text_.size() > 8 ? text_.size() - 8 : 0;  // an end cut at the line's end
      break;
    }
    seen_ = 0;
    bool opened = false;
    if (t.kind == TokenKind::start) open_->start(t, opened);
    if (t.kind == TokenKind::end && open_->end(t) == 0) broken_ = true;
    scanned_ = t.end;
  }
  return broken_ || (!pending_ && open_->names.empty()) || text_.size() > max_bytes_;
}

std::string HtmlFragments::take() {
  std::string out = std::move(text_);
  text_.clear();
  started_ = broken_ = pending_ = false;
  scanned_ = seen_ = 0;
  *open_ = OpenElements();
  return out;
}

HtmlFragments::HtmlFragments(size_t max_bytes)
    : open_(std::make_unique<OpenElements>()), max_bytes_(max_bytes) {}
HtmlFragments::~HtmlFragments() = default;

}  // namespace nmt
