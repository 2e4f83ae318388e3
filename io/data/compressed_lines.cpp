#include "io/data/compressed_lines.hpp"

#include <zlib.h>
#include <zstd.h>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr std::size_t read_bytes = std::size_t{1} << 20;  // compressed bytes per read
constexpr std::size_t decode_bytes = std::size_t{1} << 20;  // text bytes per decoding step

}  // namespace

compression compression_of(const std::filesystem::path& file) {
  const auto extension = file.extension();
  if (extension == ".gz") return compression::gzip;
  if (extension == ".zst" || extension == ".zstd") return compression::zstd;
  return compression::none;
}

std::optional<compression> compression_named(std::string_view name) {
  if (name == "none") return compression::none;
  if (name == "gzip") return compression::gzip;
  if (name == "zstd") return compression::zstd;
  return std::nullopt;
}

/// One of zlib's inflate (gzip members, one after another) or a Zstandard stream. `mid_stream`:
/// a member or frame was begun and has not ended, so the input must not end here.
struct compressed_lines::decoder {
  compression codec;
  z_stream gzip{};
  ZSTD_DStream* zstd = nullptr;
  bool mid_stream = false;

  explicit decoder(compression c) : codec(c) {
    if (codec == compression::gzip) {
      if (inflateInit2(&gzip, 16 + MAX_WBITS) != Z_OK) throw error("zlib: inflateInit2 failed");
    } else if ((zstd = ZSTD_createDStream()) == nullptr) {
      throw error("zstd: ZSTD_createDStream failed");
    }
  }
  ~decoder() {
    if (codec == compression::gzip)
      inflateEnd(&gzip);
    else
      ZSTD_freeDStream(zstd);
  }

  /// Decodes from `input` (advancing `at`) into `output`'s free space; returns the bytes written,
  /// or throws a plain message for corrupt data.
  std::size_t decode(const std::string& input, std::size_t& at, char* output, std::size_t capacity) {
    if (codec == compression::zstd) {
      ZSTD_inBuffer in{input.data(), input.size(), at};
      ZSTD_outBuffer out{output, capacity, 0};
      const std::size_t hint = ZSTD_decompressStream(zstd, &out, &in);
      if (ZSTD_isError(hint) != 0) throw error(ZSTD_getErrorName(hint));
      at = in.pos;
      mid_stream = hint != 0;
      return out.pos;
    }
    if (!mid_stream && at < input.size()) {  // the next gzip member
      inflateReset(&gzip);
      mid_stream = true;
    }
    gzip.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data() + at));
    gzip.avail_in = static_cast<uInt>(input.size() - at);
    gzip.next_out = reinterpret_cast<Bytef*>(output);
    gzip.avail_out = static_cast<uInt>(capacity);
    const int status = inflate(&gzip, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR)
      throw error(gzip.msg != nullptr ? gzip.msg : "corrupt data");
    if (status == Z_STREAM_END) mid_stream = false;
    at = input.size() - gzip.avail_in;
    return capacity - gzip.avail_out;
  }
};

compressed_lines::compressed_lines(std::filesystem::path file, compression codec)
    : file_(std::move(file)), codec_(codec) {
  stream_ = std::fopen(file_.c_str(), "rb");
  if (stream_ == nullptr) throw make_error(file_.string(), ": cannot open");
  if (codec_ != compression::none) decoder_ = std::make_unique<decoder>(codec_);
}

compressed_lines::~compressed_lines() {
  if (stream_ != nullptr) std::fclose(stream_);
}

void compressed_lines::fail(const std::string& what) const {
  throw make_error(file_.string(), ": ", what, " (after line ", line_number_, ", ", file_bytes_read_,
                   " bytes into the file)");
}

bool compressed_lines::read_more() {
  if (codec_ == compression::none) {
    const std::size_t old_size = text_.size();
    text_.resize(old_size + read_bytes);
    const std::size_t got = std::fread(text_.data() + old_size, 1, read_bytes, stream_);
    text_.resize(old_size + got);
    if (got == 0 && std::ferror(stream_) != 0) fail("read error");
    file_bytes_read_ += got;
    return got > 0;
  }
  for (;;) {
    if (input_at_ == input_.size() && !input_ended_) {
      input_.resize(read_bytes);
      const std::size_t got = std::fread(input_.data(), 1, read_bytes, stream_);
      if (got == 0 && std::ferror(stream_) != 0) fail("read error");
      input_.resize(got);
      input_at_ = 0;
      input_ended_ = got == 0;
      file_bytes_read_ += got;
    }
    if (input_ended_ && input_at_ == input_.size() && !decoder_->mid_stream) return false;
    const std::size_t old_size = text_.size();
    text_.resize(old_size + decode_bytes);
    std::size_t produced = 0;
    try {
      produced = decoder_->decode(input_, input_at_, text_.data() + old_size, decode_bytes);
    } catch (const error& e) {
      fail(detail::concat(codec_ == compression::gzip ? "corrupt gzip data: " : "corrupt zstd data: ", e.what()));
    }
    text_.resize(old_size + produced);
    if (produced > 0) return true;
    if (input_ended_ && input_at_ == input_.size() && decoder_->mid_stream)
      fail(codec_ == compression::gzip ? "the gzip stream ends early (a truncated file?)"
                                       : "the zstd stream ends early (a truncated file?)");
  }
}

bool compressed_lines::next(std::string_view& line) {
  std::size_t searched = text_at_;
  for (;;) {
    const std::size_t newline = text_.find('\n', searched);
    if (newline != std::string::npos) {
      std::size_t end = newline;
      if (end > text_at_ && text_[end - 1] == '\r') --end;
      line = std::string_view(text_).substr(text_at_, end - text_at_);
      text_at_ = newline + 1;
      ++line_number_;
      return true;
    }
    if (text_.size() - text_at_ > max_line_bytes)
      fail(detail::concat("line ", line_number_ + 1, " is longer than ", max_line_bytes >> 20,
                          " MiB (is this a text file?)"));
    text_.erase(0, text_at_);
    text_at_ = 0;
    searched = text_.size();
    if (!read_more()) {
      if (text_.empty()) return false;
      std::size_t end = text_.size();
      if (text_[end - 1] == '\r') --end;
      line = std::string_view(text_).substr(0, end);
      text_at_ = text_.size();
      ++line_number_;
      return true;
    }
  }
}

}  // namespace troupe::io
