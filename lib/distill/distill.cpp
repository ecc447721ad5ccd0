#include "distill/distill.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/format.h"
#include "decode/int8_cost.h"
#include "io/file_lock.h"
#include "io/json.h"
#include "io/output_file.h"
#include "io/text_file.h"
#include "metrics/chrf.h"
#include "model/config.h"
#include "model/model_file.h"
#include "service/translation_service.h"
#include "train/checkpoints.h"
#include "train/options.h"

namespace nmt {

const char* original_targets_name(OriginalTargets o) {
  return o == OriginalTargets::Mix ? "mix" : o == OriginalTargets::None ? "none" : "auto";
}

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr int kStateVersion = 1;
// Validation pairs on which the teacher's int8, the pilots and the
// student's int8 are measured: enough for chrF to tell 0.5 apart, few
// enough to take seconds.
constexpr size_t kMeasurePairs = 500;
constexpr size_t kChunkLines = 2000;  // the teacher's lines between saves

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string took(double seconds) { return " [" + format_number("%.1f", seconds) + " s]"; }

// What a file was when the run began: a resumed run refuses one since
// changed (its translations or pairs would no longer match).
json file_identity(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto time = fs::last_write_time(path, ec);
  return {{"path", path},
          {"bytes", ec ? 0 : size},
          {"mtime", ec ? 0 : static_cast<int64_t>(time.time_since_epoch().count())}};
}

double chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  return metrics::corpus_chrf(hyps, {refs}).score;
}

bool is_int8_file(const std::string& path) {
  const FileContents f = read_safetensors(path);
  auto q = f.metadata.find("quantization");
  return q != f.metadata.end() && q->second == "int8";
}

class Distiller {
 public:
  Distiller(const DistillOptions& o, const DistillCallbacks& cb)
      : o_(o), cb_(cb), dir_(o.out + ".distill"), start_(Clock::now()) {}
  DistillResult run();

 private:
  void check_inputs() const;
  void open_state();
  json inputs_and_options() const;
  void save_state();
  void log(const std::string& line) const {
    if (cb_.log) cb_.log(line);
  }
  std::string path(const char* name) const { return dir_ + "/" + name; }
  double minutes_spent() const { return spent_ + seconds_since(start_) / 60; }
  double minutes_left() const { return o_.max_minutes - minutes_spent(); }
  bool stopped() const { return stop_requested(cb_.stop); }

  std::unique_ptr<TranslationService> service(const std::vector<std::string>& models,
                                              const std::string& compute) const;
  std::vector<std::string> translate(TranslationService& s, const std::vector<std::string>& src,
                                     std::vector<TranslationResult>* results = nullptr) const;
  // The validation pairs translated by `models` in f32 and in int8.
  Int8Cost int8_cost(const std::vector<std::string>& models) const;
  void load_validation();
  void choose_teacher_compute();
  bool translate_training_source();
  void filter_pairs();
  bool choose_original_targets();
  bool pilot(const std::string& name, bool mix, double minutes);
  TrainResult train_model(const std::string& out, bool mix, double minutes);
  bool train_student();
  void write_student();
  DistillResult stopped_here() {
    save_state();
    log("stopped: " + format_number("%.1f", minutes_spent()) + " of " +
        format_number("%g", o_.max_minutes) + " minutes spent; {resume} goes on from here");
    return {true, ""};
  }

  const DistillOptions& o_;
  const DistillCallbacks& cb_;
  const std::string dir_;
  const Clock::time_point start_;
  double spent_ = 0;  // minutes, by earlier invocations
  json state_;
  std::vector<std::string> valid_src_, valid_ref_;  // the measured pairs
};

void Distiller::check_inputs() const {
  if (o_.teachers.empty()) throw OptionError("{teacher}: give at least one teacher model");
  if (!(o_.max_minutes > 0))
    throw OptionError("{max_minutes}: distill needs a time budget above 0 minutes");
  if (o_.valid_src.empty() != o_.valid_tgt.empty())
    throw OptionError("{valid_src} and {valid_tgt} go together: give both or neither");
  if (o_.beam < 1) throw OptionError("{beam}: at least 1");
  if (!(o_.drop_share >= 0 && o_.drop_share < 0.5))
    throw OptionError("{drop_share}: a share in [0, 0.5)");
  if (!(o_.pilot_minutes >= 0)) throw OptionError("{pilot_minutes}: 0 or more minutes");
  std::vector<io::NamedPath> inputs;
  for (const auto& t : o_.teachers) inputs.push_back({"{teacher}", t});
  inputs.push_back({"{train_src}", o_.train_src});
  inputs.push_back({"{train_tgt}", o_.train_tgt});
  if (!o_.valid_src.empty()) {
    inputs.push_back({"{valid_src}", o_.valid_src});
    inputs.push_back({"{valid_tgt}", o_.valid_tgt});
  }
  for (const auto& in : inputs) {
    if (in.path == "-")
      throw OptionError(in.option + ": distill reads its inputs more than once; give a file");
    io::check_input_path(in.path, in.option, /*nonempty=*/true);
  }
  io::check_output_path(o_.out, "{out}");
  io::check_not_an_input({"{out}", o_.out}, inputs);
}

// What a resumed run must find unchanged: the inputs and the options that
// shape the work already done.
json Distiller::inputs_and_options() const {
  json teachers = json::array();
  for (const auto& t : o_.teachers) teachers.push_back(file_identity(t));
  json j = {{"teachers", teachers},
            {"train_src", file_identity(o_.train_src)},
            {"train_tgt", file_identity(o_.train_tgt)},
            {"beam", o_.beam},
            {"drop_share", o_.drop_share},
            {"original", original_targets_name(o_.original)},
            {"config", o_.config},
            {"seed", o_.seed}};
  if (!o_.valid_src.empty()) {
    j["valid_src"] = file_identity(o_.valid_src);
    j["valid_tgt"] = file_identity(o_.valid_tgt);
  }
  return j;
}

void Distiller::open_state() {
  const std::string file = path("state.json");
  if (!o_.resume) {
    if (fs::exists(dir_))
      throw InputError(dir_ + " holds an earlier run: {resume} to go on with it, or remove it");
    if (fs::exists(o_.out))
      throw InputError("{out} " + o_.out +
                       " exists; refusing to replace it (remove it or name "
                       "another)");
    fs::create_directories(dir_);
    state_ = {{"version", kStateVersion}, {"inputs", inputs_and_options()}, {"minutes", 0.0}};
    save_state();
    return;
  }
  if (!fs::exists(file))
    throw InputError("{resume}: no earlier run to go on with (" + file + " is missing)");
  state_ = io::parse_json(io::read_whole_file(file, "state"), file);
  if (!state_.is_object() || state_.value("version", 0) != kStateVersion ||
      !state_.contains("inputs") || !state_["minutes"].is_number())
    throw InputError(file + " is not a state nmt distill wrote; remove " + dir_ + " to start over");
  const json now = inputs_and_options();
  for (const auto& [key, value] : now.items())
    if (state_["inputs"].value(key, json()) != value)
      throw InputError("{resume}: " + key + " differs from the earlier run's (" +
                       state_["inputs"].value(key, json()).dump() + ", now " + value.dump() +
                       "); resume with the same inputs and options, or remove " + dir_);
  spent_ = state_["minutes"].get<double>();
  log("resuming: " + format_number("%.1f", spent_) + " of " + format_number("%g", o_.max_minutes) +
      " minutes spent");
}

void Distiller::save_state() {
  state_["minutes"] = minutes_spent();
  io::write_file(path("state.json"), state_.dump(1) + "\n", io::Content::Text);
}

std::unique_ptr<TranslationService> Distiller::service(const std::vector<std::string>& models,
                                                       const std::string& compute) const {
  TranslateOptions t;
  t.models = models;
  t.compute = compute;
  t.device = o_.device;
  t.search.beam = o_.beam;
  t.search.stop = cb_.stop;
  t.shortlist = ShortlistUse::off;  // the teacher's full distribution; the student's own measure
  check_options(t);
  return std::make_unique<TranslationService>(t, [this](const std::string& w) { log(w); });
}

std::vector<std::string> Distiller::translate(TranslationService& s,
                                              const std::vector<std::string>& src,
                                              std::vector<TranslationResult>* results) const {
  std::vector<TextRequest> texts(src.size());
  for (size_t i = 0; i < src.size(); ++i) texts[i].text = src[i];
  std::vector<TranslationResult> r = s.translate_texts(texts);
  std::vector<std::string> out;
  out.reserve(r.size());
  for (const auto& x : r) out.push_back(x.text);
  if (results) *results = std::move(r);
  return out;
}

Int8Cost Distiller::int8_cost(const std::vector<std::string>& models) const {
  return measure_int8_cost(
      [&](const std::string& compute) { return translate(*service(models, compute), valid_src_); },
      valid_ref_, o_.beam);
}

void Distiller::load_validation() {
  if (o_.valid_src.empty()) return;
  io::TextChecks checks;
  checks.warn = [this](const std::string& w) { log(w); };
  valid_src_ = io::read_lines(o_.valid_src, checks);
  valid_ref_ = io::read_lines(o_.valid_tgt, checks);
  if (valid_src_.size() != valid_ref_.size())
    throw InputError("{valid_src} has " + std::to_string(valid_src_.size()) +
                     " lines but {valid_tgt} " + std::to_string(valid_ref_.size()));
  valid_src_.resize(std::min(valid_src_.size(), kMeasurePairs));
  valid_ref_.resize(valid_src_.size());
}

// int8 where it translates the validation pairs as well as f32
// (Int8Cost::acceptable).
void Distiller::choose_teacher_compute() {
  if (state_.contains("teacher_compute")) return;
  const auto t0 = Clock::now();
  json c;
  bool all_int8 = true;
  for (const auto& t : o_.teachers) all_int8 = all_int8 && is_int8_file(t);
  if (all_int8) {
    c = {{"compute", "int8"}, {"reason", "the teacher is an int8 model"}};
  } else if (valid_src_.empty()) {
    c = {{"compute", "f32"}, {"reason", "no validation pairs to measure int8's cost on"}};
  } else {
    const Int8Cost cost = int8_cost(o_.teachers);
    c = {{"compute", cost.acceptable() ? "int8" : "f32"},
         {"chrf_f32", cost.chrf_f32},
         {"chrf_int8", cost.chrf_int8},
         {"reason", cost.describe()}};
  }
  state_["teacher_compute"] = c;
  save_state();
  log("teacher: " + c["compute"].get<std::string>() + ": " + c["reason"].get<std::string>() +
      took(seconds_since(t0)));
}

// The lines of teacher.jsonl already written whole (a line cut by a stop or
// a crash is dropped: it is translated again).
size_t whole_lines_done(const std::string& file) {
  if (!fs::exists(file)) return 0;
  std::string s = io::read_whole_file(file, "the teacher's translations");
  const size_t end = s.rfind('\n');
  const size_t keep = end == std::string::npos ? 0 : end + 1;
  if (keep < s.size()) fs::resize_file(file, keep);
  return static_cast<size_t>(std::count(s.begin(), s.begin() + keep, '\n'));
}

void append_durably(const std::string& file, const std::string& text) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot open " + file + " to append to it");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      throw Error("cannot write " + file + " (is the disk full?)");
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
}

// The training source through the teacher, chunk by chunk onto
// teacher.jsonl (the translation, its log-probability and tokens), so a
// stop loses at most the chunk in hand. False when stopped.
bool Distiller::translate_training_source() {
  if (state_.value("teacher_done", false)) return true;
  const auto t0 = Clock::now();
  const std::string file = path("teacher.jsonl");
  io::TextChecks checks;
  checks.warn = [this](const std::string& w) { log(w); };
  const std::vector<std::string> src = io::read_lines(o_.train_src, checks);
  size_t done = whole_lines_done(file);
  if (done > src.size())
    throw InputError(file + " holds more lines than {train_src}; remove " + dir_ +
                     " to start over");
  const std::string compute = state_["teacher_compute"]["compute"];
  auto teacher = service(o_.teachers, compute);
  log("teacher: translating " + std::to_string(src.size()) + " lines at beam " +
      std::to_string(o_.beam) + " in " + compute +
      (done ? " from line " + std::to_string(done + 1) : std::string()));
  const size_t first = done;
  while (done < src.size()) {
    if (stopped()) return false;
    const size_t end = std::min(src.size(), done + kChunkLines);
    std::vector<TranslationResult> r;
    try {
      translate(*teacher, {src.begin() + done, src.begin() + end}, &r);
    } catch (const Stopped&) {
      return false;
    }
    std::string text;
    for (const auto& x : r)
      text += json{{"t", x.text}, {"lp", x.logprob}, {"n", x.tokens}}.dump(
                  -1, ' ', false, json::error_handler_t::replace) +
              "\n";
    append_durably(file, text);
    done = end;
    const double s = seconds_since(t0);
    log("teacher: " + std::to_string(done) + " of " + std::to_string(src.size()) + " lines, " +
        format_number("%.0f", (done - first) / std::max(s, 1e-3)) + " lines/s");
    save_state();
  }
  state_["teacher_done"] = true;
  save_state();
  log("teacher: done" + took(seconds_since(t0)));
  return true;
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\v\f") == std::string::npos; }

struct TeacherLine {
  std::string text;
  double per_token = 0;  // log-probability per token, </s> included
};

std::vector<TeacherLine> read_teacher(const std::string& file, size_t lines) {
  std::vector<TeacherLine> out;
  out.reserve(lines);
  io::LineReader in(file);
  std::string line;
  while (in.next(line)) {
    const json j = io::parse_json(line, file + " line " + std::to_string(out.size() + 1));
    const double n = std::max<double>(1, j.value("n", 1));
    out.push_back({j.value("t", std::string()), j.value("lp", 0.0) / n});
  }
  if (out.size() != lines)
    throw InputError(file + " has " + std::to_string(out.size()) + " lines, not " +
                     std::to_string(lines) + "; remove its directory to start over");
  return out;
}

// Drops the pairs whose source or translation is empty and the drop_share
// the teacher scored lowest per token, and writes the rest.
void Distiller::filter_pairs() {
  if (state_.contains("filter")) return;
  const auto t0 = Clock::now();
  const std::vector<std::string> src = io::read_lines(o_.train_src);
  const std::vector<TeacherLine> t = read_teacher(path("teacher.jsonl"), src.size());
  std::vector<size_t> scored;
  for (size_t i = 0; i < src.size(); ++i)
    if (!blank(src[i]) && !blank(t[i].text)) scored.push_back(i);
  const size_t empty = src.size() - scored.size();
  if (scored.empty())
    throw InputError("the teacher translated none of the " + std::to_string(src.size()) +
                     " lines of {train_src} into anything but blanks: is it a model of this "
                     "language pair?");
  const size_t drop = static_cast<size_t>(o_.drop_share * scored.size());
  std::stable_sort(scored.begin(), scored.end(),
                   [&](size_t a, size_t b) { return t[a].per_token < t[b].per_token; });
  const double threshold = drop ? t[scored[drop]].per_token : -INFINITY;
  std::vector<char> keep(src.size(), 0);
  for (size_t k = drop; k < scored.size(); ++k) keep[scored[k]] = 1;
  std::string out_src, out_tgt;
  for (size_t i = 0; i < src.size(); ++i)
    if (keep[i]) out_src += src[i] + "\n", out_tgt += t[i].text + "\n";
  io::write_file(path("distilled.src"), out_src, io::Content::Text);
  io::write_file(path("distilled.tgt"), out_tgt, io::Content::Text);
  const size_t kept = scored.size() - drop;
  state_["filter"] = {{"pairs", src.size()},
                      {"kept", kept},
                      {"empty", empty},
                      {"low_score", drop},
                      {"threshold", threshold}};
  save_state();
  const std::string by_score =
      drop ? std::to_string(drop) + " scored below " + format_number("%.3f", threshold) +
                 " per token by the teacher (the lowest {drop_share})"
           : std::string("none dropped by the teacher's score ({drop_share} ") +
                 format_number("%g", o_.drop_share) + ")";
  log("filter: kept " + std::to_string(kept) + " of " + std::to_string(src.size()) + " pairs; " +
      by_score + ", " + std::to_string(empty) +
      " with an empty side; the student's training drops implausible length ratios and "
      "duplicates" +
      took(seconds_since(t0)));
}

// A training of the student's shape on the distilled pairs (and the
// original ones with mix) for `minutes`, resumed where OUT.ckpt/ exists.
TrainResult Distiller::train_model(const std::string& out, bool mix, double minutes) {
  TrainOptions t;
  t.train_src = {path("distilled.src")};
  t.train_tgt = {path("distilled.tgt")};
  if (mix) {
    t.train_src.push_back(o_.train_src);
    t.train_tgt.push_back(o_.train_tgt);
  }
  t.valid_src = o_.valid_src, t.valid_tgt = o_.valid_tgt;
  t.out = out;
  t.resume = fs::exists(out + ".ckpt");
  t.recipe = t.filter = t.shortlist = true;
  t.device = o_.device;
  const ModelConfig cfg = read_training_config(o_.config.empty() ? kDefaultConfig : o_.config,
                                               !o_.config.empty(), "{config}", t);
  apply_given_training({{"max_minutes", minutes}, {"optimize", "student"}, {"seed", o_.seed}}, t,
                       "distill");
  TrainCallbacks tc;
  const std::string name = fs::path(out).stem().string();
  tc.log = [this, name](const std::string& line) { log(name + ": " + line); };
  if (cb_.progress) tc.progress = [this, name](const TrainProgress& p) { cb_.progress(name, p); };
  tc.stop = cb_.stop;
  return train(cfg, t, tc);
}

bool Distiller::pilot(const std::string& name, bool mix, double minutes) {
  json& p = state_["pilots"][name];
  if (p.contains("chrf")) return true;
  const TrainResult r = train_model(path((name + ".nmt").c_str()), mix, minutes);
  if (r.interrupted) return false;
  p["chrf"] = chrf(translate(*service({r.model_path}, ""), valid_src_), valid_ref_);
  p["steps"] = r.steps;
  save_state();
  return true;
}

// The teacher's targets alone, or beside the original ones: as given, or
// as two pilots on a tenth of the budget left validate. False when stopped.
bool Distiller::choose_original_targets() {
  if (state_.contains("original")) return true;
  const auto t0 = Clock::now();
  std::string choice = original_targets_name(o_.original), reason = "given ({original})";
  if (o_.original == OriginalTargets::Auto) {
    const double minutes =
        o_.pilot_minutes > 0 ? o_.pilot_minutes : std::min(4.0, minutes_left() / 10);
    if (valid_src_.empty()) {
      choice = "none", reason = "no validation pairs to compare the two on";
    } else if (minutes < 1 && o_.pilot_minutes <= 0) {
      choice = "none", reason = "the budget left is too short for two pilots of a minute";
    } else {
      if (!state_.contains("pilots")) state_["pilots"] = json::object();
      state_["pilot_minutes"] = state_.value("pilot_minutes", minutes);
      const double m = state_["pilot_minutes"];
      log("original targets: two pilots of " + format_number("%.1f", m) + " minutes each");
      if (!pilot("pilot-distilled", false, m) || !pilot("pilot-mixed", true, m)) return false;
      const double alone = state_["pilots"]["pilot-distilled"]["chrf"];
      const double mixed = state_["pilots"]["pilot-mixed"]["chrf"];
      choice = mixed > alone ? "mix" : "none";
      reason = "validation chrF " + format_number("%.2f", mixed) + " with them, " +
               format_number("%.2f", alone) + " with the teacher's alone, after pilots of " +
               format_number("%.1f", m) + " minutes";
    }
  }
  state_["original"] = {{"choice", choice}, {"reason", reason}};
  save_state();
  log("original targets: " + choice + ": " + reason + took(seconds_since(t0)));
  return true;
}

bool Distiller::train_student() {
  if (state_.contains("student")) return true;
  // The int8 measurement's minutes, kept back from the student's budget.
  const double reserve = std::min(1.0, 0.03 * o_.max_minutes);
  const double minutes = minutes_left() - reserve;
  if (minutes < 0.2)
    throw InputError("the budget is spent: " + format_number("%.1f", minutes_spent()) + " of " +
                     format_number("%g", o_.max_minutes) +
                     " minutes before the student; {resume} with a larger {max_minutes}");
  log("student: " + format_number("%.1f", minutes) + " minutes");
  const bool mix = state_["original"]["choice"] == "mix";
  const TrainResult r = train_model(path("student.nmt"), mix, minutes);
  save_state();
  if (r.interrupted) return false;
  state_["student"] = {{"steps", r.steps}, {"weights", r.final_weights}};
  save_state();
  return true;
}

// OUT: the student (int8 unless asked not to), with how it was made.
void Distiller::write_student() {
  const auto t0 = Clock::now();
  const std::string student = path("student.nmt");
  json record = {{"teachers", json::array()},
                 {"beam", o_.beam},
                 {"teacher_compute", state_["teacher_compute"]},
                 {"pairs", state_["filter"]},
                 {"original_targets", state_["original"]},
                 {"student_steps", state_["student"]["steps"]}};
  for (const auto& t : o_.teachers) record["teachers"].push_back(fs::path(t).filename().string());
  std::string int8_note;
  if (o_.quantize && !valid_src_.empty()) {
    const Int8Cost cost = int8_cost({student});
    record["chrf_f32"] = cost.chrf_f32, record["chrf_int8"] = cost.chrf_int8;
    int8_note = ", " + cost.scores();
  }
  record["weights"] = o_.quantize ? "int8" : "f32";
  record["minutes"] = minutes_spent();
  const json& f = record["pairs"];
  record["summary"] =
      "by " + record["teachers"][0].get<std::string>() +
      (o_.teachers.size() > 1 ? " and " + std::to_string(o_.teachers.size() - 1) + " more" : "") +
      " (beam " + std::to_string(o_.beam) + ", " +
      state_["teacher_compute"]["compute"].get<std::string>() + "); " +
      std::to_string(f["kept"].get<int64_t>()) + " of " +
      std::to_string(f["pairs"].get<int64_t>()) + " pairs kept; original targets " +
      state_["original"]["choice"].get<std::string>() + "; " +
      std::to_string(record["student_steps"].get<int64_t>()) + " updates; " +
      record["weights"].get<std::string>() + int8_note + "; " +
      format_number("%.1f", record["minutes"].get<double>()) + " minutes";
  write_model_copy(student, o_.out, o_.quantize, {{"distillation", record.dump()}});
  state_["done"] = true;
  save_state();
  log("wrote " + o_.out + ": distilled " + record["summary"].get<std::string>() +
      took(seconds_since(t0)));
}

DistillResult Distiller::run() {
  check_inputs();
  io::FileLock lock(lock_path(o_.out), "{out} " + o_.out);
  open_state();
  if (state_.value("done", false)) {
    log("nothing to do: " + o_.out + " was written");
    return {false, o_.out};
  }
  load_validation();
  try {
    choose_teacher_compute();
    if (!translate_training_source()) return stopped_here();
    filter_pairs();
    if (!choose_original_targets() || !train_student()) return stopped_here();
  } catch (const Stopped&) {  // inside a measurement: it is made again
    return stopped_here();
  }
  write_student();
  return {false, o_.out};
}

}  // namespace

DistillResult distill(const DistillOptions& opts, const DistillCallbacks& cb) {
  return Distiller(opts, cb).run();
}

}  // namespace nmt
