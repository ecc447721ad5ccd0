#include "model/model_file.h"

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

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "model/quantise.h"
#include "model/transformer.h"

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

  io::AtomicFile out(path);
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
  const uint64_t elem = e.dtype == "F32" ? 4 : e.dtype == "U8" || e.dtype == "I8" ? 1 : 0;
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
// order, with no gap, overlap or trailing bytes.
void check_layout(const std::map<std::string, FileContents::Entry>& tensors, uint64_t data_size,
                  const std::function<InputError(const std::string&)>& bad) {
  std::vector<std::pair<const std::string*, const FileContents::Entry*>> order;
  for (const auto& [name, e] : tensors) order.push_back({&name, &e});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->begin != b.second->begin ? a.second->begin < b.second->begin
                                              : a.second->end < b.second->end;
  });
  uint64_t at = 0;
  for (const auto& [name, e] : order) {
    if (e->begin != at)
      throw bad(
          "tensor " + *name +
          (e->begin < at ? " overlaps another tensor's data" : " leaves a gap before its data"));
    at = e->end;
  }
  if (at > data_size) throw bad("tensor data extends past the end of the file (truncated?)");
  if (at != data_size)
    throw bad(std::to_string(data_size - at) + " bytes after the last tensor's data");
}

}  // namespace

FileContents read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open model file " + path + ": " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  const std::function<InputError(const std::string&)> bad = [&](const std::string& why) {
    return InputError(path + ": not a valid model file: " + why);
  };
  if (size < 8) throw bad("file is only " + std::to_string(size) + " bytes (truncated?)");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (hlen > size - 8 || hlen > (100u << 20))
    throw bad("header length " + std::to_string(hlen) + " exceeds the file size " +
              std::to_string(size) + " (truncated?)");
  std::string h(hlen, '\0');
  in.read(h.data(), static_cast<std::streamsize>(hlen));
  json header;
  try {
    header = io::parse_json(h, "header");
  } catch (const InputError& e) {
    throw bad(e.what());
  }
  if (!header.is_object()) throw bad("header is not a JSON object");

  FileContents f;
  f.source = path;
  const uint64_t data_size = size - 8 - hlen;
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
  check_layout(f.tensors, data_size, bad);
  f.data.resize(data_size);
  in.read(f.data.data(), static_cast<std::streamsize>(data_size));
  if (static_cast<uint64_t>(in.gcount()) != data_size) throw bad("could not read the tensor data");
  return f;
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

void FileContents::read_f32(const std::string& name, const Shape& shape, float* dst) const {
  check_f32(name, shape);
  const Entry& e = tensors.at(name);
  const int64_t n = shape.numel();
  if (e.dtype == "I8") {
    std::vector<float> scale(shape[0]);
    read_f32(name + ".scale", Shape{shape[0]}, scale.data());
    const auto* q = reinterpret_cast<const int8_t*>(data.data() + e.begin);
    const int64_t cols = shape[1];
    for (int64_t i = 0; i < n; ++i) dst[i] = q[i] * scale[i / cols];
  } else {
    std::memcpy(dst, data.data() + e.begin, e.end - e.begin);
  }
  int64_t bad = -1;
#pragma omp parallel for reduction(max : bad) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(dst[i])) bad = std::max(bad, i);
  if (bad >= 0)
    throw InputError(source + ": tensor " + name + " holds a non-finite value (" +
                     std::to_string(dst[bad]) + " at element " + std::to_string(bad) + ")");
}

std::string FileContents::read_bytes(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw InputError(source + ": missing tensor " + name);
  return std::string(data.data() + it->second.begin, it->second.end - it->second.begin);
}

void save_model(const std::string& path, Transformer& model, const std::string& spm_model,
                const std::map<std::string, std::string>& extra_metadata, bool int8) {
  std::map<std::string, std::string> meta = extra_metadata;
  meta["format"] = "nmt";
  meta["format_version"] = std::to_string(kModelFormatVersion);
  meta["config"] = config_to_json(model.config()).dump();
  if (int8) meta["quantization"] = "int8";
  std::vector<NamedTensor> tensors;
  std::deque<Int8Rows> rows;  // the int8 tensors' storage, until written
  for (const auto& p : model.params().params()) {
    if (!int8 || !quantised_in_int8(p)) {
      tensors.push_back({p.name, p.shape, p.value.data()});
      continue;
    }
    const Int8Rows& q = rows.emplace_back(quantise_rows(p.value.data(), p.shape[0], p.shape[1]));
    tensors.push_back({p.name, p.shape, q.values.data(), DType::S8});
    tensors.push_back({p.name + ".scale", Shape{p.shape[0]}, q.scales.data()});
  }
  std::map<std::string, std::string> bytes;
  if (!spm_model.empty()) bytes["vocab/sentencepiece"] = spm_model;
  write_safetensors(path, meta, tensors, bytes);
}

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
  return crc_metadata(crc_bytes(crc32(0L, Z_NULL, 0), f.data.data(), f.data.size()), f.metadata);
}

FileContents open_model(const std::string& path, ModelConfig& cfg, std::string& spm_model) {
  FileContents f = read_safetensors(path);
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
  spm_model = f.has("vocab/sentencepiece") ? f.read_bytes("vocab/sentencepiece") : "";
  return f;
}

void load_weights(const FileContents& file, Transformer& model, const std::string& prefix) {
  // Every shape is checked before the parameters are allocated, so that a
  // config edited to enormous sizes is refused at once.
  for (auto& p : model.params().params()) file.check_f32(prefix + p.name, p.shape);
  if (!model.params().values().numel()) model.init(0);
  for (const Param& p : model.params().params()) {
    Tensor v = model.params().value(&p);
    file.read_f32(prefix + p.name, p.shape, v.data());
  }
  // A model whose weights are all zero translates everything to nothing:
  // it was never trained, or its data was wiped.
  const Tensor& v = model.params().values();
  if (std::all_of(v.data(), v.data() + v.numel(), [](float x) { return x == 0.f; }))
    throw InputError(file.source + ": every weight is zero (not a trained model)");
}

}  // namespace nmt
