// Line-oriented text input shared by every subcommand: plain or gzip files
// (detected by their magic bytes, so a renamed .gz still works) and stdin
// ("-"), read either whole or streamed line by line, plus strict UTF-8
// checking and repair so that metrics and tokenisers see well-formed text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::io {

// Streams lines from a file or stdin. Gzip input is inflated incrementally,
// and plain input is handed out as soon as a line is complete, so that
// `nmt translate` can answer a pipe line by line. Lines lose their "\n" and
// nothing else (a "\r" before it is kept). A last line without "\n" is still
// a line; an empty file has none.
class LineReader {
 public:
  // path "-" reads stdin. Throws nmt::InputError("cannot open PATH: ...").
  explicit LineReader(const std::string& path);
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
  // 1-based number of the line last returned by next().
  std::size_t line_number() const { return line_number_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  std::size_t line_number_ = 0;
};

// Whole-file convenience over LineReader.
std::vector<std::string> read_lines(const std::string& path);

// CRC-32 (zlib's) of a whole file, and its size; throws InputError if it
// cannot be read.
uint32_t file_crc32(const std::string& path, uint64_t* size = nullptr);

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view s);

// Replaces each maximal ill-formed subsequence with U+FFFD (the Unicode
// "best practice", as Python's errors="replace" does). *had_invalid, when
// given, says whether anything was replaced.
std::string sanitize_utf8(std::string_view s, bool* had_invalid = nullptr);

}  // namespace nmt::io
