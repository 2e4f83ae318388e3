#include "io/data/token_shards.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr char shard_magic[8] = {'T', 'R', 'P', 'S', 'H', 'R', 'D', '1'};
constexpr uint32_t shard_version = 2;  ///< 2: flags and the labels section; 1 is still read
constexpr uint32_t task_shard_version = 3;  ///< 3: the task labels section too
constexpr uint32_t sentence_order_flag = 1;
constexpr uint32_t task_labels_flag = 2;
constexpr std::size_t header_bytes = 64;

struct shard_header {
  char magic[8];
  uint32_t version;
  uint32_t token_bytes;
  uint32_t sequence_length;
  uint32_t flags;  ///< version 1: reserved, 0
  uint64_t sequence_count;
  uint64_t payload_xxh64;
  uint8_t padding[24];
};
static_assert(sizeof(shard_header) == header_bytes);

template <class T>
T load(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

// Verification stamps (see token_shard in the header).
std::filesystem::path stamp_path(const std::filesystem::path& shard) { return shard.string() + ".verified"; }

/// What the stamp of the shard mapped as `identity` must say.
std::string stamp_text(const file_identity& identity, uint64_t payload_xxh64, int64_t vocab_size,
                       uint32_t sequence_length) {
  char text[256];
  std::snprintf(text, sizeof text,
                "troupe-shard-verified 2 device=%llu inode=%llu size=%llu mtime_ns=%lld ctime_ns=%lld payload=%016llx "
                "vocab=%lld sequence_length=%u\n",
                static_cast<unsigned long long>(identity.device), static_cast<unsigned long long>(identity.inode),
                static_cast<unsigned long long>(identity.size), static_cast<long long>(identity.mtime_ns),
                static_cast<long long>(identity.ctime_ns), static_cast<unsigned long long>(payload_xxh64),
                static_cast<long long>(vocab_size), sequence_length);
  return text;
}

std::string read_stamp(const std::filesystem::path& shard) {
  std::ifstream in(stamp_path(shard));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

/// Best effort: a read-only data directory, or another process writing the same stamp, only
/// means the next open checks everything again.
void write_stamp(const std::filesystem::path& shard, const std::string& text) {
  const auto temporary = shard.string() + ".verified." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out.flush()) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      return;
    }
  }
  std::error_code failed;
  std::filesystem::rename(temporary, stamp_path(shard), failed);
  if (failed) std::filesystem::remove(temporary, failed);
}

}  // namespace

int32_t sequence_view::token(std::size_t position) const {
  if (token_bytes == 2) return load<uint16_t>(tokens + position * 2);
  return load<int32_t>(tokens + position * 4);
}

token_shard_writer::token_shard_writer(std::filesystem::path path, uint32_t sequence_length,
                                       int64_t vocab_size)
    : path_(std::move(path)), sequence_length_(sequence_length),
      token_bytes_(vocab_size <= 65536 ? 2 : 4) {
  TROUPE_ENFORCE(sequence_length > 0 && sequence_length <= 65535, "sequence_length=", sequence_length);
}

void token_shard_writer::append(const packed_sequence& sequence, int32_t pad_id) {
  TROUPE_ENFORCE(sequence.tokens.size() <= sequence_length_, "length=", sequence.tokens.size());
  TROUPE_ENFORCE(sequence.type_boundary <= sequence.tokens.size(), "boundary=", sequence.type_boundary);
  const std::size_t offset = tokens_.size();
  tokens_.resize(offset + std::size_t{sequence_length_} * token_bytes_);
  for (uint32_t i = 0; i < sequence_length_; ++i) {
    int32_t id = i < sequence.tokens.size() ? sequence.tokens[i] : pad_id;
    if (token_bytes_ == 2) {
      auto narrow = static_cast<uint16_t>(id);
      std::memcpy(tokens_.data() + offset + i * 2, &narrow, 2);
    } else {
      std::memcpy(tokens_.data() + offset + i * 4, &id, 4);
    }
  }
  lengths_.push_back(static_cast<uint16_t>(sequence.tokens.size()));
  boundaries_.push_back(sequence.type_boundary);
  TROUPE_ENFORCE(sequence.sentence_order >= -1 && sequence.sentence_order <= 1, "sentence_order=",
                 static_cast<int>(sequence.sentence_order));
  TROUPE_ENFORCE(labels_.empty() || (labels_.front() < 0) == (sequence.sentence_order < 0),
                 "a shard's sequences either all carry a sentence-order label or none do");
  labels_.push_back(sequence.sentence_order);
  if (lengths_.size() == 1) has_task_labels_ = sequence.task_labels.has_value();
  TROUPE_ENFORCE(has_task_labels_ == sequence.task_labels.has_value(),
                 "a shard's sequences either all carry task labels or none do");
  if (sequence.task_labels) {
    TROUPE_ENFORCE((*sequence.task_labels)[0] >= 0 && (*sequence.task_labels)[1] >= 0, "task labels ",
                   (*sequence.task_labels)[0], ", ", (*sequence.task_labels)[1]);
    task_labels_.insert(task_labels_.end(), sequence.task_labels->begin(), sequence.task_labels->end());
  }
}

uint64_t token_shard_writer::finish() {
  std::vector<std::byte> index(lengths_.size() * 4);
  for (std::size_t i = 0; i < lengths_.size(); ++i) {
    std::memcpy(index.data() + i * 4, &lengths_[i], 2);
    std::memcpy(index.data() + i * 4 + 2, &boundaries_[i], 2);
  }
  const bool labelled = !labels_.empty() && labels_.front() >= 0;
  std::vector<std::byte> labels;
  if (labelled)
    for (const auto label : labels_) labels.push_back(static_cast<std::byte>(label));
  const auto* task_bytes = reinterpret_cast<const std::byte*>(task_labels_.data());
  const std::size_t task_size = task_labels_.size() * sizeof(int32_t);
  xxh64_stream hash;
  hash.update(tokens_.data(), tokens_.size());
  hash.update(index.data(), index.size());
  hash.update(labels.data(), labels.size());
  hash.update(task_bytes, task_size);
  const uint64_t checksum = hash.digest();

  shard_header header{};
  std::memcpy(header.magic, shard_magic, 8);
  header.version = has_task_labels_ ? task_shard_version : shard_version;
  header.token_bytes = token_bytes_;
  header.sequence_length = sequence_length_;
  header.flags = (labelled ? sentence_order_flag : 0) | (has_task_labels_ ? task_labels_flag : 0);
  header.sequence_count = lengths_.size();
  header.payload_xxh64 = checksum;
  write_file_atomically(path_, {byte_span{reinterpret_cast<const std::byte*>(&header), sizeof header},
                                byte_span{tokens_.data(), tokens_.size()},
                                byte_span{index.data(), index.size()}, byte_span{labels.data(), labels.size()},
                                byte_span{task_bytes, task_size}});
  return checksum;
}

token_shard::token_shard(const std::filesystem::path& path, uint32_t expected_sequence_length,
                         int64_t vocab_size, shard_check check)
    : file_(path) {
  file_.advise_random_access();  // the header alone, then samples; the full check below says otherwise
  const std::string name = path.string();
  if (file_.size() < header_bytes)
    throw make_error(name, ": token shard is truncated (", file_.size(), " bytes, header needs 64)");
  auto header = load<shard_header>(file_.data());
  if (std::memcmp(header.magic, shard_magic, 8) != 0) throw make_error(name, ": not a troupe token shard (bad magic)");
  if (header.version < 1 || header.version > task_shard_version)
    throw make_error(name, ": token shard version ", header.version, ", expected 1 to ", task_shard_version);
  const uint32_t known_flags = header.version == 1   ? 0
                               : header.version == 2 ? sentence_order_flag
                                                     : sentence_order_flag | task_labels_flag;
  if ((header.flags & ~known_flags) != 0)
    throw make_error(name, ": unknown token shard flags ", header.flags, " (version ", header.version, ")");
  const bool labelled = (header.flags & sentence_order_flag) != 0;
  const bool task_labelled = (header.flags & task_labels_flag) != 0;
  if (header.token_bytes != 2 && header.token_bytes != 4)
    throw make_error(name, ": token_bytes must be 2 or 4, found ", header.token_bytes);
  if (header.sequence_length != expected_sequence_length)
    throw make_error(name, ": sequence length ", header.sequence_length, " differs from the manifest's ",
                     expected_sequence_length);
  token_bytes_ = header.token_bytes;
  sequence_length_ = header.sequence_length;
  count_ = header.sequence_count;
  payload_hash_ = header.payload_xxh64;
  const uint64_t row_bytes = uint64_t{sequence_length_} * token_bytes_ + 4 + (labelled ? 1 : 0) + (task_labelled ? 8 : 0);
  if (count_ > (file_.size() - header_bytes) / row_bytes || header_bytes + count_ * row_bytes != file_.size())
    throw make_error(name, ": size ", file_.size(), " does not match ", count_, " sequences of ", sequence_length_,
                     " tokens (corrupt or truncated shard)");
  tokens_ = file_.data() + header_bytes;
  index_ = tokens_ + count_ * sequence_length_ * token_bytes_;
  if (labelled) labels_ = index_ + count_ * 4;
  if (task_labelled) task_labels_ = index_ + count_ * (labelled ? 5 : 4);
  // The stamp describes the file as it was mapped (fstat of that descriptor), not whatever the
  // path names by now.
  const std::string stamp = stamp_text(file_.identity(), header.payload_xxh64, vocab_size, sequence_length_);
  if (check == shard_check::trust_stamp && stamp == read_stamp(path)) return;
  file_.advise_sequential_access();
  if (xxh64(tokens_, file_.size() - header_bytes) != header.payload_xxh64)
    throw make_error(name, ": checksum mismatch (corrupt shard)");
  for (uint64_t i = 0; i < count_; ++i) {
    auto view = sequence(i);
    if (view.length == 0 || view.length > sequence_length_ || view.type_boundary > view.length)
      throw make_error(name, ": sequence ", i, " has length ", view.length, " and type boundary ",
                       view.type_boundary, " (sequence length ", sequence_length_, ")");
    if (labelled && view.sentence_order != 0 && view.sentence_order != 1)
      throw make_error(name, ": sequence ", i, " has sentence-order label ", static_cast<int>(view.sentence_order),
                       " (expected 0 or 1)");
    if (task_labelled && (view.task_labels[0] < 0 || view.task_labels[1] < 0))
      throw make_error(name, ": sequence ", i, " has task labels ", view.task_labels[0], ", ", view.task_labels[1],
                       " (expected ≥ 0)");
    for (uint32_t p = 0; p < sequence_length_; ++p) {
      auto id = view.token(p);
      if (id < 0 || id >= vocab_size)
        throw make_error(name, ": sequence ", i, " position ", p, " holds token id ", id,
                         " outside the vocabulary of ", vocab_size);
    }
  }
  write_stamp(path, stamp);
  file_.advise_random_access();  // read in order above; sampled from here on
}

sequence_view token_shard::sequence(uint64_t index) const {
  TROUPE_ENFORCE(index < count_, "index=", index, " count=", count_);
  sequence_view view;
  view.tokens = tokens_ + index * sequence_length_ * token_bytes_;
  view.token_bytes = token_bytes_;
  view.length = load<uint16_t>(index_ + index * 4);
  view.type_boundary = load<uint16_t>(index_ + index * 4 + 2);
  if (labels_) view.sentence_order = static_cast<int8_t>(load<uint8_t>(labels_ + index));
  if (task_labels_) {
    view.task_labels[0] = load<int32_t>(task_labels_ + index * 8);
    view.task_labels[1] = load<int32_t>(task_labels_ + index * 8 + 4);
  }
  return view;
}

}  // namespace troupe::io
