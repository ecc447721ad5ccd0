#include "io/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace nmt::io {

namespace {

std::string read_text(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

std::string read_owner(int fd) {
  std::string s = read_text(fd).substr(0, 255);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "unknown process" : s;
}

// Whether fd is a regular file holding what FileLock writes ("pid N on
// HOST\n") or nothing (a lock whose owner has not written yet): only such a
// file is nmt's to take over, truncate and remove.
bool is_nmt_lock(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const std::string s = read_text(fd);
  if (s.empty()) return true;
  if (s.size() > 300 || s.compare(0, 4, "pid ") != 0 || s.find('\n') != s.size() - 1) return false;
  size_t i = 4;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return i > 4 && s.compare(i, 4, " on ") == 0;
}

}  // namespace

FileLock::FileLock(const std::string& lock_path, const std::string& what) : path_(lock_path) {
  // The owner unlinks the file when it is done; a waiter may then hold a lock
  // on an unlinked file, so a lock counts only if the path still names it.
  for (int attempt = 0; attempt < 100; ++attempt) {
    // A file of that name that nmt did not make (a symlink, a FIFO, someone's
    // Cargo.lock beside --out Cargo) is refused, never truncated or removed.
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno == EEXIST) {
      fd_ = ::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (fd_ < 0 && errno == ENOENT) continue;  // its owner just removed it
      // ELOOP: a symlink; ENXIO: a FIFO with no reader.
      const bool foreign = fd_ < 0 ? errno == ELOOP || errno == ENXIO : !is_nmt_lock(fd_);
      if (foreign) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        throw InputError(path_ + " exists and is not an nmt lock file; refusing to touch it " +
                         "(nmt locks " + what + " with it): move it away or choose another name");
      }
    }
    if (fd_ < 0)
      throw InputError("cannot create the lock file " + path_ + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string owner = read_owner(fd_);
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK)
        throw InputError(what + " is in use by another nmt (" + owner + "; lock " + path_ +
                         "): wait for it to finish or stop it first");
      throw InputError("cannot lock " + path_ + ": " + std::strerror(err));
    }
    struct stat held, named;
    if (::fstat(fd_, &held) == 0 && ::lstat(path_.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  if (fd_ < 0) throw InputError("cannot lock " + path_);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string owner = "pid " + std::to_string(::getpid()) + " on " + host + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    const ssize_t ignored = ::pwrite(fd_, owner.data(), owner.size(), 0);
    (void)ignored;
  }
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace nmt::io
