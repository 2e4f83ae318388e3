// The trainer on a task head (issue 25): the closed-form parameter counts that size its buffers,
// a window's loss as HF's task loss (the mean over the window's examples, however the window is
// split into micro-batches), the right-guess counts, and the encoder taken from a pretrained
// model while the head starts from the seed, and task.frozen_encoder_steps holding the encoder's
// embeddings and layers while the head (and pooler) learns.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "compute/mlm_trainer.hpp"
#include "compute/named_tensors.hpp"
#include "compute/task_model.hpp"
#include "tests/support/tiny_bert.hpp"

namespace troupe::compute {
namespace {

bert_config tiny(const std::string& type) {
  auto config = troupe::testing::tiny_bert(0.0);
  config.model_type = type;
  config.embedding_size = 8;
  return config;
}

std::string encoder_prefix_of(const std::string& type) { return type + "."; }

int64_t numel_of(const named_tensors& tensors) {
  int64_t total = 0;
  for (const auto& [name, tensor] : tensors) total += tensor.numel();
  return total;
}

TEST(task_trainer, trained_parameter_counts_are_the_built_task_models) {
  for (const std::string type : {"bert", "distilbert", "albert"}) {
    for (const auto& head : {task_head{task_type::question_answering, 2, -1, {}},
                             task_head{task_type::sequence_classification, 5, -1, {}}}) {
      task_model model(tiny(type), head);
      EXPECT_EQ(trained_parameter_count(tiny(type), head), numel_of(model->hf_named_parameters()))
          << type << " " << task_type_name(head.type);
    }
    EXPECT_EQ(trained_parameter_count(tiny(type), std::nullopt), parameter_count(tiny(type))) << type;
  }
}

/// `rows` examples of length 9 (the last two padded in the second half), with task labels.
mlm_batch task_batch(int64_t first, int64_t rows, bool question_answering, int64_t window_samples) {
  mlm_batch batch;
  torch::manual_seed(static_cast<uint64_t>(first) + 5);
  batch.input_ids = torch::randint(5, 200, {rows, 9}, torch::kLong);
  batch.token_type_ids = torch::zeros({rows, 9}, torch::kLong);
  batch.lengths = torch::full({rows}, 9, torch::kLong);
  batch.lengths[rows - 1] = 7;
  batch.task_labels = question_answering ? torch::randint(0, 7, {rows, 2}, torch::kLong)
                                         : torch::stack({torch::randint(0, 3, {rows}, torch::kLong),
                                                         torch::zeros({rows}, torch::kLong)}, 1);
  if (question_answering) batch.task_labels = std::get<0>(batch.task_labels.sort(1));  // start ≤ end
  batch.labels = torch::empty({0}, torch::kLong);
  batch.masked_positions = torch::empty({0}, torch::kLong);
  batch.samples = rows;
  for (int64_t r = 0; r < rows; ++r) batch.sample_keys.push_back(static_cast<uint64_t>(first + r));
  batch.whole_window = {window_samples, 0, 0};
  return batch;
}

/// Rows [from, from + rows) of `batch`, in the same window.
mlm_batch slice(const mlm_batch& batch, int64_t from, int64_t rows) {
  mlm_batch part = batch;
  part.input_ids = batch.input_ids.narrow(0, from, rows);
  part.token_type_ids = batch.token_type_ids.narrow(0, from, rows);
  part.lengths = batch.lengths.narrow(0, from, rows);
  part.task_labels = batch.task_labels.narrow(0, from, rows);
  part.samples = rows;
  part.sample_keys.assign(batch.sample_keys.begin() + from, batch.sample_keys.begin() + from + rows);
  return part;
}

trainer_options task_options(const std::string& type, task_type task) {
  trainer_options options;
  options.model = tiny(type);
  options.task = task_head{task, task == task_type::question_answering ? 2 : 3, 0.0, {}};
  options.seed = 9;
  return options;
}

TEST(task_trainer, a_windows_loss_is_hfs_mean_task_loss_however_it_is_split) {
  for (const std::string type : {"bert", "distilbert", "albert"}) {
    for (const auto task : {task_type::question_answering, task_type::sequence_classification}) {
      const bool qa = task == task_type::question_answering;
      const auto whole = task_batch(0, 4, qa, 4);
      // HF's loss: a task model initialised as the trainer's is, the batch's mean loss.
      task_model reference(tiny(type), *task_options(type, task).task);
      reference->reset_weights(9);
      reference->eval();
      const auto logits = reference->forward(whole.input_ids, whole.token_type_ids, whole.lengths);
      const auto expected = qa ? question_answering_loss(logits, whole.task_labels.select(1, 0),
                                                         whole.task_labels.select(1, 1))
                               : classification_loss(logits, whole.task_labels.select(1, 0));

      const auto what = type + " " + task_type_name(task);
      mlm_trainer one(task_options(type, task)), two(task_options(type, task));
      const auto alone = one.micro_step(whole);
      EXPECT_TRUE(alone.task);
      EXPECT_NEAR(alone.loss, expected.item<double>(), 1e-5) << what;
      const auto right = qa ? logits.argmax(1).eq(whole.task_labels).all(1) : logits.argmax(1).eq(whole.task_labels.select(1, 0));
      EXPECT_EQ(alone.task_correct, right.sum().item<int64_t>()) << what;
      // Two micro-batches of the same window: their shares add up to the window's loss, and
      // the accumulated gradient is the one-batch gradient.
      const auto first = two.micro_step(slice(whole, 0, 2)), second = two.micro_step(slice(whole, 2, 2));
      EXPECT_NEAR(first.loss + second.loss, alone.loss, 1e-6) << what;
      EXPECT_EQ(first.task_correct + second.task_correct, alone.task_correct) << what;
      EXPECT_LT((one.gradients() - two.gradients()).abs().max().item<double>(), 1e-6) << what;
      EXPECT_GT(one.gradients().abs().sum().item<double>(), 0.0) << what;
    }
  }
}

TEST(task_trainer, the_encoder_comes_from_the_pretrained_model_and_the_head_from_the_seed) {
  const auto pretrained_model = make_masked_lm(tiny("bert"));
  pretrained_model->reset_weights(77);
  auto pretrained = std::make_shared<named_tensors>();
  for (const auto& [name, tensor] : pretrained_model->hf_named_parameters()) pretrained->emplace_back(name, tensor.clone());
  auto options = task_options("bert", task_type::sequence_classification);
  options.pretrained = pretrained;
  mlm_trainer trainer(options);
  mlm_trainer scratch(task_options("bert", task_type::sequence_classification));
  const auto find = [](const named_tensors& tensors, const std::string& name) {
    for (const auto& [n, t] : tensors)
      if (n == name) return t;
    ADD_FAILURE() << name << " missing";
    return torch::Tensor();
  };
  const auto mine = trainer.named_parameters(), fresh = scratch.named_parameters();
  for (const char* name : {"bert.embeddings.word_embeddings.weight", "bert.encoder.layer.1.output.dense.weight"})
    EXPECT_TRUE(find(mine, name).equal(find(*pretrained, name))) << name;
  for (const char* name : {"classifier.weight", "bert.pooler.dense.weight"})
    EXPECT_TRUE(find(mine, name).equal(find(fresh, name))) << name << ": the head starts from the seed either way";
  EXPECT_EQ(trainer.parameter_values().numel(), trained_parameter_count(options.model, options.task));
}

/// Steps one window of four examples (keys from `first`).
void step_window(mlm_trainer& trainer, int64_t first) {
  trainer.micro_step(task_batch(first, 4, false, 4));
  trainer.finish_window();
}

TEST(task_trainer, frozen_encoder_steps_hold_the_embeddings_and_layers_while_the_head_learns) {
  for (const std::string type : {"bert", "distilbert", "albert"}) {
    auto options = task_options(type, task_type::sequence_classification);
    options.frozen_encoder_steps = 2;
    mlm_trainer held(options), free(task_options(type, task_type::sequence_classification));
    const auto start = held.named_parameters();
    std::vector<torch::Tensor> before;
    for (const auto& [name, tensor] : start) before.push_back(tensor.clone());
    held.micro_step(task_batch(0, 4, false, 4));
    free.micro_step(task_batch(0, 4, false, 4));
    EXPECT_TRUE(held.gradients().equal(free.gradients())) << type << ": the gradient is computed as always";
    held.finish_window();
    free.finish_window();
    // The moments follow every gradient, the held parameters' too (as with a learning rate of 0).
    const auto held_moments = held.optimizer_state(), free_moments = free.optimizer_state();
    for (std::size_t m = 0; m < held_moments.size(); ++m)
      EXPECT_TRUE(held_moments[m].second.equal(free_moments[m].second)) << type << " " << held_moments[m].first;
    step_window(held, 4);
    const auto body = encoder_prefix_of(type);
    int64_t body_tensors = 0, head_tensors = 0;
    const auto after = held.named_parameters();
    for (std::size_t i = 0; i < after.size(); ++i) {
      const auto& name = after[i].first;
      const bool in_body = name_starts_with(name, body) && !name_starts_with(name, body + "pooler.");
      const bool moved = !after[i].second.equal(before[i]);
      (in_body ? body_tensors : head_tensors) += 1;
      EXPECT_EQ(moved, !in_body) << type << " " << name << " after 2 held steps";
    }
    EXPECT_GT(body_tensors, 0);
    EXPECT_GT(head_tensors, 0);
    // The third step moves the encoder.
    const auto encoder_word = [&](const mlm_trainer& t) {
      for (const auto& [name, tensor] : t.named_parameters())
        if (name == body + "embeddings.word_embeddings.weight") return tensor.clone();
      return torch::Tensor();
    };
    const auto held_words = encoder_word(held);
    step_window(held, 8);
    EXPECT_FALSE(encoder_word(held).equal(held_words)) << type << ": the encoder learns after the held steps";
  }
}

}  // namespace
}  // namespace troupe::compute
