// Files that are never seen half-written, and checks that an output is not
// one of the inputs. Every file nmt writes (translations, models,
// checkpoints, curves) goes through AtomicFile: the bytes go to a temporary
// file beside the target, which commit() fsyncs, renames over the target and
// makes durable by fsyncing the directory too, so that neither a crash, a
// kill -9, a full disk nor a power cut leaves a torn file under the final
// name, and the previous version stays intact until the new one is complete.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace nmt::io {

class AtomicFile {
 public:
  // Creates the temporary file "DIR/.NAME.tmp.PID". Throws nmt::Error naming
  // the path when it cannot.
  explicit AtomicFile(std::string path);
  // Without commit(), the temporary file is removed and the target is left
  // as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Buffered; throws nmt::Error("cannot write PATH: ...; PATH is unchanged")
  // on a write error (a full disk, a file-size limit).
  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Makes written bytes visible to readers of the temporary file (the
  // interactive pipe case needs nothing more: the target appears on commit).
  void flush();
  // fsync, rename over the target, fsync the directory.
  void commit();
  void discard();

  const std::string& path() const { return path_; }

 private:
  void write_through(const void* data, size_t n);
  [[noreturn]] void fail(const char* what, int err);

  std::string path_, tmp_;
  bool existed_ = false;  // the target was there before: say it is unchanged
  int fd_ = -1;
  std::string buf_;
};

// Writes the whole file atomically.
void write_file_atomic(const std::string& path, std::string_view contents);

// fsyncs the directory that holds `path`, so that a rename or a new file in
// it survives a power cut. Errors are ignored where the filesystem refuses
// to fsync directories.
void fsync_parent_dir(const std::string& path);

// Remove the temporary files that a killed process left behind: those of
// one target ("DIR/.NAME.tmp.PID", and the older "DIR/NAME.tmp.PID"), or
// every one in a directory that nmt owns (a checkpoint directory). Call them
// only while holding the lock that keeps other writers out. They return
// how many files went.
int remove_stale_temps_of(const std::string& target);
int remove_stale_temps_in(const std::string& dir);

// The identity of a file (device, inode), so that two names, a symlink and
// "./" spellings compare equal. exists is false when there is no such file.
struct FileId {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId& o) const {
    return exists && o.exists && dev == o.dev && ino == o.ino;
  }
};
FileId file_id(const std::string& path);  // "-": standard input
FileId stdin_id();

}  // namespace nmt::io
