#include "io/text/sentencepiece_tokenizer.hpp"

#include <cstdlib>
#include <sstream>

#include "io/os/child_process.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr std::chrono::milliseconds helper_timeout{120'000};
constexpr std::chrono::milliseconds training_timeout{3'600'000};

}  // namespace

std::string sentencepiece_tokenizer::helper_path() {
  // TROUPE_SENTENCEPIECE_HELPER: path of the troupe-sentencepiece executable.
  const char* path = std::getenv("TROUPE_SENTENCEPIECE_HELPER");
  return path != nullptr ? path : TROUPE_SENTENCEPIECE_HELPER_PATH;
}

void sentencepiece_tokenizer::train(const std::filesystem::path& sentences_file, int vocab_size,
                                    const std::filesystem::path& model_prefix) {
  child_process helper({helper_path(), "train", "--input=" + sentences_file.string(),
                        "--model_prefix=" + model_prefix.string(), "--vocab_size=" + std::to_string(vocab_size),
                        "--model_type=unigram", "--pad_id=0", "--unk_id=1", "--bos_id=-1", "--eos_id=-1",
                        "--control_symbols=[CLS],[SEP],[MASK]", "--character_coverage=0.9995",
                        "--input_sentence_size=1000000", "--shuffle_input_sentence=true", "--minloglevel=2"});
  if (int status = helper.wait(training_timeout); status != 0)
    throw make_error("training the SentencePiece model (vocab_size ", vocab_size, ") failed with status ", status,
                     " (message above)");
}

sentencepiece_tokenizer::sentencepiece_tokenizer(const std::filesystem::path& model_file)
    : model_file_(model_file), helper_(std::make_unique<child_process>(
                                   std::vector<std::string>{helper_path(), "encode", model_file.string()})) {
  std::string header;
  try {
    header = helper_->read_line(helper_timeout);
  } catch (const error& e) {
    throw make_error(model_file.string(), ": cannot load the SentencePiece model: ", e.what());
  }
  std::istringstream in(header);
  std::string ok;
  in >> ok >> vocab_size_;
  const char* expected[] = {"<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"};
  for (const char* piece : expected) {
    std::string found;
    in >> found;
    if (found != piece)
      throw make_error(model_file.string(), ": expected SentencePiece piece ", piece, ", found '", found, "'");
  }
}

sentencepiece_tokenizer::~sentencepiece_tokenizer() = default;

std::vector<int32_t> sentencepiece_tokenizer::encode(std::string_view text) const {
  std::string line(text);
  for (auto& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::lock_guard<std::mutex> lock(helper_mutex_);
  helper_->write(line + "\n");
  std::istringstream ids_text(helper_->read_line(helper_timeout));
  std::vector<int32_t> ids;
  int32_t id;
  while (ids_text >> id) ids.push_back(id);
  return ids;
}

std::vector<std::string> sentencepiece_tokenizer::pieces() const {
  child_process helper({helper_path(), "pieces", model_file_.string()});
  std::istringstream header(helper.read_line(helper_timeout));
  std::string ok;
  int64_t count = 0;
  header >> ok >> count;
  if (ok != "ok" || count != vocab_size_)
    throw make_error(model_file_.string(), ": the SentencePiece helper listed ", count, " pieces, expected ", vocab_size_);
  std::vector<std::string> pieces;
  for (int64_t id = 0; id < count; ++id) pieces.push_back(helper.read_line(helper_timeout));
  helper.wait(helper_timeout);
  return pieces;
}

std::string sentencepiece_tokenizer::save_to(const std::filesystem::path& dir) const {
  const std::string name = "spm.model";
  if (std::filesystem::absolute(model_file_) != std::filesystem::absolute(dir / name))
    std::filesystem::copy_file(model_file_, dir / name, std::filesystem::copy_options::overwrite_existing);
  return name;
}

}  // namespace troupe::io
