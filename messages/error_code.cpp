#include "messages/error_code.hpp"

namespace troupe::messages {

std::string to_string(errc code) {
  switch (code) {
    case errc::none: return "none";
    case errc::data_failed: return "data_failed";
    case errc::compute_failed: return "compute_failed";
    case errc::checkpoint_failed: return "checkpoint_failed";
    case errc::metrics_failed: return "metrics_failed";
    case errc::timed_out: return "timed_out";
    case errc::collective_failed: return "collective_failed";
    case errc::cluster_failed: return "cluster_failed";
  }
  return "unknown";
}

}  // namespace troupe::messages
