#include "io/monitor/tfevents_writer.hpp"

#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "io/monitor/crc32c.hpp"

namespace troupe::io {
namespace {

// Protocol buffers' wire format, for the handful of fields below: a key is (field << 3) | wire
// type, then a varint (type 0), 8 little-endian bytes (1), a length-prefixed payload (2) or 4
// little-endian bytes (5). Fields of tensorflow/core/util/event.proto and summary.proto:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

template <class T>
void put_little_endian(std::string& out, T value) {
  static_assert(std::is_trivially_copyable_v<T>);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and aarch64 Linux are little-endian
  out.append(bytes, sizeof(T));
}

void put_key(std::string& out, uint32_t field, uint32_t wire_type) { put_varint(out, (field << 3) | wire_type); }

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_key(event, 1, 1);
  put_little_endian(event, wall_time);
  if (step != 0) {
    put_key(event, 2, 0);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace

std::string tfrecord_frame(const std::string& data) {
  std::string record;
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(data.size()));
  record += length;
  put_little_endian(record, masked_crc32c(length.data(), length.size()));
  record += data;
  put_little_endian(record, masked_crc32c(data.data(), data.size()));
  return record;
}

std::string scalar_event(const std::string& tag, int64_t step, double value, double wall_time) {
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  put_key(summary_value, 2, 5);
  put_little_endian(summary_value, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  return event;
}

std::string file_version_event(double wall_time) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

tfevents_writer::tfevents_writer(const std::filesystem::path& directory, double wall_time) {
  std::filesystem::create_directories(directory);
  path_ = directory / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(wall_time)) + "." + host_name() +
                       "." + std::to_string(::getpid()) + ".0");
  file_.open(path_, std::ios::binary | std::ios::app);
  if (!file_) throw std::runtime_error("cannot create the TensorBoard event file " + path_.string());
  write_record(file_version_event(wall_time));
  flush();
}

void tfevents_writer::scalar(const std::string& tag, int64_t step, double value, double wall_time) {
  write_record(scalar_event(tag, step, value, wall_time));
}

void tfevents_writer::flush() { file_.flush(); }

void tfevents_writer::write_record(const std::string& event) {
  const auto record = tfrecord_frame(event);
  file_.write(record.data(), static_cast<std::streamsize>(record.size()));
}

}  // namespace troupe::io
