#include "model/loaded_model.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/backend.h"
#include "core/error.h"
#include "model/model_file.h"
#include "model/quantise.h"

namespace nmt {

LoadedModel load_model(const std::string& path, const std::string& compute, FileChecksum* sum,
                       Device device, ShortlistLoad shortlist, WeightsUse use) {
  LoadedModel m;
  std::string spm;
  Vocab source;
  require_compute_type(device, ComputeType::F32);  // an op the device lacks: before reading
  FileContents f = open_model(path, m.config, spm, &m.vocab, sum, &source);
  if (source.size()) m.source_vocab = std::move(source);
  m.metadata = f.metadata;
  auto q = f.metadata.find("quantization");
  const bool int8_file = q != f.metadata.end() && q->second == "int8";
  m.compute = compute.empty() ? (int8_file ? ComputeType::INT8 : ComputeType::F32)
                              : parse_compute_type(compute);
  if (f.has(kShortlistTensor) &&
      (shortlist == ShortlistLoad::Read ||
       (shortlist == ShortlistLoad::IfOnByDefault && shortlist_on_by_default(m.metadata)))) {
    m.shortlist = Shortlist::parse(f.read_bytes(kShortlistTensor), m.config.source_vocab(),
                                   m.config.vocab_size, path);
    const ModelConfig& c = m.config;
    if (!m.shortlist->allows_other_than({c.pad_id, c.unk_id, c.bos_id, c.eos_id}))
      throw InputError(path +
                       ": its vocabulary shortlist lets no target piece through but <unk> and the "
                       "special ones (it was built from text the model's vocabulary does not "
                       "know), so every translation with it would be garbage; build it again from "
                       "text tokenised as the model expects");
  }
  require_compute_type(device, m.compute);  // before any work
  m.net = std::make_unique<Transformer>(m.config, device);
  // int8 holds the matrices as s8 rows from the start, never as floats (an
  // f32 file's rounded as nmt quantize would have written them).
  if (m.compute == ComputeType::INT8) m.net->init_for_loading(/*int8=*/true);
  load_weights(f, *m.net);
  // Translation and scoring never change it: its weights are prepared here, once.
  prepare_for_inference(m.net->params(), m.compute, use == WeightsUse::ProductsOnly);
#ifdef __GLIBC__
  // Reading the file freed buffers inside the heap (its header, the
  // vocabulary's bytes, the file's copy of the shortlist), whose pages glibc
  // keeps resident; hand them back before the model waits for its input.
  malloc_trim(0);
#endif
  return m;
}

}  // namespace nmt
