#pragma once
/// What etcd_client.cpp and etcd_watch.cpp share, inside io/etcd only: reading the fields of
/// etcd's JSON gateway, which writes 64-bit numbers as strings and bytes as base64.

#include <cstdint>

#include <nlohmann/json.hpp>

#include "io/etcd/etcd_client.hpp"

namespace troupe::io {

/// A number field (string or number; 0 when absent: the gateway leaves out fields that are zero).
int64_t etcd_number_field(const nlohmann::json& object, const char* name);

/// A key as a range answer or a watch event writes it.
etcd_key_value etcd_key_value_of(const nlohmann::json& kv);

}  // namespace troupe::io
