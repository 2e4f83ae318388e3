#include "io/data/data_tokenizer.hpp"

#include "io/data/token_dataset.hpp"
#include "io/text/sentencepiece_tokenizer.hpp"
#include "io/text/wordpiece_tokenizer.hpp"
#include "messages/error.hpp"

namespace troupe::io {

std::unique_ptr<tokenizer> open_data_tokenizer(const dataset_manifest& manifest, const std::filesystem::path& data_dir) {
  const auto file = data_dir / manifest.tokenizer_file;
  if (!std::filesystem::is_regular_file(file))
    throw make_error(file.string(), ": the data's tokenizer file is missing (", (data_dir / "manifest.json").string(),
                     " names it)");
  if (manifest.tokenizer_kind == "sentencepiece") return std::make_unique<sentencepiece_tokenizer>(file);
  return std::make_unique<wordpiece_tokenizer>(
      wordpiece_tokenizer::from_file(file, wordpiece_options{manifest.lower_case, 100}));
}

dataset_manifest manifest_for_tokenizer(const tokenizer& tokens, const std::filesystem::path& data_dir,
                                        uint32_t max_seq_length, bool lower_case) {
  dataset_manifest manifest;
  manifest.max_seq_length = max_seq_length;
  manifest.vocab_size = tokens.vocab_size();
  manifest.tokenizer_kind = tokens.kind();
  manifest.tokenizer_file = tokens.save_to(data_dir);
  manifest.lower_case = lower_case;
  manifest.vocab_hash = file_xxh64_hex(data_dir / manifest.tokenizer_file);
  manifest.specials = tokens.specials();
  return manifest;
}

tokenizer_spec parse_tokenizer_spec(const std::string& spec) {
  const auto colon = spec.find(':');
  return {spec.substr(0, colon), colon == std::string::npos ? "" : spec.substr(colon + 1)};
}

}  // namespace troupe::io
