#include "io/os/process_clocks.hpp"

#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace troupe::io {
namespace {

double seconds_of(clockid_t clock) {
  timespec now{};
  ::clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

double process_started_unix_seconds() {
  // proc(5): /proc/self/stat's 22nd field is the start time in clock ticks after boot. The 2nd
  // (the command's name, in parentheses) may hold spaces, so the fields are counted after its ')'.
  std::ifstream in("/proc/self/stat");
  std::string text;
  if (!std::getline(in, text)) return 0;
  const auto name_end = text.rfind(')');
  if (name_end == std::string::npos) return 0;
  std::istringstream fields(text.substr(name_end + 1));
  std::string field;
  for (int index = 3; index < 22; ++index) fields >> field;  // fields 3 (state) … 21
  double ticks = 0;
  if (!(fields >> ticks)) return 0;
  const double since_boot = ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  // The same instant on both clocks: now on the wall clock minus the time since the start.
  return seconds_of(CLOCK_REALTIME) - (seconds_of(CLOCK_BOOTTIME) - since_boot);
}

double process_cpu_seconds() { return seconds_of(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace troupe::io
