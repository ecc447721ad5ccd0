// The JSON files other tools write beside a model (CTranslate2's and
// Hugging Face's config.json, a tokeniser's tokenizer_config.json): each
// value is checked for its type where it is read, and a value of another
// type is refused by its key, never replaced by a default. null reads as
// absent, as both tools write it for "none".
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/json.h"
#include "io/text_file.h"

namespace nmt::convert {

class ConfigJson {
 public:
  ConfigJson(nlohmann::json j, std::string path) : j_(std::move(j)), path_(std::move(path)) {
    if (!j_.is_object())
      throw InputError(path_ + ": expected a JSON object, got " + j_.type_name());
  }
  // The file at path; an absent one is an empty object, or refused when
  // required.
  static ConfigJson read(const std::filesystem::path& path, bool required) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      if (required) throw InputError(path.string() + ": missing");
      return ConfigJson(nlohmann::json::object(), path.string());
    }
    return ConfigJson(io::parse_json(io::read_whole_file(path.string(), "JSON"), path.string()),
                      path.string());
  }

  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::string text(const std::string& key, const std::string& fallback) const {
    const nlohmann::json* v = find(key);
    if (!v) return fallback;
    if (!v->is_string()) fail(key, "a string", *v);
    return v->get<std::string>();
  }
  // A string, or "" for an explicit null (CTranslate2 writes null for none).
  std::string text_or_null(const std::string& key, const std::string& fallback) const {
    const auto it = j_.find(key);
    return it != j_.end() && it->is_null() ? "" : text(key, fallback);
  }
  bool flag(const std::string& key, bool fallback) const {
    const nlohmann::json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(key, "true or false", *v);
    return v->get<bool>();
  }
  int integer(const std::string& key, int fallback, int lo, int hi) const {
    const nlohmann::json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
      fail(key, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi), *v);
    return v->get<int>();
  }
  // A number in (0, 1].
  double fraction(const std::string& key, double fallback) const {
    const nlohmann::json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number() || !(v->get<double>() > 0 && v->get<double>() <= 1))
      fail(key, "a number in (0, 1]", *v);
    return v->get<double>();
  }
  // Refuses the key's value: what nmt cannot represent.
  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    throw InputError(path_ + ": \"" + key + "\": " + dump(j_.value(key, nlohmann::json())) + ": " +
                     why);
  }
  const nlohmann::json& raw() const { return j_; }
  const std::string& path() const { return path_; }

 private:
  const nlohmann::json* find(const std::string& key) const {
    const auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  static std::string dump(const nlohmann::json& v) {
    return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  [[noreturn]] void fail(const std::string& key, const std::string& want,
                         const nlohmann::json& v) const {
    throw InputError(path_ + ": key \"" + key + "\": expected " + want + ", got " + dump(v));
  }
  nlohmann::json j_;
  std::string path_;
};

}  // namespace nmt::convert
