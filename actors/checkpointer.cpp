#include "actors/checkpointer.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "actors/event_log.hpp"
#include "messages/atoms.hpp"
#include "messages/error_code.hpp"
#include "actors/protocol/checkpoint_request.hpp"
#include "actors/protocol/reports.hpp"

namespace troupe::actors {
caf::behavior checkpointer(caf::event_based_actor* self, std::filesystem::path run_dir, fault_trigger faults,
                           caf::actor metrics) {
  auto first_failure = std::make_shared<caf::error>();
  return {
      [=](messages::save_atom, const checkpoint_request& request) -> caf::result<std::string> {
        try {
          const auto started = std::chrono::steady_clock::now();
          const auto step = request.contents.state.optimizer_steps;
          auto dir = io::save_checkpoint(run_dir, request.contents, request.keep, faults.checkpoint_faults(step));
          spdlog::debug("checkpoint written: {}", dir.string());
          if (metrics) {
            messages::checkpoint_report report;
            report.step = step;
            report.unix_seconds = unix_seconds();
            report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
            report.bytes = static_cast<int64_t>(io::checkpoint_directory_bytes(dir));
            self->send(metrics, messages::saved_atom::value, report);
          }
          return dir.string();
        } catch (const std::exception& e) {
          auto failure = messages::make_error(messages::errc::checkpoint_failed, e.what());
          if (!*first_failure) *first_failure = failure;
          return failure;
        }
      },
      // Answered once every save queued before it is written (mailbox order).
      [=](messages::flush_atom) -> caf::result<void> {
        if (*first_failure) return *first_failure;
        return caf::unit;
      },
  };
}

}  // namespace troupe::actors
