#include "io/data/split_writer.hpp"

#include <unistd.h>

#include "io/os/file_util.hpp"
#include "io/os/remove_tree.hpp"
#include "messages/error.hpp"

namespace troupe::io {

split_writer::split_writer(std::string name, std::filesystem::path dir, uint32_t max_seq_length,
                           uint64_t sequences_per_shard, const tokenizer& tokens)
    : split_writer(std::move(name), std::move(dir), max_seq_length, sequences_per_shard, tokens.vocab_size(),
                   tokens.specials().pad) {}

split_writer::split_writer(std::string name, std::filesystem::path dir, uint32_t max_seq_length,
                           uint64_t sequences_per_shard, int64_t vocab_size, int32_t pad_id)
    : dir_(std::move(dir)), max_seq_length_(max_seq_length), sequences_per_shard_(sequences_per_shard),
      vocab_size_(vocab_size), pad_id_(pad_id) {
  info_.name = std::move(name);
}

void split_writer::add_document(const std::vector<packed_sequence>& sequences) {
  add_sequences(sequences);
  end_document();
}

void split_writer::add_sequences(const std::vector<packed_sequence>& sequences) {
  for (const auto& sequence : sequences) {
    if (!writer_) {
      info_.shard_files.push_back(detail::concat(info_.name, "-", info_.shard_files.size(), ".bin"));
      writer_ = std::make_unique<token_shard_writer>(dir_ / info_.shard_files.back(), max_seq_length_,
                                                     vocab_size_);
    }
    writer_->append(sequence, pad_id_);
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

void write_data_directory(const std::filesystem::path& out, bool overwrite,
                          const std::function<dataset_manifest(const std::filesystem::path& work_dir)>& fill) {
  refuse_existing(out, overwrite);
  const auto work_dir = std::filesystem::path(out.string() + ".tmp-" + std::to_string(::getpid()));
  remove_tree(work_dir);
  std::filesystem::create_directories(work_dir);
  try {
    const auto manifest = fill(work_dir);
    write_file_atomically(work_dir / "manifest.json", manifest.to_json());
    verify_dataset(work_dir);  // once per prepare: later opens trust the stamps it writes
    move_directory_into_place(work_dir, out);
  } catch (...) {
    remove_tree_quietly(work_dir);
    throw;
  }
}

}  // namespace troupe::io
