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

std::string read_owner(int fd) {
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "unknown process" : s;
}

}  // namespace

FileLock::FileLock(const std::string& lock_path, const std::string& what) : path_(lock_path) {
  // The owner unlinks the file when it is done; a waiter may then hold a lock
  // on an unlinked file, so a lock counts only if the path still names it.
  for (int attempt = 0; attempt < 100; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
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
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 &&
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
