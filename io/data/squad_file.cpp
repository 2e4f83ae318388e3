#include "io/data/squad_file.hpp"

#include <fstream>
#include <set>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

/// A record's place in the file, for messages: "FILE: data[0].paragraphs[1].qas[2] (id X)".
struct record_place {
  std::string source, path, id;
  [[noreturn]] void fail(const std::string& field, const std::string& expected, const json& got) const {
    throw make_error(source, ": ", path, id.empty() ? "" : " (id " + id + ")", ": ", field, ": expected ", expected,
                     ", got ", got.is_null() ? std::string("nothing") : got.dump().substr(0, 80));
  }
  /// object[key] when it is there; nullptr otherwise.
  static const json* member(const json& object, const std::string& key) {
    if (!object.is_object()) return nullptr;
    const auto found = object.find(key);
    return found == object.end() ? nullptr : &*found;
  }
  const json& list(const json& object, const std::string& key) const {
    const json* value = member(object, key);
    if (value == nullptr || !value->is_array()) fail(key, "a list", value ? *value : json());
    return *value;
  }
  /// object[key] as a string; `field` names it in messages (default: the key).
  std::string text(const json& object, const std::string& key, const std::string& field = "") const {
    const json* value = member(object, key);
    if (value == nullptr || !value->is_string()) fail(field.empty() ? key : field, "a string", value ? *value : json());
    return value->get<std::string>();
  }
};

squad_gold_answer parse_answer(const json& answer, const record_place& place, const std::string& field) {
  squad_gold_answer gold;
  if (!answer.is_object()) place.fail(field, "an object with text and answer_start", answer);
  gold.text = place.text(answer, "text", field + ".text");
  const json* start = record_place::member(answer, "answer_start");
  if (start == nullptr || !start->is_number_integer() || start->get<int64_t>() < 0)
    place.fail(field + ".answer_start", "a character offset into the context (an integer ≥ 0)", start ? *start : json());
  gold.start = start->get<int64_t>();
  return gold;
}

squad_question parse_question(const json& qa, const std::string& context, record_place place) {
  if (!qa.is_object()) place.fail("the record", "an object with id, question and answers", qa);
  squad_question question;
  question.id = place.text(qa, "id");
  place.id = question.id;
  question.question = place.text(qa, "question");
  question.context = context;
  if (qa.contains("is_impossible")) {
    if (!qa["is_impossible"].is_boolean()) place.fail("is_impossible", "true or false", qa["is_impossible"]);
    question.impossible = qa["is_impossible"].get<bool>();
  }
  const json& answers = place.list(qa, "answers");
  for (std::size_t a = 0; a < answers.size(); ++a)
    question.answers.push_back(parse_answer(answers[a], place, "answers[" + std::to_string(a) + "]"));
  if (question.answers.empty() && !question.impossible)
    place.fail("answers", "at least one answer (or \"is_impossible\": true, SQuAD v2.0)", answers);
  return question;
}

}  // namespace

squad_dataset parse_squad(const json& root, const std::string& source) {
  const record_place top{source, "the file", ""};
  squad_dataset dataset;
  if (root.is_object() && root.contains("version") && root["version"] == "v2.0") dataset.version = squad_version::v2_0;
  const json& articles = top.list(root, "data");
  std::set<std::string> ids;
  for (std::size_t i = 0; i < articles.size(); ++i) {
    const record_place article{source, "data[" + std::to_string(i) + "]", ""};
    const json& paragraphs = article.list(articles[i], "paragraphs");
    for (std::size_t j = 0; j < paragraphs.size(); ++j) {
      const record_place paragraph{source, article.path + ".paragraphs[" + std::to_string(j) + "]", ""};
      const auto context = paragraph.text(paragraphs[j], "context");
      const json& qas = paragraph.list(paragraphs[j], "qas");
      for (std::size_t k = 0; k < qas.size(); ++k) {
        auto question = parse_question(qas[k], context, {source, paragraph.path + ".qas[" + std::to_string(k) + "]", ""});
        if (!ids.insert(question.id).second)
          throw make_error(source, ": ", paragraph.path, ".qas[", k, "]: id ", question.id, " is used twice");
        if (question.impossible) dataset.version = squad_version::v2_0;
        dataset.questions.push_back(std::move(question));
      }
    }
  }
  return dataset;
}

squad_dataset read_squad_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw make_error(file.string(), ": SQuAD file not found");
  const auto root = json::parse(in, nullptr, false);
  if (root.is_discarded()) throw make_error(file.string(), ": not JSON (a SQuAD file is one JSON object)");
  return parse_squad(root, file.string());
}

}  // namespace troupe::io
