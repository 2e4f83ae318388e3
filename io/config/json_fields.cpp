#include "io/config/json_fields.hpp"

#include <algorithm>
#include <cmath>

#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::io {

using nlohmann::json;

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    previous.swap(current);
  }
  return previous[b.size()];
}

json_fields::json_fields(const json& object, std::string source, std::string path)
    : object_(object), source_(std::move(source)), path_(std::move(path)) {
  if (!object_.is_null() && !object_.is_object())
    throw make_error(source_, ": ", path_.empty() ? "the top level" : path_, ": expected a JSON object, got ",
                     object_.type_name());
  if (object_.is_null()) object_ = json::object();
}

std::string json_fields::where(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

void json_fields::fail(const std::string& key, const std::string& expected) const {
  std::string got = object_.contains(key) ? object_.at(key).dump() : std::string("nothing");
  if (got.size() > 60) got = got.substr(0, 57) + "...";
  throw make_error(source_, ": ", where(key), ": expected ", expected, ", got ", got);
}

bool json_fields::has(const std::string& key) const { return object_.contains(key) && !object_.at(key).is_null(); }

const json* json_fields::lookup(const std::string& key) {
  read_.insert(key);
  if (!has(key)) return nullptr;
  return &object_.at(key);
}

double json_fields::number(const std::string& key, double fallback, double min, double max) {
  const json* value = lookup(key);
  if (value == nullptr) return fallback;
  auto range = detail::concat("a number in [", min, ", ", max, "]");
  if (!value->is_number()) fail(key, range);
  double x = value->get<double>();
  if (!std::isfinite(x) || x < min || x > max) fail(key, range);
  return x;
}

int64_t json_fields::integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  const json* value = lookup(key);
  if (value == nullptr) return fallback;
  auto range = detail::concat("an integer in [", min, ", ", max, "]");
  if (!value->is_number_integer()) fail(key, range);
  int64_t x = value->get<int64_t>();
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) fail(key, range);
  if (x < min || x > max) fail(key, range);
  return x;
}

bool json_fields::boolean(const std::string& key, bool fallback) {
  const json* value = lookup(key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) fail(key, "true or false");
  return value->get<bool>();
}

std::string json_fields::string(const std::string& key, const std::string& fallback) {
  const json* value = lookup(key);
  if (value == nullptr) return fallback;
  if (!value->is_string()) fail(key, "a string");
  return value->get<std::string>();
}

std::string json_fields::choice(const std::string& key, const std::string& fallback,
                                const std::vector<std::string>& choices) {
  std::string value = string(key, fallback);
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return value;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + ("\"" + c + "\"");
  fail(key, "one of " + list);
}

std::vector<double> json_fields::numbers(const std::string& key, std::vector<double> fallback, std::size_t count) {
  const json* value = lookup(key);
  if (value == nullptr) return fallback;
  auto expected = detail::concat("an array of ", count, " numbers");
  if (!value->is_array() || value->size() != count) fail(key, expected);
  std::vector<double> out;
  for (const auto& item : *value) {
    if (!item.is_number()) fail(key, expected);
    out.push_back(item.get<double>());
  }
  return out;
}

nlohmann::json json_fields::raw(const std::string& key) {
  const json* value = lookup(key);
  return value == nullptr ? json() : *value;
}

nlohmann::json json_fields::array(const std::string& key) {
  const json* value = lookup(key);
  if (value == nullptr) return json::array();
  if (!value->is_array()) fail(key, "a JSON array");
  return *value;
}

json_fields json_fields::object(const std::string& key) {
  const json* value = lookup(key);
  if (value != nullptr && !value->is_object()) fail(key, "a JSON object");
  return json_fields(value == nullptr ? json::object() : *value, source_, where(key));
}

void json_fields::finish() const {
  for (const auto& [key, value] : object_.items()) {
    if (read_.count(key) != 0) continue;
    std::string nearest;
    std::size_t best = SIZE_MAX;
    for (const auto& known : read_) {
      auto d = edit_distance(key, known);
      if (d < best) {
        best = d;
        nearest = known;
      }
    }
    std::string message = detail::concat(source_, ": ", where(key), ": unknown key");
    if (!nearest.empty() && best <= std::max<std::size_t>(3, key.size() / 2))
      message += detail::concat(" (did you mean '", where(nearest), "'?)");
    throw error(message);
  }
}

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw make_error(source, ": not valid JSON: ", e.what());
  }
}

nlohmann::json parse_json_file(const std::filesystem::path& file) {
  return parse_json_text(read_whole_file(file), file.string());
}

}  // namespace troupe::io
