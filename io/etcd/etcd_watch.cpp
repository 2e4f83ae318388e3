#include "io/etcd/etcd_watch.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "io/etcd/etcd_json.hpp"

namespace troupe::io {
namespace {

using json = nlohmann::json;
using clock = std::chrono::steady_clock;

/// Reads the watch's stream a line (one message) at a time; each line tells whether the wait
/// is over.
class watch_stream {
 public:
  explicit watch_stream(clock::time_point deadline) : deadline_(deadline) {}

  /// Takes the next bytes; false once the wait is over (a change, a cancel, an error, or the
  /// deadline), which ends the request.
  bool take(const char* data, std::size_t length) {
    pending_.append(data, length);
    for (auto end = pending_.find('\n'); end != std::string::npos; end = pending_.find('\n')) {
      const auto message = json::parse(pending_.substr(0, end), nullptr, false);
      pending_.erase(0, end + 1);
      try {
        if (!read(message)) return false;
      } catch (const std::exception&) {  // a field of the wrong type, a key not in base64
        failed_ = true;
        return false;
      }
    }
    if (clock::now() < deadline_) return true;
    timed_out_ = true;
    return false;
  }

  bool created() const { return created_; }
  bool changed() const { return changed_; }
  /// etcd said the stream failed, or sent what could not be read.
  bool failed() const { return failed_; }
  /// Ended by the deadline, seen as bytes arrived.
  bool timed_out() const { return timed_out_; }
  const etcd_key_event& event() const { return event_; }

 private:
  bool read(const json& message) {
    if (message.is_discarded() || !message.is_object()) return true;
    if (message.contains("error")) {
      failed_ = true;
      return false;
    }
    const auto result = message.value("result", json::object());
    if (result.value("created", false)) created_ = true;
    if (result.value("canceled", false)) {
      // Its revision compacted away is news too (the caller reads the key again); any other
      // reason is a failure of this endpoint's watch.
      if (etcd_number_field(result, "compact_revision") == 0) {
        failed_ = true;
        return false;
      }
      event_.what = etcd_key_event::kind::compacted;
      changed_ = created_ = true;
      return false;
    }
    const auto events = result.value("events", json::array());
    if (events.empty()) return true;
    const auto& first = events[0];
    event_.what = first.value("type", "PUT") == "DELETE" ? etcd_key_event::kind::deleted : etcd_key_event::kind::put;
    event_.key = etcd_key_value_of(first.value("kv", json::object()));
    changed_ = created_ = true;
    return false;
  }

  clock::time_point deadline_;
  std::string pending_;
  bool created_ = false;
  bool changed_ = false;
  bool failed_ = false;
  bool timed_out_ = false;
  etcd_key_event event_;
};

}  // namespace

watch_result watch_key(const std::string& endpoint, const std::string& key, int64_t from, bool writes_only,
                       std::chrono::milliseconds timeout, std::chrono::milliseconds connect_timeout) {
  httplib::Client client(endpoint);
  if (!client.is_valid()) return {watch_outcome::unreachable, {}};
  client.set_connection_timeout(connect_timeout);
  // A read waits at most this long for the next message: a quiet key ends the request here.
  client.set_read_timeout(timeout);
  client.set_tcp_nodelay(true);
  json create = {{"key", etcd_base64(key)}};
  if (from > 0) create["start_revision"] = std::to_string(from);
  if (writes_only) create["filters"] = json::array({"NODELETE"});

  watch_stream stream(clock::now() + timeout);
  httplib::Request request;
  request.method = "POST";
  request.path = "/v3/watch";
  request.headers = {{"Connection", "close"}};
  request.body = json{{"create_request", create}}.dump();
  request.set_header("Content-Type", "application/json");
  request.content_receiver = [&](const char* data, std::size_t length, uint64_t, uint64_t) {
    return stream.take(data, length);
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  client.send(request, response, error);
  if (stream.changed()) return {watch_outcome::changed, stream.event()};
  // Quiet only when the wait ran its time on a made watcher: a read timed out, or the deadline
  // passed as bytes came. A stream etcd ended or failed early is as good as no answer, so that
  // the caller tries another endpoint or pauses, rather than watching again at once.
  const bool ran_its_time = stream.timed_out() || error == httplib::Error::Read;
  return {stream.created() && !stream.failed() && ran_its_time ? watch_outcome::quiet : watch_outcome::unreachable,
          {}};
}

}  // namespace troupe::io
