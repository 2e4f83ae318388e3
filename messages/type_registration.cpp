#include "messages/type_registration.hpp"

#include "messages/error_code.hpp"

namespace troupe::messages {

void register_types(caf::actor_system_config& config) {
  config.add_error_category(caf::atom("troupe"), [](uint8_t code, caf::atom_value, const caf::message& context) {
    std::string text = "troupe " + to_string(static_cast<errc>(code));
    if (context.match_elements<std::string>()) text += ": " + context.get_as<std::string>(0);
    return text;
  });
}

}  // namespace troupe::messages
