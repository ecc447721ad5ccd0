#include "io/output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "io/std_streams.h"

namespace nmt::io {

namespace {

constexpr size_t kBuffer = 1 << 16;

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The temporary file of `target` is hidden beside it: ".NAME.nmt.tmp.PID".
// The "nmt" in the name is what lets a later run remove the files a killed
// one left without touching a user's own "NAME.tmp.1" or ".NAME.tmp.2".
constexpr std::string_view kTempTag = ".nmt.tmp.";

// What stands for the target's name in its temporary file's: the name, or,
// where ".NAME.nmt.tmp.PID" would pass the 255 bytes a file name may have,
// its first bytes and a hash of the whole, so that every name that is legal
// for the output has a legal temporary file too.
std::string temp_stem(const std::string& name) {
  constexpr size_t kMaxName = 255, kPidDigits = 10;
  constexpr size_t kRoom = kMaxName - 1 - kTempTag.size() - kPidDigits;
  if (name.size() <= kRoom) return name;
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  size_t n = kRoom - 17;
  while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80) --n;  // a character's start
  return name.substr(0, n) + "~" + hex;
}

std::string temp_prefix(const std::string& target) {
  const std::string name = "." + temp_stem(name_of(target)) + std::string(kTempTag);
  return target.find('/') == std::string::npos ? name : dir_of(target) + "/" + name;
}

// /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N (this
// process): the descriptor N, or -1. Opening such a path anew would start a
// second description at offset 0 (and fail outright for a socket); writing
// the descriptor itself keeps what the shell set up, `>>` included.
int own_descriptor(const std::string& p) {
  if (p == "/dev/stdout") return 1;
  if (p == "/dev/stderr") return 2;
  std::string rest;
  for (const std::string& pre : {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
                                 std::string("/proc/thread-self/fd/"),
                                 "/proc/" + std::to_string(::getpid()) + "/fd/"})
    if (p.compare(0, pre.size(), pre) == 0) rest = p.substr(pre.size());
  if (rest.empty() || rest.size() > 9 || rest.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(rest);
}

// Where writing `path` lands, following symlinks one hop at a time so that
// a link to /proc/self/fd/1 is recognised before the kernel's magic link
// (which names a pipe, not a path) is followed.
struct Target {
  enum Kind { kNew, kRegular, kThrough, kDescriptor } kind = kNew;
  std::string path;  // the file itself, after symlinks
  int fd = -1;       // kDescriptor
  struct stat st {};
};

Target resolve(const std::string& path) {
  Target t;
  t.path = path;
  for (int hop = 0; hop < 40; ++hop) {
    if (const int fd = own_descriptor(t.path); fd >= 0) {
      t.kind = Target::kDescriptor;
      t.fd = fd;
      return t;
    }
    struct stat ls;
    if (::lstat(t.path.c_str(), &ls) != 0) {
      if (errno == ENOENT) return t;  // kNew (a dangling link makes its target)
      throw Error("cannot write " + path + ": " + std::strerror(errno));
    }
    if (!S_ISLNK(ls.st_mode)) {
      t.st = ls;
      if (S_ISDIR(ls.st_mode)) throw InputError("cannot write " + path + ": it is a directory");
      t.kind = S_ISREG(ls.st_mode) ? Target::kRegular : Target::kThrough;
      return t;
    }
    std::string link(4096, '\0');
    const ssize_t n = ::readlink(t.path.c_str(), link.data(), link.size() - 1);
    if (n < 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
    link.resize(static_cast<size_t>(n));
    t.path = link[0] == '/' ? link : dir_of(t.path) + "/" + link;
  }
  throw InputError("cannot write " + path + ": " + std::strerror(ELOOP));
}

// The temporary files not yet committed, where a signal handler can reach
// them without locks or allocation.
constexpr int kSlots = 32;
constexpr size_t kSlotPath = 4096;
char g_temp_paths[kSlots][kSlotPath];
std::atomic<bool> g_temp_used[kSlots];

int register_temp(const std::string& tmp) {
  if (tmp.size() >= kSlotPath) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_temp_used[i].load() && g_temp_used[i].compare_exchange_strong(expected, true)) {
      // Claimed but not yet filled: an empty path until the copy is done.
      g_temp_paths[i][0] = '\0';
      std::memcpy(g_temp_paths[i] + 1, tmp.c_str() + 1, tmp.size());
      std::atomic_signal_fence(std::memory_order_seq_cst);
      g_temp_paths[i][0] = tmp[0];
      return i;
    }
  }
  return -1;  // more than kSlots at once: the next run removes the rest
}

void unregister_temp(int slot) {
  if (slot < 0) return;
  g_temp_paths[slot][0] = '\0';
  g_temp_used[slot].store(false);
}

extern "C" void on_fatal_signal(int sig) {
  remove_pending_temps();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool process_alive(const std::string& pid_text) {
  if (pid_text.empty() || pid_text.size() > 9) return false;
  const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

}  // namespace

struct OutputFile::Deflater {
  z_stream zs{};
};

OutputFile::OutputFile(std::string path, Content content) : path_(std::move(path)) {
  if (path_.empty()) throw InputError("the output path is empty");
  gzip_ = content == Content::Text && ends_with(path_, ".gz");
  if (content == Content::Binary && ends_with(path_, ".gz"))
    throw InputError("cannot write " + path_ + ": nmt does not compress this kind of file; " +
                     "use a name without .gz");
  const Target t = resolve(path_);
  if (t.kind == Target::kDescriptor) {
    stdout_ = t.fd == STDOUT_FILENO;
    fd_ = ::fcntl(t.fd, F_DUPFD_CLOEXEC, 3);
    if (fd_ < 0) throw Error("cannot write " + path_ + ": " + std::strerror(errno));
  } else if (t.kind == Target::kThrough) {
    do {
      fd_ = ::open(t.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    } while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) throw Error("cannot write " + path_ + ": " + std::strerror(errno));
  } else {
    target_ = t.path;
    existed_ = t.kind == Target::kRegular;
    // A read-only file is protected from `>` in a shell; so it is here.
    if (existed_ && ::access(target_.c_str(), W_OK) != 0)
      throw Error("cannot write " + path_ + ": " + std::strerror(errno));
    remove_dead_temps_of(target_);
    tmp_ = temp_prefix(target_) + std::to_string(::getpid());
    slot_ = register_temp(tmp_);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      const int err = errno;
      unregister_temp(slot_);
      slot_ = -1;
      tmp_.clear();
      // The file itself may be writable where its directory is not: say
      // which of them refused.
      throw Error("cannot write " + path_ + ": " +
                  (err == ENOENT ? "directory " + dir_of(target_) + " does not exist"
                   : err == EACCES || err == EROFS
                       ? "cannot create a file in " + dir_of(target_) + " (" + std::strerror(err) +
                             "); nmt writes a new file there and renames it over " +
                             name_of(target_) + ", so that a failed run leaves it whole"
                       : std::string(std::strerror(err))));
    }
    if (existed_) {
      // The replacement is the same file to everyone who could read it.
      if (::geteuid() == 0) {
        const int ignored = ::fchown(fd_, t.st.st_uid, t.st.st_gid);
        (void)ignored;
      }
      ::fchmod(fd_, t.st.st_mode & 07777);
    }
  }
  if (gzip_) {
    z_ = new Deflater;
    // 16 + MAX_WBITS: a gzip header and trailer, as gzip(1) writes.
    if (deflateInit2(&z_->zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      delete z_;
      z_ = nullptr;
      discard();
      throw Error("zlib: deflateInit2 failed for " + path_);
    }
  }
  buf_.reserve(kBuffer);
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (z_) {
    deflateEnd(&z_->zs);
    delete z_;
    z_ = nullptr;
  }
  if (fd_ >= 0) {
    ::close(fd_);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
    fd_ = -1;
  }
  unregister_temp(slot_);
  slot_ = -1;
}

void OutputFile::fail(const char* what, int err) {
  discard();
  throw Error(std::string("cannot ") + what + " " + path_ + ": " + std::strerror(err) +
              (existed_ ? "; " + path_ + " is unchanged" : ""));
}

void OutputFile::write_raw(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      // -o /dev/stdout ends as stdout itself does when its reader leaves.
      if (errno == EPIPE && stdout_) {
        discard();
        throw StdoutClosed{};
      }
      fail("write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void OutputFile::deflate_out(int mode) {
  z_stream& zs = z_->zs;
  zs.next_in = reinterpret_cast<Bytef*>(buf_.data());
  zs.avail_in = static_cast<uInt>(buf_.size());
  unsigned char out[kBuffer];
  int rc;
  do {
    zs.next_out = out;
    zs.avail_out = sizeof out;
    rc = deflate(&zs, mode);
    if (rc == Z_STREAM_ERROR) fail("compress", EIO);
    write_raw(out, sizeof out - zs.avail_out);
  } while (zs.avail_out == 0 || (mode == Z_FINISH && rc != Z_STREAM_END));
}

void OutputFile::drain() {
  if (z_)
    deflate_out(Z_NO_FLUSH);
  else
    write_raw(buf_.data(), buf_.size());
  buf_.clear();
}

void OutputFile::write(const void* data, size_t n) {
  if (fd_ < 0) throw Error("write to " + path_ + " after it was closed");
  const char* p = static_cast<const char*>(data);
  if (buf_.size() + n <= kBuffer) {
    buf_.append(p, n);
    return;
  }
  drain();
  if (n < kBuffer || z_) {
    buf_.append(p, n);
    if (n >= kBuffer) drain();
    return;
  }
  write_raw(p, n);
}

void OutputFile::flush() {
  if (fd_ < 0) return;
  if (z_) {
    deflate_out(Z_SYNC_FLUSH);  // a reader of the pipe gets whole lines
  } else if (!buf_.empty()) {
    write_raw(buf_.data(), buf_.size());
  }
  buf_.clear();
}

void OutputFile::commit() {
  if (fd_ < 0) throw Error("commit of " + path_ + " after it was closed");
  if (z_) {
    deflate_out(Z_FINISH);
    buf_.clear();
  } else {
    flush();
  }
  if (tmp_.empty()) {
    // A device, FIFO or descriptor: nothing to rename; fsync would fail on
    // most of them and means nothing for a pipe.
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0 && errno != EINTR) fail("write", errno);
    discard();
    return;
  }
  if (::fsync(fd_) != 0) fail("write", errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    const int err = errno;
    ::unlink(tmp_.c_str());
    unregister_temp(slot_);
    slot_ = -1;
    throw Error("cannot write " + path_ + ": " + std::strerror(err) +
                (existed_ ? "; " + path_ + " is unchanged" : ""));
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    unregister_temp(slot_);
    slot_ = -1;
    throw Error("cannot write " + path_ + ": " + std::strerror(err));
  }
  unregister_temp(slot_);
  slot_ = -1;
  fsync_parent_dir(target_);
}

void write_file(const std::string& path, std::string_view contents, Content content) {
  OutputFile f(path, content);
  f.write(contents);
  f.commit();
}

void check_output_path(const std::string& path, const std::string& option, Content content) {
  if (path.empty()) throw UsageError(option + " is empty: name the file to write");
  if (content == Content::Binary && ends_with(path, ".gz"))
    throw UsageError(option + " " + path +
                     ": nmt does not compress this kind of file; use a name without .gz");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw UsageError(option + " " + path + ": is a directory");
  Target t;
  try {
    t = resolve(path);
  } catch (const Error& e) {
    throw UsageError(option + ": " + e.what());
  }
  if (t.kind != Target::kNew) return;
  const std::string dir = dir_of(t.path);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw UsageError(option + " " + path + ": directory " + dir + " does not exist");
}

namespace {

// The input whose file `out` is (by device and inode), or null.
const NamedPath* input_of(const FileId& out, const std::vector<NamedPath>& inputs) {
  for (const NamedPath& in : inputs)
    if (!in.path.empty() && out == file_id(in.path)) return &in;
  return nullptr;
}

}  // namespace

void check_not_an_input(const NamedPath& output, const std::vector<NamedPath>& inputs) {
  // Only a regular file can be destroyed by writing it; writing /dev/null
  // or a FIFO that is also read is the user's plumbing.
  struct stat st;
  if (output.path.empty() || output.path == "-" || ::stat(output.path.c_str(), &st) != 0 ||
      !S_ISREG(st.st_mode))
    return;
  if (const NamedPath* in = input_of(file_id(output.path), inputs))
    throw UsageError(
        output.option + " " + output.path + " is " +
        (in->path == "-" ? "standard input" : "the " + in->option + " file " + in->path) +
        "; refusing to overwrite it (write elsewhere, then rename)");
}

void check_stdout_not_an_input(const std::vector<NamedPath>& inputs) {
  struct stat st;
  if (::fstat(STDOUT_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) return;
  if (const NamedPath* in = input_of(FileId{true, st.st_dev, st.st_ino}, inputs))
    throw UsageError("standard output is " +
                     (in->path == "-" ? std::string("the file on standard input")
                                      : "the " + in->option + " file " + in->path) +
                     "; refusing to write into what is being read (write elsewhere, then rename)");
}

void remove_pending_temps() noexcept {
  for (int i = 0; i < kSlots; ++i)
    if (g_temp_used[i].load() && g_temp_paths[i][0] != '\0') ::unlink(g_temp_paths[i]);
}

void install_signal_cleanup() {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

void fsync_parent_dir(const std::string& path) {
  const int fd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

namespace {

// ".NAME.nmt.tmp.PID" (temp_prefix): the PID, or "" when the name is not
// such a file of target_name (of any target where target_name is empty).
std::string temp_pid(const std::string& name, const std::string& target_name) {
  const auto at = name.rfind(kTempTag);
  if (name.size() < 2 || name[0] != '.' || at == std::string::npos || at < 2 ||
      at + kTempTag.size() >= name.size())
    return "";
  if (name.find_first_not_of("0123456789", at + kTempTag.size()) != std::string::npos) return "";
  // compare() of a stem of another length is not 0 either.
  if (!target_name.empty() && name.compare(1, at - 1, temp_stem(target_name)) != 0) return "";
  return name.substr(at + kTempTag.size());
}

int remove_matching(const std::string& dir, const std::string& target_name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int removed = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string pid = temp_pid(e.path().filename().string(), target_name);
    if (pid.empty() || !e.is_regular_file(ec)) continue;
    if (fs::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace

int remove_stale_temps_of(const std::string& target) {
  return remove_matching(dir_of(target), name_of(target));
}

void remove_dead_temps_of(const std::string& target) {
  // The directory is listed once per process, and only the names of nmt's
  // temporary files are kept: --output-dir with thousands of outputs must
  // not list the directory once for each of them.
  static std::mutex mu;
  static std::map<std::string, std::vector<std::string>> temps;  // dir -> names
  const std::string dir = dir_of(target), name = name_of(target);
  std::lock_guard<std::mutex> lock(mu);
  auto it = temps.find(dir);
  if (it == temps.end()) {
    std::vector<std::string>& found = temps[dir];
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (!temp_pid(e.path().filename().string(), "").empty() && e.is_regular_file(ec))
        found.push_back(e.path().filename().string());
    it = temps.find(dir);
  }
  for (const std::string& t : it->second) {
    const std::string pid = temp_pid(t, name);
    if (pid.empty() || pid == std::to_string(::getpid()) || process_alive(pid)) continue;
    ::unlink((dir + "/" + t).c_str());
  }
}

int remove_stale_temps_in(const std::string& dir) { return remove_matching(dir, ""); }

FileId file_id(const std::string& path) {
  if (path == "-") return stdin_id();
  struct stat st;
  FileId id;
  if (::stat(path.c_str(), &st) != 0) return id;
  id.exists = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  return id;
}

FileId stdin_id() {
  struct stat st;
  FileId id;
  // Only a regular file on stdin can be clobbered by an output.
  if (::fstat(STDIN_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) return id;
  id.exists = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  return id;
}

}  // namespace nmt::io
