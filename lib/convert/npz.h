// NumPy's .npz archives, as Marian writes its models: a zip (libzip reads it,
// stored or deflated) of .npy arrays, one per parameter, and the model's
// YAML config as the byte array "special:model.yml".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

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

// Every array of the archive by name (without ".npy"). Throws InputError
// naming the file and the entry for anything malformed: not a zip, a
// truncated entry, an .npy header it cannot read, big-endian or Fortran
// order data, a size that does not match the shape.
std::map<std::string, NpyArray> read_npz(const std::string& path);

// One .npy file's bytes, as read_npz reads each entry.
NpyArray parse_npy(const std::string& bytes, const std::string& what);

}  // namespace nmt::convert
