#include "io/monitor/shared_metrics.hpp"

#include <chrono>

namespace troupe::io {
namespace {

double now_unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

dashboard_routes dashboard_routes_for(const std::shared_ptr<shared_metrics>& shared) {
  dashboard_routes routes;
  routes.state = [shared] {
    std::lock_guard lock(shared->mutex);
    return shared->store.state_json(now_unix_seconds()).dump();
  };
  routes.series = [shared] {
    std::lock_guard lock(shared->mutex);
    return shared->store.series_json().dump();
  };
  routes.windows = [shared](std::size_t last) {
    std::lock_guard lock(shared->mutex);
    return shared->store.windows_json(last).dump();
  };
  routes.prometheus = [shared] {
    std::lock_guard lock(shared->mutex);
    return shared->store.prometheus(now_unix_seconds());
  };
  return routes;
}

}  // namespace troupe::io
