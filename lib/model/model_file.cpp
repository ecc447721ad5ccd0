#include "model/model_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/transformer.h"

namespace nmt {

using json = nlohmann::json;

namespace {

void write_all(int fd, const void* p, size_t n, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot write " + path + ": " + std::strerror(errno));
    }
    c += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& byte_tensors) {
  json header;
  header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const uint64_t bytes = t.shape.numel() * sizeof(float);
    json shape = json::array();
    for (int i = 0; i < t.shape.ndim; ++i) shape.push_back(t.shape[i]);
    header[t.name] = {
        {"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
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

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("cannot create " + tmp + ": " + std::strerror(errno));
  try {
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(hlen >> (8 * i));
    write_all(fd, len, 8, tmp);
    write_all(fd, h.data(), h.size(), tmp);
    for (const auto& t : tensors) write_all(fd, t.data, t.shape.numel() * sizeof(float), tmp);
    for (const auto& kv : byte_tensors) write_all(fd, kv.second.data(), kv.second.size(), tmp);
    if (::fsync(fd) != 0) throw Error("cannot write " + tmp + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw Error("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + path + ": " + err);
  }
}

FileContents read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open model file " + path + ": " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  auto bad = [&](const std::string& why) {
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
    header = json::parse(h);
  } catch (const json::parse_error&) {
    throw bad("header is not valid JSON");
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
    const json& t = *it;
    FileContents::Entry e;
    try {
      e.dtype = t.at("dtype").get<std::string>();
      e.shape = t.at("shape").get<std::vector<int64_t>>();
      const auto off = t.at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2) throw bad("tensor " + it.key() + " has malformed data_offsets");
      e.begin = off[0];
      e.end = off[1];
    } catch (const json::exception&) {
      throw bad("tensor " + it.key() + " has a malformed entry");
    }
    uint64_t n = 1;
    for (int64_t d : e.shape) {
      if (d < 0) throw bad("tensor " + it.key() + " has a negative dimension");
      n *= static_cast<uint64_t>(d);
    }
    const uint64_t elem = e.dtype == "F32" ? 4 : e.dtype == "U8" ? 1 : 0;
    if (!elem) throw bad("tensor " + it.key() + " has unsupported dtype " + e.dtype);
    if (e.end < e.begin || e.end - e.begin != n * elem)
      throw bad("tensor " + it.key() + " data_offsets do not match its shape");
    if (e.end > data_size)
      throw bad("tensor " + it.key() + " extends past the end of the file (truncated?)");
    f.tensors[it.key()] = e;
  }
  f.data.resize(data_size);
  in.read(f.data.data(), static_cast<std::streamsize>(data_size));
  if (static_cast<uint64_t>(in.gcount()) != data_size) throw bad("could not read the tensor data");
  return f;
}

void FileContents::read_f32(const std::string& name, const Shape& shape, float* dst) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw InputError(source + ": missing tensor " + name);
  const Entry& e = it->second;
  std::vector<int64_t> want(shape.dims.begin(), shape.dims.begin() + shape.ndim);
  if (e.dtype != "F32" || e.shape != want) {
    std::string got;
    for (auto d : e.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
    throw InputError(source + ": tensor " + name + " has shape (" + got + ") " + e.dtype +
                     ", expected " + shape.str() + " F32");
  }
  std::memcpy(dst, data.data() + e.begin, e.end - e.begin);
}

std::string FileContents::read_bytes(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw InputError(source + ": missing tensor " + name);
  return std::string(data.data() + it->second.begin, it->second.end - it->second.begin);
}

void save_model(const std::string& path, Transformer& model, const std::string& spm_model,
                const std::map<std::string, std::string>& extra_metadata) {
  std::map<std::string, std::string> meta = extra_metadata;
  meta["format"] = "nmt";
  meta["format_version"] = std::to_string(kModelFormatVersion);
  meta["config"] = config_to_json(model.config()).dump();
  std::vector<NamedTensor> tensors;
  for (const auto& p : model.params().params())
    tensors.push_back({p.name, p.shape, p.value.data()});
  std::map<std::string, std::string> bytes;
  if (!spm_model.empty()) bytes["vocab/sentencepiece"] = spm_model;
  write_safetensors(path, meta, tensors, bytes);
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
  json cj;
  try {
    cj = json::parse(meta("config"));
  } catch (const json::parse_error&) {
    throw InputError(path + ": the stored config is not valid JSON");
  }
  cfg = config_from_json(cj, path + " (stored config)");
  spm_model = f.has("vocab/sentencepiece") ? f.read_bytes("vocab/sentencepiece") : "";
  return f;
}

void load_weights(const FileContents& file, Transformer& model, const std::string& prefix) {
  if (!model.params().values().numel()) model.init(0);
  for (auto& p : model.params().params()) file.read_f32(prefix + p.name, p.shape, p.value.data());
}

}  // namespace nmt
