#include "io/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "compute/error.hpp"

namespace troupe::io {

void sentencepiece_tokenizer::train(const std::filesystem::path& sentences_file, int vocab_size,
                                    const std::filesystem::path& model_prefix) {
  const std::string arguments = detail::concat(
      "--input=", sentences_file.string(), " --model_prefix=", model_prefix.string(),
      " --vocab_size=", vocab_size, " --model_type=unigram --pad_id=0 --unk_id=1 --bos_id=-1",
      " --eos_id=-1 --control_symbols=[CLS],[SEP],[MASK] --character_coverage=0.9995",
      " --input_sentence_size=1000000 --shuffle_input_sentence=true --minloglevel=2");
  auto status = sentencepiece::SentencePieceTrainer::Train(arguments);
  if (!status.ok())
    throw make_error("training the SentencePiece model (vocab_size ", vocab_size, ") failed: ",
                     status.ToString());
}

sentencepiece_tokenizer::sentencepiece_tokenizer(const std::filesystem::path& model_file)
    : model_file_(model_file), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  auto status = processor_->Load(model_file.string());
  if (!status.ok())
    throw make_error(model_file.string(), ": cannot load the SentencePiece model: ", status.ToString());
  const char* expected[] = {"<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"};
  for (int id = 0; id < 5; ++id)
    if (processor_->IdToPiece(id) != expected[id] && !(id == 0 && processor_->IsUnused(id)))
      throw make_error(model_file.string(), ": expected piece ", expected[id], " at id ", id, ", found ",
                       processor_->IdToPiece(id));
}

sentencepiece_tokenizer::~sentencepiece_tokenizer() = default;

std::vector<int32_t> sentencepiece_tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto status = processor_->Encode(std::string(text), &ids);
  if (!status.ok()) throw make_error("SentencePiece encoding failed: ", status.ToString());
  return {ids.begin(), ids.end()};
}

int64_t sentencepiece_tokenizer::vocab_size() const { return processor_->GetPieceSize(); }

std::string sentencepiece_tokenizer::save_to(const std::filesystem::path& dir) const {
  const std::string name = "spm.model";
  if (std::filesystem::absolute(model_file_) != std::filesystem::absolute(dir / name))
    std::filesystem::copy_file(model_file_, dir / name, std::filesystem::copy_options::overwrite_existing);
  return name;
}

}  // namespace troupe::io
