#include "tools/commands/checkpoint_data.hpp"

#include "messages/error.hpp"

namespace troupe::tools {

std::filesystem::path checkpoint_data_dir(const std::string& given, const io::checkpoint_contents& checkpoint) {
  if (!given.empty()) return given;
  const std::string dir = checkpoint.job.value("data", nlohmann::json::object()).value("dir", "");
  if (dir.empty()) throw make_error("--data: not given, and the checkpoint's job config names no data.dir");
  return dir;
}

void require_checkpoint_vocabulary(const io::dataset_manifest& data, const std::filesystem::path& data_dir,
                                   const io::checkpoint_contents& checkpoint,
                                   const std::filesystem::path& checkpoint_dir) {
  if (!checkpoint.state.vocab_hash.empty() && data.vocab_hash != checkpoint.state.vocab_hash)
    throw make_error(data_dir.string(), ": vocabulary ", data.vocab_hash, " differs from the checkpoint's ",
                     checkpoint.state.vocab_hash, " (", checkpoint_dir.string(), ")");
}

}  // namespace troupe::tools
