#pragma once
/// The reports (messages/metrics_batch.hpp) as actor messages inside a node: a worker's window
/// report to the node's metrics actor and its session, a checkpointer's checkpoint report to the
/// metrics actor. Across nodes they travel inside a MetricsBatch as Cap'n Proto bytes
/// (messages/metrics_batch_codec.hpp, through window_report_fields()), never as CAF-serialised
/// messages, so CAF needs no inspection list of their fields.

#include <caf/allowed_unsafe_message_type.hpp>

#include "messages/metrics_batch.hpp"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::messages::window_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::messages::checkpoint_report)
