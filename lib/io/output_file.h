// Every file nmt writes (translations, models, checkpoints, curves,
// pictures) goes through OutputFile, which writes a path as what it is:
//  - a regular file (or a new one) is replaced atomically: the bytes go to
//    a hidden temporary file beside it, which commit() fsyncs, renames over
//    the target and makes durable by fsyncing the directory, so neither a
//    crash, a kill -9, a full disk nor a power cut leaves a torn file under
//    the final name. The old file's permission bits (and, as root, owner)
//    carry over, and the old version stays intact until the new one is done;
//  - a symlink writes its target (the link stays a link);
//  - a character or block device, a FIFO or a socket is opened and written
//    through, never replaced (`-o /dev/null`, `-o >(gzip > x.gz)`);
//  - /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N write to this
//    process's descriptor N itself, at its offset and in its append mode;
//  - a directory or an empty path is refused, naming the option.
// The checks that an output is not an input live here too, so that every
// command refuses the same things with the same words.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::io {

// What a file holds: text outputs named "*.gz" are written gzip-compressed;
// binary ones (models, pictures) refuse a ".gz" name rather than write
// something no reader expects under it.
enum class Content { Text, Binary };

class OutputFile {
 public:
  // Opens the target (see above). Throws nmt::Error naming the path when it
  // cannot. Temporary files that killed nmt processes left beside the same
  // target are removed first (remove_dead_temps_of).
  explicit OutputFile(std::string path, Content content = Content::Binary);
  // Without commit(), a replaced file is left as it was (the temporary file
  // is removed); a written-through one keeps what was written.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Buffered; throws nmt::Error("cannot write PATH: ...; PATH is unchanged")
  // on a write error (a full disk, a file-size limit, a reader that left).
  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Hands written bytes on: to a FIFO's or device's reader at once, to the
  // temporary file of a replaced target (which appears on commit).
  void flush();
  // Replaced targets: fsync, rename over the target, fsync the directory.
  // Written-through ones: the last bytes out and the descriptor closed.
  void commit();
  void discard();

  const std::string& path() const { return path_; }
  // False where the target is written through (device, FIFO, descriptor).
  bool replaces() const { return !tmp_.empty(); }

 private:
  void write_raw(const void* data, size_t n);
  void drain();  // buf_ out (compressed where gzip_), buf_ cleared
  void deflate_out(int mode);
  [[noreturn]] void fail(const char* what, int err);

  std::string path_;    // as given, for messages
  std::string target_;  // the file a replacement renames onto
  std::string tmp_;     // empty when written through
  bool existed_ = false;
  bool gzip_ = false;
  bool stdout_ = false;  // this process's descriptor 1
  int fd_ = -1;
  std::string buf_;
  struct Deflater;
  Deflater* z_ = nullptr;
  int slot_ = -1;  // in the table of temporary files a signal removes
};

// Writes a whole file through OutputFile.
void write_file(const std::string& path, std::string_view contents,
                Content content = Content::Binary);

// Before any work: the output `path` of option `option` (e.g. "-o") is not
// empty, not a directory, sits in a directory that exists, and is not a
// binary output under a ".gz" name. Throws UsageError (exit 2) naming the
// option.
void check_output_path(const std::string& path, const std::string& option,
                       Content content = Content::Binary);

// A path and the option that named it, for messages ("{config}", "-m").
struct NamedPath {
  std::string option, path;
};
// Refuses (UsageError) an output that is one of the inputs, by device and
// inode, through symlinks and "./" spellings: "-o X is the -m file Y;
// refusing to overwrite it".
void check_not_an_input(const NamedPath& output, const std::vector<NamedPath>& inputs);
// The same for this process's standard output, where a command streams
// what it reads: `nmt translate -i x >> x` would read its own output back
// and grow x until the disk is full (as cat(1) does, it refuses).
void check_stdout_not_an_input(const std::vector<NamedPath>& inputs);

// Removes the temporary files of every OutputFile not yet committed. Only
// async-signal-safe calls: a handler of SIGINT/SIGTERM/SIGHUP calls it
// before the process dies of the signal (install_signal_cleanup()).
void remove_pending_temps() noexcept;
// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove the pending
// temporary files and then die of the signal as before.
void install_signal_cleanup();

// fsyncs the directory that holds `path`, so that a rename or a new file in
// it survives a power cut. Errors are ignored where the filesystem refuses
// to fsync directories.
void fsync_parent_dir(const std::string& path);

// Remove the temporary files that a killed process left behind: those of
// one target ("DIR/.NAME.nmt.tmp.PID", never a name nmt did not make), or
// every one in a directory that nmt owns (a checkpoint directory). Call them
// only while holding the lock that keeps other writers out. They return
// how many files went.
int remove_stale_temps_of(const std::string& target);
int remove_stale_temps_in(const std::string& dir);
// Without such a lock: the temporary files of `target` whose process is
// gone (OutputFile does it before it writes).
void remove_dead_temps_of(const std::string& target);

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
