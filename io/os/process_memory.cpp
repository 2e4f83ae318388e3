#include "io/os/process_memory.hpp"

#include <unistd.h>

#include <fstream>

namespace troupe::io {

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");  // size resident shared text lib data dt, in pages
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace troupe::io
