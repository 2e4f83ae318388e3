#pragma once
/// Parsing of the job config's `sync` block (compute/sync_config.hpp).

#include "compute/sync_config.hpp"
#include "io/config/json_fields.hpp"

namespace troupe::io {

/// The `sync` block: {"mode": "window"} or {"mode": "diloco", "inner_steps": H,
/// "outer_optimizer": {"type": "nesterov", "params": {"lr": 0.7, "momentum": 0.9}},
/// "communication_data_type": "fp32" | "bf16" | "fp16"}. Errors name the field.
compute::sync_config parse_sync(json_fields& fields);

}  // namespace troupe::io
