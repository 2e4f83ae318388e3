#include "io/etcd/etcd_client.hpp"

#include <openssl/evp.h>

#include <algorithm>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "io/etcd/etcd_json.hpp"
#include "io/etcd/etcd_watch.hpp"

namespace troupe::io {
namespace {

using json = nlohmann::json;

/// The first key of a range response, if any.
std::optional<etcd_key_value> first_of(const json& range) {
  if (!range.contains("kvs") || range["kvs"].empty()) return std::nullopt;
  return etcd_key_value_of(range["kvs"][0]);
}

/// Every key of a range answer, appended to `into`.
void append_all(const json& range, std::vector<etcd_key_value>& into) {
  for (const auto& kv : range.value("kvs", json::array())) into.push_back(etcd_key_value_of(kv));
}

/// The key just past every key starting with `prefix` (etcd's range end for a prefix).
std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = prefix.back();
    if (static_cast<unsigned char>(last) < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

/// A transaction's comparison: `key`'s create revision is `revision` (0: the key does not exist).
json create_revision_is(const std::string& key, int64_t revision) {
  return {{"key", etcd_base64(key)}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", std::to_string(revision)}};
}

json put_operation(const std::string& key, const std::string& value, int64_t lease) {
  json put = {{"key", etcd_base64(key)}, {"value", etcd_base64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  return {{"request_put", put}};
}

json range_operation(const std::string& key) { return {{"request_range", {{"key", etcd_base64(key)}}}}; }

json prefix_range_operation(const std::string& prefix) {
  return {{"request_range", {{"key", etcd_base64(prefix)}, {"range_end", etcd_base64(prefix_end(prefix))}}}};
}

/// gRPC codes after which another endpoint may answer: unavailable (no leader, stopping),
/// deadline exceeded (a minority member's request timed out), unknown (etcdserver's
/// "request timed out" and "leader changed").
bool worth_another_endpoint(int64_t code) { return code == 14 || code == 4 || code == 2; }

/// A call that took this long is told in the node's log, with each endpoint's share: the
/// head's role waits on such calls when it moves (docs/faults.md#head-failover).
constexpr std::chrono::milliseconds slow_call{250};

/// Milliseconds since `start`.
int64_t ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string etcd_base64(const std::string& bytes) {
  std::string text(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int length = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                                     reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  text.resize(static_cast<std::size_t>(length));
  return text;
}

std::string etcd_unbase64(const std::string& text, const std::string& what) {
  if (text.size() % 4 != 0) throw make_error(what, " is not base64: ", text.size(), " characters, not a multiple of 4");
  std::string bytes(text.size() / 4 * 3, '\0');
  const int length = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                     reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (length < 0) throw make_error(what, " is not base64");
  std::size_t padding = 0;
  for (auto it = text.rbegin(); it != text.rend() && *it == '=' && padding < 2; ++it) ++padding;
  bytes.resize(static_cast<std::size_t>(length) - padding);
  return bytes;
}

int64_t etcd_number_field(const nlohmann::json& object, const char* name) {
  if (!object.is_object() || !object.contains(name)) return 0;
  const auto& field = object[name];
  if (field.is_number_integer()) return field.get<int64_t>();
  if (field.is_string()) return std::stoll(field.get<std::string>());
  return 0;
}

etcd_key_value etcd_key_value_of(const nlohmann::json& kv) {
  etcd_key_value result;
  result.key = etcd_unbase64(kv.value("key", ""), "etcd's key");
  result.value = etcd_unbase64(kv.value("value", ""), "etcd's value of " + result.key);
  result.create_revision = etcd_number_field(kv, "create_revision");
  result.mod_revision = etcd_number_field(kv, "mod_revision");
  result.lease = etcd_number_field(kv, "lease");
  return result;
}

/// One keep-alive HTTP connection per endpoint; the one that answered last is tried first.
struct etcd_client::connections {
  etcd_settings settings;
  std::vector<std::unique_ptr<httplib::Client>> clients;
  std::size_t current = 0;
  std::string answered;
  int64_t revision = 0;  ///< the store's revision in the last answer's header

  explicit connections(etcd_settings s) : settings(std::move(s)) {
    if (settings.endpoints.empty()) throw make_error("etcd: no endpoints (failover.etcd lists none)");
    for (const auto& endpoint : settings.endpoints) {
      const bool url = endpoint.rfind("http://", 0) == 0 || endpoint.rfind("https://", 0) == 0;
      auto client = url ? std::make_unique<httplib::Client>(endpoint) : nullptr;
      if (!client || !client->is_valid())
        throw make_error("etcd: endpoint '", endpoint, "' is not a URL (expected http://host:port)");
      // A connection within a cluster takes well under this; a member on a host cut off answers
      // no SYN, and the next endpoint should not wait the whole request timeout for it.
      client->set_connection_timeout(std::min(settings.request_timeout, std::chrono::milliseconds(200)));
      client->set_read_timeout(settings.request_timeout);
      client->set_write_timeout(settings.request_timeout);
      client->set_keep_alive(true);
      // A request's headers and body go out in two writes: with Nagle's algorithm the body
      // waits for etcd's delayed acknowledgement of the headers on a reused connection (about
      // 40 ms on Linux), which made every request after a connection's first take ~50 ms.
      client->set_tcp_nodelay(true);
      clients.push_back(std::move(client));
    }
  }

  /// POSTs `body` to `path` at each endpoint in turn until one answers; the answer's JSON.
  /// An error etcd gives for the request itself (not its own availability) is thrown as it is.
  /// `close_after`: the connection is not reused (etcd's gateway serves a keep-alive as a
  /// stream, and a request sent after it on the same connection went unanswered).
  /// `stop_at_unreadable`: an endpoint whose answer could not be read (etcd's errors come with
  /// HTTP trailers, which cpp-httplib 0.11 cannot read) ends the tries: {"troupe_unreadable": …},
  /// that endpoint first from now on.
  json post(const std::string& path, const json& body, bool close_after = false, bool stop_at_unreadable = false) {
    const auto text = body.dump();
    const auto started = std::chrono::steady_clock::now();
    std::string failures;
    for (std::size_t attempt = 0; attempt < clients.size(); ++attempt) {
      const auto index = (current + attempt) % clients.size();
      const auto& endpoint = settings.endpoints[index];
      const httplib::Headers headers = close_after ? httplib::Headers{{"Connection", "close"}} : httplib::Headers{};
      const auto tried = std::chrono::steady_clock::now();
      auto response = clients[index]->Post(path, headers, text, "application/json");
      if (!response && stop_at_unreadable && response.error() == httplib::Error::Read) {
        current = index;
        tell_if_slow(path, started, endpoint + " unreadable", failures);
        return {{"troupe_unreadable", endpoint}};
      }
      if (!response) {
        failures += " " + endpoint + ": " + httplib::to_string(response.error()) + " after " +
                    std::to_string(ms_since(tried)) + " ms;";
        continue;
      }
      auto answer = json::parse(response->body, nullptr, false);
      if (answer.is_discarded())
        throw make_error("etcd at ", endpoint, " answered ", path, " with HTTP ", response->status, " and no JSON");
      // A stream's error (keep-alive) comes as {"error": {"grpc_code": …, "message": …}}.
      if (answer.contains("error") && answer["error"].is_object()) {
        const auto& nested = answer["error"];
        answer["code"] = etcd_number_field(nested, "grpc_code");
        answer["message"] = nested.value("message", std::string("no message"));
      }
      if (response->status != 200 || answer.contains("code")) {
        const auto code = etcd_number_field(answer, "code");
        const auto message = answer.value("message", answer.value("error", std::string("no message")));
        if (worth_another_endpoint(code)) {
          failures += " " + endpoint + ": " + message + ";";
          continue;
        }
        answer["troupe_error"] = {{"code", code}, {"message", message}, {"endpoint", endpoint}};
      }
      current = index;
      answered = endpoint;
      if (answer.contains("header")) revision = std::max(revision, etcd_number_field(answer["header"], "revision"));
      tell_if_slow(path, started, endpoint, failures);
      return answer;
    }
    throw etcd_unavailable("etcd: no endpoint answered " + path + " within " +
                           std::to_string(settings.request_timeout.count()) + " ms:" + failures);
  }

  /// A call that took `slow_call` or more, in the log: who answered, and what each endpoint tried before cost.
  static void tell_if_slow(const std::string& path, std::chrono::steady_clock::time_point started,
                           const std::string& answered_by, const std::string& failures) {
    const auto took = ms_since(started);
    if (took < slow_call.count()) return;
    spdlog::info("etcd: {} took {} ms, answered by {}{}", path, took, answered_by,
                 failures.empty() ? "" : " (before:" + failures + ")");
  }

  /// As post(), throwing any error etcd gave.
  json post_ok(const std::string& path, const json& body) { return refused_or(post(path, body), path); }

  /// `answer`, unless it is an error etcd gave to `path`: that is thrown.
  static json refused_or(json answer, const std::string& path) {
    if (answer.contains("troupe_error")) {
      const auto& failure = answer["troupe_error"];
      throw make_error("etcd at ", failure["endpoint"].get<std::string>(), " refused ", path, ": ",
                       failure["message"].get<std::string>());
    }
    return answer;
  }
};

etcd_client::etcd_client(etcd_settings settings) : connections_(std::make_unique<connections>(std::move(settings))) {}
etcd_client::~etcd_client() = default;

const std::string& etcd_client::endpoint() const { return connections_->answered; }

int64_t etcd_client::revision() const { return connections_->revision; }

std::optional<etcd_key_event> etcd_client::next_change(const std::string& key, int64_t from,
                                                      std::chrono::milliseconds timeout, changes reported) {
  auto& c = *connections_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (std::size_t attempt = 0; attempt < c.settings.endpoints.size(); ++attempt) {
    const auto index = (c.current + attempt) % c.settings.endpoints.size();
    // Every endpoint tried shares the one timeout.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds(0)) break;
    const auto connect_timeout = std::min({c.settings.request_timeout, std::chrono::milliseconds(200), left});
    auto watched = watch_key(c.settings.endpoints[index], key, from, reported == changes::writes_only, left,
                             connect_timeout);
    if (watched.outcome == watch_outcome::unreachable) continue;
    c.current = index;
    if (watched.outcome == watch_outcome::quiet) return std::nullopt;
    return std::move(watched.event);
  }
  throw etcd_unavailable("etcd: no endpoint would watch " + key);
}

etcd_lease etcd_client::grant_lease(int64_t ttl_seconds) {
  const auto answer = connections_->post_ok("/v3/lease/grant", {{"TTL", std::to_string(ttl_seconds)}});
  etcd_lease lease{etcd_number_field(answer, "ID"), etcd_number_field(answer, "TTL")};
  if (lease.id == 0 || lease.ttl_seconds <= 0)
    throw make_error("etcd at ", endpoint(), " granted no lease: ", answer.value("error", answer.dump()));
  return lease;
}

int64_t etcd_client::keep_alive(int64_t lease) {
  // A stream in gRPC; the gateway answers one request with one message: {"result": {...}}.
  const auto answer = connections_->post("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}, true);
  if (answer.contains("troupe_error")) {
    if (etcd_number_field(answer["troupe_error"], "code") == 5) return 0;  // not found: gone
    throw etcd_unavailable("etcd at " + endpoint() + " did not keep lease " + std::to_string(lease) +
                           " alive: " + answer["troupe_error"]["message"].get<std::string>());
  }
  // An expired lease is answered with a result whose TTL is left out (0).
  if (!answer.contains("result"))
    throw etcd_unavailable("etcd at " + endpoint() + " answered a keep-alive without a result: " + answer.dump());
  return etcd_number_field(answer["result"], "TTL");
}

int64_t etcd_client::time_to_live(int64_t lease) {
  const auto answer = connections_->post_ok("/v3/lease/timetolive", {{"ID", std::to_string(lease)}});
  const auto left = etcd_number_field(answer, "TTL");
  return left < 0 ? -1 : left;
}

// A lease that is gone is answered "not found" with HTTP trailers, which cpp-httplib 0.11 cannot
// read: the endpoint that answered so is asked at once whether the lease is gone, rather than
// every other endpoint first (a node that lost the race to revoke a silent head's lease would
// otherwise wait out the connection timeout of the member on the lost head's host, asked last).
void etcd_client::revoke_lease(int64_t lease) {
  const json request{{"ID", std::to_string(lease)}};
  try {
    const auto answer = connections_->post("/v3/lease/revoke", request, false, true);
    if (!answer.contains("troupe_unreadable")) {
      connections::refused_or(answer, "/v3/lease/revoke");
      return;
    }
  } catch (const etcd_unavailable&) {
    // None answered: the lease may be gone all the same.
  }
  if (time_to_live(lease) < 0) return;
  connections_->post_ok("/v3/lease/revoke", request);  // it lives: another endpoint may revoke it
}

std::optional<etcd_key_value> etcd_client::get(const std::string& key) {
  return first_of(connections_->post_ok("/v3/kv/range", {{"key", etcd_base64(key)}}));
}

std::vector<etcd_key_value> etcd_client::get_prefix(const std::string& prefix) {
  const auto answer = connections_->post_ok("/v3/kv/range", prefix_range_operation(prefix)["request_range"]);
  std::vector<etcd_key_value> found;
  append_all(answer, found);
  return found;
}

std::vector<etcd_key_value> etcd_client::get_prefixes(const std::vector<std::string>& prefixes) {
  json txn;
  txn["compare"] = json::array();  // none: the reads always run
  txn["success"] = json::array();
  for (const auto& prefix : prefixes) txn["success"].push_back(prefix_range_operation(prefix));
  const auto answer = connections_->post_ok("/v3/kv/txn", txn);
  std::vector<etcd_key_value> found;
  for (const auto& response : answer.value("responses", json::array()))
    append_all(response.value("response_range", json::object()), found);
  return found;
}

etcd_create_result etcd_client::create(const std::string& key, const std::string& value, int64_t lease,
                                       const etcd_create_extras& extras) {
  json txn;
  txn["compare"] = json::array({create_revision_is(key, 0)});
  txn["success"] = json::array({put_operation(key, value, lease)});
  if (!extras.record_key.empty()) {
    auto record = put_operation(extras.record_key, value, 0);
    record["request_put"]["prev_kv"] = true;
    txn["success"].push_back(std::move(record));
  }
  for (const auto& removed : extras.remove)
    txn["success"].push_back({{"request_delete_range", {{"key", etcd_base64(removed)}}}});
  txn["success"].push_back(range_operation(key));
  txn["failure"] = json::array({range_operation(key)});
  for (const auto& prefix : extras.read_prefixes) {
    txn["success"].push_back(prefix_range_operation(prefix));
    txn["failure"].push_back(prefix_range_operation(prefix));
  }
  const auto answer = connections_->post_ok("/v3/kv/txn", txn);
  etcd_create_result result;
  result.created = answer.value("succeeded", false);
  bool key_read = false;  // the first range is the key's, the others the prefixes'
  for (const auto& response : answer.value("responses", json::array())) {
    if (response.contains("response_range") && !key_read) {
      key_read = true;
      if (auto found = first_of(response["response_range"])) result.current = *found;
    } else if (response.contains("response_range")) {
      append_all(response["response_range"], result.read);
    }
    if (response.contains("response_put") && response["response_put"].contains("prev_kv"))
      result.previous_record = etcd_unbase64(response["response_put"]["prev_kv"].value("value", ""), "prev_kv.value");
  }
  return result;
}

bool etcd_client::put_while(const std::vector<std::pair<std::string, std::string>>& puts, const std::string& guard,
                            int64_t guard_revision) {
  json txn;
  txn["compare"] = json::array({create_revision_is(guard, guard_revision)});
  txn["success"] = json::array();
  for (const auto& [key, value] : puts) txn["success"].push_back(put_operation(key, value, 0));
  return connections_->post_ok("/v3/kv/txn", txn).value("succeeded", false);
}

bool etcd_client::remove(const std::string& key) {
  const auto answer = connections_->post_ok("/v3/kv/deleterange", {{"key", etcd_base64(key)}});
  return etcd_number_field(answer, "deleted") > 0;
}

}  // namespace troupe::io
