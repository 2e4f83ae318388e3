#include "io/monitor/tfevents_writer.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/monitor/crc32c.hpp"
#include "io/os/scratch_directory.hpp"

namespace troupe::io {
namespace {

uint32_t crc_of(const std::string& text) { return crc32c(text.data(), text.size()); }

// RFC 3720 (iSCSI) appendix B.4 and the customary "123456789" check value of CRC-32C.
TEST(crc32c, matches_the_published_check_values) {
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc_of(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc_of(descending), 0x113FDB5Cu);
  EXPECT_EQ(crc_of(""), 0u);
}

TEST(crc32c, continues_over_split_input) {
  const std::string text = "the quick brown fox jumps over the lazy dog";
  const uint32_t whole = crc_of(text);
  EXPECT_EQ(crc32c(text.data() + 10, text.size() - 10, crc32c(text.data(), 10)), whole);
}

// TFRecord's mask, computed from its definition: rotate right 15, add 0xa282ead8.
TEST(crc32c, masked_as_tfrecord_defines_it) {
  const uint32_t crc = crc_of("123456789");
  EXPECT_EQ(masked_crc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

template <class T>
T read_little_endian(const std::string& bytes, std::size_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  return value;
}

// A reader written from the TFRecord definition, to check what the writer framed.
std::vector<std::string> read_records(const std::string& file) {
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < file.size()) {
    EXPECT_GE(file.size() - at, 12u);
    const auto length = read_little_endian<uint64_t>(file, at);
    EXPECT_EQ(read_little_endian<uint32_t>(file, at + 8), masked_crc32c(file.data() + at, 8)) << "length CRC";
    const std::string data = file.substr(at + 12, length);
    EXPECT_EQ(read_little_endian<uint32_t>(file, at + 12 + length), masked_crc32c(data.data(), data.size()))
        << "data CRC";
    records.push_back(data);
    at += 12 + length + 4;
  }
  return records;
}

TEST(tfrecord, frames_length_and_data_with_masked_crcs) {
  const auto record = tfrecord_frame("abc");
  ASSERT_EQ(record.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(read_little_endian<uint64_t>(record, 0), 3u);
  EXPECT_EQ(read_records(record), std::vector<std::string>{"abc"});
}

// The protobuf bytes of Event{wall_time: 1.5, step: 300, summary: {value: [{tag: "a/b",
// simple_value: 2.0}]}}, spelled out field by field (event.proto, summary.proto).
TEST(tfevents, scalar_event_is_the_protobuf_encoding) {
  std::string expected;
  expected += '\x09';  // field 1 (wall_time), 64-bit
  const double wall = 1.5;
  expected.append(reinterpret_cast<const char*>(&wall), 8);
  expected += "\x10\xac\x02";  // field 2 (step), varint 300
  expected += "\x2a\x0c";      // field 5 (summary), 12 bytes
  expected += "\x0a\x0a";      // Summary.value, 10 bytes
  expected += "\x0a\x03" "a/b";  // Value.tag
  expected += '\x15';          // Value.simple_value, 32-bit
  const float value = 2.0f;
  expected.append(reinterpret_cast<const char*>(&value), 4);
  EXPECT_EQ(scalar_event("a/b", 300, 2.0, 1.5), expected);
}

// An independent protobuf parser (Debian's protoc, --decode_raw: wire format only, no schema)
// reads the event back with the field numbers and wire types of event.proto / summary.proto.
TEST(tfevents, protoc_decodes_the_scalar_event) {
  if (std::system("command -v protoc >/dev/null 2>&1") != 0) GTEST_SKIP() << "protoc is not installed";
  scratch_directory dir("protoc");
  {
    std::ofstream(dir / "event.bin", std::ios::binary) << scalar_event("Train/Samples/train_loss", 300, 2.0, 1.5);
  }
  const auto command = "protoc --decode_raw < " + (dir / "event.bin").string() + " > " + (dir / "decoded.txt").string();
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(dir / "decoded.txt");
  const std::string decoded((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(decoded.find("1: 0x3ff8000000000000"), std::string::npos) << decoded;  // wall_time 1.5 (double)
  EXPECT_NE(decoded.find("2: 300"), std::string::npos) << decoded;                 // step
  EXPECT_NE(decoded.find("5 {"), std::string::npos) << decoded;                    // summary
  EXPECT_NE(decoded.find("1: \"Train/Samples/train_loss\""), std::string::npos) << decoded;  // value.tag
  EXPECT_NE(decoded.find("2: 0x40000000"), std::string::npos) << decoded;          // simple_value 2.0f
}

TEST(tfevents, writer_starts_with_the_file_version_and_appends_scalars) {
  scratch_directory dir("tfevents");
  std::filesystem::path path;
  {
    tfevents_writer writer(dir.path() / "tb", 1700000000.25);
    writer.scalar("Train/Samples/train_loss", 64, 7.25, 1700000001.0);
    writer.scalar("Train/Samples/lr", 64, 1e-4, 1700000001.0);
    writer.flush();
    path = writer.path();
  }
  EXPECT_EQ(path.filename().string().rfind("events.out.tfevents.1700000000.", 0), 0u) << path;
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto records = read_records(file);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_EQ(records[1], scalar_event("Train/Samples/train_loss", 64, 7.25, 1700000001.0));
  EXPECT_EQ(records[2], scalar_event("Train/Samples/lr", 64, 1e-4, 1700000001.0));
}

}  // namespace
}  // namespace troupe::io
