#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace nmt::app {

Progress::Progress(std::string what, bool plain, bool sized, bool to_stdout)
    : what_(std::move(what)),
      tty_(sized && ::isatty(STDERR_FILENO) == 1 && !(to_stdout && ::isatty(STDOUT_FILENO) == 1)),
      plain_(plain),
      start_(clock::now()),
      last_(start_ - std::chrono::seconds(60)) {}  // the first report shows at once

Progress::~Progress() {
  // An error ends the job: leave the terminal's line clean for its message.
  if (tty_ && shown_ && !done_) std::fputs("\r\033[K", stderr);
}

std::string Progress::text(const std::string& what, int64_t lines, double seconds,
                           double fraction) {
  char buf[256];
  const double rate = seconds > 0 ? static_cast<double>(lines) / seconds : 0;
  int n = std::snprintf(buf, sizeof buf, "%s: %lld lines, %.1f lines/s", what.c_str(),
                        static_cast<long long>(lines), rate);
  if (fraction > 0 && n > 0 && n < static_cast<int>(sizeof buf)) {
    const double left = seconds * (1 - fraction) / fraction;
    const long s = static_cast<long>(left + 0.5);
    std::snprintf(buf + n, sizeof buf - n, ", %.0f%% (ETA %ld:%02ld:%02ld)", 100 * fraction,
                  s / 3600, s / 60 % 60, s % 60);
  }
  return buf;
}

void Progress::update(int64_t lines, double fraction) {
  lines_ = lines, fraction_ = fraction;
  if (!tty_ && !plain_) return;
  const auto now = clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (since < (tty_ ? 0.25 : 10.0)) return;
  last_ = now;
  const std::string t =
      text(what_, lines, std::chrono::duration<double>(now - start_).count(), fraction);
  if (tty_)
    std::fprintf(stderr, "\r\033[K%s", t.c_str());
  else
    std::fprintf(stderr, "%s\n", t.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::finish() {
  if (done_) return;
  done_ = true;
  if (tty_) {
    if (shown_) std::fputs("\r\033[K", stderr);
  } else if (plain_) {
    const double s = std::chrono::duration<double>(clock::now() - start_).count();
    std::fprintf(stderr, "%s (done)\n", text(what_, lines_, s, fraction_ >= 0 ? 1.0 : -1).c_str());
  }
  std::fflush(stderr);
}

}  // namespace nmt::app
