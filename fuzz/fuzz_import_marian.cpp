// The Marian importer on arbitrary model directories: model.npz, vocab.yml
// and decoder.yml from one input (fuzz_import.h). The archive is read
// through libzip, the options and vocabulary through yaml-cpp.
#include "convert/convert.h"
#include "core/error.h"
#include "fuzz_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nmt::fuzz::ModelDir dir({"model.npz", "vocab.yml", "decoder.yml"});
  nmt::convert::ConvertOptions opts;
  opts.from = "marian";
  try {
    nmt::convert::import_model(dir.write(data, size), opts);
  } catch (const nmt::Error&) {
  }
  return 0;
}
