#include "io/checkpoint/safetensors.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>

#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

std::string file_with_header(const std::string& header, std::size_t data_bytes) {
  std::string bytes(8, '\0');
  uint64_t length = header.size();
  std::memcpy(bytes.data(), &length, 8);
  return bytes + header + std::string(data_bytes, '\0');
}

void expect_rejected(const std::string& bytes, const std::string& fragment) {
  try {
    parse_safetensors(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "hostile.safetensors");
    FAIL() << "accepted: " << fragment;
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("hostile.safetensors"), std::string::npos) << e.what();
  }
}

TEST(safetensors, round_trip_preserves_names_dtypes_values_and_metadata) {
  troupe::testing::temp_dir dir;
  compute::named_tensors tensors{{"a.weight", torch::randn({3, 4})},
                                 {"b.bias", torch::arange(5, torch::kLong)},
                                 {"c", torch::randn({2}).to(torch::kBFloat16)},
                                 {"empty", torch::zeros({0, 3})}};
  write_safetensors(dir / "t.safetensors", tensors, {{"format", "pt"}});
  auto content = read_safetensors(dir / "t.safetensors");
  EXPECT_EQ(content.metadata.at("format"), "pt");
  ASSERT_EQ(content.tensors.size(), tensors.size());
  for (const auto& [name, expected] : tensors) {
    auto it = std::find_if(content.tensors.begin(), content.tensors.end(), [&](auto& e) { return e.first == name; });
    ASSERT_NE(it, content.tensors.end()) << name;
    EXPECT_TRUE(torch::equal(it->second, expected)) << name;
  }
  // The header is padded to 8 bytes as the reference implementation does.
  auto bytes = read_whole_file(dir / "t.safetensors");
  uint64_t header_length;
  std::memcpy(&header_length, bytes.data(), 8);
  EXPECT_EQ(header_length % 8, 0u);
}

TEST(safetensors, hostile_headers_are_rejected_without_reading_out_of_bounds) {
  expect_rejected("abc", "too short");
  std::string huge(8, '\0');
  uint64_t length = uint64_t{1} << 63;
  std::memcpy(huge.data(), &length, 8);
  expect_rejected(huge + "{}", "exceeds the file");
  expect_rejected(file_with_header("{not json", 0), "not valid JSON");
  expect_rejected(file_with_header("[1,2]", 0), "must be a JSON object");
  // Found by the fuzzer: a number too large for a double threw out_of_range, not parse_error.
  expect_rejected(file_with_header("{\"a\":3" + std::string(30, '3') + "e33333333}", 0), "not valid JSON");
  expect_rejected(file_with_header(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
                  "fall outside the data section");
  expect_rejected(file_with_header(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16),
                  "need 12 bytes");
  expect_rejected(file_with_header(R"({"t":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", 4), "unknown dtype");
  expect_rejected(file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                   12),
                  "overlaps");
  expect_rejected(file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "gap");
  expect_rejected(file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12),
                  "no tensor describes");
  expect_rejected(file_with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                  "non-negative");
  expect_rejected(file_with_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})", 4),
                  "too large");
  expect_rejected(file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8), "outside");
}

}  // namespace
}  // namespace troupe::io
