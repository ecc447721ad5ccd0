// Line reading over raw read(2) plus zlib's inflate. gzread() is not used:
// it blocks until its whole buffer is full, which would stall a pipe into
// `nmt translate`, and it cannot take the bytes already read to sniff the
// gzip magic back from stdin.
#include "io/text_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unicode/utf8.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <istream>

#include "core/error.h"
#include "io/std_streams.h"

namespace nmt::io {

namespace {

constexpr std::size_t kChunk = 1 << 16;
constexpr std::size_t kMaxWholeFile = std::size_t{4} << 30;  // read_whole_file's limit

std::string errno_message(int err) { return std::strerror(err); }

}  // namespace

struct LineReader::Impl {
  enum class Mode { kUnknown, kPlain, kGzip };

  std::string path;
  int fd = -1;
  bool owns_fd = false;
  std::istream* stream = nullptr;  // read instead of fd when set
  Mode mode = Mode::kUnknown;
  bool raw_eof = false;
  bool at_end = false;  // no more bytes will be added to `pending`
  std::string pending;  // decoded bytes not yet handed out
  std::size_t pos = 0;  // start of the unread part of `pending`
  std::string raw;      // compressed bytes waiting for inflate
  z_stream zs{};
  bool zs_ready = false;
  bool member_done = false;  // last inflate() hit the end of a gzip member
  uint64_t raw_read = 0;     // bytes read from the file so far
  int64_t size = -1;         // a regular file's size; -1 for a pipe or a terminal

  ~Impl() {
    if (zs_ready) inflateEnd(&zs);
    if (owns_fd && fd >= 0) ::close(fd);
  }

  // Appends up to kChunk raw bytes to `dst`; returns how many (0 at EOF).
  std::size_t read_raw(std::string& dst) {
    if (raw_eof) return 0;
    std::size_t old = dst.size();
    dst.resize(old + kChunk);
    ssize_t n;
    if (stream) {
      stream->read(&dst[old], kChunk);
      if (stream->bad()) {
        dst.resize(old);
        throw InputError("cannot read " + path + ": the stream failed");
      }
      n = static_cast<ssize_t>(stream->gcount());
    } else {
      do {
        n = ::read(fd, &dst[old], kChunk);
      } while (n < 0 && errno == EINTR);
    }
    if (n < 0) {
      int err = errno;
      dst.resize(old);
      throw InputError("cannot read " + path + ": " + errno_message(err));
    }
    dst.resize(old + static_cast<std::size_t>(n));
    raw_read += static_cast<uint64_t>(n);
    if (n == 0) raw_eof = true;
    return static_cast<std::size_t>(n);
  }

  void detect() {
    // Two bytes decide; a pipe may deliver them one at a time.
    while (raw.size() < 2 && read_raw(raw) > 0) {
    }
    bool gz = raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f &&
              static_cast<unsigned char>(raw[1]) == 0x8b;
    if (!gz) {
      mode = Mode::kPlain;
      pending.append(raw);
      raw.clear();
      if (raw_eof) at_end = true;
      return;
    }
    mode = Mode::kGzip;
    // 16 + MAX_WBITS: expect a gzip header and trailer, not a raw zlib stream.
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
      throw Error("zlib: inflateInit2 failed for " + path);
    zs_ready = true;
  }

  // Adds at least one byte to `pending`, or sets at_end.
  void fill() {
    if (mode == Mode::kUnknown) {
      detect();
      if (mode == Mode::kPlain) return;
    }
    if (mode == Mode::kPlain) {
      if (read_raw(pending) == 0) at_end = true;
      return;
    }
    fill_gzip();
  }

  void fill_gzip() {
    std::string out(kChunk, '\0');
    bool starved = false;  // inflate made no progress on the input it had
    for (;;) {
      if (raw.empty() || starved) {
        if (read_raw(raw) == 0 && (raw.empty() || starved)) {
          if (!member_done)
            throw InputError(path + ": unexpected end of gzip data (truncated file?)");
          at_end = true;
          return;
        }
        starved = false;
      }
      if (member_done) {
        // Concatenated members (as `cat a.gz b.gz` makes) are one stream;
        // anything else after a member is padding, ignored as gzip(1) does.
        while (raw.size() < 2 && read_raw(raw) > 0) {
        }
        if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f ||
            static_cast<unsigned char>(raw[1]) != 0x8b) {
          at_end = true;
          return;
        }
        inflateReset(&zs);
        member_done = false;
      }
      zs.next_in = reinterpret_cast<Bytef*>(&raw[0]);
      zs.avail_in = static_cast<uInt>(raw.size());
      zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
      zs.avail_out = static_cast<uInt>(out.size());
      int rc = inflate(&zs, Z_NO_FLUSH);
      std::size_t used = raw.size() - zs.avail_in;
      std::size_t produced = out.size() - zs.avail_out;
      raw.erase(0, used);
      if (rc == Z_STREAM_END) {
        member_done = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw InputError(path + ": corrupt gzip data (" +
                         (zs.msg ? std::string(zs.msg) : "zlib error " + std::to_string(rc)) + ")");
      } else if (used == 0 && produced == 0) {
        starved = true;
      }
      if (produced > 0) {
        pending.append(out, 0, produced);
        return;
      }
    }
  }
};

LineReader::LineReader(const std::string& path, TextChecks checks)
    : impl_(std::make_unique<Impl>()), path_(path), checks_(std::move(checks)) {
  impl_->path = path == "-" ? std::string("<stdin>") : path;
  if (path == "-") {
    if (stdin_was_closed())
      throw InputError("cannot read stdin: it is closed (give the input as a file or a pipe)");
    impl_->fd = STDIN_FILENO;
    return;
  }
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw InputError("cannot open " + path + ": " + errno_message(errno));
  impl_->fd = fd;
  impl_->owns_fd = true;
  struct stat st;
  // A directory opens fine and only fails on read; say so up front.
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (stat_ok && S_ISDIR(st.st_mode))
    throw InputError("cannot open " + path + ": " + errno_message(EISDIR));
  if (stat_ok && S_ISREG(st.st_mode)) impl_->size = static_cast<int64_t>(st.st_size);
}

LineReader::LineReader(std::istream& in, const std::string& name, TextChecks checks)
    : impl_(std::make_unique<Impl>()), path_(name), checks_(std::move(checks)) {
  impl_->path = name;
  impl_->stream = &in;
}

double LineReader::fraction_read() const {
  const Impl& s = *impl_;
  if (s.size <= 0) return -1;
  // The bytes read less those still buffered: raw bytes awaiting inflate,
  // or plain text not yet handed out (a gzip file's inflated text is not
  // counted back, so it runs up to a buffer ahead).
  const uint64_t buffered = s.mode == Impl::Mode::kGzip
                                ? s.raw.size()
                                : s.pending.size() - std::min(s.pos, s.pending.size());
  const uint64_t done = s.raw_read > buffered ? s.raw_read - buffered : 0;
  return std::min(1.0, static_cast<double>(done) / static_cast<double>(s.size));
}

LineReader::~LineReader() = default;
LineReader::LineReader(LineReader&&) noexcept = default;
LineReader& LineReader::operator=(LineReader&&) noexcept = default;

bool LineReader::would_block() const {
  const Impl& s = *impl_;
  if (s.at_end || s.stream || s.pending.find('\n', s.pos) != std::string::npos) return false;
  pollfd p{s.fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

namespace {

// The length of `s` without a last character that the cut left incomplete.
std::size_t utf8_boundary(const std::string& s) {
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const std::size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return len > back ? n - back : n;
  }
  return n;
}

}  // namespace

bool LineReader::next(std::string& line) {
  Impl& s = *impl_;
  const std::size_t max = checks_.max_line_bytes;
  truncated_ = false;
  bool cutting = false;     // past max_line_bytes: the rest of the line is dropped
  std::size_t skipped = 0;  // bytes of this line dropped so far
  std::size_t scan_from = s.pos;
  // A line longer than max: its first max bytes, ending on a character.
  auto take = [&](std::size_t from, std::size_t n) {
    if (max > 0 && n > max) {
      line.assign(s.pending, from, checks_.whole_lines ? 0 : max);
      line.resize(utf8_boundary(line));
      skipped = n - line.size();
      cutting = true;
    } else {
      line.assign(s.pending, from, n);
    }
  };
  auto done = [&] {
    ++line_number_;
    truncated_ = cutting;
    full_length_ = line.size() + skipped;
    check(line);
    return true;
  };
  for (;;) {
    const std::size_t nl = s.pending.find('\n', scan_from);
    if (nl != std::string::npos) {
      if (cutting)
        skipped += nl - s.pos;
      else
        take(s.pos, nl - s.pos);
      s.pos = nl + 1;
      return done();
    }
    if (s.at_end) {
      if (s.pos < s.pending.size() || cutting) {
        if (cutting)
          skipped += s.pending.size() - s.pos;
        else
          take(s.pos, s.pending.size() - s.pos);
        s.pending.clear();
        s.pos = 0;
        return done();
      }
      summarise();
      return false;
    }
    if (max > 0 && !cutting && s.pending.size() - s.pos > max) {
      take(s.pos, s.pending.size() - s.pos);
    } else if (cutting) {
      skipped += s.pending.size() - s.pos;
    }
    if (cutting) {
      s.pending.clear();
      s.pos = 0;
      scan_from = 0;
    } else {
      // Drop what was handed out so `pending` stays about one chunk long.
      s.pending.erase(0, s.pos);
      s.pos = 0;
      scan_from = s.pending.size();
    }
    s.fill();
  }
}

void LineReader::check(std::string& line) {
  if (!checks_.warn) return;
  const std::string where = impl_->path + " line " + std::to_string(line_number_) + ": ";
  const std::string why = checks_.why_limit.empty() ? "" : " (" + checks_.why_limit + ")";
  if (truncated_ && ++cut_ <= kWarningsPerFile)
    checks_.warn(where + std::to_string(full_length_) +
                 (checks_.whole_lines ? " bytes, more than the " +
                                            std::to_string(checks_.max_line_bytes) +
                                            " a line may have" + why + "; read as an empty line"
                                      : " bytes; only the first " + std::to_string(line.size()) +
                                            " are read" + why));
  if (!is_valid_utf8(line)) {
    line = checked_text(line, where.substr(0, where.size() - 2),
                        ++bad_utf8_ <= kWarningsPerFile ? checks_.warn : nullptr);
  }
}

void LineReader::summarise() {
  if (!checks_.warn) return;
  const std::string& p = impl_->path;
  if (bad_utf8_ > kWarningsPerFile)
    checks_.warn(p + ": " + std::to_string(bad_utf8_) + " lines in all were not valid UTF-8 " +
                 "(the first " + std::to_string(kWarningsPerFile) + " are named above)");
  if (cut_ > kWarningsPerFile)
    checks_.warn(p + ": " + std::to_string(cut_) + " lines in all were cut (the first " +
                 std::to_string(kWarningsPerFile) + " are named above)");
  bad_utf8_ = cut_ = 0;
}

std::string checked_text(std::string_view s, const std::string& what,
                         const std::function<void(const std::string&)>& warn) {
  if (is_valid_utf8(s)) return std::string(s);
  if (warn) warn(what + ": invalid UTF-8 replaced with U+FFFD");
  return sanitize_utf8(s);
}

void warn_on_stderr(const std::string& message) {
  std::fprintf(stderr, "nmt: warning: %s\n", printable(message).c_str());
}

std::string read_whole_file(const std::string& path, const std::string& what) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw InputError("cannot open " + what + " " + path + ": " + errno_message(errno));
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw InputError(what + " " + path + " is a directory");
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw InputError("cannot read " + what + " " + path + ": " + errno_message(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxWholeFile) {  // /dev/zero, or a stream that never ends
      ::close(fd);
      throw InputError(what + " " + path + " is larger than " +
                       std::to_string(kMaxWholeFile >> 20) + " MiB");
    }
  }
  ::close(fd);
  return out;
}

void check_input_path(const std::string& path, const std::string& option, bool nonempty) {
  if (path == "-") return;
  if (path.empty()) throw InputError(option + " is empty: name the file to read");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(option + " " + path + ": " + errno_message(errno));
  if (S_ISDIR(st.st_mode)) throw InputError(option + " " + path + ": is a directory");
  if (nonempty && S_ISREG(st.st_mode) && st.st_size == 0)
    throw InputError(option + " " + path + ": the file is empty");
}

std::vector<std::string> read_lines(const std::string& path, const TextChecks& checks) {
  LineReader reader(path, checks);
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) lines.push_back(line);
  return lines;
}

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  int32_t n = static_cast<int32_t>(s.size());
  int32_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {  // ASCII fast path
      ++i;
      continue;
    }
    UChar32 c;
    U8_NEXT(p, i, n, c);  // strict since ICU 60: rejects overlongs and surrogates
    if (c < 0) return false;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s, bool* had_invalid) {
  bool bad = false;
  std::string out;
  if (is_valid_utf8(s)) {
    out.assign(s);
  } else {
    bad = true;
    out.reserve(s.size() + 8);
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    int32_t n = static_cast<int32_t>(s.size());
    int32_t i = 0;
    while (i < n) {
      int32_t start = i;
      UChar32 c;
      // On error U8_NEXT skips exactly one maximal ill-formed subpart.
      U8_NEXT(p, i, n, c);
      if (c < 0)
        out += "\xEF\xBF\xBD";
      else
        out.append(s.data() + start, static_cast<std::size_t>(i - start));
    }
  }
  if (had_invalid) *had_invalid = bad;
  return out;
}

std::string one_line(std::string_view s) {
  std::string out = sanitize_utf8(s);
  size_t w = 0;
  for (size_t r = 0; r < out.size(); ++r) {
    const auto c = static_cast<unsigned char>(out[r]);
    const auto next = r + 1 < out.size() ? static_cast<unsigned char>(out[r + 1]) : 0;
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      out[w++] = ' ';
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F
      out[w++] = ' ';
      ++r;
    } else if (c == 0xe2 && next == 0x80 && r + 2 < out.size() &&
               (out[r + 2] == '\xa8' || out[r + 2] == '\xa9')) {  // U+2028, U+2029
      out[w++] = ' ';
      r += 2;
    } else {
      out[w++] = out[r];
    }
  }
  out.resize(w);
  return out;
}

}  // namespace nmt::io
