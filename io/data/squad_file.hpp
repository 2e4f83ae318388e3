#pragma once
/// SQuAD v1.1 and v2.0 files, read as the official scripts and run_squad.py read them: a JSON
/// object with "data" → articles → "paragraphs" → {"context", "qas": [{"id", "question",
/// "answers": [{"text", "answer_start"}], "is_impossible" (v2.0)}]}. Other keys ("version",
/// "title", "plausible_answers") are allowed and not used. Errors name the file, the record
/// (data[i].paragraphs[j].qas[k] and its id) and the field.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/text/squad_answer.hpp"

namespace troupe::io {

struct squad_gold_answer {
  std::string text;
  int64_t start = 0;  ///< in characters (code points) of the context, as the files count
};

struct squad_question {
  std::string id;
  std::string question;
  std::string context;
  std::vector<squad_gold_answer> answers;
  bool impossible = false;  ///< v2.0's is_impossible
};

struct squad_dataset {
  squad_version version = squad_version::v1_1;  ///< v2.0 when the file says so or any question is impossible
  std::vector<squad_question> questions;        ///< in file order
};

squad_dataset parse_squad(const nlohmann::json& root, const std::string& source);

/// Reads and parses a file; throws troupe::error naming it (missing, not JSON, or a bad record).
squad_dataset read_squad_file(const std::filesystem::path& file);

}  // namespace troupe::io
