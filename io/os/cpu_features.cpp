#include "io/os/cpu_features.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace troupe::io {

bool cpu_has_bf16_instructions() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream flags(line.substr(line.find(':') + 1));
    for (std::string flag; flags >> flag;)
      if (flag == "avx512_bf16" || flag == "amx_bf16") return true;
    return false;  // every CPU lists the same flags
  }
  return false;
}

}  // namespace troupe::io
