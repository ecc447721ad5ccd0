#include "convert/zip_archive.h"

#include <zip.h>

#include <algorithm>
#include <filesystem>

#include "core/dynlib.h"
#include "core/error.h"

namespace nmt::convert {
namespace {

// The libzip functions this file calls, from libzip.so.4 on the first
// archive (core/dynlib.h: other runs map neither libzip nor the libcrypto
// it needs).
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
  return open_library<ZipApi>(NMT_ZIP_SONAME, "reading zip archives (.npz, pytorch_model.bin)",
                              "libzip4");
}

// What an archive may inflate to, at most: this many times its own size.
// Weights are floats, whose low bits are noise to deflate (trained weights
// compress by 10% or so); only a forged or damaged archive comes near.
constexpr uint64_t kMaxInflation = 64;

}  // namespace

struct ZipArchive::Zip {
  std::unique_ptr<zip_t, void (*)(zip_t*)> z{nullptr, nullptr};
};

ZipArchive::ZipArchive(const std::string& path, const std::string& kind)
    : path_(path), zip_(std::make_unique<Zip>()) {
  int err = 0;
  const ZipApi& zx = zip_api();
  zip_->z = {zx.zip_open(path.c_str(), ZIP_RDONLY, &err), zx.zip_discard};
  if (!zip_->z) {
    zip_error_t ze;
    zx.zip_error_init_with_code(&ze, err);
    const std::string why = zx.zip_error_strerror(&ze);
    zx.zip_error_fini(&ze);
    throw InputError(path + ": not a readable " + kind + " archive (" + why + ")");
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
    const std::string name = st.name;
    // Of two entries of one name, which one the writer's reader takes is
    // not defined.
    if (!index_.emplace(name, i).second)
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

ZipArchive::~ZipArchive() = default;

std::string ZipArchive::read(const std::string& name) const {
  if (!has(name)) throw InputError(path_ + ": the archive has no " + name);
  return read(name, sizes_.at(name));
}

std::string ZipArchive::read(const std::string& name, uint64_t size) const {
  const auto it = index_.find(name);
  if (it == index_.end()) throw InputError(path_ + ": the archive has no " + name);
  size = std::min(size, sizes_.at(name));
  const ZipApi& zx = zip_api();
  std::unique_ptr<zip_file_t, decltype(zx.zip_fclose)> f(
      zx.zip_fopen_index(zip_->z.get(), it->second, 0), zx.zip_fclose);
  if (!f) throw InputError(path_ + ": cannot read " + name + ": " + zx.zip_strerror(zip_->z.get()));
  std::string bytes(size, '\0');
  const zip_int64_t got = zx.zip_fread(f.get(), bytes.data(), size);
  if (got < 0 || static_cast<zip_uint64_t>(got) != size)
    throw InputError(path_ + ": " + name + " is truncated or damaged");
  return bytes;
}

}  // namespace nmt::convert
