#include "actors/warning_log.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <deque>
#include <mutex>

#include "actors/event_log.hpp"

namespace troupe::actors {

struct warning_log::lines {
  std::mutex mutex;
  std::deque<messages::log_line> kept;
};

std::shared_ptr<warning_log::lines> warning_log::make_lines() { return std::make_shared<lines>(); }

namespace {

/// Installed once; each attach() points it at the log of the moment (under base_sink's mutex).
class warning_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  warning_sink() { set_level(spdlog::level::warn); }
  void point_at(std::weak_ptr<warning_log> log) {
    std::lock_guard lock(mutex_);
    log_ = std::move(log);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    if (message.level < spdlog::level::warn) return;
    auto log = log_.lock();
    if (!log) return;
    const auto level = spdlog::level::to_string_view(message.level);
    log->add({unix_seconds(), std::string(level.data(), level.size()),
              std::string(message.payload.data(), message.payload.size())});
  }
  void flush_() override {}

 private:
  std::weak_ptr<warning_log> log_;
};

/// The process's one sink (spdlog's default logger is process-wide).
std::shared_ptr<warning_sink> installed_sink() {
  static const auto sink = [] {
    auto made = std::make_shared<warning_sink>();
    spdlog::default_logger()->sinks().push_back(made);
    return made;
  }();
  return sink;
}

}  // namespace

void warning_log::install() { installed_sink(); }

std::shared_ptr<warning_log> warning_log::attach() {
  static std::mutex attaching;
  static std::weak_ptr<warning_log> attached;
  std::lock_guard lock(attaching);
  if (auto log = attached.lock()) return log;
  auto log = std::make_shared<warning_log>();
  installed_sink()->point_at(log);
  attached = log;
  return log;
}

void warning_log::add(messages::log_line line) {
  std::lock_guard lock(lines_->mutex);
  lines_->kept.push_back(std::move(line));
  if (lines_->kept.size() > 100) lines_->kept.pop_front();
}

std::vector<messages::log_line> warning_log::take() {
  std::lock_guard lock(lines_->mutex);
  std::vector<messages::log_line> taken(lines_->kept.begin(), lines_->kept.end());
  lines_->kept.clear();
  return taken;
}

}  // namespace troupe::actors
