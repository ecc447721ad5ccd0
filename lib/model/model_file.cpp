#include "model/model_file.h"
#include "model/shortlist.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "io/json.h"
#include "io/output_file.h"
#include "model/quantise.h"
#include "model/transformer.h"
#include "model/vocab.h"
#include "ops/ops.h"

namespace nmt {

using json = nlohmann::json;

void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& byte_tensors) {
  json header;
  header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.dtype != DType::F32 && t.dtype != DType::S8)
      throw Error(std::string("cannot write a ") + dtype_name(t.dtype) + " tensor");
    const uint64_t bytes = t.shape.numel() * dtype_size(t.dtype);
    json shape = json::array();
    for (int i = 0; i < t.shape.ndim; ++i) shape.push_back(t.shape[i]);
    header[t.name] = {{"dtype", t.dtype == DType::F32 ? "F32" : "I8"},
                      {"shape", shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  for (const auto& [name, bytes] : byte_tensors) {
    header[name] = {{"dtype", "U8"},
                    {"shape", {bytes.size()}},
                    {"data_offsets", {offset, offset + bytes.size()}}};
    offset += bytes.size();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the format pads the header with spaces
  const uint64_t hlen = h.size();

  io::OutputFile out(path);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(hlen >> (8 * i));
  out.write(len, 8);
  out.write(h);
  for (const auto& t : tensors) out.write(t.data, t.shape.numel() * dtype_size(t.dtype));
  for (const auto& kv : byte_tensors) out.write(kv.second);
  out.commit();
}

namespace {

// One tensor entry of the header, every number checked in 64 bits.
FileContents::Entry parse_entry(const std::string& name, const json& t,
                                const std::function<InputError(const std::string&)>& bad) {
  FileContents::Entry e;
  if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") ||
      !t.contains("data_offsets") || !t["dtype"].is_string() || !t["shape"].is_array() ||
      !t["data_offsets"].is_array())
    throw bad("tensor " + name + " has a malformed entry");
  e.dtype = t["dtype"].get<std::string>();
  // nmt writes F32, I8 and U8; F16, BF16 and F64 are read from other
  // tools' files (convert/checkpoint.h), and refused by a model's loader.
  const uint64_t elem = e.dtype == "F32"                        ? 4
                        : e.dtype == "U8" || e.dtype == "I8"    ? 1
                        : e.dtype == "F16" || e.dtype == "BF16" ? 2
                        : e.dtype == "F64"                      ? 8
                                                                : 0;
  if (!elem) throw bad("tensor " + name + " has unsupported dtype " + e.dtype);
  uint64_t bytes = elem;
  for (const json& d : t["shape"]) {
    if (!d.is_number_unsigned()) throw bad("tensor " + name + " has a malformed shape");
    const uint64_t x = d.get<uint64_t>();
    if (x > (uint64_t{1} << 40) || __builtin_mul_overflow(bytes, x, &bytes))
      throw bad("tensor " + name + " has an impossibly large shape");
    e.shape.push_back(static_cast<int64_t>(x));
  }
  if (e.shape.size() > 4) throw bad("tensor " + name + " has more than 4 dimensions");
  const json& off = t["data_offsets"];
  if (off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    throw bad("tensor " + name + " has malformed data_offsets");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.end < e.begin || e.end - e.begin != bytes)
    throw bad("tensor " + name + " data_offsets do not match its shape");
  return e;
}

// As safetensors requires: the tensors tile the data exactly, in offset
// order, with no gap, overlap or trailing bytes. A gap is what a tensor
// missing from the header leaves, so it is only recorded in *gap: the
// caller that knows which tensors to expect names the missing one first.
void check_layout(const std::map<std::string, FileContents::Entry>& tensors, uint64_t data_size,
                  const std::function<InputError(const std::string&)>& bad, std::string* gap) {
  std::vector<std::pair<const std::string*, const FileContents::Entry*>> order;
  for (const auto& [name, e] : tensors) {
    if (e.end > data_size)
      throw bad("tensor " + name + "'s data [" + std::to_string(e.begin) + ", " +
                std::to_string(e.end) + ") extends past the end of the data (" +
                std::to_string(data_size) + " bytes; truncated?)");
    order.push_back({&name, &e});
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->begin != b.second->begin ? a.second->begin < b.second->begin
                                              : a.second->end < b.second->end;
  });
  uint64_t at = 0;
  for (const auto& [name, e] : order) {
    if (e->begin < at) throw bad("tensor " + *name + " overlaps another tensor's data");
    if (e->begin > at && gap->empty())
      *gap = bad(std::to_string(e->begin - at) + " bytes before tensor " + *name +
                 "'s data belong to no tensor")
                 .what();
    at = e->end;
  }
  if (at != data_size && gap->empty())
    *gap = bad(std::to_string(data_size - at) + " bytes after the last tensor's data").what();
}

}  // namespace

namespace {

uLong crc_bytes(uLong crc, const void* data, uint64_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {  // crc32 takes at most a uInt at a time
    const uInt k = static_cast<uInt>(std::min<uint64_t>(n, uint64_t{1} << 30));
    crc = crc32(crc, p, k);
    p += k;
    n -= k;
  }
  return crc;
}

// A model file's bytes, from a regular file or a pipe (`-m <(zcat m.gz)`),
// read with the file's size known where it is, so that a bad header is
// refused before the data is allocated.
class ModelBytes {
 public:
  explicit ModelBytes(const std::string& path) : path_(path) {
    do {
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) throw InputError("cannot open model file " + path + ": " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd_, &st) != 0) fail(errno);
    if (S_ISDIR(st.st_mode)) {
      ::close(fd_);
      throw InputError("cannot read model file " + path + ": it is a directory");
    }
    if (S_ISREG(st.st_mode)) size_ = static_cast<uint64_t>(st.st_size);
  }
  ~ModelBytes() {
    if (fd_ >= 0) ::close(fd_);
  }
  ModelBytes(const ModelBytes&) = delete;
  ModelBytes& operator=(const ModelBytes&) = delete;

  bool size_known() const { return size_ != kUnknown; }
  // The open file, for reading its bytes later (FileBytes::read_at); this
  // object no longer closes it.
  std::shared_ptr<const int> share() {
    const int fd = fd_;
    fd_ = -1;
    return std::shared_ptr<const int>(new int(fd), [](const int* f) {
      ::close(*f);
      delete f;
    });
  }
  uint64_t size() const { return size_; }
  // With a checksum asked for, every byte read goes into it.
  void checksum_into(FileChecksum* c) {
    sum_ = c;
    if (sum_) *sum_ = FileChecksum{0, static_cast<uint32_t>(crc32(0L, Z_NULL, 0))};
  }
  // Reads up to n bytes into dst; returns how many (fewer only at the end).
  uint64_t read(char* dst, uint64_t n) {
    const uint64_t got = read_raw(dst, n);
    if (sum_) {
      sum_->bytes += got;
      sum_->crc32 = static_cast<uint32_t>(crc_bytes(sum_->crc32, dst, got));
    }
    return got;
  }

 private:
  uint64_t read_raw(char* dst, uint64_t n) {
    uint64_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd_, dst + got, std::min<uint64_t>(n - got, 1 << 24));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail(errno);
      if (r == 0) break;
      got += static_cast<uint64_t>(r);
    }
    return got;
  }
  [[noreturn]] void fail(int err) {
    throw InputError("cannot read model file " + path_ + ": " + std::strerror(err));
  }
  static constexpr uint64_t kUnknown = ~uint64_t{0};
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = kUnknown;
  FileChecksum* sum_ = nullptr;
};

}  // namespace

namespace {

FileContents read_file(const std::string& path, bool strict, FileChecksum* sum) {
  ModelBytes in(path);
  in.checksum_into(sum);
  const std::function<InputError(const std::string&)> bad = [&](const std::string& why) {
    return InputError(path + ": not a valid model file: " + why);
  };
  unsigned char len[8];
  const uint64_t got = in.read(reinterpret_cast<char*>(len), 8);
  if (got < 8)
    throw bad(got == 0 ? std::string("the file is empty")
                       : "file is only " + std::to_string(got) + " bytes (truncated?)");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(len[i]) << (8 * i);
  if ((in.size_known() && hlen > in.size() - 8) || hlen > (100u << 20))
    throw bad("header length " + std::to_string(hlen) + " exceeds the file size" +
              (in.size_known() ? " " + std::to_string(in.size()) : std::string()) +
              " (truncated?)");
  std::string h(hlen, '\0');
  if (in.read(h.data(), hlen) != hlen)
    throw bad("header length " + std::to_string(hlen) + " exceeds the file size (truncated?)");
  json header;
  try {
    header = io::parse_json(h, "header");
  } catch (const InputError& e) {
    throw bad(e.what());
  }
  if (!header.is_object()) throw bad("header is not a JSON object");

  FileContents f;
  f.source = path;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw bad("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw bad("metadata value " + m.key() + " is not a string");
        f.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    f.tensors[it.key()] = parse_entry(it.key(), *it, bad);
  }
  // Only now, with every entry checked, is the data read: a pipe's as far
  // as the header says it goes, and one byte more to see that it ends.
  uint64_t need = 0;
  for (const auto& [name, e] : f.tensors) need = std::max(need, e.end);
  if (in.size_known()) {
    const uint64_t size = in.size() - 8 - hlen;
    if (sum) {  // every byte, as a pipe's would be read
      std::vector<char> chunk(1 << 20);
      for (uint64_t left = size; left > 0;) {
        const uint64_t got = in.read(chunk.data(), std::min<uint64_t>(left, chunk.size()));
        if (got == 0) break;  // cut short: check_layout says so
        left -= got;
      }
    }
    f.data.read_at(in.share(), 8 + hlen, size, path);
  } else {
    std::vector<char> buffer(in.size_known() ? in.size() - 8 - hlen : need);
    const uint64_t read = in.read(buffer.data(), buffer.size());
    buffer.resize(read);
    if (!in.size_known() && read == need) {
      char extra[4096];
      const uint64_t n = in.read(extra, sizeof extra);  // trailing bytes: some are enough
      buffer.insert(buffer.end(), extra, extra + n);
    }
    f.data.hold(std::move(buffer));
  }
  check_layout(f.tensors, f.data.size(), bad, &f.layout_error);
  if (strict) f.check_layout();
  return f;
}

}  // namespace

FileContents read_safetensors(const std::string& path) { return read_file(path, true, nullptr); }

void FileBytes::hold(std::vector<char> buffer) {
  fd_.reset();
  size_ = buffer.size();
  offset_ = 0;
  buffer_ = std::make_shared<const std::vector<char>>(std::move(buffer));
}

void FileBytes::read_at(std::shared_ptr<const int> fd, uint64_t offset, uint64_t size,
                        std::string path) {
  buffer_.reset();
  fd_ = std::move(fd);
  offset_ = offset, size_ = size, path_ = std::move(path);
}

void FileBytes::copy(uint64_t begin, uint64_t n, void* dst) const {
  if (begin > size_ || n > size_ - begin) throw Error("FileBytes: read past the end of the data");
  if (buffer_) {
    std::memcpy(dst, buffer_->data() + begin, n);
    return;
  }
  auto* to = static_cast<char*>(dst);
  for (uint64_t got = 0; got < n;) {
    const ssize_t r = ::pread(*fd_, to + got, std::min<uint64_t>(n - got, 1 << 30),
                              static_cast<off_t>(offset_ + begin + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw InputError("cannot read model file " + path_ + ": " + std::strerror(errno));
    if (r == 0)
      throw InputError(path_ + ": the file ended at byte " +
                       std::to_string(offset_ + begin + got) +
                       " while it was read (changed or cut short since it was opened?)");
    got += static_cast<uint64_t>(r);
  }
}

std::string FileBytes::str(uint64_t begin, uint64_t n) const {
  std::string s(n, '\0');
  copy(begin, n, s.data());
  return s;
}

void FileContents::check_layout() const {
  if (!layout_error.empty()) throw InputError(layout_error);
}

void FileContents::check_f32(const std::string& name, const Shape& shape) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw InputError(source + ": missing tensor " + name);
  const Entry& e = it->second;
  std::vector<int64_t> want(shape.dims.begin(), shape.dims.begin() + shape.ndim);
  if (e.dtype == "I8" && e.shape == want && shape.ndim == 2) {
    auto s = tensors.find(name + ".scale");
    if (s == tensors.end() || s->second.dtype != "F32" ||
        s->second.shape != std::vector<int64_t>{shape[0]})
      throw InputError(source + ": int8 tensor " + name + " has no F32 scale per row (" + name +
                       ".scale)");
    return;
  }
  if (e.dtype != "F32" || e.shape != want) {
    std::string got;
    for (auto d : e.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
    throw InputError(source + ": tensor " + name + " has shape (" + got + ") " + e.dtype +
                     ", expected " + shape.str() + " F32");
  }
}

namespace {

// Throws unless x[0 .. n) are all finite, naming the tensor and the last bad
// element, counted from `first`.
void check_finite(const std::string& source, const std::string& name, const float* x, int64_t n,
                  int64_t first) {
  int64_t bad = -1;
#pragma omp parallel for reduction(max : bad) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) bad = std::max(bad, i);
  if (bad >= 0)
    throw InputError(source + ": tensor " + name + " holds a non-finite value (" +
                     std::to_string(x[bad]) + " at element " + std::to_string(first + bad) + ")");
}

}  // namespace

void FileContents::read_f32(const std::string& name, const Shape& shape, float* dst) const {
  check_f32(name, shape);
  const Entry& e = tensors.at(name);
  const int64_t n = shape.numel();
  if (e.dtype == "I8") {
    std::vector<float> scale(shape[0]);
    read_f32(name + ".scale", Shape{shape[0]}, scale.data());
    std::vector<int8_t> q(static_cast<size_t>(n));
    data.copy(e.begin, e.end - e.begin, q.data());
    const int64_t cols = shape[1];
    for (int64_t i = 0; i < n; ++i) dst[i] = q[i] * scale[i / cols];
  } else {
    data.copy(e.begin, e.end - e.begin, dst);
  }
  check_finite(source, name, dst, n, 0);
}

std::string FileContents::read_bytes(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw InputError(source + ": missing tensor " + name);
  return data.str(it->second.begin, it->second.end - it->second.begin);
}

VocabTensors vocab_tensors(const Vocab& vocab, const Vocab* source) {
  VocabTensors t;
  auto add = [&](const Vocab& v, const std::string& prefix) {
    if (std::string spm = v.bytes(); !spm.empty()) t[prefix + "sentencepiece"] = std::move(spm);
    if (v.imported()) t[prefix + "tokens"] = json(v.tokens()).dump();
  };
  add(vocab, "vocab/");
  if (source) add(*source, "vocab/source/");
  return t;
}

VocabTensors vocab_tensors(const FileContents& f) {
  VocabTensors t;
  for (const auto& [name, e] : f.tensors)
    if ((name.rfind("vocab/", 0) == 0 || name == kShortlistTensor) && e.dtype == "U8")
      t[name] = f.read_bytes(name);
  return t;
}

void save_model(const std::string& path, Transformer& model, const std::string& spm_model,
                const std::map<std::string, std::string>& extra_metadata, bool int8) {
  VocabTensors v;
  if (!spm_model.empty()) v["vocab/sentencepiece"] = spm_model;
  save_model(path, model, v, extra_metadata, int8);
}

void save_model(const std::string& path, Transformer& model, const VocabTensors& vocab,
                const std::map<std::string, std::string>& extra_metadata, bool int8) {
  std::map<std::string, std::string> meta = extra_metadata;
  meta["format"] = "nmt";
  meta["format_version"] = std::to_string(kModelFormatVersion);
  meta["config"] = config_to_json(model.config()).dump();
  if (int8) meta["quantization"] = "int8";
  std::vector<NamedTensor> tensors;
  std::deque<Int8Rows> rows;  // the int8 tensors' storage, until written
  std::vector<float> staging;  // the f32 values of a store on another device
  const ParamStore& store = model.params();
  if (store.dropped_values())
    throw Error(
        "save_model: the model was loaded for its products only, and holds its Linear "
        "weights in their prepared form alone; load it with WeightsUse::Keep to write it");
  const float* values =
      store.holds_int8() ? nullptr : ops::host_data(store.values(), staging);
  for (const auto& p : store.params()) {
    if (p.value.dtype() == DType::S8) {  // a store that holds int8 writes what it holds
      if (!int8) throw Error("save_model: an int8 model can only be written as int8");
      tensors.push_back({p.name, p.shape, p.value.raw(), DType::S8});
      tensors.push_back({p.name + ".scale", Shape{p.shape[0]}, p.scales.data()});
      continue;
    }
    const float* v = values ? values + p.offset : p.value.data();
    if (!int8 || !p.quantisable) {
      tensors.push_back({p.name, p.shape, v});
      continue;
    }
    const Int8Rows& q = rows.emplace_back(quantise_rows(v, p.shape[0], p.shape[1]));
    tensors.push_back({p.name, p.shape, q.values.data(), DType::S8});
    tensors.push_back({p.name + ".scale", Shape{p.shape[0]}, q.scales.data()});
  }
  write_safetensors(path, meta, tensors, vocab);
}

namespace {

std::string crc_metadata(uLong crc, const std::map<std::string, std::string>& metadata) {
  for (const auto& [key, value] : metadata) {
    if (key == "checksum") continue;
    crc = crc_bytes(crc, key.data(), key.size() + 1);  // with the terminating NUL
    crc = crc_bytes(crc, value.data(), value.size() + 1);
  }
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08lx", static_cast<unsigned long>(crc & 0xffffffffUL));
  return std::string("crc32:") + hex;
}

}  // namespace

std::string content_checksum(const std::map<std::string, std::string>& metadata,
                             const std::vector<NamedTensor>& tensors,
                             const std::map<std::string, std::string>& byte_tensors) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto& t : tensors) crc = crc_bytes(crc, t.data, t.shape.numel() * dtype_size(t.dtype));
  for (const auto& kv : byte_tensors) crc = crc_bytes(crc, kv.second.data(), kv.second.size());
  return crc_metadata(crc, metadata);
}

std::string content_checksum(const FileContents& f) {
  // read_safetensors checked that the tensors tile the data in offset order,
  // which is the order write_safetensors wrote them in.
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<char> chunk(1 << 20);
  for (uint64_t at = 0; at < f.data.size(); at += chunk.size()) {
    const uint64_t n = std::min<uint64_t>(chunk.size(), f.data.size() - at);
    f.data.copy(at, n, chunk.data());
    crc = crc_bytes(crc, chunk.data(), n);
  }
  return crc_metadata(crc, f.metadata);
}

namespace {

// One side's vocabulary from the tensors under `prefix`: a token list (with
// or without a SentencePiece model to cut text into its pieces), or nmt's
// own SentencePiece model. Empty when the file has neither.
std::optional<Vocab> read_vocab(const FileContents& f, const std::string& prefix,
                                const ModelConfig& cfg, std::string* spm_out) {
  const std::string spm_name = prefix + "sentencepiece", tokens_name = prefix + "tokens";
  if (!f.has(spm_name) && !f.has(tokens_name)) return std::nullopt;
  const std::string spm = f.has(spm_name) ? f.read_bytes(spm_name) : std::string();
  if (spm_out) *spm_out = spm;
  try {
    if (!f.has(tokens_name)) return Vocab::from_bytes(spm);
    const std::string text = f.read_bytes(tokens_name);
    json list;
    try {
      list = io::parse_json(text, tokens_name);
    } catch (const InputError&) {
      list = nullptr;
    }
    if (!list.is_array()) throw InputError("not a JSON list of tokens");
    std::vector<std::string> tokens;
    tokens.reserve(list.size());
    for (const json& t : list) {
      if (!t.is_string()) throw InputError("not a JSON list of tokens");
      tokens.push_back(t.get<std::string>());
    }
    return Vocab::from_tokens(std::move(tokens), spm,
                              prefix == "vocab/source/" ? cfg.source_unk() : cfg.unk_id);
  } catch (const InputError& e) {
    throw InputError(f.source + ": " + (f.has(tokens_name) ? tokens_name : spm_name) + ": " +
                     e.what());
  }
}

}  // namespace

FileContents open_model(const std::string& path, ModelConfig& cfg, std::string& spm_model,
                        Vocab* vocab, FileChecksum* sum, Vocab* source) {
  FileContents f = read_file(path, /*strict=*/false, sum);
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = f.metadata.find(key);
    if (it == f.metadata.end())
      throw InputError(path + ": not an nmt model file: metadata has no \"" + key + "\"");
    return it->second;
  };
  if (meta("format") != "nmt") throw InputError(path + ": not an nmt model file");
  const std::string& version = meta("format_version");
  if (version != std::to_string(kModelFormatVersion))
    throw InputError(path + ": unsupported model format version " + version + " (this nmt reads " +
                     std::to_string(kModelFormatVersion) + ")");
  cfg = parse_config(meta("config"), path + " (stored config)");
  if (auto it = f.metadata.find("step"); it != f.metadata.end()) {
    const std::string& st = it->second;
    if (st.empty() || st.size() > 18 || st.find_first_not_of("0123456789") != std::string::npos)
      throw InputError(path + ": metadata \"step\" is not a non-negative integer: \"" +
                       st.substr(0, 40) + "\"");
  }
  // Every command that loads a model makes the same checks of its
  // vocabularies: there, readable, and as large as the embeddings.
  spm_model.clear();
  std::optional<Vocab> v = read_vocab(f, "vocab/", cfg, &spm_model);
  if (!v) throw InputError(path + ": the model file holds no SentencePiece vocabulary");
  if (v->size() != cfg.vocab_size)
    throw InputError(path + ": the vocabulary has " + std::to_string(v->size()) +
                     " pieces but the model's embedding " + std::to_string(cfg.vocab_size) +
                     " rows");
  std::optional<Vocab> s = read_vocab(f, "vocab/source/", cfg, nullptr);
  if (s && s->size() != cfg.source_vocab())
    throw InputError(path + ": the source vocabulary has " + std::to_string(s->size()) +
                     " pieces but the model's source embedding " +
                     std::to_string(cfg.source_vocab()) + " rows");
  if (!s && cfg.src_vocab_size)
    throw InputError(path + ": the model has a source embedding of its own (src_vocab_size " +
                     std::to_string(cfg.src_vocab_size) + ") but no source vocabulary");
  if (vocab) *vocab = std::move(*v);
  if (source && s) *source = std::move(*s);
  return f;
}

void FileContents::read_s8(const std::string& name, const Shape& shape, int8_t* dst,
                           float* scales) const {
  check_f32(name, shape);
  const Entry& e = tensors.at(name);
  const int64_t rows = shape[0], cols = shape[1];
  if (e.dtype != "I8") {
    // An f32 matrix, rounded as nmt quantize rounds it (row by row), read in
    // blocks of rows through one buffer of at most 256 KB: a whole f32 copy
    // of each matrix was fresh memory, 2.2K of the 4.1K page faults of
    // loading transformer-small in int8 from its f32 file.
    const int64_t block = std::max<int64_t>(1, (int64_t{256} << 10) / (cols * 4));
    std::vector<float> w(static_cast<size_t>(std::min(rows, block) * cols));
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      const int64_t n = std::min(block, rows - r0) * cols;
      data.copy(e.begin + static_cast<uint64_t>(r0 * cols * 4), static_cast<uint64_t>(n * 4),
                w.data());
      check_finite(source, name, w.data(), n, r0 * cols);
      quantise_rows(w.data(), n / cols, cols, dst + r0 * cols, scales + r0);
    }
    return;
  }
  read_f32(name + ".scale", Shape{rows}, scales);  // finite, as every f32 tensor
  data.copy(e.begin, e.end - e.begin, dst);
  // Widened, every weight is finite too (the check read_f32 makes).
  for (int64_t r = 0; r < rows; ++r) {
    int amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(int{dst[r * cols + c]}));
    if (!std::isfinite(static_cast<float>(amax) * scales[r]))
      throw InputError(source + ": tensor " + name + " holds a non-finite value (row " +
                       std::to_string(r) + "'s scale " + std::to_string(scales[r]) + " times " +
                       std::to_string(amax) + ")");
  }
}

void load_weights(const FileContents& file, Transformer& model, const std::string& prefix) {
  // Every shape is checked before the parameters are allocated, so that a
  // config edited to enormous sizes is refused at once.
  ParamStore& store = model.params();
  for (auto& p : store.params()) file.check_f32(prefix + p.name, p.shape);
  file.check_layout();  // a gap, now that no tensor is missing
  if (!store.allocated()) model.init_for_loading();
  // A store on another device is read into host staging and placed once.
  const bool on_host = store.device() == Device::CPU;
  std::vector<float> staging;
  if (!on_host) staging.assign(static_cast<size_t>(store.size()), 0.f);
  bool all_zero = true;  // a model that translates everything to nothing:
                         // never trained, or its data wiped
  for (const Param& p : store.params()) {
    Tensor v = store.value(&p);
    if (v.dtype() == DType::S8) {
      file.read_s8(prefix + p.name, p.shape, v.data_as<int8_t>(), store.scales(&p).data());
      const int8_t* q = v.data_as<int8_t>();
      all_zero = all_zero && std::all_of(q, q + v.numel(), [](int8_t x) { return x == 0; });
    } else {
      float* dst = on_host ? v.data() : staging.data() + p.offset;
      file.read_f32(prefix + p.name, p.shape, dst);
      all_zero = all_zero && std::all_of(dst, dst + v.numel(), [](float x) { return x == 0.f; });
    }
  }
  if (all_zero) throw InputError(file.source + ": every weight is zero (not a trained model)");
  if (!on_host) ops::upload(staging.data(), store.values());
}

void write_model_copy(const std::string& in, const std::string& out, bool int8,
                      const std::map<std::string, std::string>& extra) {
  ModelConfig cfg;
  std::string spm;
  FileContents f = open_model(in, cfg, spm);
  auto q = f.metadata.find("quantization");
  if (int8 && q != f.metadata.end())
    throw InputError(in + " is already quantised (" + q->second + ")");
  Transformer net(cfg);
  load_weights(f, net);
  std::map<std::string, std::string> keep = extra;  // what nmt info shows of its training
  for (const char* k : {"step", "training_options", "training_data", "recipe", "imported_from",
                        "shortlist", "distillation"})
    if (auto it = f.metadata.find(k); it != f.metadata.end()) keep.emplace(k, it->second);
  save_model(out, net, vocab_tensors(f), keep, int8);
}

}  // namespace nmt
