#include "actors/followed_head_watch.hpp"

#include <caf/actor_control_block.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/make_message.hpp>
#include <caf/sec.hpp>
#include <spdlog/spdlog.h>

#include "cluster/head_lease.hpp"

namespace troupe::actors {

followed_head_watch::followed_head_watch(followed_head_watch_settings settings, caf::strong_actor_ptr waiter,
                                         caf::message_id request)
    : settings_(std::move(settings)), waiter_(std::move(waiter)), request_(request) {
  thread_ = std::thread([this] { watch(); });
}

followed_head_watch::~followed_head_watch() { stop(); }

void followed_head_watch::stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  stopping_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string followed_head_watch::moved() const {
  std::lock_guard lock(mutex_);
  return moved_;
}

void followed_head_watch::watch() {
  io::etcd_client etcd(settings_.etcd);
  std::unique_lock lock(mutex_);
  while (!stopping_.wait_for(lock, settings_.period, [this] { return stopped_; })) {
    lock.unlock();
    std::string moved;
    try {
      const auto term = cluster::current_head(etcd, settings_.head_key);
      if (!term)
        moved = "the head it joined lost its role (no node holds it now)";
      else if (term->revision != settings_.followed_term)
        moved = "the head it joined lost its role (etcd names another holder, term " +
                std::to_string(term->revision) + ")";
    } catch (const io::etcd_unavailable& e) {
      spdlog::debug("followed head watch: {}", e.what());  // asked again after the period
    }
    lock.lock();
    if (moved.empty() || stopped_) continue;
    // The error CAF delivers when a request's receiver is gone, as the response to the request
    // (a request's handle holds its response's id): the waiting receive takes it and returns.
    moved_ = moved;
    waiter_->enqueue(caf::make_mailbox_element(nullptr, request_, {},
                                               caf::make_error(caf::sec::request_receiver_down)),
                     nullptr);
    return;
  }
}

}  // namespace troupe::actors
