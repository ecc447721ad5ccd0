#include "io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

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

// The temporary file of `target` is hidden beside it: ".NAME.tmp.PID".
std::string temp_prefix(const std::string& target) {
  const std::string name = "." + name_of(target) + ".tmp.";
  return target.find('/') == std::string::npos ? name : dir_of(target) + "/" + name;
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_ = temp_prefix(path_) + std::to_string(::getpid());
  struct stat st;
  existed_ = ::stat(path_.c_str(), &st) == 0;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw Error("cannot write " + path_ + ": " + std::strerror(err));
  }
  buf_.reserve(kBuffer);
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
    fd_ = -1;
  }
}

void AtomicFile::fail(const char* what, int err) {
  discard();
  throw Error(std::string("cannot ") + what + " " + path_ + ": " + std::strerror(err) +
              (existed_ ? "; " + path_ + " is unchanged" : ""));
}

void AtomicFile::write_through(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) throw Error("write to " + path_ + " after it was closed");
  if (buf_.size() + n <= kBuffer) {
    buf_.append(static_cast<const char*>(data), n);
    return;
  }
  flush();
  if (n >= kBuffer)
    write_through(data, n);
  else
    buf_.append(static_cast<const char*>(data), n);
}

void AtomicFile::flush() {
  if (fd_ < 0 || buf_.empty()) return;
  write_through(buf_.data(), buf_.size());
  buf_.clear();
}

void AtomicFile::commit() {
  if (fd_ < 0) throw Error("commit of " + path_ + " after it was closed");
  flush();
  if (::fsync(fd_) != 0) fail("write", errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw Error("cannot write " + path_ + ": " + std::strerror(err) +
                (existed_ ? "; " + path_ + " is unchanged" : ""));
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw Error("cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(err));
  }
  fsync_parent_dir(path_);
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFile f(path);
  f.write(contents);
  f.commit();
}

void fsync_parent_dir(const std::string& path) {
  const int fd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

namespace {

// "NAME.tmp.PID" or ".NAME.tmp.PID" (digits after the last ".tmp.").
bool is_temp_name(const std::string& name, const std::string& target_name) {
  const auto at = name.rfind(".tmp.");
  if (at == std::string::npos || at + 5 >= name.size()) return false;
  if (name.find_first_not_of("0123456789", at + 5) != std::string::npos) return false;
  if (target_name.empty()) return true;
  const std::string stem = name.substr(0, at);
  return stem == target_name || stem == "." + target_name;
}

int remove_matching(const std::string& dir, const std::string& target_name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int removed = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!is_temp_name(e.path().filename().string(), target_name)) continue;
    if (fs::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace

int remove_stale_temps_of(const std::string& target) {
  return remove_matching(dir_of(target), name_of(target));
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
