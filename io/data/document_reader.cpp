#include "io/data/document_reader.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "io/text/utf8.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr std::size_t huge_line_bytes = std::size_t{1} << 20;

/// Adds the visible regular files under `dir` (symbolic links to directories are not followed)
/// to `files`. A plain directory walk rather than std::filesystem::recursive_directory_iterator,
/// whose copy in PyTorch 2.x's libtorch.so can be the one a program binds to (io/os/remove_tree.hpp).
void collect_files(const std::filesystem::path& dir, std::vector<std::filesystem::path>& files) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().front() == '.') continue;
    if (entry.is_directory() && !entry.is_symlink())
      collect_files(entry.path(), files);
    else if (entry.is_regular_file())
      files.push_back(entry.path());
  }
}

}  // namespace

document_reader::document_reader(const std::vector<std::filesystem::path>& inputs, document_reader_options options)
    : options_(options) {
  for (const auto& input : inputs) {
    if (!std::filesystem::exists(input)) throw make_error(input.string(), ": input not found");
    if (std::filesystem::is_regular_file(input))
      files_.push_back(input.lexically_normal());
    else
      collect_files(input.lexically_normal(), files_);
  }
  std::sort(files_.begin(), files_.end());
  files_.erase(std::unique(files_.begin(), files_.end()), files_.end());
  if (files_.empty()) throw make_error("--input: no files found in the given inputs");
  for (const auto& file : files_) {
    file_bytes_.push_back(std::filesystem::file_size(file));
    total_bytes_ += file_bytes_.back();
  }
}

document_reader::~document_reader() = default;

uint64_t document_reader::bytes_read() const {
  return finished_bytes_ + (lines_ ? lines_->file_bytes_read() : 0);
}

std::vector<text_part> document_reader::next_batch() {
  std::vector<text_part> batch;
  std::size_t batch_bytes = 0;
  while (batch_bytes < options_.batch_bytes && read_line(batch, batch_bytes)) {
  }
  return batch;
}

void document_reader::open_next_file() {
  file_ = next_file_++;
  const auto& file = files_[file_];
  lines_ = std::make_unique<compressed_lines>(file, options_.codec ? *options_.codec : compression_of(file));
}

bool document_reader::read_line(std::vector<text_part>& batch, std::size_t& batch_bytes) {
  if (!lines_) {
    if (next_file_ == files_.size()) return false;
    open_next_file();
  }
  std::string_view line;
  bool more = false;
  try {
    more = lines_->next(line);
  } catch (const error& e) {  // a corrupt or truncated stream, a line too long: the rest of the file is lost
    hand_on(true, batch, batch_bytes);
    text_part bad;
    bad.file = file_;
    bad.problem = e.what();
    batch.push_back(std::move(bad));
    end_file(batch, batch_bytes);
    return true;
  }
  if (!more) {
    end_file(batch, batch_bytes);
  } else if (options_.format != corpus_format::jsonl) {
    take_text_line(line, batch, batch_bytes);
  } else if (!blank_line(line)) {
    text_part record;
    record.file = file_;
    record.line = lines_->line_number();
    record.lines.emplace_back(line);
    batch_bytes += line.size();
    batch.push_back(std::move(record));
  }
  return true;
}

void document_reader::take_text_line(std::string_view line, std::vector<text_part>& batch,
                                     std::size_t& batch_bytes) {
  if (auto bad = decode_utf8(line, code_points_)) {
    text_part part;
    part.file = file_;
    part.line = lines_->line_number();
    part.problem = detail::concat("invalid UTF-8 at byte ", *bad + 1, " of the line (convert the file to UTF-8, e.g. with iconv)");
    batch.push_back(std::move(part));
    return;
  }
  if (blank_line(line)) {
    if (options_.format == corpus_format::blank_line) hand_on(true, batch, batch_bytes);
    return;
  }
  if (line.size() > huge_line_bytes)
    spdlog::warn("{}:{}: line of {} bytes; splitting it into sentence-sized pieces", files_[file_].string(),
                 lines_->line_number(), line.size());
  if (held_.lines.empty()) {
    held_.file = file_;
    held_.line = lines_->line_number();
  }
  held_.lines.emplace_back(line);
  held_bytes_ += line.size();
  if (!fixed_key_) {
    key_.add_line(line);
    if (key_.bytes() >= options_.hold_bytes) {
      fixed_key_ = key_.value();
      if (options_.format == corpus_format::file)
        spdlog::warn("{}: one document of more than {} MiB (--format file makes each file one document); if it holds "
                     "many, separated by blank lines, --format bert reads them as such",
                     files_[file_].string(), options_.hold_bytes >> 20);
    }
  }
  if (fixed_key_ && held_bytes_ >= options_.batch_bytes) hand_on(false, batch, batch_bytes);
}

void document_reader::hand_on(bool last, std::vector<text_part>& batch, std::size_t& batch_bytes) {
  if (held_.lines.empty() && !handed_on_) return;  // no document under way
  text_part part = std::move(held_);
  part.first = !handed_on_;
  part.last = last;
  part.key = fixed_key_ ? *fixed_key_ : key_.value();
  batch_bytes += held_bytes_;
  batch.push_back(std::move(part));
  held_ = {};
  held_bytes_ = 0;
  handed_on_ = !last;
  if (last) {
    key_ = document_key();
    fixed_key_.reset();
  }
}

void document_reader::end_file(std::vector<text_part>& batch, std::size_t& batch_bytes) {
  hand_on(true, batch, batch_bytes);  // a document never spans files
  finished_bytes_ += file_bytes_[file_];
  lines_.reset();
}

}  // namespace troupe::io
