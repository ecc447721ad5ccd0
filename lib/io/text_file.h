// Line-oriented text input shared by every subcommand: plain or gzip files
// (detected by their magic bytes, so a renamed .gz still works) and stdin
// ("-"), read either whole or streamed line by line, plus strict UTF-8
// checking and repair so that metrics and tokenisers see well-formed text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::io {

// What every text input gets, whatever the command: ill-formed UTF-8
// replaced with U+FFFD (as Python's errors="replace") and reported by file
// and line number; with max_line_bytes, a longer line is cut while it is
// read (at a character boundary; the rest of it skipped unread into memory),
// and reported, so that memory never follows the input's shape.
struct TextChecks {
  std::size_t max_line_bytes = 0;  // 0: no limit
  std::string why_limit;           // appended to the cut-line warning
  // A line past max_line_bytes is read as an empty line, with a warning,
  // rather than cut: a record (a JSON object) means nothing in part.
  bool whole_lines = false;
  // Warnings, one line each ("FILE line N: ..."); none when empty, and then
  // the lines are left as they are.
  std::function<void(const std::string&)> warn;
};

// SentencePiece pieces are at most 16 characters of at most 4 bytes: a line
// cut at this many bytes per subword the model can take loses nothing the
// model would have read.
inline constexpr std::size_t kMaxBytesPerSubword = 64;

// The first this many warnings of one kind are given per file, then one
// saying how many more followed.
inline constexpr int kWarningsPerFile = 10;

// The check every command makes of an input path before any work: missing,
// a directory or (with nonempty) an empty file is an InputError naming the
// option ("-m adir: is a directory"). "-" (stdin) passes.
void check_input_path(const std::string& path, const std::string& option, bool nonempty = false);

// Streams lines from a file or stdin. Gzip input is inflated incrementally,
// and plain input is handed out as soon as a line is complete, so that
// `nmt translate` can answer a pipe line by line. Lines lose their "\n" and
// nothing else (a "\r" before it is kept). A last line without "\n" is still
// a line; an empty file has none.
class LineReader {
 public:
  // path "-" reads stdin. Throws nmt::InputError("cannot open PATH: ...").
  explicit LineReader(const std::string& path, TextChecks checks = {});
  // From a stream, named `name` in warnings, read a chunk at a time (so it
  // never reports that it would block: a stream's lines are translated by
  // the window, not as each is typed). The stream must outlive the reader.
  LineReader(std::istream& in, const std::string& name, TextChecks checks = {});
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  LineReader(LineReader&&) noexcept;
  LineReader& operator=(LineReader&&) noexcept;

  // False at end of input. Throws nmt::InputError on read or gzip errors.
  bool next(std::string& line);

  // True when next() would have to wait for more input (an interactive
  // terminal or a slow pipe), so a caller can flush what it has first.
  bool would_block() const;

  const std::string& path() const { return path_; }
  // How much of a regular file has been read, 0 to 1 (of its bytes as
  // stored: compressed for gzip); -1 for a pipe or a terminal.
  double fraction_read() const;
  // 1-based number of the line last returned by next().
  std::size_t line_number() const { return line_number_; }
  // Whether the line last returned was cut at max_line_bytes, and the
  // whole line's length in bytes.
  bool truncated() const { return truncated_; }
  std::size_t full_length() const { return full_length_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  std::size_t line_number_ = 0;
  TextChecks checks_;
  bool truncated_ = false;
  std::size_t full_length_ = 0;
  int64_t bad_utf8_ = 0, cut_ = 0;
  void check(std::string& line);
  void summarise();
};

// All the bytes of a small file read whole (a config, a SentencePiece
// model, a vocabulary); a pipe is read to its end. InputError "cannot open
// WHAT PATH" (with the reason where there is one), or "WHAT PATH is a
// directory".
std::string read_whole_file(const std::string& path, const std::string& what);

// Whole-file convenience over LineReader.
std::vector<std::string> read_lines(const std::string& path, const TextChecks& checks = {});

// The warning printer every command passes in TextChecks::warn:
// "nmt: warning: ..." on stderr.
void warn_on_stderr(const std::string& message);

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view s);

// A text that came from elsewhere than a file (an argument): ill-formed
// UTF-8 replaced and warned about as a file's line would be ("WHAT: ...").
std::string checked_text(std::string_view s, const std::string& what,
                         const std::function<void(const std::string&)>& warn);

// Replaces each maximal ill-formed subsequence with U+FFFD (the Unicode
// "best practice", as Python's errors="replace" does). *had_invalid, when
// given, says whether anything was replaced.
std::string sanitize_utf8(std::string_view s, bool* had_invalid = nullptr);

// Text that is one line, whoever reads it: every character a reader of
// lines may split at or stop at (C0 controls but TAB, DEL, C1 controls such
// as NEL, U+2028, U+2029; NUL) becomes a space, and ill-formed UTF-8 becomes
// U+FFFD. A translation is made of a model's tokens, and an imported model's
// tokens are not to be trusted to hold none of these.
std::string one_line(std::string_view s);

}  // namespace nmt::io
