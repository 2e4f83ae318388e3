#include "io/config/sync_block.hpp"

namespace troupe::io {
namespace {

void parse_outer_optimizer(json_fields& fields, compute::diloco_config& diloco) {
  diloco.nesterov = fields.choice("type", "nesterov", {"nesterov", "sgd"}) == "nesterov";
  auto params = fields.object("params");
  diloco.outer_lr = params.number("lr", diloco.outer_lr, 0.0, 100.0);
  if (diloco.outer_lr <= 0.0) params.fail("lr", "a positive learning rate");
  diloco.outer_momentum = params.number("momentum", diloco.outer_momentum, 0.0, 0.999999);
  params.finish();
  fields.finish();
}

}  // namespace

compute::sync_config parse_sync(json_fields& fields) {
  compute::sync_config sync;
  sync.mode = fields.choice("mode", "window", {"window", "diloco"}) == "diloco" ? compute::sync_mode::diloco
                                                                              : compute::sync_mode::window;
  if (!sync.diloco_mode()) {
    fields.finish();  // window mode takes no other key
    return sync;
  }
  auto& diloco = sync.diloco;
  diloco.inner_steps = fields.integer("inner_steps", diloco.inner_steps, 1, int64_t{1} << 30);
  auto outer = fields.object("outer_optimizer");
  parse_outer_optimizer(outer, diloco);
  diloco.communication_data_type = fields.choice("communication_data_type", "fp32", {"fp32", "bf16", "fp16", "int8"});
  diloco.fragments = fields.integer("fragments", 1, 1, 1024);
  if (diloco.inner_steps % diloco.fragments != 0)
    fields.fail("fragments", "a divisor of inner_steps (" + std::to_string(diloco.inner_steps) +
                                 "): the fragments are synchronised inner_steps / fragments steps apart");
  const int64_t spacing = diloco.inner_steps / diloco.fragments;
  diloco.overlap_steps = fields.integer("overlap_steps", 0, 0, int64_t{1} << 30);
  if (diloco.overlap_steps >= spacing)
    fields.fail("overlap_steps", "less than inner_steps / fragments (" + std::to_string(spacing) +
                                     "): one fragment's exchange lands before the next one's starts");
  diloco.fragment_update_alpha = fields.number("fragment_update_alpha", 0.0, 0.0, 1.0);
  fields.finish();
  return sync;
}

}  // namespace troupe::io
