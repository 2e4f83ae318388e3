#include "io/config/byte_count.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/error_text.hpp"

namespace troupe::io {
namespace {

TEST(byte_count, sizes_as_written_on_command_lines) {
  EXPECT_EQ(parse_byte_count("4096", "--bytes"), 4096u);
  EXPECT_EQ(parse_byte_count("64K", "--bytes"), 65536u);
  EXPECT_EQ(parse_byte_count("256M", "--bytes"), 268435456u);
  EXPECT_EQ(parse_byte_count("1G", "--bytes"), 1073741824u);
  for (const char* bad : {"", "0", "0.3", "1.5G", "nan", "inf", "-4K", "4T", "K", "99999999999999999999",
                          "17179869184G"})
    troupe::testing::expect_error([&] { parse_byte_count(bad, "--bytes"); },
                                  std::string("--bytes: expected a whole number of bytes with an optional unit "
                                              "(4096, 64K, 256M, 1G), got '") + bad + "'");
}

}  // namespace
}  // namespace troupe::io
