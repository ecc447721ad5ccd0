// Library errors. The library never exits the process: it throws nmt::Error
// with a one-line message that names the file, key or line at fault, and only
// app/ turns that into a message on stderr and a non-zero exit code.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace nmt {

// Text that came from a file or a command line, made safe to print on one
// line of a terminal: control characters (C0, DEL, C1), the Unicode line and
// paragraph separators and bytes that are not UTF-8 are written as escapes
// (\n, \x1b, \u0085, \xff), so that a name read from a model can neither
// end a message early (NUL), split it (a line break) nor reach the terminal
// as an escape sequence. Everything else, non-ASCII text included, is kept.
inline std::string printable(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto escape = [&](const char* prefix, unsigned v, int digits) {
    out += prefix;
    for (int d = digits - 1; d >= 0; --d) out += hex[(v >> (4 * d)) & 15];
  };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7f) escape("\\x", c, 2);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The length of a well-formed UTF-8 sequence starting here, or 0.
    const int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                    : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    unsigned cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xc0) == 0x80;
      cp = cp << 6 | (b & 0x3f);
    }
    ok = ok && !(len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) &&
         !(len == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (!ok) {
      escape("\\x", c, 2);
      ++i;
    } else if (cp <= 0x9f || cp == 0x2028 || cp == 0x2029) {
      escape("\\u", cp, 4);
      i += len;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

// Visible by default, so that their type information is one across the CUDA
// library (lib/cuda, opened with dlopen, built with hidden visibility) and
// the binary: an Error thrown there is caught here by type.
#define NMT_ERROR_VISIBLE __attribute__((visibility("default")))

// Its message is made printable() once, here: a message names files, keys
// and tokens that came from untrusted files.
class NMT_ERROR_VISIBLE Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(printable(what)) {}
};

// Thrown for input the user can fix (bad option, bad file); same handling.
class NMT_ERROR_VISIBLE InputError : public Error {
 public:
  using Error::Error;
  // The option at fault, by its key in the library's options (beam,
  // batch_tokens), or empty: app/ writes the key as its command-line flag
  // before the message, so that the library names no flag.
  const std::string& option() const { return option_; }
  void set_option(std::string key) { option_ = std::move(key); }

 private:
  std::string option_;
};

// A command line that cannot mean anything (an output that is an input or a
// directory, options that contradict each other): exits 2, as argparse and
// most Unix tools do, where errors in the input itself exit 1.
class NMT_ERROR_VISIBLE UsageError : public InputError {
 public:
  using InputError::InputError;
};

// An error of kind E (InputError, UsageError) about the option `key`; what
// follows the option's name in the message ("8: more than ..."). Other
// options it names are written "{key}" ("5 exceeds {beam} 4").
template <class E>
E about_option(std::string key, const std::string& what) {
  E e(what);
  e.set_option(std::move(key));
  return e;
}

// text with every "{key}" (a key of lowercase letters and '_') written as
// name(key): the command line's "--beam", a program's "beam".
inline std::string name_options(const std::string& text,
                                const std::function<std::string(const std::string&)>& name) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    size_t end = text[i] == '{' ? i + 1 : std::string::npos;
    while (end != std::string::npos && end < text.size() &&
           ((text[end] >= 'a' && text[end] <= 'z') || text[end] == '_'))
      ++end;
    if (end != std::string::npos && end > i + 1 && end < text.size() && text[end] == '}') {
      out += name(text.substr(i + 1, end - i - 1));
      i = end;
    } else {
      out += text[i];
    }
  }
  return out;
}

// e's message with its options named as the caller names them: the option
// at fault before the text (no space where the text starts with ':'), and
// every "{key}" in it.
inline std::string message_naming(const Error& e,
                                  const std::function<std::string(const std::string&)>& name) {
  const std::string out = name_options(e.what(), name);
  const auto* input = dynamic_cast<const InputError*>(&e);
  if (!input || input->option().empty()) return out;
  return name(input->option()) + (out.empty() || out[0] == ':' ? "" : " ") + out;
}

}  // namespace nmt
