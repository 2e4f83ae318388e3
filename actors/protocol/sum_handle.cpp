#include "actors/protocol/sum_handle.hpp"

#include <caf/all.hpp>

#include <condition_variable>
#include <mutex>
#include <optional>

#include "messages/atoms.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {

/// One sum's answer, written once by the reducer's thread and read by the worker's.
struct sum_slot {
  std::mutex mutex;
  std::condition_variable answered;
  std::optional<reduce_result> result;
  caf::error failure;
  bool done = false;

  void settle(std::optional<reduce_result> value, caf::error error) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (done) return;
      result = std::move(value);
      failure = std::move(error);
      done = true;
    }
    answered.notify_all();
  }
};

sum_failed::sum_failed(caf::error error) : std::runtime_error("a reducer's sum failed"), error_(std::move(error)) {}

sum_completion::sum_completion(std::shared_ptr<sum_slot> slot) : slot_(std::move(slot)) {}

sum_completion::~sum_completion() {
  slot_->settle(std::nullopt, messages::make_error(messages::errc::collective_failed,
                                                   "the reducer ended before answering"));
}

void sum_completion::deliver(const reduce_result& result) { slot_->settle(result, caf::error{}); }

void sum_completion::fail(caf::error error) { slot_->settle(std::nullopt, std::move(error)); }

sum_handle::sum_handle(std::shared_ptr<sum_slot> slot) : slot_(std::move(slot)) {}

bool sum_handle::ready() const {
  if (!slot_) return true;
  std::lock_guard<std::mutex> lock(slot_->mutex);
  return slot_->done;
}

reduce_result sum_handle::wait(std::chrono::seconds backstop, const std::string& awaited) const {
  if (!slot_) return {};
  std::unique_lock<std::mutex> lock(slot_->mutex);
  if (!slot_->answered.wait_for(lock, backstop, [this] { return slot_->done; }))
    throw sum_failed(messages::make_error(messages::errc::timed_out, awaited + " did not answer within " +
                                                                         std::to_string(backstop.count()) + " s"));
  if (!slot_->result) throw sum_failed(slot_->failure);
  return *slot_->result;
}

sum_handle start_sum(const caf::actor& reducer, reduce_request request) {
  auto slot = std::make_shared<sum_slot>();
  request.completion = std::make_shared<sum_completion>(slot);
  caf::anon_send(reducer, messages::reduce_atom::value, std::move(request));
  return sum_handle(std::move(slot));
}

}  // namespace troupe::actors
