#pragma once
/// A small checkpoint's contents (a tiny model's config, a training state, two parameter and two
/// optimizer tensors of random values), for tests that write or read checkpoints.

#include <torch/torch.h>

#include <cstdint>

#include "io/checkpoint/checkpoint_store.hpp"

namespace troupe::testing {

inline io::checkpoint_contents sample_checkpoint_contents(int64_t step) {
  io::checkpoint_contents c;
  c.model.vocab_size = 30;
  c.model.hidden_size = 8;
  c.model.num_hidden_layers = 1;
  c.model.num_attention_heads = 2;
  c.model.intermediate_size = 16;
  c.state.optimizer_steps = step;
  c.state.next_position = 1000 + static_cast<uint64_t>(step);
  c.state.seed = 42;
  c.state.dataset_size = 600;
  c.state.vocab_hash = "00112233aabbccdd";
  c.state.rng = {{"dropout/rank0", 7, 123}};
  c.state.last_lr = 1e-4;
  c.parameters = {{"a.weight", torch::randn({4, 3})}, {"a.bias", torch::randn({3})}};
  c.optimizer = {{"exp_avg", torch::randn({15})}, {"exp_avg_sq", torch::rand({15})}};
  c.job = {{"train_steps", 10}, {"data", {{"dir", "somewhere"}}}};
  return c;
}

}  // namespace troupe::testing
