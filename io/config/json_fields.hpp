#pragma once
/// Typed, path-aware reading of a JSON object, for configs and manifests.

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::io {

/// Reads fields of one JSON object and remembers which it read. Every error is a
/// troupe::error naming the source, the JSON path ("optimizer.params.lr") and what was
/// expected; `finish()` rejects keys nobody read, suggesting the nearest known one.
class json_fields {
 public:
  json_fields(const nlohmann::json& object, std::string source, std::string path = "");

  bool has(const std::string& key) const;
  double number(const std::string& key, double fallback, double min, double max);
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::string& fallback);
  /// A string that must be one of `choices`.
  std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& choices);
  std::vector<double> numbers(const std::string& key, std::vector<double> fallback, std::size_t count);
  /// The value as it is (null when absent), for fields of more than one shape.
  nlohmann::json raw(const std::string& key);
  /// A JSON array (empty when absent); elements are checked by the caller.
  nlohmann::json array(const std::string& key);
  /// A nested object (an empty one when absent).
  json_fields object(const std::string& key);
  /// Throws for every key that was not read.
  void finish() const;

  /// Full path of a key, for messages ("model.hidden_size").
  std::string where(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

 private:
  const nlohmann::json* lookup(const std::string& key);

  nlohmann::json object_;
  std::string source_;
  std::string path_;
  std::set<std::string> read_;
};

/// Parses `text` read from `source`; invalid JSON is a troupe::error naming the source.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);
/// Reads and parses a JSON file (errors name the file).
nlohmann::json parse_json_file(const std::filesystem::path& file);

/// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace troupe::io
