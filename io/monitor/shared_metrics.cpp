#include "io/monitor/shared_metrics.hpp"

#include "io/os/wall_clock.hpp"

namespace troupe::io {

dashboard_routes dashboard_routes_for(const std::shared_ptr<shared_metrics>& shared) {
  dashboard_routes routes;
  routes.state = [shared] {
    std::lock_guard lock(shared->mutex);
    return shared->store.state_json(unix_seconds()).dump();
  };
  routes.series = [shared] {
    std::lock_guard lock(shared->mutex);
    return shared->store.series_json().dump();
  };
  routes.nodes = [shared] {
    std::lock_guard lock(shared->mutex);
    return nlohmann::json{{"nodes", shared->store.nodes_json(unix_seconds(), SIZE_MAX)}}.dump();
  };
  routes.windows = [shared](std::size_t last) {
    std::lock_guard lock(shared->mutex);
    return shared->store.windows_json(last).dump();
  };
  routes.prometheus = [shared] {
    std::lock_guard lock(shared->mutex);
    return shared->store.prometheus(unix_seconds());
  };
  return routes;
}

}  // namespace troupe::io
