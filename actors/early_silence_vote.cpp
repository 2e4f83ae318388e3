#include "actors/early_silence_vote.hpp"

#include <spdlog/spdlog.h>

#include <utility>

#include "cluster/head_silence.hpp"

namespace troupe::actors {

early_silence_vote::early_silence_vote(cluster::head_record_keys keys, std::string node, int64_t lease_s)
    : keys_(std::move(keys)), node_(std::move(node)), lease_s_(lease_s) {}

void early_silence_vote::plan_taken(const std::string& head, int64_t term, std::optional<bool> elector,
                                    io::etcd_settings etcd) {
  const std::lock_guard lock(mutex_);
  head_ = head;
  term_ = term;
  elector_ = elector;
  etcd_ = std::move(etcd);
}

std::optional<bool> early_silence_vote::elector_by_plan(const std::string& head) {
  const std::lock_guard lock(mutex_);
  return head_ == head ? elector_ : std::nullopt;
}

void early_silence_vote::cast(const std::string& head) noexcept {
  int64_t term = 0;
  io::etcd_settings settings;
  {
    const std::lock_guard lock(mutex_);
    if (elector_ != true || head_ != head || term_ <= 0) return;
    term = term_;
    settings = etcd_;
  }
  try {
    io::etcd_client etcd(settings);
    cluster::silence_ballot(keys_, term, head, node_, lease_s_, true).majority(etcd);
    spdlog::info("node {}: voted node {}'s term {} silent in etcd", node_, head, term);
  } catch (const std::exception& e) {
    spdlog::warn("node {}: its vote on node {}'s silence failed ({}); it votes again as it follows the role", node_,
                 head, e.what());
  }
}

}  // namespace troupe::actors
