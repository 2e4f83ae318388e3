#include "cluster/head_lease.hpp"

#include <spdlog/spdlog.h>

namespace troupe::cluster {
namespace {

using clock = std::chrono::steady_clock;

std::chrono::milliseconds seconds_ms(int64_t seconds) { return std::chrono::milliseconds(seconds * 1000); }

}  // namespace

std::optional<head_term> current_head(io::etcd_client& etcd, const std::string& key) {
  const auto found = etcd.get(key);
  if (!found) return std::nullopt;
  return head_term{found->create_revision, found->value, found->lease};
}

std::unique_ptr<head_lease> head_lease::try_take(const head_lease_settings& settings, lost_callback lost,
                                                 head_term* current) {
  io::etcd_client etcd(settings.etcd);
  const auto asked_at = clock::now();  // the lease runs from after this on etcd's side
  const auto lease = etcd.grant_lease(settings.ttl_seconds);
  const auto result = etcd.create(settings.key, settings.holder, lease.id, settings.on_take);
  if (!result.created) {
    try {
      etcd.revoke_lease(lease.id);  // unused; it would expire on its own
    } catch (const std::exception& failure) {
      spdlog::debug("head lease: unused lease {} not revoked: {}", lease.id, failure.what());
    }
    if (current) *current = head_term{result.current.create_revision, result.current.value, result.current.lease};
    return nullptr;
  }
  const head_term term{result.current.create_revision, settings.holder, lease.id, result.previous_record};
  return std::unique_ptr<head_lease>(new head_lease(settings, term, lease.ttl_seconds, asked_at, std::move(lost)));
}

head_lease::head_lease(const head_lease_settings& settings, head_term term, int64_t ttl_seconds,
                       clock::time_point granted_at, lost_callback lost)
    : settings_(settings),
      term_(std::move(term)),
      ttl_seconds_(ttl_seconds),
      lost_(std::move(lost)),
      deadline_(granted_at + seconds_ms(ttl_seconds)) {
  keeper_ = std::thread([this] { keep_alive_loop(); });
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

head_lease::~head_lease() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  keeper_.join();
  watchdog_.join();
  if (!held()) return;
  try {
    io::etcd_client(settings_.etcd).revoke_lease(term_.lease);
  } catch (const std::exception& failure) {
    spdlog::warn("head lease: could not hand the role back (lease {} runs out in {} s): {}", term_.lease,
                 ttl_seconds_, failure.what());
  }
}

bool head_lease::held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !lost_already_;
}

clock::time_point head_lease::deadline() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return deadline_;
}

void head_lease::keep_alive_loop() {
  io::etcd_client etcd(settings_.etcd);
  const auto period = seconds_ms(ttl_seconds_) / 3;
  auto wait = period;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (changed_.wait_for(lock, wait, [this] { return stopping_ || lost_already_; })) return;
    }
    const auto sent_at = clock::now();
    try {
      const auto left = etcd.keep_alive(term_.lease);
      if (left <= 0) {
        lose("etcd says its lease " + std::to_string(term_.lease) + " is gone");
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        deadline_ = std::max(deadline_, sent_at + seconds_ms(left));
      }
      changed_.notify_all();
      wait = period;
    } catch (const std::exception& failure) {
      spdlog::warn("head lease: keep-alive failed ({}); the role is held {} ms more without one", failure.what(),
                   std::chrono::duration_cast<std::chrono::milliseconds>(deadline() - settings_.margin - clock::now()).count());
      wait = std::chrono::milliseconds(100);
    }
  }
}

void head_lease::watchdog_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    const auto fence_at = deadline_ - settings_.margin;
    changed_.wait_until(lock, fence_at, [&] { return stopping_ || lost_already_ || deadline_ - settings_.margin != fence_at; });
    if (stopping_ || lost_already_) return;
    if (clock::now() >= deadline_ - settings_.margin) {
      lock.unlock();
      lose("no keep-alive reached etcd in time: the lease may run out in " +
           std::to_string(settings_.margin.count()) + " ms");
      return;
    }
  }
}

void head_lease::lose(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_already_) return;
    lost_already_ = true;
  }
  changed_.notify_all();
  if (lost_) lost_(why);
}

}  // namespace troupe::cluster
