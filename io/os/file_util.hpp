#pragma once
/// Small filesystem helpers: atomic file writes and whole-file reads.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>
#include <string>

struct XXH64_state_s;  // xxhash.h's streaming state

namespace troupe::io {

/// A contiguous run of bytes to write.
struct byte_span {
  const std::byte* data;
  std::size_t size;
};

/// Called after each chunk (at most 4 MiB) with the bytes written so far: a test seam.
using write_progress = std::function<void(std::size_t written)>;

/// Writes the parts to `<path>.tmp`, fsyncs it, renames it over `path` and fsyncs the parent
/// directory, so readers see either the old file or the complete new one. Returns the xxh64 of
/// the bytes written, hashed on the way (no second read).
uint64_t write_file_atomically(const std::filesystem::path& path, const std::vector<byte_span>& parts,
                               const write_progress& progress = {});
uint64_t write_file_atomically(const std::filesystem::path& path, const std::string& text);

/// Reads a whole file; throws troupe::error naming it when it cannot.
std::string read_whole_file(const std::filesystem::path& path);

/// Reads a whole file with large read() calls into one buffer (much faster than page-faulting
/// a cold mmap); throws troupe::error naming it when it cannot.
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path);

/// Reads exactly `bytes` bytes from `fd` into `into` in large read() calls; throws troupe::error
/// naming `name` on an error or an early end of file.
void read_exactly(int fd, void* into, uint64_t bytes, const std::string& name);

/// xxh64 (seed 0) of a block of memory: checkpoint file hashes and replica checks.
uint64_t xxh64(const void* data, std::size_t bytes);

/// xxh64 (seed 0) of bytes that arrive in pieces (a file being written or read).
class xxh64_stream {
 public:
  xxh64_stream();
  ~xxh64_stream();
  xxh64_stream(const xxh64_stream&) = delete;
  xxh64_stream& operator=(const xxh64_stream&) = delete;
  void update(const void* data, std::size_t bytes);
  uint64_t digest() const;

 private:
  ::XXH64_state_s* state_;
};

/// A 64-bit hash as 16 lower-case hex digits (how troupe writes xxh64 values).
std::string hex64(uint64_t value);

/// True for a name that stays inside the directory it is joined to: not empty, no '/', not "."
/// or "..". Names read from manifests (shards, tokenizer, checkpoint files) must pass it.
bool is_plain_file_name(const std::string& name);

/// Refuses to replace an existing `path` unless `overwrite`: troupe::error "PATH: already exists;
/// pass --overwrite to replace it" (every command that writes a whole directory says so alike).
void refuse_existing(const std::filesystem::path& path, bool overwrite);

/// Puts a finished directory `temporary` in place of `target` (whatever was there goes) and
/// fsyncs the parent, so the new directory is there whole or not at all.
void move_directory_into_place(const std::filesystem::path& temporary, const std::filesystem::path& target);

/// fsyncs a directory so a rename inside it is durable.
void fsync_directory(const std::filesystem::path& dir);

/// Appends `line` and a newline to `path` (created when missing) in one write(2) with O_APPEND,
/// so lines from several processes never interleave. Throws troupe::error naming the file.
void append_line(const std::filesystem::path& path, const std::string& line);

}  // namespace troupe::io
