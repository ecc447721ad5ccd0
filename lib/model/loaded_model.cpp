#include "model/loaded_model.h"

#include "core/error.h"
#include "model/model_file.h"

namespace nmt {

LoadedModel load_model(const std::string& path) {
  LoadedModel m;
  std::string spm;
  FileContents f = open_model(path, m.config, spm);
  if (spm.empty()) throw InputError(path + ": the model file holds no SentencePiece vocabulary");
  m.vocab = Vocab::from_bytes(spm);
  if (m.vocab.size() > m.config.vocab_size)
    throw InputError(path + ": vocabulary has " + std::to_string(m.vocab.size()) +
                     " pieces but the model only " + std::to_string(m.config.vocab_size));
  m.net = std::make_unique<Transformer>(m.config);
  load_weights(f, *m.net);
  m.net->params().freeze();  // translation and scoring never change it
  return m;
}

}  // namespace nmt
