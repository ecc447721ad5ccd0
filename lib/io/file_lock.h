// An exclusive lock on a path (flock(2) on "PATH.lock"), so that two
// processes never write the same outputs at once. The lock file holds the
// owner's pid and host, so the refusal can name the other process; the
// kernel drops the lock when its owner dies, even by kill -9, so a crash
// never leaves a stale lock behind.
#pragma once

#include <string>

namespace nmt::io {

class FileLock {
 public:
  // Takes the lock or throws InputError naming `what` and the process that
  // holds it.
  FileLock(const std::string& lock_path, const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace nmt::io
