#include "convert/npz.h"

#include <zip.h>

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

}  // namespace

NpyArray parse_npy(const std::string& bytes, const std::string& what) {
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
  const std::string shape = dict_value(h, "shape", what);
  for (size_t i = 1; i < shape.size();) {
    const size_t b = shape.find_first_of("0123456789", i);
    if (b == std::string::npos) break;
    const size_t e = shape.find_first_not_of("0123456789", b);
    if (e - b > 12) throw InputError(what + ": impossibly large .npy shape " + shape);
    a.shape.push_back(std::stoll(shape.substr(b, e - b)));
    i = e;
  }
  int64_t n = 1;
  for (int64_t d : a.shape)
    if (__builtin_mul_overflow(n, d, &n) || n > (int64_t{1} << 40))
      throw InputError(what + ": impossibly large .npy shape " + shape);
  const size_t need = static_cast<size_t>(n * elem), have = bytes.size() - start - hlen;
  if (have != need)
    throw InputError(what + ": " + std::to_string(have) + " bytes of data for shape " + shape +
                     " of '" + descr + "' (" + std::to_string(need) + " expected)");
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(start + hlen), bytes.end());
  return a;
}

std::vector<float> NpyArray::to_f32(const std::string& name) const {
  const int64_t n = size();
  std::vector<float> out(static_cast<size_t>(n));
  if (dtype == "f4") {
    std::memcpy(out.data(), data.data(), out.size() * 4);
  } else if (dtype == "f2") {
    widen_f16(data.data(), n, out.data());
  } else {
    throw InputError(name + ": expected float32 or float16 values, got '" + dtype + "'");
  }
  return out;
}

std::map<std::string, NpyArray> read_npz(const std::string& path) {
  int err = 0;
  const ZipApi& zx = zip_api();
  std::unique_ptr<zip_t, decltype(zx.zip_discard)> z(zx.zip_open(path.c_str(), ZIP_RDONLY, &err),
                                                     zx.zip_discard);
  if (!z) {
    zip_error_t ze;
    zx.zip_error_init_with_code(&ze, err);
    const std::string why = zx.zip_error_strerror(&ze);
    zx.zip_error_fini(&ze);
    throw InputError(path + ": not a readable .npz archive (" + why + ")");
  }
  std::map<std::string, NpyArray> out;
  // An entry inflates to at most 1032 times its stored size (deflate's
  // limit), so a header promising more is a forgery: refused before any of
  // it is allocated.
  std::error_code ec;
  const uint64_t archive = std::filesystem::file_size(path, ec);
  const zip_int64_t n = zx.zip_get_num_entries(z.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zx.zip_stat_index(z.get(), i, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
        !(st.valid & ZIP_STAT_NAME))
      throw InputError(path + ": entry " + std::to_string(i) + " of the archive is unreadable");
    std::string name = st.name;
    if (st.size > (uint64_t{1} << 40) || (!ec && st.size > 1032 * archive + 4096))
      throw InputError(path + ": " + name + " claims " + std::to_string(st.size) +
                       " bytes, more than the archive could hold");
    std::unique_ptr<zip_file_t, decltype(zx.zip_fclose)> f(zx.zip_fopen_index(z.get(), i, 0),
                                                           zx.zip_fclose);
    if (!f) throw InputError(path + ": cannot read " + name + ": " + zx.zip_strerror(z.get()));
    std::string bytes(st.size, '\0');
    const zip_int64_t got = zx.zip_fread(f.get(), bytes.data(), st.size);
    if (got < 0 || static_cast<zip_uint64_t>(got) != st.size)
      throw InputError(path + ": " + name + " is truncated or damaged");
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    out[name] = parse_npy(bytes, path + ": " + name);
  }
  return out;
}

}  // namespace nmt::convert
