// The text input path: LineReader (plain or gzip, sniffed from the bytes)
// and the UTF-8 checks. Properties: repaired text is valid UTF-8, valid text
// is left alone, and the lines put back together give the decoded input.
// With the checks every command uses (TextChecks: a line length limit that
// the input's last byte picks, warnings): as many lines, each valid UTF-8,
// none longer than the limit, a cut one said to be longer than it was read.
#include "core/error.h"
#include "fuzz_common.h"
#include "io/text_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nmt::fuzz::MemFile file(data, size);
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  try {
    nmt::io::LineReader in(file.path());
    std::string line, joined;
    while (in.next(line)) {
      bool bad = false;
      const std::string clean = nmt::io::sanitize_utf8(line, &bad);
      if (!nmt::io::is_valid_utf8(clean)) __builtin_trap();
      if (bad == nmt::io::is_valid_utf8(line)) __builtin_trap();
      if (!bad && clean != line) __builtin_trap();
      joined += line + "\n";
    }
    if (!gzip) {
      const std::string raw(reinterpret_cast<const char*>(data), size);
      const bool ends_nl = !raw.empty() && raw.back() == '\n';
      if (joined != (ends_nl || raw.empty() ? raw : raw + "\n")) __builtin_trap();
    }
  } catch (const nmt::Error&) {
  }
  try {
    nmt::io::LineReader plain(file.path());
    nmt::io::TextChecks checks;
    checks.max_line_bytes = size ? data[size - 1] % 64 : 0;
    int warnings = 0;
    checks.warn = [&](const std::string&) { ++warnings; };
    nmt::io::LineReader in(file.path(), checks);
    std::string line, raw;
    while (in.next(line)) {
      if (!plain.next(raw)) __builtin_trap();
      if (!nmt::io::is_valid_utf8(line)) __builtin_trap();
      const std::size_t max = checks.max_line_bytes;
      if (in.truncated() != (max > 0 && raw.size() > max)) __builtin_trap();
      if (in.truncated() && (in.full_length() != raw.size() || line.size() > 3 * max))
        __builtin_trap();  // U+FFFD (3 bytes) may stand for each ill-formed byte
      if (!in.truncated() && line != nmt::io::sanitize_utf8(raw)) __builtin_trap();
      if ((in.truncated() || line != raw) && warnings == 0) __builtin_trap();
    }
    if (plain.next(raw)) __builtin_trap();
  } catch (const nmt::Error&) {
  }
  return 0;
}
