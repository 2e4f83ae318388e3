// io::remove_tree: removes a tree as rm -rf does (counts what went, never follows a link out of
// the tree, is fine with nothing there) and names the entry it could not remove.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io/os/remove_tree.hpp"
#include "io/os/scratch_directory.hpp"
#include "tests/support/error_text.hpp"

namespace troupe::io {
namespace {

void touch(const std::filesystem::path& file) { std::ofstream(file) << "x"; }

TEST(remove_tree, removes_a_nested_tree_and_counts_its_entries) {
  scratch_directory scratch("troupe-remove-tree");
  const auto root = scratch.path() / "root";
  std::filesystem::create_directories(root / "a" / "b" / "c");
  touch(root / "top.txt");
  touch(root / "a" / "b" / "deep.bin");
  touch(root / "a" / ".hidden");
  EXPECT_EQ(remove_tree(root), 7u);  // root, a, b, c and three files
  EXPECT_FALSE(std::filesystem::exists(root));
  EXPECT_EQ(remove_tree(root), 0u) << "nothing there is not an error";
}

TEST(remove_tree, removes_links_without_following_them) {
  scratch_directory scratch("troupe-remove-tree");
  const auto outside = scratch.path() / "outside";
  std::filesystem::create_directories(outside);
  touch(outside / "kept.txt");
  const auto root = scratch.path() / "root";
  std::filesystem::create_directories(root);
  std::filesystem::create_directory_symlink(outside, root / "link");
  EXPECT_EQ(remove_tree(root), 2u);
  EXPECT_TRUE(std::filesystem::exists(outside / "kept.txt"));
  touch(scratch.path() / "plain.txt");
  EXPECT_EQ(remove_tree(scratch.path() / "plain.txt"), 1u) << "a file is removed like rm -f";
}

// /proc refuses every removal, root's too: the first entry tried is named with the reason.
TEST(remove_tree, an_entry_that_cannot_go_is_named) {
  troupe::testing::expect_error([] { remove_tree("/proc/self/fd"); }, "/proc/self/fd/");
  troupe::testing::expect_error([] { remove_tree("/proc/self/fd"); }, ": cannot remove it: ");
}

}  // namespace
}  // namespace troupe::io
