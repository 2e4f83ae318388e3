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
  return head_term{found->create_revision, found->value, found->lease, "", {}};
}

std::unique_ptr<head_lease> head_lease::try_take(const head_lease_settings& settings, lost_callback lost,
                                                 head_term* current) {
  io::etcd_client etcd(settings.etcd);
  const auto asked_at = clock::now();  // the lease runs from after this on etcd's side
  const auto lease = etcd.grant_lease(settings.ttl_seconds);
  const auto result = etcd.create(settings.key, settings.holder, lease.id, settings.on_take);
  if (!result.created) {
    // The lease is left unused: it runs out by itself, and revoking it would cost a node that
    // lost the race two more requests on its way to the new head.
    if (current) *current = head_term{result.current.create_revision, result.current.value, result.current.lease, ""};
    return nullptr;
  }
  const head_term term{result.current.create_revision, settings.holder, lease.id, result.previous_record, result.read};
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

void head_lease::watch_majority(std::function<bool()> hears_half, std::chrono::milliseconds confirm_within) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    majority_ = majority_watch{std::move(hears_half), confirm_within, clock::now()};
  }
  changed_.notify_all();
}

// Every third of the TTL, and at once when the watchdog asks for a confirmation.
void head_lease::keep_alive_loop() {
  io::etcd_client etcd(settings_.etcd);
  const auto period = seconds_ms(ttl_seconds_) / 3;
  auto wait = period;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const bool woken = changed_.wait_for(lock, wait, [this] {
        return stopping_ || lost_already_ || (confirmation_ && !confirmation_->sent);
      });
      if (stopping_ || lost_already_) return;
      if (woken && confirmation_) confirmation_->sent = true;  // a confirmation asked for
    }
    const auto sent_at = clock::now();
    try {
      const auto left = etcd.keep_alive(term_.lease);
      if (left <= 0) {
        lose("etcd says its lease " + std::to_string(term_.lease) + " is gone");
        return;
      }
      bool confirming = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        deadline_ = std::max(deadline_, sent_at + seconds_ms(left));
        confirming = confirmation_ && sent_at >= confirmation_->asked_at;
      }
      changed_.notify_all();
      if (confirming && !confirm_role(etcd)) return;
      wait = period;
    } catch (const std::exception& failure) {
      spdlog::warn("head lease: keep-alive failed ({}); the role is held {} ms more without one", failure.what(),
                   std::chrono::duration_cast<std::chrono::milliseconds>(deadline() - settings_.margin - clock::now()).count());
      wait = std::chrono::milliseconds(100);  // a confirmation too is tried again then
    }
  }
}

// An etcd leader cut off from its followers answers keep-alives until it steps down (etcd 3.4
// renews a lease on the leader alone, etcd issue 15247), even after the others revoked it; a
// linearizable read needs a majority of etcd's members, so it is what confirms the role.
bool head_lease::confirm_role(io::etcd_client& etcd) {
  const auto key = etcd.get(settings_.key);
  if (!key || key->create_revision != term_.revision) {
    lose("etcd says the role is no longer this term's");
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    confirmation_.reset();
    if (majority_) majority_->next_check = clock::now() + majority_->confirm_within;
  }
  changed_.notify_all();
  return true;
}

void head_lease::check_majority(std::unique_lock<std::mutex>& lock) {
  if (!majority_ || confirmation_ || clock::now() < majority_->next_check) return;
  majority_->next_check = clock::now() + majority_check_period;
  const auto hears_half = majority_->hears_half;
  lock.unlock();
  const bool heard = hears_half();
  lock.lock();
  if (heard || lost_already_ || stopping_) return;
  const auto now = clock::now();
  confirmation_ = confirmation{now, now + majority_->confirm_within};
  spdlog::warn("head lease: this head hears from fewer than half of its members; etcd must confirm its lease within {} ms",
               majority_->confirm_within.count());
  changed_.notify_all();
}

void head_lease::watchdog_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    const auto fence_at = deadline_ - settings_.margin;
    auto wake_at = fence_at;
    if (confirmation_) wake_at = std::min(wake_at, confirmation_->by);
    else if (majority_) wake_at = std::min(wake_at, majority_->next_check);
    const bool watching = majority_.has_value();
    changed_.wait_until(lock, wake_at, [&] {
      return stopping_ || lost_already_ || deadline_ - settings_.margin != fence_at || majority_.has_value() != watching;
    });
    if (stopping_ || lost_already_) return;
    const auto now = clock::now();
    std::string why;
    if (now >= deadline_ - settings_.margin) {
      why = "no keep-alive reached etcd in time: the lease may run out in " + std::to_string(settings_.margin.count()) +
            " ms";
    } else if (confirmation_ && now >= confirmation_->by) {
      why = "it hears from fewer than half of its members and etcd did not confirm its lease within " +
            std::to_string(majority_->confirm_within.count()) + " ms: this side of a network split is cut off";
    }
    if (!why.empty()) {
      lock.unlock();
      lose(why);
      return;
    }
    check_majority(lock);
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
