#include "io/data/sentence_pair_encoding.hpp"

#include "messages/error.hpp"

namespace troupe::io {

encoded_input encode_sentences(const tokenizer& tokens, const std::string& text, const std::optional<std::string>& pair,
                               int64_t max_length) {
  const int64_t specials = pair ? 3 : 2;
  if (max_length < specials + (pair ? 2 : 1))
    throw make_error("max_seq_length: expected ≥ ", specials + (pair ? 2 : 1), " for ", pair ? "sentence pairs" : "sentences",
                     ", got ", max_length);
  auto first = tokens.encode(text);
  std::vector<int32_t> second;
  if (pair) second = tokens.encode(*pair);
  const auto room = static_cast<std::size_t>(max_length - specials);
  while (first.size() + second.size() > room) {
    if (first.size() >= second.size())
      first.pop_back();
    else
      second.pop_back();
  }
  const auto ids = tokens.specials();
  encoded_input out;
  out.input_ids.push_back(ids.cls);
  out.input_ids.insert(out.input_ids.end(), first.begin(), first.end());
  out.input_ids.push_back(ids.sep);
  out.token_types.assign(out.input_ids.size(), 0);
  if (pair) {
    out.input_ids.insert(out.input_ids.end(), second.begin(), second.end());
    out.input_ids.push_back(ids.sep);
    out.token_types.resize(out.input_ids.size(), 1);
  }
  return out;
}

}  // namespace troupe::io
