#pragma once
/// The run's metrics store behind a mutex, as the dashboard's HTTP threads read it while the
/// metrics hub (actors/metrics_hub) or `troupe dashboard RUN_DIR` fills it, and the dashboard's
/// routes over it.

#include <memory>
#include <mutex>

#include "io/monitor/dashboard_server.hpp"
#include "io/monitor/metrics_store.hpp"

namespace troupe::io {

struct shared_metrics {
  std::mutex mutex;
  metrics_store store;

  explicit shared_metrics(metrics_store s) : store(std::move(s)) {}
};

/// The dashboard's routes (/api/state, /api/series, /api/windows, /metrics) over `shared`.
dashboard_routes dashboard_routes_for(const std::shared_ptr<shared_metrics>& shared);

}  // namespace troupe::io
