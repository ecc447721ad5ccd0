// Shared by the importers' fuzz targets: one input holds the files of a
// model directory, each but the last behind its 32-bit little-endian length
// (the last takes what is left), written into a directory of this process's
// own, so that the mutations reach every file: weights, config and
// vocabulary. Anything but a clean nmt::Error (or an imported model) is a
// finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace nmt::fuzz {

class ModelDir {
 public:
  explicit ModelDir(std::vector<std::string> names) : names_(std::move(names)) {
    const char* base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string t = std::string(base) + "/nmt-fuzz-XXXXXX";
    if (!::mkdtemp(t.data())) __builtin_trap();
    dir_ = t;
  }
  ~ModelDir() {
    for (const auto& n : names_) ::unlink((dir_ + "/" + n).c_str());
    ::rmdir(dir_.c_str());
  }
  // Writes the files the input holds (a name whose part is missing is
  // removed) and returns the directory.
  const std::string& write(const uint8_t* data, size_t size) {
    size_t at = 0;
    for (size_t i = 0; i < names_.size(); ++i) {
      size_t n = size - at;
      if (i + 1 < names_.size()) {
        uint32_t len = 0;
        if (size - at >= 4) std::memcpy(&len, data + at, 4), at += 4;
        n = std::min<size_t>(len, size - at);
      }
      const std::string path = dir_ + "/" + names_[i];
      ::unlink(path.c_str());
      if (n > 0 || i == 0) {
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data + at),
                                                    static_cast<std::streamsize>(n));
      }
      at += n;
    }
    return dir_;
  }

 private:
  std::vector<std::string> names_;
  std::string dir_;
};

}  // namespace nmt::fuzz
