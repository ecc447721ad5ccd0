// The reader of PyTorch's pickled state dicts (convert/checkpoint.h) on any
// bytes. Properties: nothing but InputError is thrown; every tensor it
// returns lies within its storage, with a known element type.
#include <string>

#include "convert/checkpoint.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& [name, t] : nmt::convert::read_state_dict_pickle(bytes, "fuzz")) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      if (t.offset < 0 || n > t.storage_elements - t.offset) __builtin_trap();
      if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16" && t.dtype != "F64")
        __builtin_trap();
    }
  } catch (const nmt::InputError&) {
  }
  return 0;
}
