// A progress line on stderr for long jobs (translating or scoring a large
// file): on a terminal, one line rewritten in place at most four times a
// second and cleared at the end; elsewhere nothing, unless plain lines were
// asked for (--progress), one every ten seconds and one at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace nmt::app {

class Progress {
 public:
  // what: the line's start ("nmt translate test.en"). plain: --progress.
  // sized: the input is a file of known size (a terminal shows a live line
  // only then: never while someone types into a pipe). to_stdout: the
  // results go to stdout, so a terminal there would mix them with the line.
  Progress(std::string what, bool plain, bool sized, bool to_stdout);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Lines done so far, and how much of the input that is, 0 to 1 (-1:
  // unknown, as for a pipe: no percentage or ETA).
  void update(int64_t lines, double fraction);
  // The end: clears a terminal's line, prints a last plain line.
  void finish();

  // The text of one report.
  static std::string text(const std::string& what, int64_t lines, double seconds, double fraction);

 private:
  using clock = std::chrono::steady_clock;
  std::string what_;
  bool tty_ = false, plain_ = false, shown_ = false, done_ = false;
  clock::time_point start_, last_;
  int64_t lines_ = 0;
  double fraction_ = -1;
};

}  // namespace nmt::app
