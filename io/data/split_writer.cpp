#include "io/data/split_writer.hpp"

#include "messages/error.hpp"

namespace troupe::io {

split_writer::split_writer(std::string name, std::filesystem::path dir, uint32_t max_seq_length,
                           uint64_t sequences_per_shard, const tokenizer& tokens)
    : dir_(std::move(dir)), max_seq_length_(max_seq_length), sequences_per_shard_(sequences_per_shard),
      tokenizer_(tokens) {
  info_.name = std::move(name);
}

void split_writer::add_document(const std::vector<packed_sequence>& sequences) {
  ++info_.documents;
  for (const auto& sequence : sequences) {
    if (!writer_) {
      info_.shard_files.push_back(detail::concat(info_.name, "-", info_.shard_files.size(), ".bin"));
      writer_ = std::make_unique<token_shard_writer>(dir_ / info_.shard_files.back(), max_seq_length_,
                                                     tokenizer_.vocab_size());
    }
    writer_->append(sequence, tokenizer_.specials().pad);
    ++info_.sequences;
    info_.tokens += sequence.tokens.size();
    if (writer_->size() >= sequences_per_shard_) flush();
  }
}

split_info split_writer::finish() {
  flush();
  return info_;
}

void split_writer::flush() {
  if (writer_) writer_->finish();
  writer_.reset();
}

}  // namespace troupe::io
