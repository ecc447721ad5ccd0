#include "convert/npz.h"

#include <zip.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "convert/formats.h"
#include "core/dynlib.h"
#include "core/error.h"

namespace nmt::convert {

int64_t NpyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// The libzip functions this file calls, from libzip.so.4 on the first .npz
// (core/dynlib.h: other runs map neither libzip nor the libcrypto it needs).
#define NMT_ZIP_FUNCTIONS(X)  \
  X(zip_discard)              \
  X(zip_error_fini)           \
  X(zip_error_init_with_code) \
  X(zip_error_strerror)       \
  X(zip_fclose)               \
  X(zip_fopen_index)          \
  X(zip_fread)                \
  X(zip_get_num_entries)      \
  X(zip_open)                 \
  X(zip_stat_index)           \
  X(zip_strerror)
NMT_DYNLIB_TABLE(ZipApi, NMT_ZIP_FUNCTIONS);

const ZipApi& zip_api() {
  return open_library<ZipApi>(NMT_ZIP_SONAME, "reading Marian's .npz models", "libzip4");
}

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

// What an archive may inflate to, at most: this many times its own size.
// Weights are floats, whose low bits are noise to deflate (trained weights
// compress by 10% or so); only a forged or damaged archive comes near.
constexpr uint64_t kMaxInflation = 64;

struct NpzArchive::Zip {
  std::unique_ptr<zip_t, void (*)(zip_t*)> z{nullptr, nullptr};
};

NpzArchive::NpzArchive(const std::string& path) : path_(path), zip_(std::make_unique<Zip>()) {
  int err = 0;
  const ZipApi& zx = zip_api();
  zip_->z = {zx.zip_open(path.c_str(), ZIP_RDONLY, &err), zx.zip_discard};
  if (!zip_->z) {
    zip_error_t ze;
    zx.zip_error_init_with_code(&ze, err);
    const std::string why = zx.zip_error_strerror(&ze);
    zx.zip_error_fini(&ze);
    throw InputError(path + ": not a readable .npz archive (" + why + ")");
  }
  std::error_code ec;
  const uint64_t archive = std::filesystem::file_size(path, ec);
  const zip_int64_t n = zx.zip_get_num_entries(zip_->z.get(), 0);
  uint64_t total = 0;
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zx.zip_stat_index(zip_->z.get(), i, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
        !(st.valid & ZIP_STAT_NAME))
      throw InputError(path + ": entry " + std::to_string(i) + " of the archive is unreadable");
    std::string name = st.name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    // NumPy writes each array once; of two, which one Marian would read is
    // not defined.
    if (!entries_.emplace(name, i).second)
      throw InputError(path + ": the archive holds " + name + " twice");
    sizes_[name] = st.size;
    if (st.size > (uint64_t{1} << 40) || __builtin_add_overflow(total, st.size, &total))
      throw InputError(path + ": " + name + " claims " + std::to_string(st.size) +
                       " bytes, more than any archive could hold");
  }
  if (!ec && total > kMaxInflation * archive + (1 << 20))
    throw InputError(path + ": the archive's entries claim " + std::to_string(total) +
                     " bytes in all, " + std::to_string(total / std::max<uint64_t>(archive, 1)) +
                     " times the archive's " + std::to_string(archive) +
                     " bytes; weights do not compress so far (a damaged or forged archive)");
}

NpzArchive::~NpzArchive() = default;

NpyArray NpzArchive::read(const std::string& name) const {
  if (!has(name)) throw InputError(path_ + ": the archive has no " + name);
  return parse(inflate(name, sizes_.at(name)), path_ + ": " + name, /*with_data=*/true);
}

std::vector<int64_t> NpzArchive::shape(const std::string& name) const {
  if (!has(name)) throw InputError(path_ + ": the archive has no " + name);
  const uint64_t size = std::min<uint64_t>(sizes_.at(name), kMaxHeader + 12);
  return parse(inflate(name, size), path_ + ": " + name, /*with_data=*/false).shape;
}

std::string NpzArchive::inflate(const std::string& name, uint64_t size) const {
  const auto it = entries_.find(name);
  const ZipApi& zx = zip_api();
  std::unique_ptr<zip_file_t, decltype(zx.zip_fclose)> f(
      zx.zip_fopen_index(zip_->z.get(), it->second, 0), zx.zip_fclose);
  if (!f)
    throw InputError(path_ + ": cannot read " + name + ": " + zx.zip_strerror(zip_->z.get()));
  std::string bytes(size, '\0');
  const zip_int64_t got = zx.zip_fread(f.get(), bytes.data(), size);
  if (got < 0 || static_cast<zip_uint64_t>(got) != size)
    throw InputError(path_ + ": " + name + " is truncated or damaged");
  return bytes;
}

}  // namespace nmt::convert
