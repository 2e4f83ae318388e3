#include "actors/indirect_probes.hpp"

#include <caf/all.hpp>

#include "io/comm/link_probe.hpp"
#include "messages/atoms.hpp"

namespace troupe::actors {

caf::behavior one_probe(caf::event_based_actor* self, std::uint64_t token, io::probe_outcome counted) {
  return {[self, token, counted](messages::probe_atom, const std::string& host, int32_t port, int64_t budget_ms) {
    self->quit();
    return port > 0 && port < 65536 &&
           io::probe_host(host, static_cast<std::uint16_t>(port), token, std::chrono::milliseconds(budget_ms),
                          std::chrono::milliseconds(50)) == counted;
  }};
}

caf::behavior probe_agent(caf::event_based_actor* self, probe_agent_settings settings) {
  self->send(settings.coordinator, messages::prober_atom::value, settings.node, settings.incarnation);
  return {[self, token = settings.token](messages::probe_atom probe, const std::string& host, int32_t port,
                                         int64_t budget_ms) {
    auto prober = self->spawn<caf::detached>(one_probe, token, io::probe_outcome::answered);
    return self->delegate(prober, probe, host, port, budget_ms);
  }};
}

}  // namespace troupe::actors
