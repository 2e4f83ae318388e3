#include "actors/event_log.hpp"

#include <spdlog/spdlog.h>

#include "io/os/file_util.hpp"
#include "io/os/wall_clock.hpp"

namespace troupe::actors {

double unix_seconds() { return io::unix_seconds(); }

void record_event(const std::filesystem::path& file, nlohmann::json event) {
  if (file.empty()) return;
  event["unix_s"] = unix_seconds();
  try {
    io::append_line(file, event.dump());
  } catch (const std::exception& e) {
    spdlog::warn("event not recorded: {}", e.what());
  }
}

}  // namespace troupe::actors
