#pragma once
/// TensorBoard event files (`events.out.tfevents.*`) with scalar summaries, written by hand: the
/// TFRecord framing and the few protobuf fields of `Event` and `Summary` a scalar needs.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/monitor/scalar_log.hpp"

namespace troupe::io {

/// Appends scalar events to a new event file in `directory` (created), named as TensorBoard's
/// own writers name theirs: events.out.tfevents.<unix seconds>.<host>.<pid>.<suffix>. The first
/// record is the file-version event TensorBoard expects.
class tfevents_writer final : public scalar_log {
 public:
  explicit tfevents_writer(const std::filesystem::path& directory, double wall_time);
  void scalar(const std::string& tag, int64_t step, double value, double wall_time) override;
  void flush() override;
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  std::filesystem::path path_;
  std::ofstream file_;
};

/// One TFRecord: little-endian uint64 length, its masked CRC-32C, the data, the data's masked
/// CRC-32C (exposed for tests).
std::string tfrecord_frame(const std::string& data);

/// A serialized tensorflow.Event holding one scalar Summary.Value (simple_value, a float).
std::string scalar_event(const std::string& tag, int64_t step, double value, double wall_time);

/// A serialized tensorflow.Event holding file_version "brain.Event:2".
std::string file_version_event(double wall_time);

}  // namespace troupe::io
