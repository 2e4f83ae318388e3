#include "actors/event_log.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "io/os/file_util.hpp"

namespace troupe::actors {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

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
