// Zip archives read by the importers (NumPy's .npz, PyTorch's checkpoint
// files): libzip, opened on first use, reads them, stored or deflated.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace nmt::convert {

// An archive opened for reading. Opening lists the entries and what each
// says it inflates to, and refuses an archive whose entries together claim
// more than weights stored in a file of its size could be (float weights
// barely compress): nothing is inflated then. An entry is inflated only when
// read, so that a caller checks names and sizes against what it expects
// first. Errors are InputErrors naming the file and the entry: not a zip
// (`kind` says what it should have been), a name given twice, a truncated
// entry.
class ZipArchive {
 public:
  ZipArchive(const std::string& path, const std::string& kind);
  ~ZipArchive();
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return index_.count(name) > 0; }
  // Each entry's name and the bytes it inflates to.
  const std::map<std::string, uint64_t>& entries() const { return sizes_; }
  // The first `size` bytes of an entry (at most what it inflates to).
  std::string read(const std::string& name, uint64_t size) const;
  std::string read(const std::string& name) const;

 private:
  struct Zip;
  std::string path_;
  std::unique_ptr<Zip> zip_;
  std::map<std::string, int64_t> index_;  // name -> index in the zip
  std::map<std::string, uint64_t> sizes_;
};

}  // namespace nmt::convert
