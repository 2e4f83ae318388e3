#include "io/data/synthetic_dataset.hpp"

#include <fstream>

#include "compute/counter_random.hpp"
#include "io/data/split_writer.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::io {

void write_synthetic_dataset(const std::filesystem::path& dir, uint64_t sequences, uint32_t sequence_length,
                             int64_t vocab_size, uint64_t seed, uint64_t sequences_per_shard) {
  TROUPE_ENFORCE(vocab_size > 110, "vocab_size=", vocab_size);
  std::filesystem::create_directories(dir);
  {
    // BERT's layout: [PAD] 0, [unusedN] 1-99, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103.
    std::ofstream vocab(dir / "vocab.txt");
    for (int64_t id = 0; id < vocab_size; ++id) {
      if (id == 0) vocab << "[PAD]\n";
      else if (id < 100) vocab << "[unused" << id - 1 << "]\n";
      else if (id == 100) vocab << "[UNK]\n";
      else if (id == 101) vocab << "[CLS]\n";
      else if (id == 102) vocab << "[SEP]\n";
      else if (id == 103) vocab << "[MASK]\n";
      else vocab << "tok" << id << "\n";
    }
  }
  dataset_manifest manifest;
  manifest.max_seq_length = sequence_length;
  manifest.vocab_size = vocab_size;
  manifest.tokenizer_kind = "wordpiece";
  manifest.tokenizer_file = "vocab.txt";
  manifest.vocab_hash = file_xxh64_hex(dir / "vocab.txt");
  for (const char* split : {"train", "validation"}) {
    const uint64_t count = std::string(split) == "train" ? sequences : std::max<uint64_t>(1, sequences / 10);
    // Each sequence a document of its own, in shards of sequences_per_shard (memory holds one).
    split_writer writer(split, dir, sequence_length, sequences_per_shard, vocab_size, manifest.specials.pad);
    for (uint64_t i = 0; i < count; ++i) {
      packed_sequence sequence;
      sequence.tokens.push_back(manifest.specials.cls);
      for (uint32_t p = 1; p + 1 < sequence_length; ++p) {
        auto r = compute::keyed_random(seed, split[0], i, p);
        sequence.tokens.push_back(static_cast<int32_t>(104 + compute::below(r, static_cast<uint64_t>(vocab_size - 104))));
      }
      sequence.tokens.push_back(manifest.specials.sep);
      sequence.type_boundary = static_cast<uint16_t>(sequence.tokens.size());
      writer.add_document({sequence});
    }
    manifest.splits.push_back(writer.finish());
  }
  write_file_atomically(dir / "manifest.json", manifest.to_json());
  verify_dataset(dir);  // writes the stamps later opens trust
}

}  // namespace troupe::io
