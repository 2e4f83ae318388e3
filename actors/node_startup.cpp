#include "actors/node_startup.hpp"

#include "actors/event_log.hpp"

namespace troupe::actors {

void startup_timeline::record(const std::filesystem::path& events, const std::string& node) const {
  record_event(events, {{"event", "node_startup"},
                        {"node", node},
                        {"exec_unix_s", exec},
                        {"session_unix_s", session},
                        {"head_reached_unix_s", head_reached},
                        {"join_sent_unix_s", join_sent},
                        {"planned_unix_s", planned},
                        {"wired_unix_s", wired},
                        {"session_cpu_s", session_cpu},
                        {"wired_cpu_s", wired_cpu}});
}

}  // namespace troupe::actors
