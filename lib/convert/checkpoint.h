// The weights of a Hugging Face checkpoint directory, whichever way they are
// stored: model.safetensors, shards listed by model.safetensors.index.json,
// or PyTorch's pytorch_model.bin (and its shards). A .bin is a zip of a
// pickle and raw storages; its pickle is read by a reader that knows only
// what a file of tensors holds (dicts, tuples, numbers, strings, the
// tensor-rebuilding functions and the float storage types) and refuses any
// other name it refers to: no code is ever run from a model file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace nmt::convert {

class Checkpoint {
 public:
  // Throws InputError when dir holds none of those files, naming them.
  explicit Checkpoint(const std::string& dir);
  ~Checkpoint();
  Checkpoint(Checkpoint&&) noexcept;

  bool has(const std::string& name) const;
  std::vector<int64_t> shape(const std::string& name) const;  // throws if absent
  // A tensor as f32 (from F32, F16, BF16 or F64), checked for this shape and
  // for finite values, naming the tensor and its file.
  std::vector<float> read(const std::string& name, const std::vector<int64_t>& shape) const;
  // Whether two tensors are one stored tensor (PyTorch's tied weights are
  // views of one storage; safetensors may list one range twice): a second
  // name for it need not be read again. Both are then counted as read.
  bool same_data(const std::string& a, const std::string& b) const;
  // The tensors nothing read.
  std::vector<std::string> unused() const;
  // The files the weights came from.
  const std::vector<std::string>& files() const { return files_; }

  struct Store;  // one file's tensors

 private:
  std::vector<std::unique_ptr<Store>> stores_;
  std::map<std::string, const Store*> where_;
  std::vector<std::string> files_;
  mutable std::set<std::string> used_;
};

// The tensors a pickled state dict names (exposed for the fuzz target and
// the tests): each tensor's storage key, element type ("F32", "F16",
// "BF16", "F64"), offset in elements, and shape (contiguous, row-major).
struct PickledTensor {
  std::string storage, dtype;
  int64_t offset = 0, storage_elements = 0;
  std::vector<int64_t> shape;
};
std::map<std::string, PickledTensor> read_state_dict_pickle(const std::string& bytes,
                                                            const std::string& what);

}  // namespace nmt::convert
