#include "io/data/classification_file.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

using ordered_json = nlohmann::ordered_json;

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const auto tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

/// run_glue.py's choice among the columns other than "label".
std::vector<std::string> text_columns_of(const std::vector<std::string>& columns, const std::string& file) {
  if (std::find(columns.begin(), columns.end(), "label") == columns.end()) {
    std::string names;
    for (const auto& column : columns) names += (names.empty() ? "\"" : ", \"") + column + "\"";
    throw make_error(file, ": no \"label\" column (columns: ", names, ")");
  }
  std::vector<std::string> others;
  for (const auto& column : columns)
    if (column != "label") others.push_back(column);
  const auto has = [&](const char* name) { return std::find(others.begin(), others.end(), name) != others.end(); };
  if (has("sentence1") && has("sentence2")) return {"sentence1", "sentence2"};
  if (others.empty()) throw make_error(file, ": no text column besides \"label\"");
  if (others.size() >= 2) return {others[0], others[1]};
  return {others[0]};
}

/// One example from a row of named fields; `field_of` maps a column to its value or null.
template <typename FieldOf>
text_example example_from(const std::vector<std::string>& text_columns, FieldOf field_of, int64_t line) {
  text_example example;
  example.line = line;
  example.label = field_of("label");
  example.text = field_of(text_columns[0]);
  if (text_columns.size() > 1) example.pair = field_of(text_columns[1]);
  return example;
}

classification_data read_tsv(const std::filesystem::path& file, std::ifstream& in) {
  classification_data data{file, {}, {}};
  std::string line;
  if (!std::getline(in, line)) throw make_error(file.string(), ": empty (expected a header row naming the columns)");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const auto columns = split_tabs(line);
  data.text_columns = text_columns_of(columns, file.string());
  std::map<std::string, std::size_t> index;
  for (std::size_t c = 0; c < columns.size(); ++c) index[columns[c]] = c;
  for (int64_t number = 2; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto fields = split_tabs(line);
    if (fields.size() != columns.size())
      throw make_error(file.string(), ": line ", number, ": expected ", columns.size(), " tab-separated fields, got ",
                       fields.size());
    data.examples.push_back(
        example_from(data.text_columns, [&](const std::string& column) { return fields[index.at(column)]; }, number));
  }
  return data;
}

std::string json_field(const ordered_json& row, const std::string& column, const std::string& file, int64_t line) {
  const auto found = row.find(column);
  const bool label = column == "label";
  if (found != row.end() && found->is_string()) return found->get<std::string>();
  if (label && found != row.end() && found->is_number_integer()) return found->dump();
  throw make_error(file, ": line ", line, ": ", column, ": expected ", label ? "a string or an integer" : "a string",
                   ", got ", found == row.end() ? std::string("nothing") : found->dump().substr(0, 80));
}

classification_data read_json_lines(const std::filesystem::path& file, std::ifstream& in) {
  classification_data data{file, {}, {}};
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ordered_json row;
    try {
      row = ordered_json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw make_error(file.string(), ": line ", number, ": not JSON (", e.what(), ")");
    }
    if (!row.is_object()) throw make_error(file.string(), ": line ", number, ": expected a JSON object");
    if (data.text_columns.empty()) {
      std::vector<std::string> columns;
      for (const auto& [key, value] : row.items()) columns.push_back(key);
      data.text_columns = text_columns_of(columns, file.string());
    }
    data.examples.push_back(example_from(
        data.text_columns, [&](const std::string& column) { return json_field(row, column, file.string(), number); },
        number));
  }
  return data;
}

bool is_integer(const std::string& text) {
  int64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  return !text.empty() && error == std::errc() && at == end;
}

}  // namespace

classification_data read_classification_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw make_error(file.string(), ": cannot open the classification data");
  const auto extension = file.extension().string();
  classification_data data;
  if (extension == ".tsv") {
    data = read_tsv(file, in);
  } else if (extension == ".jsonl" || extension == ".json") {
    data = read_json_lines(file, in);
  } else {
    throw make_error(file.string(), ": expected a .tsv (GLUE, header row) or .jsonl/.json (JSON lines) file");
  }
  if (data.examples.empty()) throw make_error(file.string(), ": no examples");
  return data;
}

std::vector<std::string> classification_labels(const classification_data& train) {
  std::set<std::string> distinct;
  for (const auto& example : train.examples) distinct.insert(example.label);
  std::vector<std::string> labels(distinct.begin(), distinct.end());
  if (std::all_of(labels.begin(), labels.end(), is_integer))
    std::sort(labels.begin(), labels.end(),
              [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
  return labels;
}

std::vector<int64_t> label_indices(const classification_data& data, const std::vector<std::string>& labels) {
  std::vector<int64_t> out;
  out.reserve(data.examples.size());
  for (const auto& example : data.examples) {
    const auto found = std::find(labels.begin(), labels.end(), example.label);
    if (found == labels.end())
      throw make_error(data.file.string(), ": line ", example.line, ": label: \"", example.label,
                       "\" is not one of the training file's ", labels.size(), " labels");
    out.push_back(found - labels.begin());
  }
  return out;
}

}  // namespace troupe::io
