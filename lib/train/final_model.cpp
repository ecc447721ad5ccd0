// The end of a training session: the final weights, the shortlist, OUT.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/format.h"
#include "core/stop.h"
#include "decode/int8_cost.h"
#include "decode/shortlist_cost.h"
#include "decode/translator.h"
#include "io/output_file.h"
#include "metrics/tokenizers.h"
#include "model/loaded_model.h"
#include "model/shortlist.h"
#include "train/checkpoints.h"
#include "train/session.h"

namespace nmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

// With --average-last, the average of the last checkpoints usually beats the
// last weights, but not when the checkpoints span much of the run: keep
// whichever validates better, and say which and why.
void TrainSession::choose_final_weights() {
  result_.final_weights = "last";
  const auto all = list_checkpoints(opts_.out);
  if (opts_.average_last <= 1 || all.size() <= 1) return;
  const size_t k = std::min<size_t>(all.size(), static_cast<size_t>(opts_.average_last));
  const std::vector<std::string> last(all.end() - static_cast<std::ptrdiff_t>(k), all.end());
  average_checkpoints(last, *model_, cb_.stop);
  const std::string what = "the average of the last " + std::to_string(k) + " checkpoints";
  json entry = {{"type", "final"}, {"step", trainer_->steps()}, {"averaged_checkpoints", k}};
  std::string why;
  if (!plan_.has_valid()) {
    result_.final_weights = "average";
    why = what + " (no validation set to compare it with the last weights)";
  } else {
    const Metric avg = validate(/*averaged=*/true);
    entry["metric"] = avg.name;
    entry["average"] = avg.value;
    entry["last"] = last_metric_;
    if (!avg.better_than(last_metric_) && avg.value != last_metric_) {
      load_weights(read_safetensors(all.back()), *model_);  // the last weights
      why = "the last weights (validation " + std::string(avg.name) + " " +
            format_number("%.3f", last_metric_) + ") beat " + what + " (" +
            format_number("%.3f", avg.value) + ")";
    } else {
      result_.final_weights = "average";
      why = what + " (validation " + std::string(avg.name) + " " +
            format_number("%.3f", avg.value) + ", against " + format_number("%.3f", last_metric_) +
            " for the last weights)";
    }
  }
  entry["kept"] = result_.final_weights;
  entry["why"] = why;
  log_->write(entry);
  log("final model: " + why);
}

// The vocabulary shortlist, from the training pairs, and what it costs: the
// validation set (its first kShortlistSentences) translated at beam 4 with
// and without it by the model at model_path (the final weights), as `nmt
// translate` loads it. Translation uses it by default only if that cost is
// at most kMaxDefaultShortlistCost BLEU. The table goes into tensors, the
// measurement into meta.
void TrainSession::add_shortlist(const std::string& model_path, VocabTensors& tensors,
                                 std::map<std::string, std::string>& meta) {
  constexpr int64_t kShortlistSentences = 1000;
  const auto t0 = Clock::now();
  std::vector<const std::vector<int32_t>*> src, tgt;
  for (int64_t i = 0; i < data_.train.size(); ++i)
    src.push_back(&data_.train.src[i]), tgt.push_back(&data_.train.tgt[i]);
  const Shortlist sl =
      Shortlist::build(src, tgt, plan_.cfg.source_vocab(), plan_.cfg.vocab_size, {}, cb_.stop);
  std::optional<ShortlistCost> cost;
  if (plan_.has_valid() && data_.valid.size() > 0) {
    const LoadedModel m = load_model(model_path, "", nullptr, opts_.device);
    const int64_t n = std::min(data_.valid.size(), kShortlistSentences);
    std::vector<std::string> src, refs;
    for (int64_t i = 0; i < n; ++i)
      src.push_back(data_.vsrc[data_.valid.line[i]]),
          refs.push_back(data_.vtgt[data_.valid.line[i]]);
    SearchOptions so;
    so.beam = 4;
    so.stop = cb_.stop;
    cost = measure_shortlist(m, sl, src, refs, so, metrics::tokenizer_name(opts_.valid_tokenize));
  }
  const std::string from = std::to_string(data_.train.size()) + " training pairs";
  meta["shortlist"] = shortlist_metadata(sl, from, cost ? &*cost : nullptr);
  tensors[kShortlistTensor] = sl.serialise();
  std::string line = "shortlist: the " + std::to_string(sl.options().per_source) +
                     " likeliest target pieces of each source piece and the " +
                     std::to_string(sl.options().frequent) + " most frequent, from " + from + " (" +
                     std::to_string(sl.entries()) + " entries)";
  json entry = {{"type", "shortlist"}, {"entries", sl.entries()}, {"seconds", seconds_since(t0)}};
  if (cost) {
    line += "; validation BLEU at beam 4 " + format_number("%.2f", cost->bleu_shortlist) +
            " with it, " + format_number("%.2f", cost->bleu_full) + " without (" +
            std::to_string(cost->sentences) + " sentences, " +
            format_number("%.1f", cost->seconds_shortlist) + " s against " +
            format_number("%.1f", cost->seconds_full) + " s): " +
            (cost->on_by_default()
                 ? "translation uses it by default"
                 : "it costs more than " + format_number("%.1f", kMaxDefaultShortlistCost) +
                       " BLEU, so translation uses it only with {shortlist} on");
    entry["bleu"] = cost->bleu_full;
    entry["bleu_shortlist"] = cost->bleu_shortlist;
    entry["seconds_full"] = cost->seconds_full;
    entry["seconds_shortlist"] = cost->seconds_shortlist;
    entry["default"] = cost->on_by_default();
  } else {
    line += "; no validation set to measure it on, so translation uses it only with {shortlist} on";
    entry["default"] = false;
  }
  log_->write(entry);
  log(line);
}

// --optimize speed: whether OUT is written in int8. It is where the
// validation set (its first kInt8Sentences) translates in int8 at beam 4,
// with the shortlist as translation will use it, as well as in f32
// (Int8Cost::acceptable); else, and without validation pairs or int8 on the
// device, OUT stays f32.
bool TrainSession::int8_validates(const std::string& model_path) {
  constexpr int64_t kInt8Sentences = 500;
  const auto t0 = Clock::now();
  json entry = {{"type", "int8"}};
  std::string why;
  bool take = false;
  if (!plan_.has_valid() || data_.valid.size() == 0) {
    why = "no validation set to measure int8's cost on";
  } else {
    const int64_t n = std::min(data_.valid.size(), kInt8Sentences);
    std::vector<std::string> src, refs;
    for (int64_t i = 0; i < n; ++i)
      src.push_back(data_.vsrc[data_.valid.line[i]]),
          refs.push_back(data_.vtgt[data_.valid.line[i]]);
    auto translate_in = [&](const std::string& compute) {
      const LoadedModel m =
          load_model(model_path, compute, nullptr, opts_.device, ShortlistLoad::IfOnByDefault);
      SearchOptions so;
      so.beam = 4;
      so.stop = cb_.stop;
      so.shortlist = m.shortlist ? &*m.shortlist : nullptr;
      return translate_lines(m, src, so);
    };
    try {
      const Int8Cost c = measure_int8_cost(translate_in, refs, 4);
      take = c.acceptable();
      entry["chrf_f32"] = c.chrf_f32, entry["chrf_int8"] = c.chrf_int8, entry["sentences"] = n;
      why = c.describe();
    } catch (const InputError& e) {  // int8 that this device cannot run
      why = e.what();
    }
  }
  entry["int8"] = take;
  entry["why"] = why;
  entry["seconds"] = seconds_since(t0);
  log_->write(entry);
  log("weights: " + std::string(take ? "int8" : "f32") + " ({optimize} speed): " + why + " [" +
      format_number("%.1f", seconds_since(t0)) + " s]");
  return take;
}

// OUT appears once, whole (its shortlist included), as the run's last act:
// the final model is written as OUT.partial, where the shortlist is also
// measured, and renamed onto OUT. A kill before then leaves OUT.partial
// (the next run into OUT removes it), never an OUT that looks final; a stop
// signal is honoured up to the rename, by every long loop on the way.
void TrainSession::write_final_model() {
  throw_if_stopped(cb_.stop);
  if (plan_.has_valid() && last_valid_step_ != trainer_->steps()) validate(false);
  choose_final_weights();
  const std::string partial = partial_path(opts_.out);
  std::map<std::string, std::string> meta = model_metadata();
  VocabTensors tensors;
  if (!plan_.spm.empty()) tensors["vocab/sentencepiece"] = plan_.spm;
  save_model(partial, *model_, tensors, meta);
  if (opts_.shortlist) {
    add_shortlist(partial, tensors, meta);
    save_model(partial, *model_, tensors, meta);
  }
  const bool int8 = opts_.optimize == Optimize::Speed && int8_validates(partial);
  if (int8) save_model(partial, *model_, tensors, meta, /*int8=*/true);
  throw_if_stopped(cb_.stop);
  // A symlink, device or FIFO at OUT is written through, as every output is.
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(opts_.out, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    save_model(opts_.out, *model_, tensors, meta, int8);
    fs::remove(partial, ec);
    return;
  }
  if (::rename(partial.c_str(), opts_.out.c_str()) != 0)
    throw Error("cannot rename " + partial + " to " + opts_.out + ": " + std::strerror(errno));
  io::fsync_parent_dir(opts_.out);
}

void TrainSession::finish() {
  const int64_t steps = trainer_->steps();
  if (steps > last_ckpt_step_ || list_checkpoints(opts_.out).empty()) save_checkpoint();
  bool in_final_phase = false;
  if (result_.stop_reason != "interrupted") {
    in_final_phase = true;
    try {
      write_final_model();
      result_.model_path = opts_.out;
      log("wrote " + opts_.out + " after " + std::to_string(steps) + " steps (" +
          result_.stop_reason + ")");
    } catch (const Stopped&) {
      result_.stop_reason = "interrupted";
      std::error_code ec;
      fs::remove(partial_path(opts_.out), ec);
    }
  }
  result_.interrupted = result_.stop_reason == "interrupted";
  if (result_.interrupted)
    log("interrupted at step " + std::to_string(steps) +
        (in_final_phase ? ", before " + opts_.out + " was written" : std::string()) +
        "; checkpoint saved in " + checkpoint_dir(opts_.out) + "; continue with {resume}");
  if (best_step_ >= 0) {
    result_.best_path = opts_.out + ".best";
    result_.best = best_;
  }
  log_->write({{"type", "end"},
               {"step", steps},
               {"reason", result_.stop_reason},
               {"best", best_},
               {"best_step", best_step_},
               {"elapsed_s", seconds_since(start_)}});
  log_->sync();
  log_->write_curve();
}

}  // namespace nmt
