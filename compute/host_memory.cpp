#include "compute/host_memory.hpp"

#include <malloc.h>

namespace troupe::compute {

void keep_freed_memory_mapped() {
  // Serve blocks up to 1 GiB from the heap, and never trim the heap's top back to the kernel.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, -1);
}

}  // namespace troupe::compute
