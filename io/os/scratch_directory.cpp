#include "io/os/scratch_directory.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstring>

#include "io/os/remove_tree.hpp"
#include "messages/error.hpp"

namespace troupe::io {

scratch_directory::scratch_directory(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw make_error("cannot create a scratch directory ", pattern, ": ", std::strerror(errno));
  path_ = pattern;
}

scratch_directory::~scratch_directory() {
  remove_tree_quietly(path_);
}

}  // namespace troupe::io
