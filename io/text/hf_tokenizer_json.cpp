#include "io/text/hf_tokenizer_json.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

using json = nlohmann::json;

/// The normalizer's casing: BertNormalizer's `lowercase`; `strip_accents` null (following it) or equal.
bool lower_case_of(const json& normalizer, bool fallback, const std::string& where) {
  if (normalizer.is_null()) return fallback;
  if (!normalizer.is_object() || normalizer.value("type", "") != "BertNormalizer")
    throw make_error(where, ": normalizer: expected BertNormalizer or null, got ", normalizer.dump().substr(0, 80));
  const bool lower = normalizer.value("lowercase", true);
  const auto strip = normalizer.find("strip_accents");
  if (strip != normalizer.end() && !strip->is_null() && strip->get<bool>() != lower)
    throw make_error(where, ": normalizer.strip_accents: troupe's WordPiece strips accents exactly when it lower-cases "
                     "(strip_accents null or equal to lowercase), got ", strip->dump(), " with lowercase ", lower);
  return lower;
}

std::vector<std::string> dense_vocabulary(const json& vocab, const std::string& where) {
  if (!vocab.is_object() || vocab.empty()) throw make_error(where, ": model.vocab: expected an object of token → id");
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<std::size_t>() >= tokens.size() || seen[id.get<std::size_t>()])
      throw make_error(where, ": model.vocab[\"", token, "\"]: expected a distinct id below ", tokens.size(),
                       " (ids number the tokens from 0), got ", id.dump());
    tokens[id.get<std::size_t>()] = token;
    seen[id.get<std::size_t>()] = true;
  }
  return tokens;
}

}  // namespace

wordpiece_tokenizer wordpiece_from_tokenizer_json(const std::filesystem::path& file, wordpiece_options options) {
  const auto where = file.string();
  std::ifstream in(file);
  if (!in) throw make_error(where, ": cannot open the tokenizer");
  std::stringstream text;
  text << in.rdbuf();
  const auto root = json::parse(text.str(), nullptr, false);
  if (root.is_discarded() || !root.is_object()) throw make_error(where, ": not a JSON object (a HF tokenizer.json)");
  const auto model = root.value("model", json::object());
  if (model.value("type", "") != "WordPiece")
    throw make_error(where, ": model.type: expected WordPiece (a BERT tokenizer), got ", model.value("type", json()).dump());
  if (model.value("continuing_subword_prefix", "##") != "##")
    throw make_error(where, ": model.continuing_subword_prefix: expected \"##\", got ",
                     model["continuing_subword_prefix"].dump());
  options.max_chars_per_word = model.value("max_input_chars_per_word", options.max_chars_per_word);
  options.lower_case = lower_case_of(root.value("normalizer", json()), options.lower_case, where);
  return wordpiece_tokenizer(dense_vocabulary(model.value("vocab", json()), where), options, where);
}

}  // namespace troupe::io
