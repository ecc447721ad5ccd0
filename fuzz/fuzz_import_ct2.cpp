// The CTranslate2 importer on arbitrary model directories: model.bin,
// config.json and shared_vocabulary.json from one input (fuzz_import.h).
#include "convert/convert.h"
#include "core/error.h"
#include "fuzz_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nmt::fuzz::ModelDir dir({"model.bin", "config.json", "shared_vocabulary.json"});
  nmt::convert::ConvertOptions opts;
  opts.from = "ctranslate2";
  try {
    nmt::convert::import_model(dir.write(data, size), opts);
  } catch (const nmt::Error&) {
  }
  return 0;
}
