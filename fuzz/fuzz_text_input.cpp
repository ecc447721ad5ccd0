// The text input path: LineReader (plain or gzip, sniffed from the bytes)
// and the UTF-8 checks. Properties: repaired text is valid UTF-8, valid text
// is left alone, and the lines put back together give the decoded input.
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
  return 0;
}
