#pragma once
/// Sentence(-pair) classification data as transformers' run_glue.py reads a user's files:
///
///   .tsv            GLUE's own files: a header row naming the columns, then one example per
///                   line, fields separated by tabs, no quoting
///   .jsonl / .json  JSON lines: one object per line, its keys the columns
///
/// The label is the "label" column. The text columns are chosen as run_glue.py chooses them
/// among the others: "sentence1" and "sentence2" when both exist, else the first two, else the
/// only one (so SST-2's "sentence", "label" is a single-sentence task). The label set is the
/// training file's distinct labels sorted (numerically when every label is an integer, as the
/// datasets library reads such a column), stored with the model: label i is class i.
///
/// Errors name the file, the line and the field.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace troupe::io {

struct text_example {
  std::string text;
  std::optional<std::string> pair;  ///< the second sentence of a pair task
  std::string label;                ///< as written ("1", "positive", …)
  int64_t line = 0;                 ///< 1-based line in its file, for messages
};

struct classification_data {
  std::filesystem::path file;
  std::vector<std::string> text_columns;  ///< one, or two for pairs
  std::vector<text_example> examples;     ///< in file order
};

/// Reads a .tsv, .jsonl or .json file; throws troupe::error naming it (missing, no "label"
/// column, no text column, a line with the wrong number of fields or a non-string text, empty).
classification_data read_classification_file(const std::filesystem::path& file);

/// The training data's label set, sorted as run_glue.py sorts it.
std::vector<std::string> classification_labels(const classification_data& train);

/// Each example's class index in `labels`; throws troupe::error naming the file, line and label
/// when one is not in the set (a validation file with a label the training file lacks).
std::vector<int64_t> label_indices(const classification_data& data, const std::vector<std::string>& labels);

}  // namespace troupe::io
