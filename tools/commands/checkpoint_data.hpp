#pragma once
/// The data directory a checkpoint is read with by `troupe eval`, `fill-mask` and `predict`: its
/// tokenizer encodes the user's text (and its splits are scored) as the model was trained.

#include <filesystem>
#include <string>

#include "io/checkpoint/checkpoint_store.hpp"
#include "io/data/token_dataset.hpp"

namespace troupe::tools {

/// `--data` when given, else the `data.dir` of the checkpoint's job config; throws troupe::error
/// naming --data when neither names one (an imported checkpoint has no job).
std::filesystem::path checkpoint_data_dir(const std::string& given, const io::checkpoint_contents& checkpoint);

/// Throws troupe::error naming both when `data`'s tokenizer file is not the one the checkpoint
/// was trained with (its vocabulary hash); a checkpoint that records none is not checked.
void require_checkpoint_vocabulary(const io::dataset_manifest& data, const std::filesystem::path& data_dir,
                                   const io::checkpoint_contents& checkpoint,
                                   const std::filesystem::path& checkpoint_dir);

}  // namespace troupe::tools
