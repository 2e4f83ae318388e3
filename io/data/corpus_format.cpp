#include "io/data/corpus_format.hpp"

#include <nlohmann/json.hpp>

#include "messages/error.hpp"

namespace troupe::io {

std::optional<corpus_format> corpus_format_named(std::string_view name) {
  if (name == "file") return corpus_format::file;
  if (name == "bert") return corpus_format::blank_line;
  if (name == "jsonl") return corpus_format::jsonl;
  return std::nullopt;
}

bool blank_line(std::string_view line) {
  return line.find_first_not_of(" \t\r\v\f") == std::string_view::npos;
}

void document_key::add_line(std::string_view line) {
  if (blank_line(line)) return;
  XXH64_update(&state_, line.data(), line.size());
  XXH64_update(&state_, "\n", 1);
  bytes_ += line.size() + 1;
}

void for_each_line(std::string_view text, const std::function<void(std::string_view)>& line) {
  while (!text.empty()) {
    const auto newline = text.find('\n');
    line(text.substr(0, newline));
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
  }
}

void document_key::add_text(std::string_view text) {
  for_each_line(text, [this](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    add_line(line);
  });
}

std::vector<std::string> jsonl_field_path(const std::string& field) {
  std::vector<std::string> keys;
  std::size_t start = 0;
  for (;;) {
    const auto dot = field.find('.', start);
    keys.push_back(field.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (keys.back().empty())
      throw make_error("--jsonl-field: expected a key or dotted keys (text, meta.body), got '", field, "'");
    if (dot == std::string::npos) return keys;
    start = dot + 1;
  }
}

jsonl_record jsonl_text(std::string_view line, const std::vector<std::string>& field_path,
                        const std::string& field_name) {
  const auto document = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (document.is_discarded()) return {{}, "not valid JSON (or not UTF-8)"};
  if (!document.is_object()) return {{}, detail::concat("expected a JSON object, got a ", document.type_name())};
  const nlohmann::json* value = &document;
  for (const auto& key : field_path) {
    if (!value->is_object()) return {{}, detail::concat("no field '", field_name, "': '", key, "' is not in an object")};
    const auto found = value->find(key);
    if (found == value->end()) return {{}, detail::concat("no field '", field_name, "' (--jsonl-field)")};
    value = &*found;
  }
  if (!value->is_string())
    return {{}, detail::concat("field '", field_name, "' is a ", value->type_name(), ", expected a string")};
  return {value->get<std::string>(), {}};
}

}  // namespace troupe::io
