// cpu_bf16_linear (compute/cpu_bf16_linear.hpp): outputs and every gradient bit for bit those of
// LibTorch's linear under CPU bf16 autocast, over micro-batches that reuse the window's copies,
// for the forms it takes (3-d with a bias, 2-d without, the tied decoder's fp32 sum with its
// bias), for a weight used several times in one pass (and in passes not begun: counts that add
// up); whole BERT and ALBERT models with and without the copies over two windows whose
// parameters change between them as the optimizer changes them; the vector loops against the
// scalar ones.
#include "compute/cpu_bf16_linear.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <limits>
#include <vector>

#include "compute/autocast_scope.hpp"
#include "compute/masked_lm.hpp"
#include "compute/cpu_features.hpp"
#include "compute/mixed_precision_rows.hpp"

namespace troupe::compute {
namespace {

int64_t differing(const torch::Tensor& a, const torch::Tensor& b) {
  return a.numel() - a.eq(b).logical_or(a.isnan().logical_and(b.isnan())).sum().item<int64_t>();
}

/// A leaf like the trainer's parameters: fp32, its `.grad` defined (and not zero: a window's
/// earlier micro-batches have added into it).
torch::Tensor parameter(std::vector<int64_t> sizes) {
  auto p = torch::randn(sizes).requires_grad_(true);
  p.mutable_grad() = torch::randn(sizes) * 3;
  return p;
}

torch::Tensor twin(const torch::Tensor& p) {
  auto copy = p.detach().clone().requires_grad_(true);
  copy.mutable_grad() = p.grad().clone();
  return copy;
}

struct linear_case {
  std::vector<int64_t> x_sizes;
  int64_t outputs;
  bool bias;
  torch::ScalarType x_type;
  int uses;  ///< times the weight is applied in one forward pass (summed)
  bool begin_passes = true;  ///< as the trainer does; without, the uses add up over micro-batches
  bias_sum sum = bias_sum::rounded;
};

/// What LibTorch computes under autocast for each form.
torch::Tensor reference_of(const linear_case& c, const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias) {
  if (c.sum == bias_sum::widened) return torch::matmul(x, weight.t()) + bias;  // the tied decoder
  return torch::nn::functional::linear(x, weight, bias);
}

/// `uses` applications of the layer to different inputs, summed, through autocast's path for
/// the reference parameters and through cpu_bf16_linear for their twins, over three
/// micro-batches that share one set of copies: outputs, input gradients and the parameters'
/// accumulated gradients must be equal bit for bit.
void expect_autocast_s_bits(const linear_case& c) {
  torch::manual_seed(11);
  const int64_t inputs = c.x_sizes.back();
  auto weight = parameter({c.outputs, inputs});
  auto bias = c.bias ? parameter({c.outputs}) : torch::Tensor();
  auto weight2 = twin(weight);
  auto bias2 = c.bias ? twin(bias) : torch::Tensor();
  bf16_weight_copies copies;
  for (int micro_batch = 0; micro_batch < 3; ++micro_batch) {
    std::vector<torch::Tensor> xs, xs2;
    torch::Tensor expected, y;
    if (c.begin_passes) copies.begin_pass();
    {
      autocast_scope autocast(torch::kCPU, torch::kBFloat16);
      for (int use = 0; use < c.uses; ++use) {
        xs.push_back(torch::randn(c.x_sizes).to(c.x_type).requires_grad_(true));
        xs2.push_back(xs.back().detach().clone().requires_grad_(true));
        const auto reference = reference_of(c, xs.back(), weight, bias);
        const auto mine = cpu_bf16_linear(xs2.back(), weight2, bias2, copies, c.sum);
        ASSERT_TRUE(mine.has_value());
        ASSERT_EQ(mine->scalar_type(), reference.scalar_type());
        ASSERT_EQ(differing(*mine, reference), 0) << "forward, micro-batch " << micro_batch << ", use " << use;
        expected = expected.defined() ? expected + reference : reference;
        y = y.defined() ? y + *mine : *mine;
      }
    }
    const auto r = torch::randn(expected.sizes());
    (expected.to(torch::kFloat) * r).sum().backward();
    (y.to(torch::kFloat) * r).sum().backward();
    for (int use = 0; use < c.uses; ++use)
      EXPECT_EQ(differing(xs2[use].grad(), xs[use].grad()), 0) << "x's gradient, use " << use;
    EXPECT_EQ(differing(weight2.grad(), weight.grad()), 0) << "weight, micro-batch " << micro_batch;
    if (c.bias) EXPECT_EQ(differing(bias2.grad(), bias.grad()), 0) << "bias, micro-batch " << micro_batch;
  }
  EXPECT_EQ(copies.size(), 1u) << "one copy of the weight for the window (the bias is added in fp32)";
}

TEST(cpu_bf16_linear, a_3d_input_with_a_bias_gives_autocast_s_bits) {
  expect_autocast_s_bits({{4, 9, 16}, 24, true, torch::kFloat, 1});
  expect_autocast_s_bits({{4, 9, 16}, 13, true, torch::kBFloat16, 1});  // a bf16 input; rows of 13
}

TEST(cpu_bf16_linear, a_2d_input_without_a_bias_gives_autocast_s_bits) {
  expect_autocast_s_bits({{10, 16}, 37, false, torch::kFloat, 1});
}

TEST(cpu_bf16_linear, the_tied_decoder_s_fp32_sum_with_its_bias_gives_autocast_s_bits) {
  expect_autocast_s_bits({{10, 16}, 37, true, torch::kFloat, 1, true, bias_sum::widened});
  expect_autocast_s_bits({{10, 16}, 37, true, torch::kFloat, 3, true, bias_sum::widened});
}

TEST(cpu_bf16_linear, a_weight_used_three_times_in_one_pass_gives_autocast_s_bits) {
  expect_autocast_s_bits({{4, 9, 16}, 24, true, torch::kFloat, 3});
  expect_autocast_s_bits({{10, 16}, 37, false, torch::kFloat, 3});
  expect_autocast_s_bits({{4, 9, 16}, 24, true, torch::kFloat, 1, /*begin_passes=*/false});
}

bert_config tiny(const char* type) {
  bert_config config;
  config.model_type = type;
  config.vocab_size = 50;
  config.embedding_size = 8;
  config.hidden_size = 16;
  config.num_hidden_layers = 2;
  config.num_hidden_groups = 1;  // ALBERT: one layer applied twice
  config.num_attention_heads = 2;
  config.intermediate_size = 24;
  config.max_position_embeddings = 16;
  return config;
}

/// Gradients defined (zero) on every parameter, and the input words looked up in an alias of
/// the word embeddings with a gradient of its own, as the trainer sets a model up.
void set_up_as_the_trainer_does(masked_lm_impl& model) {
  for (auto& [name, tensor] : model.hf_named_parameters()) tensor.mutable_grad() = torch::zeros_like(tensor);
  for (auto& [name, tensor] : model.hf_named_parameters())
    if (name.find("word_embeddings") != std::string::npos) {
      auto alias = tensor.detach().requires_grad_(true);
      alias.mutable_grad() = torch::zeros_like(alias);
      model.look_up_words_in(alias);
    }
  model.eval();  // no dropout: the two models draw nothing, grad mode stays on
}

/// Two windows of two micro-batches each through a model that keeps bf16 copies and one that does
/// not; between the windows every parameter changes through a raw pointer (as the optimizer
/// writes the flat buffer, no version counter moving) and the copies are cleared, as the trainer
/// clears them. Every parameter's accumulated gradient must be equal bit for bit.
TEST(cpu_bf16_linear, a_model_with_the_copies_trains_to_the_same_bits) {
  for (const char* type : {"bert", "albert"}) {
    auto with = make_masked_lm(tiny(type)), without = make_masked_lm(tiny(type));
    set_up_as_the_trainer_does(*with);
    set_up_as_the_trainer_does(*without);
    auto& copies = with->keep_bf16_weight_copies();
    torch::manual_seed(2);
    for (int window = 0; window < 2; ++window) {
      for (int micro_batch = 0; micro_batch < 2; ++micro_batch) {
        const auto ids = torch::randint(50, {3, 10}, torch::kLong), types = torch::zeros({3, 10}, torch::kLong);
        const auto positions = torch::tensor({1, 4, 7, 12, 25}, torch::kLong);
        const auto r = torch::randn({5, 50});
        copies.begin_pass();
        for (auto* model : {&with, &without}) {
          torch::Tensor logits;
          {
            autocast_scope autocast(torch::kCPU, torch::kBFloat16);
            logits = (*model)->predict((*model)->encode(ids, types, {}), positions);
          }
          (logits * r).sum().backward();
        }
      }
      const auto a = with->hf_named_parameters(), b = without->hf_named_parameters();
      for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(differing(a[i].second.grad(), b[i].second.grad()), 0) << type << " " << a[i].first << ", window " << window;
      EXPECT_GT(copies.size(), 0u) << "the copies were used";
      for (auto* model : {&with, &without})
        for (auto& [name, tensor] : (*model)->hf_named_parameters()) {
          float* values = tensor.data_ptr<float>();
          for (int64_t k = 0; k < tensor.numel(); ++k) values[k] += 0.01f * static_cast<float>(k % 7);
        }
      copies.clear();
    }
  }
}

TEST(cpu_bf16_linear, a_parameter_changed_in_place_is_copied_again) {
  auto weight = parameter({8, 8});
  bf16_weight_copies copies;
  const auto first = copies.of(weight).clone();
  EXPECT_EQ(differing(copies.of(weight), weight.detach().to(torch::kBFloat16)), 0);
  {
    torch::NoGradGuard no_grad;
    weight.add_(1.0);
  }
  EXPECT_EQ(differing(copies.of(weight), weight.detach().to(torch::kBFloat16)), 0);
  EXPECT_GT(differing(copies.of(weight), first), 0);
  copies.clear();
  EXPECT_EQ(copies.size(), 0u);
}

TEST(cpu_bf16_linear, leaves_the_other_cases_to_libtorch) {
  auto weight = parameter({8, 8});
  auto bias = parameter({8});
  bf16_weight_copies copies;
  const auto x = torch::randn({2, 8});
  EXPECT_FALSE(cpu_bf16_linear(x, weight, bias, copies).has_value()) << "autocast off";
  autocast_scope autocast(torch::kCPU, torch::kBFloat16);
  {
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(cpu_bf16_linear(x, weight, bias, copies).has_value()) << "outside grad mode (evaluation)";
  }
  auto frozen = torch::randn({8, 8});
  EXPECT_FALSE(cpu_bf16_linear(x, frozen, bias, copies).has_value()) << "a weight without a gradient";
  auto no_grad_yet = torch::randn({8, 8}).requires_grad_(true);
  EXPECT_FALSE(cpu_bf16_linear(x, no_grad_yet, bias, copies).has_value()) << "no .grad to add into";
  EXPECT_FALSE(cpu_bf16_linear(x, weight, bias, copies).has_value()) << "2-d with a bias: addmm";
  EXPECT_TRUE(cpu_bf16_linear(x, weight, torch::Tensor(), copies).has_value());
  EXPECT_TRUE(cpu_bf16_linear(x.unsqueeze(0), weight, bias, copies).has_value());
}

/// bf16 bit patterns that include ties (a last kept bit of 0 and of 1, the dropped half exactly
/// 0x8000), infinities and NaN, in a run whose length is not a multiple of eight.
std::vector<uint16_t> awkward_halves(int64_t count) {
  const auto random = torch::randn({count}).mul_(100).to(torch::kBFloat16);
  std::vector<uint16_t> halves(static_cast<std::size_t>(count));
  std::memcpy(halves.data(), random.data_ptr(), halves.size() * sizeof(uint16_t));
  halves[1] = 0x7F80;  // +inf
  halves[2] = 0xFF80;  // -inf
  halves[3] = 0x7FC1;  // NaN
  halves[4] = 0x3F80;  // 1.0
  return halves;
}

#if defined(__x86_64__)  // the vector loops are built for x86-64 only
TEST(cpu_bf16_linear, the_vector_loops_give_the_scalar_loops_bits) {
  if (!cpu_has_avx2_and_fma()) GTEST_SKIP() << "no AVX2 on this CPU: the scalar loops run alone";
  const int64_t rows = 5, width = 29;
  auto values = awkward_halves(rows * width);
  std::vector<float> bias(static_cast<std::size_t>(width));
  for (int64_t c = 0; c < width; ++c) bias[static_cast<std::size_t>(c)] = static_cast<float>(c) * 0.37f - 4.0f;
  bias[5] = 1.0f / 256;   // added to 1.0: exactly half a bf16 step, a tie
  bias[6] = 3.0f / 256;
  bias[7] = std::numeric_limits<float>::quiet_NaN();
  auto vector_rows = values, scalar_rows = values;
  mixed_precision_rows::add_bias_rounded(vector_rows.data(), bias.data(), rows, width);
  mixed_precision_rows::add_bias_rounded_scalar(scalar_rows.data(), bias.data(), rows, width);
  EXPECT_EQ(vector_rows, scalar_rows);

  std::vector<float> vector_widened(values.size()), scalar_widened(values.size());
  mixed_precision_rows::add_bias_widened(vector_widened.data(), values.data(), bias.data(), rows, width);
  mixed_precision_rows::add_bias_widened_scalar(scalar_widened.data(), values.data(), bias.data(), rows, width);
  EXPECT_EQ(0, std::memcmp(vector_widened.data(), scalar_widened.data(), vector_widened.size() * sizeof(float)));

  std::vector<float> vector_sums(values.size()), scalar_sums;
  for (std::size_t i = 0; i < vector_sums.size(); ++i) vector_sums[i] = static_cast<float>(i) * 0.5f - 20.0f;
  scalar_sums = vector_sums;
  mixed_precision_rows::add_widened(vector_sums.data(), values.data(), static_cast<int64_t>(values.size()));
  mixed_precision_rows::add_widened_scalar(scalar_sums.data(), values.data(), static_cast<int64_t>(values.size()));
  EXPECT_EQ(0, std::memcmp(vector_sums.data(), scalar_sums.data(), vector_sums.size() * sizeof(float)));
}

#endif

}  // namespace
}  // namespace troupe::compute
