#pragma once
/// metrics_batch ↔ Cap'n Proto bytes (schema::MetricsBatch): the cross-node metrics path from
/// each node's metrics actor to the head's metrics hub.

#include <string>

#include "messages/metrics_batch.hpp"

namespace troupe::messages {

std::string encode_metrics_batch(const metrics_batch& batch);
/// Throws troupe::error when the bytes are not a valid MetricsBatch message, or one larger than
/// a node could honestly send (limits below).
metrics_batch decode_metrics_batch(const std::string& bytes);

}  // namespace troupe::messages
