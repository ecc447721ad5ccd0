#include "convert/checkpoint.h"

#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>

#include "convert/formats.h"
#include "convert/zip_archive.h"
#include "core/dtype.h"
#include "core/error.h"
#include "io/json.h"
#include "io/text_file.h"
#include "model/model_file.h"

namespace nmt::convert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A value of the pickle machine: only the kinds a file of tensors holds.
struct Obj;
// Values live in the reader's arena (a pickle may build cycles: a list
// appended to itself), referred to by pointer.
using Ref = Obj*;
struct Obj {
  enum Kind { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Storage, Tensor, Mark };
  Kind kind = None;
  int64_t i = 0;
  std::string s;           // Str; Global: "module name"
  std::vector<Ref> items;  // Tuple, List; Dict: key, value, key, value...
  PickledTensor tensor;    // Storage (storage, dtype, storage_elements), Tensor
};

// The names a state dict's pickle refers to, and nothing else.
const char* const kRebuildTensor = "torch._utils _rebuild_tensor_v2";
const char* const kRebuildParameter = "torch._utils _rebuild_parameter";
const char* const kOrderedDict = "collections OrderedDict";
const char* storage_dtype(const std::string& global) {
  if (global == "torch FloatStorage") return "F32";
  if (global == "torch HalfStorage") return "F16";
  if (global == "torch BFloat16Storage") return "BF16";
  if (global == "torch DoubleStorage") return "F64";
  return nullptr;
}

class Unpickler {
 public:
  Unpickler(const std::string& b, std::string what) : b_(b), what_(std::move(what)) {}

  Ref run() {
    while (true) {
      const uint8_t op = byte();
      if (op == '.') break;
      step(op);
    }
    if (stack_.size() != 1) fail("the pickle does not end with one value");
    return stack_.back();
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(what_ + ": " + why + " (at byte " + std::to_string(at_) + ")");
  }
  void need(uint64_t n) const {
    if (n > b_.size() - at_) fail("truncated pickle");
  }
  uint8_t byte() {
    need(1);
    return static_cast<uint8_t>(b_[at_++]);
  }
  uint64_t uint(int n) {
    need(n);
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= uint64_t{static_cast<uint8_t>(b_[at_ + k])} << (8 * k);
    at_ += n;
    return v;
  }
  std::string bytes(uint64_t n) {
    need(n);
    std::string s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  std::string line() {
    const size_t e = b_.find('\n', at_);
    if (e == std::string::npos) fail("truncated pickle");
    std::string s = b_.substr(at_, e - at_);
    at_ = e + 1;
    return s;
  }
  Ref make(Obj::Kind k) {
    if (arena_.size() >= kMaxValues) fail("a pickle of more values than any state dict's");
    arena_.emplace_back();
    arena_.back().kind = k;
    return &arena_.back();
  }
  void push(Ref o) {
    if (stack_.size() >= kMaxStack) fail("a pickle deeper than any state dict's");
    stack_.push_back(std::move(o));
  }
  Ref pop() {
    if (stack_.empty() || stack_.back()->kind == Obj::Mark) fail("a pickle popping past its mark");
    Ref o = stack_.back();
    stack_.pop_back();
    return o;
  }
  Ref& top() {
    if (stack_.empty() || stack_.back()->kind == Obj::Mark) fail("a pickle with an empty stack");
    return stack_.back();
  }
  // The values above the last mark, the mark removed.
  std::vector<Ref> pop_mark() {
    size_t m = stack_.size();
    while (m > 0 && stack_[m - 1]->kind != Obj::Mark) --m;
    if (m == 0) fail("a pickle without its mark");
    std::vector<Ref> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m - 1);
    return out;
  }
  Ref integer(int64_t v) {
    Ref o = make(Obj::Int);
    o->i = v;
    return o;
  }
  Ref text(std::string s) {
    Ref o = make(Obj::Str);
    o->s = std::move(s);
    return o;
  }
  void memo_put(uint64_t k) {
    if (k > kMaxMemo) fail("a memo index past any state dict's");
    memo_[k] = top();
  }
  Ref memo_get(uint64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) fail("a memo entry read before it was written");
    return it->second;
  }
  Ref global(const std::string& module, const std::string& name) {
    const std::string g = module + " " + name;
    if (g != kRebuildTensor && g != kRebuildParameter && g != kOrderedDict && !storage_dtype(g))
      fail("the pickle refers to " + module + "." + name +
           ", which no file of tensors needs; refused (nothing in a model file is run)");
    Ref o = make(Obj::Global);
    o->s = g;
    return o;
  }
  bool push_value(uint8_t op);
  void step(uint8_t op);
  void reduce();
  Ref persistent(const Ref& pid);

  static constexpr size_t kMaxStack = 1 << 20;
  static constexpr uint64_t kMaxMemo = 1 << 24;
  const std::string& b_;
  std::string what_;
  size_t at_ = 0;
  static constexpr size_t kMaxValues = 1 << 22;
  std::deque<Obj> arena_;
  std::vector<Ref> stack_;
  std::map<uint64_t, Ref> memo_;
};

// Opcodes that push one value (a constant, a number, a string, a global);
// false for any other.
bool Unpickler::push_value(uint8_t op) {
  static const std::pair<uint8_t, Obj::Kind> empty[] = {
      {'(', Obj::Mark}, {'}', Obj::Dict}, {']', Obj::List}, {')', Obj::Tuple}, {'N', Obj::None}};
  for (const auto& [code, kind] : empty)
    if (op == code) {
      push(make(kind));
      return true;
    }
  switch (op) {
    case 0x80:
      byte();
      return true;  // PROTO
    case 0x95:
      uint(8);
      return true;  // FRAME
    case 0x88:
    case 0x89: {  // NEWTRUE, NEWFALSE
      Ref o = make(Obj::Bool);
      o->i = op == 0x88;
      push(o);
      return true;
    }
    case 'J':
      push(integer(static_cast<int32_t>(uint(4))));
      return true;
    case 'K':
      push(integer(static_cast<int64_t>(uint(1))));
      return true;
    case 'M':
      push(integer(static_cast<int64_t>(uint(2))));
      return true;
    case 0x8a: {  // LONG1
      const int n = byte();
      if (n > 8) fail("an integer wider than 64 bits");
      uint64_t v = uint(n);
      if (n > 0 && n < 8 && (v >> (8 * n - 1) & 1)) v |= ~uint64_t{0} << (8 * n);
      push(integer(static_cast<int64_t>(v)));
      return true;
    }
    case 'G': {  // BINFLOAT, big-endian
      need(8);
      at_ += 8;
      push(make(Obj::Float));
      return true;
    }
    case 'X':
      push(text(bytes(uint(4))));
      return true;
    case 0x8c:
      push(text(bytes(uint(1))));
      return true;
    case 0x8d:
      push(text(bytes(uint(8))));
      return true;
    case 'U':
    case 'C':
      push(text(bytes(uint(1))));
      return true;
    case 'T':
    case 'B':
      push(text(bytes(uint(4))));
      return true;
    case 'c': {
      const std::string module = line();
      push(global(module, line()));
      return true;
    }
    case 0x93: {  // STACK_GLOBAL
      const Ref name = pop(), module = pop();
      if (name->kind != Obj::Str || module->kind != Obj::Str) fail("a malformed global");
      push(global(module->s, name->s));
      return true;
    }
  }
  return false;
}

void Unpickler::step(uint8_t op) {
  if (push_value(op)) return;
  switch (op) {
    case 'q':
      return memo_put(uint(1));
    case 'r':
      return memo_put(uint(4));
    case 0x94:
      return memo_put(memo_.size());
    case 'h':
      return push(memo_get(uint(1)));
    case 'j':
      return push(memo_get(uint(4)));
    case '0':
      pop();
      return;
    case '2':
      return push(top());
    case 't':
    case 'l': {
      Ref o = make(op == 't' ? Obj::Tuple : Obj::List);
      o->items = pop_mark();
      return push(o);
    }
    case 0x85:
    case 0x86:
    case 0x87: {  // TUPLE1..3
      Ref o = make(Obj::Tuple);
      o->items.resize(op - 0x84);
      for (size_t k = o->items.size(); k-- > 0;) o->items[k] = pop();
      return push(o);
    }
    case 'd': {
      Ref o = make(Obj::Dict);
      o->items = pop_mark();
      if (o->items.size() % 2) fail("a dict of an odd number of values");
      return push(o);
    }
    case 'a':
    case 'e':
    case 's':
    case 'u': {  // APPEND(S), SETITEM(S)
      std::vector<Ref> v;
      if (op == 'a') v = {pop()};
      if (op == 's') {
        Ref val = pop();
        v = {pop(), val};
      }
      if (op == 'e' || op == 'u') v = pop_mark();
      Ref& into = top();
      if (into->kind != ((op == 'a' || op == 'e') ? Obj::List : Obj::Dict))
        fail("items added to something that cannot hold them");
      if ((op == 'u') && v.size() % 2) fail("a dict of an odd number of values");
      into->items.insert(into->items.end(), v.begin(), v.end());
      return;
    }
    case 'Q': {
      const Ref pid = pop();
      return push(persistent(pid));
    }
    case 'R':
      return reduce();
    case 'b': {  // BUILD: a dict's attributes (a state dict's _metadata), a tensor's state
      pop();
      top();
      return;
    }
  }
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", op);
  fail(std::string("pickle opcode ") + hex + " is not one a file of tensors uses; refused");
}

// ('storage', torch.FloatStorage, key, location, elements)
Ref Unpickler::persistent(const Ref& pid) {
  const auto& it = pid->items;
  if (pid->kind != Obj::Tuple || it.size() != 5 || it[0]->kind != Obj::Str ||
      it[0]->s != "storage" || it[1]->kind != Obj::Global || !storage_dtype(it[1]->s) ||
      it[2]->kind != Obj::Str || it[4]->kind != Obj::Int || it[4]->i < 0)
    fail("a persistent id that is not a float storage");
  Ref o = make(Obj::Storage);
  o->tensor.storage = it[2]->s;
  o->tensor.dtype = storage_dtype(it[1]->s);
  o->tensor.storage_elements = it[4]->i;
  return o;
}

void Unpickler::reduce() {
  const Ref args = pop(), fn = pop();
  if (fn->kind != Obj::Global || args->kind != Obj::Tuple) fail("a call that is not a known one");
  const auto& a = args->items;
  if (fn->s == kOrderedDict) {
    if (!a.empty()) fail("an OrderedDict built from arguments");
    return push(make(Obj::Dict));
  }
  if (fn->s == kRebuildParameter) {
    if (a.empty() || a[0]->kind != Obj::Tensor) fail("a parameter of no tensor");
    return push(a[0]);
  }
  if (fn->s != kRebuildTensor) fail("a call to " + fn->s + "; refused");
  // (storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
  if (a.size() < 4 || a[0]->kind != Obj::Storage || a[1]->kind != Obj::Int ||
      a[2]->kind != Obj::Tuple || a[3]->kind != Obj::Tuple ||
      a[2]->items.size() != a[3]->items.size() || a[2]->items.size() > 4)
    fail("a tensor rebuilt from arguments that are not a storage, offset, size and stride");
  Ref t = make(Obj::Tensor);
  t->tensor = a[0]->tensor;
  t->tensor.offset = a[1]->i;
  int64_t n = 1, expect = 1;
  for (size_t k = a[2]->items.size(); k-- > 0;) {
    const Ref& d = a[2]->items[k];
    const Ref& st = a[3]->items[k];
    if (d->kind != Obj::Int || st->kind != Obj::Int || d->i < 0 || d->i > (int64_t{1} << 40))
      fail("a tensor of a malformed size");
    if (d->i > 1 && st->i != expect) fail("a tensor that is not contiguous (a view)");
    expect *= d->i;
    if (__builtin_mul_overflow(n, d->i, &n) || n > (int64_t{1} << 40))
      fail("a tensor of an impossibly large size");
  }
  for (const Ref& d : a[2]->items) t->tensor.shape.push_back(d->i);
  if (t->tensor.offset < 0 || t->tensor.offset > t->tensor.storage_elements ||
      n > t->tensor.storage_elements - t->tensor.offset)
    fail("a tensor past the end of its storage");
  push(t);
}

size_t dtype_bytes(const std::string& d) {
  return d == "F32" ? 4 : d == "F64" ? 8 : d == "F16" || d == "BF16" ? 2 : 0;
}

std::vector<float> to_f32(const std::string& dtype, const char* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  if (dtype == "F32") {
    copy_bytes(out.data(), p, out.size() * 4);
  } else if (dtype == "F16") {
    widen_f16(p, n, out.data());
  } else if (dtype == "BF16") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = bf16_to_float(h);
    }
  } else {  // F64
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
  }
  return out;
}

}  // namespace

std::map<std::string, PickledTensor> read_state_dict_pickle(const std::string& bytes,
                                                            const std::string& what) {
  Unpickler reader(bytes, what);
  const Ref root = reader.run();
  if (root->kind != Obj::Dict) throw InputError(what + ": the pickle is not a dict of tensors");
  std::map<std::string, PickledTensor> out;
  for (size_t k = 0; k + 1 < root->items.size(); k += 2) {
    const Ref &key = root->items[k], &val = root->items[k + 1];
    if (key->kind != Obj::Str || val->kind != Obj::Tensor)
      throw InputError(what + ": the pickle is not a dict of named tensors");
    out[key->s] = val->tensor;  // as Python's dict, a later key replaces an earlier
  }
  return out;
}

// One file's tensors, and how to read one as f32.
struct Checkpoint::Store {
  virtual ~Store() = default;
  virtual std::vector<std::string> names() const = 0;
  virtual std::vector<int64_t> shape(const std::string& name) const = 0;
  virtual std::vector<float> read(const std::string& name) const = 0;
  // Where its data is (equal for two names of one stored tensor).
  virtual std::string place(const std::string& name) const = 0;
};

namespace {

struct SafetensorsStore : Checkpoint::Store {
  explicit SafetensorsStore(const std::string& path) : file(read_safetensors(path)) {
    for (const auto& [name, e] : file.tensors)
      if (!dtype_bytes(e.dtype))
        throw InputError(path + ": tensor " + name + " is " + e.dtype +
                         " (weights are read from F32, F16, BF16 and F64)");
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> v;
    for (const auto& [name, e] : file.tensors) v.push_back(name);
    return v;
  }
  std::vector<int64_t> shape(const std::string& name) const override {
    return file.tensors.at(name).shape;
  }
  std::string place(const std::string& name) const override {
    const FileContents::Entry& e = file.tensors.at(name);
    return e.dtype + shape_text(e.shape) + std::to_string(e.begin);
  }
  std::vector<float> read(const std::string& name) const override {
    const FileContents::Entry& e = file.tensors.at(name);
    const std::string b = file.data.str(e.begin, e.end - e.begin);
    return to_f32(e.dtype, b.data(), static_cast<int64_t>(b.size() / dtype_bytes(e.dtype)));
  }
  FileContents file;
};

struct TorchStore : Checkpoint::Store {
  explicit TorchStore(const std::string& path) : zip(path, "PyTorch checkpoint (zip)") {
    std::string pkl;
    for (const auto& [name, size] : zip.entries())
      if (name.size() >= 8 && name.compare(name.size() - 8, 8, "data.pkl") == 0 &&
          (name.size() == 8 || name[name.size() - 9] == '/')) {
        if (!pkl.empty()) throw InputError(path + ": the archive holds two data.pkl");
        pkl = name;
      }
    if (pkl.empty())
      throw InputError(path +
                       ": no data.pkl in the archive (a PyTorch file from before 1.6, or not "
                       "PyTorch's; re-save it with torch.save or as safetensors)");
    prefix = pkl.substr(0, pkl.size() - 8);
    if (zip.entries().at(pkl) > (uint64_t{1} << 30))
      throw InputError(path + ": " + pkl + " is larger than any state dict's pickle");
    tensors = read_state_dict_pickle(zip.read(pkl), path + ": " + pkl);
    for (const auto& [name, t] : tensors) {
      const std::string entry = prefix + "data/" + t.storage;
      if (!zip.has(entry))
        throw InputError(path + ": tensor " + name + "'s storage " + entry + " is missing");
      if (zip.entries().at(entry) !=
          static_cast<uint64_t>(t.storage_elements) * dtype_bytes(t.dtype))
        throw InputError(path + ": storage " + entry + " is not the size its tensors say");
    }
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> v;
    for (const auto& [name, t] : tensors) v.push_back(name);
    return v;
  }
  std::vector<int64_t> shape(const std::string& name) const override {
    return tensors.at(name).shape;
  }
  std::string place(const std::string& name) const override {
    const PickledTensor& t = tensors.at(name);
    return t.dtype + shape_text(t.shape) + t.storage + ":" + std::to_string(t.offset);
  }
  std::vector<float> read(const std::string& name) const override {
    const PickledTensor& t = tensors.at(name);
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const size_t e = dtype_bytes(t.dtype);
    const std::string b = zip.read(prefix + "data/" + t.storage, (t.offset + n) * e);
    return to_f32(t.dtype, b.data() + t.offset * e, n);
  }
  ZipArchive zip;
  std::string prefix;
  std::map<std::string, PickledTensor> tensors;
};

// The shard files an index names, in order, each once.
std::vector<std::string> shards(const fs::path& index) {
  const json j =
      io::parse_json(io::read_whole_file(index.string(), "checkpoint index"), index.string());
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw InputError(index.string() + ": no \"weight_map\" object");
  std::vector<std::string> files;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
      throw InputError(index.string() + ": \"" + name +
                       "\" is not mapped to a file in the directory");
    const std::string f = (index.parent_path() / file.get<std::string>()).string();
    if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
  }
  return files;
}

}  // namespace

Checkpoint::Checkpoint(const std::string& dir) {
  const fs::path d = dir;
  std::error_code ec;
  auto exists = [&](const char* f) { return fs::exists(d / f, ec); };
  bool safe = true;
  if (exists("model.safetensors")) {
    files_ = {(d / "model.safetensors").string()};
  } else if (exists("model.safetensors.index.json")) {
    files_ = shards(d / "model.safetensors.index.json");
  } else if (exists("pytorch_model.bin")) {
    files_ = {(d / "pytorch_model.bin").string()}, safe = false;
  } else if (exists("pytorch_model.bin.index.json")) {
    files_ = shards(d / "pytorch_model.bin.index.json"), safe = false;
  } else {
    throw InputError(dir +
                     ": no weights (model.safetensors, model.safetensors.index.json, "
                     "pytorch_model.bin or pytorch_model.bin.index.json)");
  }
  for (const std::string& f : files_) {
    stores_.push_back(safe ? std::unique_ptr<Store>(new SafetensorsStore(f))
                           : std::unique_ptr<Store>(new TorchStore(f)));
    for (const std::string& n : stores_.back()->names())
      if (!where_.emplace(n, stores_.back().get()).second)
        throw InputError(f + ": tensor " + n + " is also in another shard");
  }
}

Checkpoint::~Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;

bool Checkpoint::has(const std::string& name) const { return where_.count(name) > 0; }

std::vector<int64_t> Checkpoint::shape(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw InputError(files_[0] + ": the checkpoint has no tensor " + name);
  return it->second->shape(name);
}

std::vector<float> Checkpoint::read(const std::string& name,
                                    const std::vector<int64_t>& shape) const {
  const std::vector<int64_t> got = this->shape(name);
  if (got != shape)
    throw InputError(files_[0] + ": tensor " + name + " has shape " + shape_text(got) +
                     ", expected " + shape_text(shape));
  used_.insert(name);
  std::vector<float> v = where_.at(name)->read(name);
  check_finite(v, files_[0] + ": tensor " + name);
  return v;
}

bool Checkpoint::same_data(const std::string& a, const std::string& b) const {
  const auto x = where_.find(a), y = where_.find(b);
  if (x == where_.end() || y == where_.end() || x->second != y->second ||
      x->second->place(a) != y->second->place(b))
    return false;
  used_.insert(a), used_.insert(b);
  return true;
}

std::vector<std::string> Checkpoint::unused() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : where_)
    if (!used_.count(name)) out.push_back(name);
  return out;
}

}  // namespace nmt::convert
