#include "model/loaded_model.h"

#include "core/error.h"
#include "model/model_file.h"
#include "model/quantise.h"

namespace nmt {

LoadedModel load_model(const std::string& path, const std::string& compute, FileChecksum* sum) {
  LoadedModel m;
  std::string spm;
  Vocab source;
  FileContents f = open_model(path, m.config, spm, &m.vocab, sum, &source);
  if (source.size()) m.source_vocab = std::move(source);
  m.metadata = f.metadata;
  auto q = f.metadata.find("quantization");
  const bool int8_file = q != f.metadata.end() && q->second == "int8";
  m.compute = compute.empty() ? (int8_file ? ComputeType::INT8 : ComputeType::F32)
                              : parse_compute_type(compute);
  if (f.has(kShortlistTensor))
    m.shortlist = Shortlist::parse(f.read_bytes(kShortlistTensor), m.config.source_vocab(),
                                   m.config.vocab_size, path);
  m.net = std::make_unique<Transformer>(m.config);
  load_weights(f, *m.net);
  // Translation and scoring never change it. int8 from an f32 file rounds
  // the weights as nmt quantize would have written them.
  freeze_for_inference(m.net->params(), m.compute);
  return m;
}

}  // namespace nmt
