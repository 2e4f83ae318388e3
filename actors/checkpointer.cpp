#include "actors/checkpointer.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "messages/atoms.hpp"
#include "messages/error_code.hpp"
#include "messages/training_messages.hpp"

namespace troupe::actors {

caf::behavior checkpointer(caf::event_based_actor*, std::filesystem::path run_dir, fault_trigger faults) {
  return {
      [=](messages::save_atom, const messages::checkpoint_request& request) -> caf::result<std::string> {
        try {
          auto dir = io::save_checkpoint(run_dir, request.contents, request.keep,
                                         faults.checkpoint_faults(request.contents.state.optimizer_steps));
          spdlog::debug("checkpoint written: {}", dir.string());
          return dir.string();
        } catch (const std::exception& e) {
          return messages::make_error(messages::errc::checkpoint_failed, e.what());
        }
      },
      // Answered once every save queued before it is written (mailbox order).
      [](messages::flush_atom) { return caf::unit; },
  };
}

}  // namespace troupe::actors
