// The extension nmt._nmt: nmt's public C++ API (include/nmt/, libnmt.so) as
// Python sees it. nmt/__init__.py builds the Pythonic API (keyword options,
// CTranslate2's names) over it; here are only the types and the calls, each
// that translates or scores run with the GIL released, so that Python
// threads can share one Translator.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "nmt/nmt.h"

namespace py = pybind11;
using namespace nmt::api;

namespace {

// A choice by its name, or an Error naming the option's key as the
// library's own errors do.
template <class E>
E choice(const std::string& key, const std::string& value,
         const std::vector<std::pair<const char*, E>>& names) {
  std::string all;
  for (const auto& [name, e] : names) {
    if (value == name) return e;
    all += (all.empty() ? "" : ", ") + std::string(name);
  }
  throw Error(Error::Kind::usage, key, key + " " + value + ": expected one of " + all);
}

template <class E>
std::string name_of(E e, const std::vector<std::pair<const char*, E>>& names) {
  for (const auto& [name, v] : names)
    if (v == e) return name;
  return "";
}

// An enum member of TranslateOptions as a property read and written by name.
template <class E>
void choice_property(py::class_<TranslateOptions>& c, const char* key, E TranslateOptions::*member,
                     const std::vector<std::pair<const char*, E>>& names) {
  c.def_property(
      key, [member, &names](const TranslateOptions& o) { return name_of(o.*member, names); },
      [key, member, &names](TranslateOptions& o, const std::string& v) {
        o.*member = choice(key, v, names);
      });
}

const std::vector<std::pair<const char*, Shortlist>> kShortlists = {
    {"auto", Shortlist::automatic}, {"on", Shortlist::on}, {"off", Shortlist::off}};
const std::vector<std::pair<const char*, InputFormat>> kInputFormats = {
    {"text", InputFormat::text}, {"tsv", InputFormat::tsv}, {"jsonl", InputFormat::jsonl}};
const std::vector<std::pair<const char*, OutputFormat>> kOutputFormats = {
    {"text", OutputFormat::text}, {"jsonl", OutputFormat::jsonl}, {"html", OutputFormat::html}};
const std::vector<std::pair<const char*, Metric>> kMetrics = {
    {"bleu", Metric::bleu}, {"chrf", Metric::chrf}, {"ter", Metric::ter}};

// Warnings go to a Python callable (under the GIL: they come from the
// workers' threads), or to standard error as `nmt translate` writes them.
std::function<void(const std::string&)> warner(const py::object& warn) {
  if (warn.is_none())
    return [](const std::string& m) { std::fprintf(stderr, "nmt: warning: %s\n", m.c_str()); };
  // The library copies and drops its callback on threads that do not hold
  // the GIL: they touch only this pointer's count, and the last one lets go
  // of the callable under the GIL.
  auto callable = std::shared_ptr<py::object>(new py::object(warn), [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
  return [callable](const std::string& m) {
    py::gil_scoped_acquire gil;
    try {
      (*callable)(m);
    } catch (py::error_already_set& e) {
      // Raised on a worker's thread, it has no caller to go to.
      e.discard_as_unraisable("nmt's warn callback");
    }
  };
}

// nmt.Error: the library's one-line message, with its kind ("usage",
// "input", "runtime") and the option to blame (its key, or "").
void bind_error(py::module_& m) {
  static py::exception<Error> error(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      const char* kind = e.kind() == Error::Kind::usage   ? "usage"
                         : e.kind() == Error::Kind::input ? "input"
                                                          : "runtime";
      py::object instance = py::handle(error.ptr())(e.what());
      instance.attr("kind") = kind;
      instance.attr("option") = e.option();
      PyErr_SetObject(error.ptr(), instance.ptr());
    }
  });
}

void bind_translate_options(py::module_& m) {
  py::class_<TranslateOptions> c(m, "TranslateOptions");
  c.def(py::init<>())
      .def_readwrite("compute_type", &TranslateOptions::compute_type)
      .def_readwrite("device", &TranslateOptions::device)
      .def_readwrite("beam", &TranslateOptions::beam)
      .def_readwrite("alpha", &TranslateOptions::alpha)
      .def_readwrite("length_norm", &TranslateOptions::length_norm)
      .def_readwrite("n_best", &TranslateOptions::n_best)
      .def_readwrite("sampling", &TranslateOptions::sampling)
      .def_readwrite("sampling_temperature", &TranslateOptions::sampling_temperature)
      .def_readwrite("seed", &TranslateOptions::seed)
      .def_readwrite("max_length_a", &TranslateOptions::max_length_a)
      .def_readwrite("max_length_b", &TranslateOptions::max_length_b)
      .def_readwrite("batch_tokens", &TranslateOptions::batch_tokens)
      .def_readwrite("continuous_batching", &TranslateOptions::continuous_batching)
      .def_readwrite("window", &TranslateOptions::window)
      .def_readwrite("threads", &TranslateOptions::threads)
      .def_readwrite("workers", &TranslateOptions::workers)
      .def_readwrite("split", &TranslateOptions::split)
      .def_readwrite("source_language", &TranslateOptions::source_language)
      .def_readwrite("scores", &TranslateOptions::scores)
      .def_readwrite("alignments", &TranslateOptions::alignments)
      .def_readwrite("attention", &TranslateOptions::attention)
      .def_readwrite("alignment_layer", &TranslateOptions::alignment_layer);
  choice_property(c, "shortlist", &TranslateOptions::shortlist, kShortlists);
  choice_property(c, "input_format", &TranslateOptions::input_format, kInputFormats);
  choice_property(c, "format", &TranslateOptions::format, kOutputFormats);
}

// The constructor of a Translator or Scorer: its models load with the GIL
// free (seconds of reading and preparing weights), warnings go to `warn`.
template <class T, class Options>
auto loading() {
  return py::init(
      [](const std::vector<std::string>& models, const Options& options, const py::object& warn) {
        const auto w = warner(warn);
        py::gil_scoped_release free;
        return std::make_unique<T>(models, options, w);
      });
}

void bind_translator(py::module_& m) {
  py::class_<TranslationResult>(m, "TranslationResult")
      .def_readonly("hypotheses", &TranslationResult::hypotheses)
      .def_readonly("scores", &TranslationResult::scores)
      .def_readonly("logprob", &TranslationResult::logprob)
      .def_readonly("tokens", &TranslationResult::tokens)
      .def_readonly("alignment", &TranslationResult::alignment)
      .def_readonly("source_pieces", &TranslationResult::source_pieces)
      .def_readonly("target_pieces", &TranslationResult::target_pieces)
      .def_readonly("attention", &TranslationResult::attention);
  const auto released = py::call_guard<py::gil_scoped_release>();
  py::class_<Translator>(m, "Translator")
      .def(loading<Translator, TranslateOptions>(), py::arg("models"), py::arg("options"),
           py::arg("warn") = py::none())
      .def("translate_batch", &Translator::translate_batch, py::arg("sources"), released)
      .def("translate", py::overload_cast<const std::vector<std::string>&>(&Translator::translate),
           py::arg("lines"), released)
      .def("translate_file",
           py::overload_cast<const std::string&, const std::string&>(&Translator::translate_file),
           py::arg("input"), py::arg("output"), released)
      .def("describe", &Translator::describe);
}

void bind_scoring(py::module_& m) {
  py::class_<ScoreOptions>(m, "ScoreOptions")
      .def(py::init<>())
      .def_readwrite("compute_type", &ScoreOptions::compute_type)
      .def_readwrite("device", &ScoreOptions::device)
      .def_readwrite("batch_tokens", &ScoreOptions::batch_tokens)
      .def_readwrite("alpha", &ScoreOptions::alpha)
      .def_readwrite("jsonl", &ScoreOptions::jsonl)
      .def_readwrite("word_scores", &ScoreOptions::word_scores);
  py::class_<Scorer>(m, "Scorer")
      .def(loading<Scorer, ScoreOptions>(), py::arg("models"), py::arg("options"),
           py::arg("warn") = py::none())
      .def("score", &Scorer::score, py::arg("source"), py::arg("target"),
           py::call_guard<py::gil_scoped_release>());
}

void bind_metrics(py::module_& m) {
  py::class_<MetricOptions>(m, "MetricOptions")
      .def(py::init<>())
      .def_readwrite("tokenize", &MetricOptions::tokenize)
      .def_readwrite("spm_model", &MetricOptions::spm_model)
      .def_readwrite("lowercase", &MetricOptions::lowercase)
      .def_readwrite("smooth", &MetricOptions::smooth)
      .def_readwrite("char_order", &MetricOptions::char_order)
      .def_readwrite("word_order", &MetricOptions::word_order)
      .def_readwrite("beta", &MetricOptions::beta)
      .def_readwrite("chrf_whitespace", &MetricOptions::chrf_whitespace)
      .def_readwrite("ter_normalized", &MetricOptions::ter_normalized)
      .def_readwrite("ter_no_punct", &MetricOptions::ter_no_punct)
      .def_readwrite("ter_asian_support", &MetricOptions::ter_asian_support)
      .def_readwrite("ter_case_sensitive", &MetricOptions::ter_case_sensitive)
      .def_readwrite("width", &MetricOptions::width);
  py::class_<MetricScore>(m, "MetricScore")
      .def_readonly("score", &MetricScore::score)
      .def_readonly("signature", &MetricScore::signature)
      .def_readonly("line", &MetricScore::line)
      .def("__repr__", [](const MetricScore& s) { return s.line; });
  m.def(
      "corpus_score",
      [](const std::string& metric, const std::vector<std::string>& hyps,
         const std::vector<std::vector<std::string>>& refs, const MetricOptions& options) {
        const Metric which = choice("metric", metric, kMetrics);
        py::gil_scoped_release free;
        return corpus_score(which, hyps, refs, options);
      },
      py::arg("metric"), py::arg("hypotheses"), py::arg("references"), py::arg("options"));
}

}  // namespace

PYBIND11_MODULE(_nmt, m) {
  m.doc() = "nmt's C++ API (include/nmt/); use the package nmt";
  m.attr("__version__") = version();
  bind_error(m);
  bind_translate_options(m);
  bind_translator(m);
  bind_scoring(m);
  bind_metrics(m);
}
