#include "io/data/part_tokenizer.hpp"

#include "io/text/sentence_splitter.hpp"

namespace troupe::io {
namespace {

void visit_lines(std::string_view text, const std::function<void(std::string_view)>& sentence) {
  for_each_line(text, [&](std::string_view line) {
    for (const auto piece : split_sentences(line)) sentence(piece);
  });
}

}  // namespace

part_text visit_sentences(const text_part& part, const part_text_options& options,
                          const std::function<void(std::string_view)>& sentence) {
  if (!part.problem.empty()) return {0, part.problem};
  if (options.format == corpus_format::jsonl) {
    auto record = jsonl_text(part.lines.front(), options.field_path, options.field_name);
    if (!record.problem.empty()) return {0, std::move(record.problem)};
    document_key key;
    key.add_text(record.text);
    visit_lines(record.text, sentence);
    return {key.value(), {}};
  }
  for (const auto& line : part.lines) visit_lines(line, sentence);
  return {part.key.value_or(0), {}};
}

std::vector<tokenized_part> tokenize_parts(const std::vector<text_part>& parts, const tokenizer& tokens,
                                           const part_text_options& options) {
  std::vector<tokenized_part> results;
  results.reserve(parts.size());
  for (const auto& part : parts) {
    tokenized_part result;
    result.file = part.file;
    result.line = part.line;
    result.first = part.first;
    result.last = part.last;
    auto text = visit_sentences(part, options, [&](std::string_view sentence) {
      auto ids = tokens.encode(sentence);
      if (!ids.empty()) result.segments.push_back(std::move(ids));
    });
    result.key = text.key;
    result.problem = std::move(text.problem);
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace troupe::io
