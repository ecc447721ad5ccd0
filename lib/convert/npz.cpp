#include "convert/npz.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "convert/formats.h"
#include "core/error.h"

namespace nmt::convert {

int64_t NpyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// The value of `key` in the header dict: "{'descr': '<f4', 'fortran_order':
// False, 'shape': (512, 512), }" (NumPy writes exactly this form).
std::string dict_value(const std::string& h, const std::string& key, const std::string& what) {
  const std::string k = "'" + key + "'";
  const size_t at = h.find(k);
  if (at == std::string::npos) throw InputError(what + ": the .npy header has no " + k);
  size_t b = h.find(':', at + k.size());
  if (b == std::string::npos) throw InputError(what + ": malformed .npy header");
  b = h.find_first_not_of(' ', b + 1);
  if (b == std::string::npos) throw InputError(what + ": malformed .npy header");
  size_t e;
  if (h[b] == '\'') {
    e = h.find('\'', b + 1);
    if (e == std::string::npos) throw InputError(what + ": malformed .npy header");
    return h.substr(b + 1, e - b - 1);
  }
  if (h[b] == '(') {
    e = h.find(')', b);
    if (e == std::string::npos) throw InputError(what + ": malformed .npy header");
    return h.substr(b, e - b + 1);
  }
  e = h.find_first_of(",}", b);
  return h.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

// The array in `bytes`; with_data false: its header only (bytes may end
// anywhere after it).
NpyArray parse(const std::string& bytes, const std::string& what, bool with_data) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw InputError(what + ": not a .npy array");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t hlen, start;
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw InputError(what + ": truncated .npy header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    start = 12;
  } else {
    throw InputError(what + ": .npy format version " + std::to_string(major) + " is not known");
  }
  if (start + hlen > bytes.size()) throw InputError(what + ": truncated .npy header");
  const std::string h = bytes.substr(start, hlen);
  NpyArray a;
  std::string descr = dict_value(h, "descr", what);
  if (descr.size() < 2) throw InputError(what + ": unknown .npy dtype '" + descr + "'");
  const char order = descr[0];
  a.dtype = descr.substr(1);
  const int64_t elem = a.dtype.size() > 1 ? std::atoi(a.dtype.c_str() + 1) : 0;
  if (elem <= 0 || elem > 8) throw InputError(what + ": unknown .npy dtype '" + descr + "'");
  if (order == '>' && elem > 1)
    throw InputError(what + ": big-endian arrays ('" + descr + "') are not supported");
  if (dict_value(h, "fortran_order", what) != "False")
    throw InputError(what + ": Fortran-order arrays are not supported");
  // "(512, 512)", "(8,)" or "()": non-negative integers and nothing else.
  const std::string shape = dict_value(h, "shape", what);
  auto bad_shape = [&](const std::string& why) {
    return InputError(what + ": .npy shape " + shape + " " + why);
  };
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')')
    throw bad_shape("is not a tuple");
  for (size_t i = 1; i + 1 < shape.size();) {
    i = shape.find_first_not_of(' ', i);
    if (i + 1 >= shape.size()) break;
    const size_t e = shape.find_first_not_of("0123456789", i);
    if (e == i) throw bad_shape("holds something other than non-negative integers");
    if (e - i > 12) throw bad_shape("is impossibly large");
    a.shape.push_back(std::stoll(shape.substr(i, e - i)));
    i = shape.find_first_not_of(' ', e);
    if (i + 1 < shape.size() && shape[i] != ',') throw bad_shape("is not a tuple of integers");
    ++i;
  }
  int64_t n = 1;
  for (int64_t d : a.shape)
    if (__builtin_mul_overflow(n, d, &n) || n > (int64_t{1} << 40))
      throw InputError(what + ": impossibly large .npy shape " + shape);
  if (!with_data) return a;
  const size_t need = static_cast<size_t>(n * elem), have = bytes.size() - start - hlen;
  if (have != need)
    throw InputError(what + ": " + std::to_string(have) + " bytes of data for shape " + shape +
                     " of '" + descr + "' (" + std::to_string(need) + " expected)");
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(start + hlen), bytes.end());
  return a;
}

// NumPy pads its header to 64 bytes; a longer one than this is no array's.
constexpr uint64_t kMaxHeader = 1 << 16;

}  // namespace

NpyArray parse_npy(const std::string& bytes, const std::string& what) {
  return parse(bytes, what, /*with_data=*/true);
}

std::vector<float> NpyArray::to_f32(const std::string& name) const {
  const int64_t n = size();
  std::vector<float> out(static_cast<size_t>(n));
  if (dtype == "f4") {
    copy_bytes(out.data(), data.data(), out.size() * 4);
  } else if (dtype == "f2") {
    widen_f16(data.data(), n, out.data());
  } else {
    throw InputError(name + ": expected float32 or float16 values, got '" + dtype + "'");
  }
  return out;
}

NpzArchive::NpzArchive(const std::string& path) : zip_(path, ".npz") {
  for (const auto& [entry, size] : zip_.entries()) {
    std::string name = entry;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    // NumPy writes each array once; of two, which one Marian would read is
    // not defined.
    if (!entries_.emplace(name, entry).second)
      throw InputError(path + ": the archive holds " + name + " twice");
    sizes_[name] = size;
  }
}

NpyArray NpzArchive::read(const std::string& name) const {
  if (!has(name)) throw InputError(path() + ": the archive has no " + name);
  const std::string& entry = entries_.at(name);
  return parse(zip_.read(entry, sizes_.at(name)), path() + ": " + name, /*with_data=*/true);
}

std::vector<int64_t> NpzArchive::shape(const std::string& name) const {
  if (!has(name)) throw InputError(path() + ": the archive has no " + name);
  const uint64_t size = std::min<uint64_t>(sizes_.at(name), kMaxHeader + 12);
  return parse(zip_.read(entries_.at(name), size), path() + ": " + name, /*with_data=*/false).shape;
}

}  // namespace nmt::convert
