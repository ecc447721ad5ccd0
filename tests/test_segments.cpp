// Documents as segments (service/segments.h): sentences by ICU's rules and
// the source language's abbreviations, over-long sentences cut at clause
// boundaries into pieces a model takes, and translations joined back with
// the source's spacing (none between Chinese or Japanese sentences).
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "service/segments.h"

using namespace nmt;

namespace {

std::vector<std::string> texts(const Segmented& s) {
  std::vector<std::string> out;
  for (const Segment& g : s.segments) out.push_back(g.text);
  return out;
}

std::string rejoin(const Segmented& s) {
  std::string out = s.lead;
  for (const Segment& g : s.segments) out += g.text + g.after;
  return out;
}

}  // namespace

TEST_CASE("sentences: ICU's rules with the language's abbreviations", "[segments]") {
  SentenceSplitter en("en"), de("de");
  const std::string line = "  Mr. Smith saw two dogs.  They ran away! Did he follow?\t";
  const Segmented s = en.split(line);
  CHECK(texts(s) ==
        std::vector<std::string>{"Mr. Smith saw two dogs.", "They ran away!", "Did he follow?"});
  CHECK(s.lead == "  ");
  CHECK(s.segments[0].after == "  ");
  CHECK(s.segments[2].after == "\t");
  CHECK(rejoin(s) == line);  // nothing of the line is lost
  // German abbreviations are not sentence ends in German, as they would be
  // by the rules alone.
  const std::string german = "Ein Hund, z. B. ein Pudel, spielt. Die Frau lacht.";
  CHECK(texts(de.split(german)) ==
        std::vector<std::string>{"Ein Hund, z. B. ein Pudel, spielt.", "Die Frau lacht."});
  CHECK(texts(en.split(german)).size() > 2);
  // Chinese sentences end at their full stops, with no space between them.
  const Segmented zh = SentenceSplitter("zh").split("今天天气很好。我们去公园吧！");
  CHECK(texts(zh) == std::vector<std::string>{"今天天气很好。", "我们去公园吧！"});
  CHECK(zh.segments[0].after.empty());
  CHECK(en.split("   ").segments.empty());
  CHECK_THROWS_AS(SentenceSplitter("not a language!"), InputError);
}

TEST_CASE("sentences: translations joined with the source's spacing", "[segments]") {
  SentenceSplitter en("en"), zh("zh");
  const Segmented two = en.split(" It is fine.  Let us go. ");
  CHECK(join_segments(two, {"Es ist gut.", "Gehen wir."}) == " Es ist gut.  Gehen wir. ");
  // Into Chinese the space goes, out of it one comes.
  CHECK(join_segments(two, {"天气很好。", "我们走吧。"}) == " 天气很好。我们走吧。 ");
  const Segmented cjk = zh.split("今天天气很好。我们去公园吧！");
  CHECK(join_segments(cjk, {"The weather is good today.", "Let's go to the park!"}) ==
        "The weather is good today. Let's go to the park!");
  CHECK(join_segments(cjk, {"今日は天気がいい。", "公園に行こう！"}) ==
        "今日は天気がいい。公園に行こう！");
  CHECK(join_segments(whole_line("  A dog.  "), {"Ein Hund."}) == "  Ein Hund.  ");
}

TEST_CASE("pieces: cut at clause boundaries first, each one fitting", "[segments]") {
  auto fits = [](size_t bytes) {
    return [bytes](const std::string& t) { return t.size() <= bytes; };
  };
  const Segment s{"A dog runs; a cat sleeps: the bird, the fish and the frog swim all day long",
                  " "};
  const std::vector<Segment> p = pieces_that_fit(s, fits(30));
  REQUIRE(p.size() > 2);
  CHECK(p[0].text == "A dog runs;");  // the semicolon before the colon and the commas
  CHECK(p[1].text == "a cat sleeps:");
  for (const Segment& g : p) CHECK(g.text.size() <= 30);
  CHECK(p.back().after == " ");
  // A text that fits stays whole, and CJK commas cut too.
  CHECK(pieces_that_fit(s, fits(1000)).size() == 1);
  const std::vector<Segment> zh =
      pieces_that_fit({"我们去公园，然后去商店，最后回家", ""}, fits(20));
  REQUIRE(zh.size() == 3);
  CHECK(zh[0].text == "我们去公园，");
  CHECK(zh[0].after.empty());

  // On random texts of words, commas and semicolons: the pieces fit and,
  // joined with what follows each, are the text.
  std::mt19937 rng(7);
  const std::vector<std::string> words = {"dog", "a", "running", ",", ";", ":", "longerword", "x"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const std::string& w = words[rng() % words.size()];
      if (!text.empty() && w.size() > 1) text += std::string(1 + rng() % 2, ' ');
      text += w;
    }
    if (text.find_first_not_of(",;: ") == std::string::npos) continue;
    const size_t limit = 4 + rng() % 30;
    const std::vector<Segment> pieces = pieces_that_fit({text, ""}, fits(limit));
    std::string joined;
    for (const Segment& g : pieces) {
      CHECK(g.text.size() <= limit);
      CHECK_FALSE(g.text.empty());
      joined += g.text + g.after;
    }
    CHECK(joined == text);
  }
}

TEST_CASE("sentences: Chinese paragraphs from Tatoeba split where their sentences end",
          "[segments]") {
  std::ifstream in(std::string(NMT_DATA_DIR) + "/tatoeba-cmn-eng/test.zh");
  REQUIRE(in);  // ../shared/data is part of the set-up
  std::vector<std::string> sentences;
  // The lines that end in a full stop, exclamation or question mark (a line
  // without one runs into the next, for any splitter).
  auto ends_in_stop = [](const std::string& l) {
    for (const char* stop : {"。", "！", "？"})
      if (l.size() > 3 && l.compare(l.size() - 3, 3, stop) == 0) return true;
    return false;
  };
  for (std::string line; std::getline(in, line);)
    if (ends_in_stop(line) && line.find_first_of(" \t") == std::string::npos)
      sentences.push_back(line);
  REQUIRE(sentences.size() > 900);
  SentenceSplitter zh("zh");
  size_t paragraphs = 0, same = 0;
  for (size_t i = 0, n = 1; i < sentences.size(); i += n, n = n % 5 + 1) {
    const size_t end = std::min(sentences.size(), i + n);
    std::string paragraph;
    std::vector<std::string> want(sentences.begin() + static_cast<std::ptrdiff_t>(i),
                                  sentences.begin() + static_cast<std::ptrdiff_t>(end));
    for (const std::string& s : want) paragraph += s;  // no space between them
    const Segmented got = zh.split(paragraph);
    ++paragraphs;
    same += texts(got) == want;
    // Into English, a space between the translations.
    if (got.segments.size() == 2) CHECK(join_segments(got, {"One.", "Two."}) == "One. Two.");
  }
  INFO(same << " of " << paragraphs << " paragraphs");
  CHECK(same >= paragraphs * 98 / 100);
}
