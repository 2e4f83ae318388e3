#include "messages/metrics_batch_codec.hpp"

#include <capnp/dynamic.h>

#include "messages/capnp_message.hpp"
#include "messages/window_report_fields.hpp"
#include "messages/schemas/metrics.capnp.h"

namespace troupe::messages {
namespace {

// A batch holds at most a node's bounded queue (actors/metrics.hpp), a few KiB per window
// report: 64 MiB of words is far above any honest batch and far below a memory problem.
capnp::ReaderOptions batch_limits() {
  capnp::ReaderOptions limits;
  limits.traversalLimitInWords = 8 << 20;
  limits.nestingLimit = 8;
  return limits;
}

// Lists of zero-size elements cost the traversal limit one word per element, so 8 Mi words still
// admit millions of empty elements, each a push and a decode here (a fuzzer found a 464-byte
// batch that took 96 s under ASan). No honest batch comes near these counts: a node's metrics
// queue holds 1024 reports, its links are its workers × rings.
constexpr unsigned max_windows = 1 << 16, max_checkpoints = 1 << 12, max_log_lines = 1 << 12, max_links = 1 << 12;

void check_count(const char* list, unsigned count, unsigned limit) {
  if (count > limit)
    throw make_error("MetricsBatch: ", list, ": ", count, " entries, at most ", limit, " expected");
}

// Every field of a window report goes through its row of window_report_fields(), by its schema
// name (Cap'n Proto's dynamic API over the generated schema), so the codec lists no field.

template <class T>
void set_field(capnp::DynamicStruct::Builder& out, const char* name, const T& value) {
  out.set(name, value);
}

template <class T>
void set_field(capnp::DynamicStruct::Builder& out, const char* name, const std::vector<T>& values) {
  auto list = out.init(name, static_cast<unsigned>(values.size())).template as<capnp::DynamicList>();
  for (unsigned i = 0; i < list.size(); ++i) list.set(i, values[i]);
}

template <class T>
void get_field(const capnp::DynamicStruct::Reader& in, const char* name, T& value) {
  value = in.get(name).as<T>();
}

template <class T>
void get_field(const capnp::DynamicStruct::Reader& in, const char* name, std::vector<T>& values) {
  for (auto value : in.get(name).as<capnp::DynamicList>()) values.push_back(value.as<T>());
}

void write_window(schema::WindowReport::Builder out, const window_report& r) {
  capnp::DynamicStruct::Builder dynamic = capnp::toDynamic(out);
  for (const auto& field : window_report_fields())
    std::visit([&](auto member) { set_field(dynamic, field.schema_name, r.*member); }, field.member);
}

window_report read_window(schema::WindowReport::Reader in) {
  const capnp::DynamicStruct::Reader dynamic = capnp::toDynamic(in);
  window_report r;
  for (const auto& field : window_report_fields())
    std::visit([&](auto member) { get_field(dynamic, field.schema_name, r.*member); }, field.member);
  return r;
}

}  // namespace

std::string encode_metrics_batch(const metrics_batch& batch) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::MetricsBatch>();
  out.setNode(batch.node);
  out.setGeneration(batch.generation);
  out.setSequence(batch.sequence);
  out.setUnixSeconds(batch.unix_seconds);
  out.setResidentBytes(batch.resident_bytes);
  out.setDropped(batch.dropped);
  out.setFinal(batch.final);
  out.setWrittenThrough(batch.written_through);
  out.setResent(batch.resent);
  auto windows = out.initWindows(static_cast<unsigned>(batch.windows.size()));
  for (unsigned i = 0; i < windows.size(); ++i) write_window(windows[i], batch.windows[i]);
  auto checkpoints = out.initCheckpoints(static_cast<unsigned>(batch.checkpoints.size()));
  for (unsigned i = 0; i < checkpoints.size(); ++i) {
    const auto& c = batch.checkpoints[i];
    checkpoints[i].setStep(c.step);
    checkpoints[i].setUnixSeconds(c.unix_seconds);
    checkpoints[i].setSeconds(c.seconds);
    checkpoints[i].setBytes(c.bytes);
    checkpoints[i].setSkipped(c.skipped);
  }
  auto log = out.initLog(static_cast<unsigned>(batch.log.size()));
  for (unsigned i = 0; i < log.size(); ++i) {
    log[i].setUnixSeconds(batch.log[i].unix_seconds);
    log[i].setLevel(batch.log[i].level);
    log[i].setText(batch.log[i].text);
  }
  auto links = out.initLinks(static_cast<unsigned>(batch.links.size()));
  for (unsigned i = 0; i < links.size(); ++i) {
    const auto& link = batch.links[i];
    links[i].setRing(link.ring);
    links[i].setRank(link.rank);
    links[i].setPeer(link.peer);
    links[i].setTransport(link.transport);
    links[i].setDevice(link.device);
  }
  auto heartbeats = out.initHeartbeats();
  heartbeats.setCount(batch.heartbeats.count);
  heartbeats.setP50Ms(batch.heartbeats.p50_ms);
  heartbeats.setP99Ms(batch.heartbeats.p99_ms);
  heartbeats.setMaxMs(batch.heartbeats.max_ms);
  return flat_message_bytes<std::string>(message);
}

metrics_batch decode_metrics_batch(const std::string& bytes) {
  return read_flat_message<schema::MetricsBatch>(bytes.data(), bytes.size(), batch_limits(), "MetricsBatch",
                                                 [](schema::MetricsBatch::Reader in) {
    metrics_batch batch;
    batch.node = in.getNode();
    batch.generation = in.getGeneration();
    batch.sequence = in.getSequence();
    batch.unix_seconds = in.getUnixSeconds();
    batch.resident_bytes = in.getResidentBytes();
    batch.dropped = in.getDropped();
    batch.final = in.getFinal();
    batch.written_through = in.getWrittenThrough();
    batch.resent = in.getResent();
    check_count("windows", in.getWindows().size(), max_windows);
    check_count("checkpoints", in.getCheckpoints().size(), max_checkpoints);
    check_count("log", in.getLog().size(), max_log_lines);
    check_count("links", in.getLinks().size(), max_links);
    for (auto window : in.getWindows()) batch.windows.push_back(read_window(window));
    for (auto c : in.getCheckpoints())
      batch.checkpoints.push_back({c.getStep(), c.getUnixSeconds(), c.getSeconds(), c.getBytes(), c.getSkipped()});
    for (auto line : in.getLog()) batch.log.push_back({line.getUnixSeconds(), line.getLevel(), line.getText()});
    for (auto link : in.getLinks())
      batch.links.push_back({link.getRing(), link.getRank(), link.getPeer(), link.getTransport(), link.getDevice()});
    const auto heartbeats = in.getHeartbeats();
    batch.heartbeats = {heartbeats.getCount(), heartbeats.getP50Ms(), heartbeats.getP99Ms(), heartbeats.getMaxMs()};
    for (const double ms : {batch.heartbeats.p50_ms, batch.heartbeats.p99_ms, batch.heartbeats.max_ms})
      if (!(ms >= 0 && ms <= 3.6e6))  // NaN too
        throw make_error("MetricsBatch: heartbeats: expected round trips in [0, 3600000] ms, got ", ms);
    return batch;
  });
}

}  // namespace troupe::messages
