// The model-file reader on arbitrary bytes: header, metadata, stored config,
// tensor layout, weights and the SentencePiece bytes. Anything but a clean
// nmt::Error (or a loaded model) is a finding.
#include "core/error.h"
#include "fuzz_common.h"
#include "model/model_file.h"
#include "model/transformer.h"
#include "model/vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nmt::fuzz::MemFile file(data, size);
  try {
    nmt::ModelConfig cfg;
    std::string spm;
    const nmt::FileContents f = nmt::open_model(file.path(), cfg, spm);
    if (!spm.empty()) nmt::Vocab::from_bytes(spm);
    nmt::Transformer model(cfg);
    nmt::load_weights(f, model);
  } catch (const nmt::Error&) {
  }
  return 0;
}
