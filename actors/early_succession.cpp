#include "actors/early_succession.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "actors/event_log.hpp"

namespace troupe::actors {

early_succession::early_succession(cluster::succession_settings settings, take_function take,
                                   voted_silent_function on_voted_silent)
    : settings_(std::move(settings)), take_(std::move(take)), on_voted_silent_(std::move(on_voted_silent)) {}

early_succession::~early_succession() {
  std::future<outcome> under_way;
  {
    const std::lock_guard lock(mutex_);
    under_way = std::move(under_way_);
  }
  if (under_way.valid()) under_way.wait();
}

void early_succession::plan_taken(const std::string& head, int64_t term, std::optional<bool> elector,
                                  io::etcd_settings etcd) {
  const std::lock_guard lock(mutex_);
  head_ = head;
  term_ = term;
  elector_ = elector;
  etcd_ = std::move(etcd);
}

std::optional<bool> early_succession::elector_by_plan(const std::string& head) {
  const std::lock_guard lock(mutex_);
  return head_ == head ? elector_ : std::nullopt;
}

void early_succession::start(const std::string& head) noexcept {
  const std::lock_guard lock(mutex_);
  if (head_ != head || under_way_.valid()) return;
  auto settings = settings_;
  settings.lost = head;
  settings.followed_term = term_;
  settings.elector_hint = elector_;
  try {
    under_way_ = std::async(std::launch::async, [this, settings = std::move(settings), etcd = etcd_] {
      return follow(settings, etcd);
    });
    started_after_ = head;
  } catch (const std::exception& e) {  // no thread: the session follows the role itself
    spdlog::warn("node {}: could not start following the head's role at once ({})", settings_.node, e.what());
  }
}

std::optional<early_succession::outcome> early_succession::take(const std::string& head) {
  std::future<outcome> under_way;
  {
    const std::lock_guard lock(mutex_);
    if (!under_way_.valid() || started_after_ != head) return std::nullopt;
    under_way = std::move(under_way_);
  }
  return under_way.get();
}

early_succession::outcome early_succession::follow(cluster::succession_settings settings,
                                                   io::etcd_settings etcd_settings) const {
  outcome result;
  io::etcd_client etcd(etcd_settings);
  cluster::succession_callbacks callbacks;
  callbacks.try_take = [&](cluster::head_term* other) {
    // The endpoint that just answered first, for the lease's clients too.
    auto endpoints = etcd_settings;
    const auto answered = std::find(endpoints.endpoints.begin(), endpoints.endpoints.end(), etcd.endpoint());
    if (answered != endpoints.endpoints.end()) std::rotate(endpoints.endpoints.begin(), answered, answered + 1);
    result.lease = take_(endpoints, other);
    if (result.lease) result.role_taken_unix_s = unix_seconds();
    return result.lease != nullptr;
  };
  callbacks.on_voted_silent = [&](const std::string& tally) {
    if (on_voted_silent_) on_voted_silent_(settings.lost, tally);
  };
  result.result = cluster::follow_succession(etcd, settings, callbacks);
  result.etcd_answered = etcd.endpoint();
  return result;
}

}  // namespace troupe::actors
