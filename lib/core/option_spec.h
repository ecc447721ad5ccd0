// One option of a command family (training, translation, scoring),
// declared once: its key (JSON's, the messages' {key}; the command line's
// flag is app/'s to derive), its type and what values it may take, its help,
// and how to read and write it in the family's options struct. The tables
// made of these generate the command line, read and write JSON, check
// values and say what a user gave.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nmt {

struct OptionInfo {
  enum Type {
    kInt,       // a whole number
    kUnsigned,  // a whole number from 0 to 2^64 - 1
    kNumber,    // a finite number
    kFlag,      // true when named
    kChoice,    // one of `choices`, by name
    kText,      // free text, checked by the option's setter
  };
  std::string key;
  Type type = kInt;
  std::optional<double> min, max;    // kInt, kNumber: the range allowed
  bool strict_min = false;           // min itself is not
  std::vector<std::string> choices;  // kChoice
  bool list = false;                 // kChoice: one or more, each once
  bool path = false;                 // kText: a file's path (completed as one)
  std::string help;                  // names other options as {key}
  std::string needs;                 // meaningful only with this option given
  bool recipe = false;               // training: the recipe chooses it unless given
  // Training: it says how long to go on or how to log, so a resumed run
  // takes this invocation's value, not the checkpoint's.
  bool per_run = false;

  // "an integer >= 2", "a number from 1 to 1024", "a number in (0, 100]",
  // "\"bleu\" or \"loss\"", "one of 13a, intl, ...".
  std::string expected() const;
  // Empty when v is a value of this option, else "expected <expected()>,
  // got <v>".
  std::string problem(const nlohmann::json& v) const;
};

// An option held in a T: get reads it as JSON, set writes a checked value.
template <class T>
struct OptionSpec : OptionInfo {
  std::function<nlohmann::json(const T&)> get;
  std::function<void(T&, const nlohmann::json&)> set;
};

// An option of a part (SearchOptions) as an option of the whole that holds
// it (TranslateOptions::search).
template <class Whole, class Part>
OptionSpec<Whole> lift(const OptionSpec<Part>& o, Part Whole::*part) {
  OptionSpec<Whole> w;
  static_cast<OptionInfo&>(w) = o;
  w.get = [get = o.get, part](const Whole& t) { return get(t.*part); };
  w.set = [set = o.set, part](Whole& t, const nlohmann::json& v) { set(t.*part, v); };
  return w;
}

// An option with its own get and set.
template <class T>
OptionSpec<T> make_option(const char* key, OptionInfo::Type type, std::string help,
                          std::function<nlohmann::json(const T&)> get,
                          std::function<void(T&, const nlohmann::json&)> set) {
  OptionSpec<T> o;
  o.key = key;
  o.type = type;
  o.help = std::move(help);
  o.get = std::move(get);
  o.set = std::move(set);
  return o;
}

// An option that is one member of T, read and written as it is.
template <class T, class M>
OptionSpec<T> member_option(const char* key, OptionInfo::Type type, M T::*m, std::string help) {
  return make_option<T>(
      key, type, std::move(help), [m](const T& t) { return nlohmann::json(t.*m); },
      [m](T& t, const nlohmann::json& v) { t.*m = v.template get<M>(); });
}

template <class T>
OptionSpec<T> with_range(OptionSpec<T> o, double min, double max, bool strict_min = false) {
  o.min = min;
  o.max = max;
  o.strict_min = strict_min;
  return o;
}

template <class T>
OptionSpec<T> with_choices(OptionSpec<T> o, std::vector<std::string> choices) {
  o.choices = std::move(choices);
  return o;
}

template <class T>
const OptionSpec<T>* find_option(const std::vector<OptionSpec<T>>& table, const std::string& key) {
  for (const OptionSpec<T>& o : table)
    if (o.key == key) return &o;
  return nullptr;
}

}  // namespace nmt
