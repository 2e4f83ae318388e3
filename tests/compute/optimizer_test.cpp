#include "compute/optimizer.hpp"

#include <gtest/gtest.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "compute/flat_parameters.hpp"
#include "compute/lr_schedule.hpp"
#include "compute/outer_optimizer.hpp"

namespace troupe::compute {
namespace {

double max_difference(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(adamw, matches_torch_optim_adamw_over_steps) {
  torch::manual_seed(0);
  auto weight = torch::randn({7, 5}, torch::requires_grad());
  auto bias = torch::randn({5}, torch::requires_grad());
  auto reference_weight = weight.detach().clone().requires_grad_();
  auto reference_bias = bias.detach().clone().requires_grad_();

  optimizer_config config;
  config.lr = 1e-2;
  config.weight_decay = 0.1;
  config.eps = 1e-8;
  flat_parameters flat({{"layer.weight", weight}, {"layer.bias", bias}});
  adamw_optimizer ours(config);
  // torch applies decay per group: decay on the weight, none on the bias, as troupe does.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{reference_weight},
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-2).weight_decay(0.1)));
  groups.emplace_back(std::vector<at::Tensor>{reference_bias},
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-2).weight_decay(0.0)));
  torch::optim::AdamW reference(groups, torch::optim::AdamWOptions(1e-2));

  for (int step = 0; step < 5; ++step) {
    auto input = torch::randn({3, 7});
    flat.zero_gradients();
    (torch::matmul(input, weight) + bias).pow(2).sum().backward();
    reference.zero_grad();
    (torch::matmul(input, reference_weight) + reference_bias).pow(2).sum().backward();
    ours.step(flat, 1e-2);
    reference.step();
  }
  const double difference = std::max(max_difference(weight, reference_weight), max_difference(bias, reference_bias));
  std::printf("max |troupe - torch.optim.AdamW| = %.3g\n", difference);
  EXPECT_LT(difference, 1e-6);
}

/// troupe's SGD against torch::optim::SGD (LibTorch's port of torch.optim.SGD) over six steps,
/// weight decay on the weight only as troupe groups it.
double sgd_difference_from_torch(double momentum, double dampening, bool nesterov, double weight_decay) {
  torch::manual_seed(1);
  auto weight = torch::randn({6, 4}, torch::requires_grad());
  auto bias = torch::randn({4}, torch::requires_grad());
  auto reference_weight = weight.detach().clone().requires_grad_();
  auto reference_bias = bias.detach().clone().requires_grad_();
  optimizer_config config;
  config.kind = optimizer_kind::sgd;
  config.momentum = momentum;
  config.dampening = dampening;
  config.nesterov = nesterov;
  config.weight_decay = weight_decay;
  flat_parameters flat({{"layer.weight", weight}, {"layer.bias", bias}});
  auto ours = make_optimizer(config);
  const auto options = [&](double decay) {
    return std::make_unique<torch::optim::SGDOptions>(
        torch::optim::SGDOptions(0.05).momentum(momentum).dampening(dampening).nesterov(nesterov).weight_decay(decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{reference_weight}, options(weight_decay));
  groups.emplace_back(std::vector<at::Tensor>{reference_bias}, options(0.0));
  torch::optim::SGD reference(groups, torch::optim::SGDOptions(0.05));
  for (int step = 0; step < 6; ++step) {
    auto input = torch::randn({3, 6});
    flat.zero_gradients();
    (torch::matmul(input, weight) + bias).pow(2).sum().backward();
    reference.zero_grad();
    (torch::matmul(input, reference_weight) + reference_bias).pow(2).sum().backward();
    ours->step(flat, 0.05);
    reference.step();
  }
  EXPECT_EQ(ours->state().size(), momentum != 0.0 ? 1u : 0u);
  return std::max(max_difference(weight, reference_weight), max_difference(bias, reference_bias));
}

TEST(sgd, matches_torch_optim_sgd_in_every_variant) {
  EXPECT_LT(sgd_difference_from_torch(0.0, 0.0, false, 0.0), 1e-6);
  EXPECT_LT(sgd_difference_from_torch(0.9, 0.0, false, 0.01), 1e-6);
  EXPECT_LT(sgd_difference_from_torch(0.9, 0.3, false, 0.0), 1e-6);  // dampening: the first step is undamped
  EXPECT_LT(sgd_difference_from_torch(0.8, 0.0, true, 0.05), 1e-6);
}

TEST(sgd, plain_step_has_closed_form) {
  auto weight = torch::tensor({1.0f, -2.0f}, torch::requires_grad());
  flat_parameters flat({{"w.weight", weight}});
  optimizer_config config;
  config.kind = optimizer_kind::sgd;
  config.weight_decay = 0.0;
  auto sgd = make_optimizer(config);
  flat.gradients().copy_(torch::tensor({0.5f, -1.0f}));
  sgd->step(flat, 0.1);
  EXPECT_LT(max_difference(weight, torch::tensor({0.95f, -1.9f})), 1e-7);
}

/// The outer step written out per element, in doubles: the obviously-correct reference.
TEST(outer_optimizer, matches_nesterov_and_heavy_ball_written_out) {
  for (const bool nesterov : {true, false}) {
    diloco_config config;
    config.outer_lr = 0.7;
    config.outer_momentum = 0.9;
    config.nesterov = nesterov;
    auto values = torch::tensor({1.0f, -2.0f, 0.5f});
    outer_optimizer outer(config, values);
    std::vector<double> start{1.0, -2.0, 0.5}, momentum(3, 0.0);
    auto carrier = torch::zeros({3});
    const std::vector<std::vector<float>> replicas[] = {{{0.9f, -1.8f, 0.6f}, {1.1f, -2.1f, 0.3f}},
                                                        {{0.5f, -1.0f, 0.2f}, {0.7f, -1.5f, 0.1f}}};
    const double weights[] = {30.0, 10.0};
    for (const auto& round : replicas) {
      auto summed = torch::zeros({3});
      for (std::size_t r = 0; r < round.size(); ++r) {  // each replica's weighted pseudo-gradient, summed as the rings would
        outer.put_pseudo_gradient(torch::tensor(round[r]), carrier, 0, weights[r]);
        summed += carrier;
      }
      carrier.copy_(summed);
      outer.step(values, carrier, 0, weights[0] + weights[1]);
      for (std::size_t i = 0; i < 3; ++i) {
        const double delta = ((start[i] - round[0][i]) * weights[0] + (start[i] - round[1][i]) * weights[1]) / 40.0;
        momentum[i] = 0.9 * momentum[i] + delta;
        start[i] -= 0.7 * (nesterov ? delta + 0.9 * momentum[i] : momentum[i]);
        EXPECT_NEAR(values[static_cast<int64_t>(i)].item<double>(), start[i], 1e-5);
        EXPECT_NEAR(outer.round_start()[static_cast<int64_t>(i)].item<double>(), start[i], 1e-5);
      }
      EXPECT_EQ(carrier.abs().sum().item<float>(), 0.0f);
    }
  }
}

TEST(outer_optimizer, lr_one_without_momentum_takes_the_weighted_mean) {
  diloco_config config;
  config.outer_lr = 1.0;
  config.outer_momentum = 0.0;
  auto values = torch::tensor({2.0f, 4.0f});
  outer_optimizer outer(config, values);
  auto carrier = torch::zeros({2});
  outer.put_pseudo_gradient(torch::tensor({1.0f, 1.0f}), carrier, 0, 3.0);  // one replica of weight 3 …
  auto sum = carrier.clone();
  outer.put_pseudo_gradient(torch::tensor({5.0f, 9.0f}), carrier, 0, 1.0);  // … one of weight 1
  carrier += sum;
  outer.step(values, carrier, 0, 4.0);
  EXPECT_LT(max_difference(values, torch::tensor({2.0f, 3.0f})), 1e-6);  // (3·1 + 5)/4, (3·1 + 9)/4
  EXPECT_THROW(outer.step(values, carrier, 0, 0.0), std::exception);
}

/// Streaming DiLoCo (issue 24): three replicas take inner steps of their own (made-up updates
/// and weights) over 25 steps with H = 6 and F = 3; at each step the schedule names, every
/// replica puts its weighted pseudo-gradient of that fragment, the carriers are summed as the
/// rings would, and τ steps later (sync.overlap_steps; all at once at the run's end) each
/// replica's outer optimizer steps that fragment, mixing by α (fragment_update_alpha). A slow
/// reference, per element in doubles, with its own fragment ranges and its own schedule
/// (fragment f sent after steps 2(f + 1), 2(f + 1) + 6, …, merged τ steps later; every
/// fragment at the end): every replica's parameters and round start must match it after every
/// step, and fragments off the schedule must not move.
void check_streaming_against_the_slow_reference(int64_t tau, double alpha) {
  sync_config sync;
  sync.mode = sync_mode::diloco;
  sync.diloco.inner_steps = 6;
  sync.diloco.fragments = 3;
  sync.diloco.outer_lr = 0.7;
  sync.diloco.outer_momentum = 0.9;
  sync.diloco.overlap_steps = tau;
  sync.diloco.fragment_update_alpha = alpha;
  constexpr int replicas = 3, count = 10, steps = 25;
  const auto update = [](int r, int t, int i) { return 0.01 * ((r * 7 + t * 3 + i * 5) % 11 - 5); };
  const auto weight = [](int r, int t) { return static_cast<double>(10 + (r * 5 + t) % 7); };
  const int64_t begins[] = {0, 3, 6, 10};  // 10·f/3
  // The runtime's path: the exchange in flight (its fragment, step, summed carrier and total).
  std::vector<at::Tensor> values;
  std::vector<std::unique_ptr<outer_optimizer>> outers;
  for (int r = 0; r < replicas; ++r) {
    values.push_back(torch::arange(count, torch::kFloat) * 0.1);
    outers.push_back(std::make_unique<outer_optimizer>(sync.diloco, values.back()));
  }
  struct flight {
    int64_t fragment = -1, merge_after = 0;
    at::Tensor summed;
    double total = 0;
  } in_flight;
  const auto send = [&](int64_t f, int t) {
    const auto size = begins[f + 1] - begins[f];
    in_flight = {f, t + tau, torch::zeros({size}), outers[0]->round_total(f)};
    for (int r = 0; r < replicas; ++r) {
      auto carrier = torch::zeros({size});
      outers[r]->put_pseudo_gradient(values[r], carrier, f, outers[r]->round_weight(f));
      in_flight.summed += carrier;
    }
  };
  const auto land = [&] {
    for (int r = 0; r < replicas; ++r) outers[r]->step(values[r], in_flight.summed.clone(), in_flight.fragment, in_flight.total);
    in_flight.fragment = -1;
  };
  // The reference: per element, the pseudo-gradient taken when sent, applied when landed.
  std::vector<double> start(count), momentum(count, 0.0), own(replicas * 3, 0.0), total(3, 0.0), sent(count, 0.0);
  std::vector<std::vector<double>> local(replicas, std::vector<double>(count));
  for (int i = 0; i < count; ++i) start[i] = local[0][i] = local[1][i] = local[2][i] = static_cast<float>(0.1 * i);
  int64_t reference_flight = -1;
  double sent_total = 0;
  const auto reference_send = [&](int64_t f) {
    for (int64_t i = begins[f]; i < begins[f + 1]; ++i) {
      sent[i] = 0;
      for (int r = 0; r < replicas; ++r) sent[i] += own[r * 3 + f] * (start[i] - local[r][i]);
    }
    sent_total = total[f];
    reference_flight = f;
  };
  const auto reference_land = [&] {
    const auto f = reference_flight;
    for (int64_t i = begins[f]; i < begins[f + 1]; ++i) {
      const double delta = sent[i] / sent_total;
      momentum[i] = 0.9 * momentum[i] + delta;
      start[i] -= 0.7 * (delta + 0.9 * momentum[i]);
      for (int r = 0; r < replicas; ++r) local[r][i] = alpha * local[r][i] + (1 - alpha) * start[i];
    }
    for (int r = 0; r < replicas; ++r) own[r * 3 + f] = 0;
    total[f] = 0;
    reference_flight = -1;
  };

  for (int t = 1; t <= steps; ++t) {
    double window_total = 0;
    for (int r = 0; r < replicas; ++r) window_total += weight(r, t);
    for (int r = 0; r < replicas; ++r) {
      auto step_update = torch::zeros({count});
      for (int i = 0; i < count; ++i) {
        step_update[i] = update(r, t, i);
        local[r][i] += static_cast<float>(update(r, t, i));
      }
      values[r] += step_update;
      outers[r]->add_round_weights(weight(r, t), window_total);
      for (int f = 0; f < 3; ++f) own[r * 3 + f] += weight(r, t);
    }
    for (int f = 0; f < 3; ++f) total[f] += window_total;
    if (in_flight.fragment >= 0 && (t == steps || t == in_flight.merge_after)) land();
    if (reference_flight >= 0 && (t == steps || (t - tau) % 2 == 0)) reference_land();  // sent after an even step
    std::vector<int64_t> due;
    if (t == steps) due = {0, 1, 2};
    else if (const auto f = sync.fragment_due_after(t); f >= 0) due = {f};
    const std::vector<int64_t> expected_due = t == steps ? std::vector<int64_t>{0, 1, 2}
                                              : t % 2 == 0 ? std::vector<int64_t>{(t / 2 + 2) % 3}
                                                           : std::vector<int64_t>{};
    ASSERT_EQ(due, expected_due) << "step " << t;
    for (const auto f : due) {  // at the end, or without overlap, each lands at once
      if (total[f] == 0) continue;  // at the end: landed this very step, nothing to add
      send(f, t);
      reference_send(f);
      if (tau == 0 || t == steps) {
        land();
        reference_land();
      }
    }
    for (int r = 0; r < replicas; ++r)
      for (int i = 0; i < count; ++i) {
        ASSERT_NEAR(values[r][i].item<double>(), local[r][i], 1e-5) << "replica " << r << ", element " << i << ", step " << t;
        ASSERT_NEAR(outers[r]->round_start()[i].item<double>(), start[i], 1e-5) << "element " << i << ", step " << t;
      }
  }
}

TEST(outer_optimizer, streams_fragments_on_the_schedule_as_the_slow_reference_does) {
  check_streaming_against_the_slow_reference(0, 0.0);
}

TEST(outer_optimizer, overlapped_fragments_land_tau_steps_later_as_the_slow_reference_does) {
  check_streaming_against_the_slow_reference(1, 0.0);
  check_streaming_against_the_slow_reference(1, 0.5);
}

TEST(adamw, first_step_has_closed_form) {
  // After one step with zero decay: m̂ = g, v̂ = g², so w ← w − lr · g / (|g| + eps).
  auto weight = torch::tensor({1.0f, -2.0f, 3.0f}, torch::requires_grad());
  flat_parameters flat({{"w.weight", weight}});
  flat.gradients().copy_(torch::tensor({0.5f, -0.25f, 2.0f}));
  optimizer_config config;
  config.weight_decay = 0.0;
  config.eps = 1e-8;
  adamw_optimizer optimizer(config);
  optimizer.step(flat, 0.1);
  auto expected = torch::tensor({1.0f - 0.1f, -2.0f + 0.1f, 3.0f - 0.1f});
  EXPECT_LT(max_difference(weight, expected), 1e-6);
  EXPECT_EQ(optimizer.steps(), 1);
}

TEST(lamb, one_step_matches_reference_loop) {
  // A slow, obviously-correct scalar reference of one LAMB step per tensor.
  auto weight = torch::tensor({{0.5f, -1.0f}, {2.0f, 0.25f}}, torch::requires_grad());
  auto bias = torch::tensor({0.1f, -0.2f}, torch::requires_grad());
  flat_parameters flat({{"dense.weight", weight}, {"dense.bias", bias}});
  std::vector<float> grads_w{0.3f, -0.6f, 0.9f, 0.05f}, grads_b{-0.4f, 0.2f};
  flat.gradient(flat.slots()[0]).copy_(torch::tensor(grads_w).view({2, 2}));
  flat.gradient(flat.slots()[1]).copy_(torch::tensor(grads_b));
  optimizer_config config;
  config.kind = optimizer_kind::lamb;
  config.weight_decay = 0.01;
  config.eps = 1e-6;
  config.min_trust = 0.01;
  config.max_trust = 10.0;
  const double lr = 0.05;

  auto reference = [&](std::vector<float> w, const std::vector<float>& g, bool decay) {
    std::vector<double> update(w.size());
    double w_norm = 0, u_norm = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      double m = (1 - config.beta1) * g[i], v = (1 - config.beta2) * g[i] * g[i];
      double m_hat = m / (1 - config.beta1), v_hat = v / (1 - config.beta2);
      update[i] = m_hat / (std::sqrt(v_hat) + config.eps) + (decay ? config.weight_decay * w[i] : 0.0);
      w_norm += double(w[i]) * w[i];
      u_norm += update[i] * update[i];
    }
    double trust = std::clamp(std::sqrt(w_norm) / std::sqrt(u_norm), config.min_trust, config.max_trust);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(w[i] - lr * trust * update[i]);
    return w;
  };
  auto expected_w = reference({0.5f, -1.0f, 2.0f, 0.25f}, grads_w, true);
  auto expected_b = reference({0.1f, -0.2f}, grads_b, false);
  lamb_optimizer optimizer(config);
  optimizer.step(flat, lr);
  const double difference = std::max(max_difference(weight.view({-1}), torch::tensor(expected_w)),
                                     max_difference(bias, torch::tensor(expected_b)));
  std::printf("max |troupe LAMB - reference| = %.3g\n", difference);
  EXPECT_LT(difference, 1e-6);
}

TEST(lamb, trust_ratio_is_clamped) {
  auto weight = torch::full({4}, 100.0f, torch::requires_grad());  // ||w|| / ||update|| = 100 > 10
  flat_parameters flat({{"w.weight", weight}});
  flat.gradients().fill_(1.0f);
  optimizer_config config;
  config.kind = optimizer_kind::lamb;
  config.weight_decay = 0.0;
  config.max_trust = 10.0;
  lamb_optimizer optimizer(config);
  optimizer.step(flat, 0.01);
  // update ≈ 1 per element; clamped trust 10 → each weight moves by lr · 10 · 1.
  EXPECT_NEAR(weight[0].item<double>(), 100.0 - 0.1, 1e-4);
}

TEST(gradient_clipping, scales_to_max_norm_like_torch) {
  auto grads = torch::tensor({3.0f, 4.0f});
  double norm = clip_gradient_norm(grads, 1.0);
  EXPECT_NEAR(norm, 5.0, 1e-6);
  EXPECT_NEAR(grads.norm().item<double>(), 1.0, 1e-6);
  auto small = torch::tensor({0.3f, 0.4f});
  clip_gradient_norm(small, 1.0);
  EXPECT_NEAR(small.norm().item<double>(), 0.5, 1e-7);
}

TEST(lr_schedule, warmup_decay_matches_deepspeed_formula) {
  schedule_config s;
  s.kind = schedule_kind::warmup_decay;
  s.warmup_min_lr = 0.0;
  s.warmup_max_lr = 1e-3;
  s.warmup_num_steps = 10;
  s.total_num_steps = 110;
  EXPECT_DOUBLE_EQ(learning_rate(s, 1e-3, 0), 0.0);
  EXPECT_DOUBLE_EQ(learning_rate(s, 1e-3, 5), 5e-4);
  EXPECT_DOUBLE_EQ(learning_rate(s, 1e-3, 10), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(s, 1e-3, 60), 5e-4);
  EXPECT_DOUBLE_EQ(learning_rate(s, 1e-3, 110), 0.0);
  EXPECT_DOUBLE_EQ(learning_rate(s, 1e-3, 200), 0.0);
  s.shape = warmup_shape::log;
  EXPECT_NEAR(learning_rate(s, 1e-3, 4), 1e-3 * std::log(5.0) / std::log(10.0), 1e-15);
}

TEST(lr_schedule, warmup_linear_decay_exp_matches_formula) {
  schedule_config s;
  s.kind = schedule_kind::warmup_linear_decay_exp;
  s.warmup_max_lr = 2e-3;
  s.warmup_proportion = 0.1;
  s.decay_rate = 0.5;
  s.decay_steps = 50;
  s.total_num_steps = 1000;
  EXPECT_NEAR(learning_rate(s, 0, 50), 2e-3 * 0.5, 1e-15);    // halfway through warm-up
  EXPECT_NEAR(learning_rate(s, 0, 100), 2e-3, 1e-15);         // warm-up ends at 10%
  EXPECT_NEAR(learning_rate(s, 0, 150), 2e-3 * 0.5, 1e-15);   // one decay period later
  EXPECT_NEAR(learning_rate(s, 0, 200), 2e-3 * 0.25, 1e-15);
}

TEST(lr_schedule, constant_is_the_base_rate) {
  schedule_config s;
  EXPECT_DOUBLE_EQ(learning_rate(s, 3e-4, 0), 3e-4);
  EXPECT_DOUBLE_EQ(learning_rate(s, 3e-4, 12345), 3e-4);
}

}  // namespace
}  // namespace troupe::compute

namespace troupe::compute {
namespace {

// AdamW's `fused` step on `device` (troupe's loop on the CPU, LibTorch's fused kernel on CUDA
// where the build has it) against the per-operation reference over four steps, weights that
// decay and biases that do not; returns the largest difference of the parameters.
double fused_against_reference(const torch::Device& device, bool fused) {
  torch::manual_seed(3);
  const int64_t n = 10007, decay_numel = 6000;
  const auto on = torch::TensorOptions().device(device);
  flat_parameters flat({{"a.weight", torch::randn({decay_numel}, on).requires_grad_(true)},
                        {"a.bias", torch::randn({n - decay_numel}, on).requires_grad_(true)}});
  optimizer_config config;
  config.weight_decay = 0.05;
  config.fused = fused;
  adamw_optimizer tested(config);
  auto m = torch::zeros({n}, on), v = torch::zeros({n}, on);
  auto reference = flat.values().clone();
  double worst = 0;
  for (int64_t step = 1; step <= 4; ++step) {
    auto grads = torch::randn({n}, on);
    flat.gradients().copy_(grads);
    tested.step(flat, 1e-3);
    adamw_reference_update(reference, grads, m, v, flat.decay_numel(), config, 1e-3, step);
    worst = std::max(worst, (flat.values() - reference).abs().max().item<double>());
  }
  return worst;
}

TEST(adamw, fused_cpu_loop_matches_the_tensor_reference) {
  const double worst = fused_against_reference(torch::kCPU, true);
  std::printf("max |fused - reference| = %.3g\n", worst);
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(fused_against_reference(torch::kCPU, false), 0.0) << "fused: false is the reference itself";
}

// The fused CPU step against its formula written out one element at a time, in the loop's
// order of fp32 operations: the vector path (eight at a time) and the remainders around the
// decay boundary must give the same bits.
TEST(adamw, fused_cpu_step_is_the_per_element_formula_bit_for_bit) {
  torch::manual_seed(4);
  const int64_t n = 10007, decay_numel = 6003;
  flat_parameters flat({{"a.weight", torch::randn({decay_numel}).requires_grad_(true)},
                        {"a.bias", torch::randn({n - decay_numel}).requires_grad_(true)}});
  optimizer_config config;
  config.weight_decay = 0.05;
  adamw_optimizer tested(config);
  auto p = flat.values().clone();
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  const double lr = 1e-3;
  for (int64_t step = 1; step <= 3; ++step) {
    const auto grads = torch::randn({n});
    flat.gradients().copy_(grads);
    tested.step(flat, lr);
    const auto k1 = static_cast<float>(config.beta1), k2 = static_cast<float>(config.beta2);
    const auto c1 = static_cast<float>(1.0 - config.beta1), c2 = static_cast<float>(1.0 - config.beta2);
    const auto step_size = static_cast<float>(lr / (1.0 - std::pow(config.beta1, static_cast<double>(step))));
    const auto bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config.beta2, static_cast<double>(step))));
    const auto eps = static_cast<float>(config.eps), decay = static_cast<float>(1.0 - lr * config.weight_decay);
    float* w = p.data_ptr<float>();
    const float* g = grads.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      m[i] = m[i] * k1 + g[i] * c1;
      v[i] = v[i] * k2 + g[i] * g[i] * c2;
      w[i] = w[i] * (i < decay_numel ? decay : 1.0f) - step_size * m[i] / (std::sqrt(v[i]) * bc2 + eps);
    }
    EXPECT_TRUE(torch::equal(flat.values(), p)) << "step " << step;
  }
}

TEST(adamw, fused_on_a_gpu_matches_the_tensor_reference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here";
  const double worst = fused_against_reference(torch::Device(torch::kCUDA, 0), true);
  std::printf("cuda: max |fused - reference| = %.3g\n", worst);
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(fused_against_reference(torch::Device(torch::kCUDA, 0), false), 0.0);
}

}  // namespace
}  // namespace troupe::compute
