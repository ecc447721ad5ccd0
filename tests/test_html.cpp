// HTML translated with its markup (service/html_document.h): what is
// translated (flows), what is written back byte for byte, inline elements
// carried across word alignments (checked against every alignment of a
// three-word sentence), what is not well formed, and how a stream of lines
// is cut into fragments.
#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

#include "core/error.h"
#include "service/html_document.h"

using namespace nmt;

namespace {

using Pairs = std::vector<std::pair<int, int>>;

AlignedText aligned(const std::string& source, const std::string& target, Pairs pairs) {
  return {target, words_of(source), words_of(target), std::move(pairs)};
}

AlignedText identity(const std::string& text) {
  Pairs pairs;
  const size_t n = words_of(text).size();
  for (size_t i = 0; i < n; ++i) pairs.emplace_back(static_cast<int>(i), static_cast<int>(i));
  return aligned(text, text, pairs);
}

// A one-flow snippet rendered over a translation.
std::string render1(const std::string& html, const std::string& target, const Pairs& pairs) {
  const HtmlDocument d(html);
  const std::vector<std::string> flows = d.flows();
  REQUIRE(flows.size() == 1);
  return d.render({aligned(flows[0], target, pairs)});
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("HTML flows: block elements end them, inline tags and entities do not") {
  const HtmlDocument d(
      "<p>A <b>man</b> in an\n   <i>orange</i> hat.</p>\n<div>Tom &amp; Jerry &eacute;t&#233; "
      "&#x41;&nbsp;x &bogus; &lt;</div><br>Last <img src=a.png> line<script>var a = '<b>';"
      "</script><pre>kept</pre><p translate=\"no\">kept</p> and <code>a &lt; b</code>.");
  CHECK(d.flows() == std::vector<std::string>{"A man in an orange hat.",
                                              "Tom & Jerry \xC3\xA9t\xC3\xA9 A\xC2\xA0x &bogus; <",
                                              "Last line", "and a < b."});
}

TEST_CASE("HTML is written back byte for byte under an identity translation") {
  for (const std::string html : {
           "<p>A <b>man</b> in an <i>orange <u>hat</u></i>.</p>",
           "<ul>\n  <li>one <a href=\"x\" title='t &amp; u'>two</a>\n  <li>three</li>\n</ul>\n",
           "<div>x<br/>y <img src=\"a.png\" alt=\"A\">z</div>",
           "<p>Run <code>make &amp;&amp; install</code> now.</p>",
           "<script>if (a < b) document.write('<b>x</b>');</script><p>T</p>",
           "<!DOCTYPE html>\n<html><head><title>T t</title><meta charset=utf-8></head>"
           "<body><p>x y</p></body></html>",
           "<table><tr><td>a<td>b</table>",
           "<p translate=\"no\">Keep <b>this</b></p><pre>  a   b </pre><textarea>x</textarea>",
           "<a href=\"/\"><div>in a block</div></a><svg><text>z</text></svg>",
           "  plain text, no markup  ",
       }) {
    CAPTURE(html);
    const HtmlDocument d(html);
    std::vector<AlignedText> same;
    for (const std::string& f : d.flows()) same.push_back(identity(f));
    CHECK(d.render(same) == html);
  }
}

TEST_CASE("HTML inline elements go where their words went") {
  // Reordered, nested, one word to two, punctuation left out, none aligned.
  CHECK(render1("a <b>red</b> car", "ein Auto rot", {{0, 0}, {1, 2}, {2, 1}}) ==
        "ein Auto <b>rot</b>");
  CHECK(render1("<i>very <b>red</b></i> car", "Auto sehr rot", {{0, 1}, {1, 2}, {2, 0}}) ==
        "Auto <i>sehr <b>rot</b></i>");
  CHECK(render1("<b>children</b> play", "die Kinder spielen", {{0, 0}, {0, 1}, {1, 2}}) ==
        "<b>die Kinder</b> spielen");
  CHECK(render1("Hello <b>world</b>!", "Hallo Welt!", {{0, 0}, {1, 1}}) == "Hallo <b>Welt</b>!");
  CHECK(render1("a <b>b</b> c", "x y", {{0, 0}, {2, 1}}) == "x <b></b>y");
  CHECK(render1("a <img src=i.png>b c", "x y", {{0, 0}, {1, 1}}) == "x <img src=i.png>y");
  CHECK(render1("a<img src=i.png> b", "x y", {{0, 0}, {1, 1}}) == "x<img src=i.png> y");
  // Inside a word, a void element takes none of it (the fuzzer's find).
  CHECK(render1("a b<img src=i.png>c d", "x y z", {{0, 0}, {1, 1}, {2, 2}}) ==
        "x y<img src=i.png> z");
  // Entities decoded for the model, the translation's written as entities.
  CHECK(render1("Tom &amp; <b>Jerry</b>", "Tom & Jerry\xC2\xA0<3", {{0, 0}, {1, 1}, {2, 2}}) ==
        "Tom &amp; <b>Jerry</b>&nbsp;&lt;3");
  // Code in part of a word is not read, and goes where the word went.
  CHECK(HtmlDocument("Use <code>printf</code>s (<code>man 3</code>).").flows() ==
        std::vector<std::string>{"Use s (man 3)."});
  CHECK(render1("Use <code>printf</code>s here", "Hier s verwenden", {{0, 2}, {1, 1}, {2, 0}}) ==
        "Hier <code>printf</code>s verwenden");
  CHECK(render1("<code>a</code><code>b</code> c", "c", {{0, 0}}) ==
        "<code>a</code><code>b</code>c");
  // Code is written as it was where its words went.
  CHECK(render1("Run <code>make</code> now.", "Jetzt machen ausf\xC3\xBChren.",
                {{0, 2}, {1, 1}, {2, 0}}) == "Jetzt <code>make</code> ausf\xC3\xBChren.");
}

TEST_CASE("HTML inline elements under every alignment of three words") {
  // Each target word aligned to one of the three source words or to none:
  // the output is well formed, its text is the translation, each tag is
  // written once, and an element holds exactly the target words from the
  // first to the last aligned with its source words.
  const std::string html = "<p><a href='u'>one <b>two</b></a> three</p>";
  const std::vector<std::string> target{"uno", "dos", "tres"};
  for (int code = 0; code < 64; ++code) {
    Pairs pairs;
    int a_lo = 9, a_hi = -1, b_lo = 9, b_hi = -1;
    for (int t = 0, c = code; t < 3; ++t, c /= 4) {
      const int s = c % 4;
      if (s == 3) continue;
      pairs.emplace_back(s, t);
      if (s <= 1) a_lo = std::min(a_lo, t), a_hi = std::max(a_hi, t);
      if (s == 1) b_lo = std::min(b_lo, t), b_hi = std::max(b_hi, t);
    }
    const HtmlDocument d(html);
    const std::string out = d.render({aligned("one two three", "uno dos tres", pairs)});
    CAPTURE(code, out);
    REQUIRE_NOTHROW(HtmlDocument(out));
    CHECK(HtmlDocument(out).flows() == std::vector<std::string>{"uno dos tres"});
    for (const char* tag : {"<a href='u'>", "</a>", "<b>", "</b>", "<p>", "</p>"})
      CHECK(count(out, tag) == 1);
    auto inside = [&](const std::string& open, const std::string& close) {
      const size_t from = out.find(open) + open.size();
      return std::regex_replace(out.substr(from, out.find(close) - from), std::regex("<[^>]*>"),
                                "");
    };
    auto words = [&](int lo, int hi) {
      std::string w;
      for (int i = lo; i <= hi; ++i) w += (i > lo ? " " : "") + target[static_cast<size_t>(i)];
      return w;
    };
    if (b_hi >= 0) CHECK(inside("<b>", "</b>") == words(b_lo, b_hi));
    if (a_hi >= 0) CHECK(inside("<a href='u'>", "</a>") == words(a_lo, a_hi));
  }
}

TEST_CASE("HTML that is not well formed is refused, saying where") {
  for (const char* bad :
       {"<div><b>x</div>", "x</p>", "<b>bold", "<!-- open", "<script>x", "<p title=\"x>y</p>"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(HtmlDocument(bad), InputError);
  }
  try {
    HtmlDocument("<div><b>x</div>");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "</div> at byte 10 does not close <b>");
  }
  // End tags HTML lets the next tag or the end imply.
  CHECK(HtmlDocument("<p>one<p>two").flows() == std::vector<std::string>{"one", "two"});
  CHECK(HtmlDocument("<ul><li>a<li>b</ul><dl><dt>c<dd>d</dl>").flows() ==
        std::vector<std::string>{"a", "b", "c", "d"});
}

TEST_CASE("HTML fragments: a line, or the lines up to where what opened closes") {
  HtmlFragments f(1 << 20);
  CHECK(f.add("<p>one</p> two"));
  CHECK(f.take() == "<p>one</p> two");
  CHECK(f.empty());
  CHECK_FALSE(f.add("<div>"));
  CHECK_FALSE(f.add("  <p>two"));
  CHECK(f.add("</div>"));
  CHECK(f.take() == "<div>\n  <p>two\n</div>");
  CHECK_FALSE(f.add("<a"));
  CHECK(f.add("href=x>t</a>"));
  CHECK(f.take() == "<a\nhref=x>t</a>");
  CHECK_FALSE(f.add("<script>"));
  CHECK_FALSE(f.add("if (a</b) x('</div>');"));
  CHECK(f.add("</script>"));
  f.take();
  CHECK(f.add("x</b> and more"));  // cannot be well formed: goes no further
  f.take();
  HtmlFragments small(10);
  CHECK(small.add("<div>0123456789"));
}

TEST_CASE("HTML of many tags, words and ampersands takes time in proportion to it") {
  // 200,000 inline elements over 300,000 words (half of the elements code
  // inside a word) and a megabyte of '&': work quadratic in any of them
  // would take minutes.
  std::string many;
  for (int i = 0; i < 100000; ++i) many += "<b>x</b> <code>y</code>z w ";
  const std::string amps(1 << 20, '&');
  const HtmlDocument d("<p>" + many + "</p><p>" + amps + "</p>");
  const std::vector<std::string> flows = d.flows();
  REQUIRE(flows.size() == 2);
  CHECK(flows[1] == amps);
  std::vector<AlignedText> same;
  for (const std::string& f : flows) same.push_back(identity(f));
  const std::string out = d.render(same);
  CHECK(count(out, "<code>y</code>z") == 100000);
  CHECK(HtmlDocument(out).flows() == flows);
}

TEST_CASE("HTML fragments: a comment or script left open over many lines is read once") {
  // 200,000 lines inside an open comment, then inside a script, each line
  // holding a '>': reading the fragment again at every line would take
  // minutes.
  HtmlFragments f(size_t{1} << 30);
  CHECK_FALSE(f.add("<!-- commented out"));
  for (int i = 0; i < 200000; ++i) REQUIRE_FALSE(f.add("if (a > b) x = 1;"));
  CHECK(f.add("-->"));
  CHECK(f.take().size() > 200000 * 17);
  CHECK_FALSE(f.add("<script>"));
  for (int i = 0; i < 200000; ++i) REQUIRE_FALSE(f.add("if (a > b) x = '</scrip';"));
  CHECK(f.add("</script>"));
}
