// NumPy's .npz archives, as Marian writes its models: a zip (libzip reads it,
// stored or deflated) of .npy arrays, one per parameter, and the model's
// YAML config as the byte array "special:model.yml".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "convert/zip_archive.h"

namespace nmt::convert {

struct NpyArray {
  std::string dtype;           // NumPy's descr without the byte order: "f4", "f2", "i1", "S1"...
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<char> data;      // little-endian, C order
  int64_t size() const;        // elements
  // The values as f32 (from f4 or f2); throws InputError naming the array
  // for any other type.
  std::vector<float> to_f32(const std::string& name) const;
};

// A Marian .npz: each entry of the zip (convert/zip_archive.h, which bounds
// what it may inflate to) an .npy array. Throws InputError naming the file
// and the entry for anything malformed: an array given twice, an .npy
// header it cannot read, big-endian or Fortran order data, a size that does
// not match the shape.
class NpzArchive {
 public:
  explicit NpzArchive(const std::string& path);

  const std::string& path() const { return zip_.path(); }
  bool has(const std::string& name) const { return entries_.count(name) > 0; }
  // Each array's name (without ".npy") and the bytes its entry inflates to,
  // .npy header included.
  const std::map<std::string, uint64_t>& entries() const { return sizes_; }
  // One array, inflated and parsed now (names not in entries() throw).
  NpyArray read(const std::string& name) const;
  // Its shape, from its header alone.
  std::vector<int64_t> shape(const std::string& name) const;

 private:
  ZipArchive zip_;
  std::map<std::string, std::string> entries_;  // array name -> entry name
  std::map<std::string, uint64_t> sizes_;
};

// One .npy file's bytes, as NpzArchive::read parses each entry.
NpyArray parse_npy(const std::string& bytes, const std::string& what);

}  // namespace nmt::convert
