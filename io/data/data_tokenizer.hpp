#pragma once
/// The tokenizer a prepared data directory was made with, rebuilt from its manifest (to encode
/// new text the way the training data was encoded, e.g. for `troupe fill-mask`).

#include <filesystem>
#include <memory>

#include "io/text/tokenizer.hpp"

namespace troupe::io {

struct dataset_manifest;

/// WordPiece (the manifest's vocab.txt and casing) or SentencePiece (its model file). Throws
/// troupe::error naming the file when it is missing.
std::unique_ptr<tokenizer> open_data_tokenizer(const dataset_manifest& manifest, const std::filesystem::path& data_dir);

}  // namespace troupe::io
