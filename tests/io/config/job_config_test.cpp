#include "io/config/job_config.hpp"

#include <gtest/gtest.h>

#include "io/data/synthetic_dataset.hpp"
#include "io/data/token_dataset.hpp"
#include "messages/error.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

json valid_config() {
  return json::parse(R"({
    "train_batch_size": 32, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 4,
    "bf16": {"enabled": true},
    "model": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2},
    "optimizer": {"type": "Lamb", "params": {"lr": 0.001, "betas": [0.9, 0.98], "max_coeff": 5.0}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10, "warmup_max_lr": 0.001}},
    "data": {"dir": "data/x"}
  })");
}

/// Parses and expects a troupe::error mentioning every fragment.
void expect_error(const json& config, std::initializer_list<std::string> fragments, int64_t workers = 1) {
  try {
    parse_job_config(config, "job.json", workers);
    FAIL() << "accepted: " << config.dump();
  } catch (const troupe::error& e) {
    for (const auto& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "'" << fragment << "' not in: " << e.what();
  }
}

TEST(job_config, valid_config_parses_with_deepspeed_names) {
  auto config = parse_job_config(valid_config(), "job.json");
  EXPECT_EQ(config.micro_batch_size, 8);
  EXPECT_EQ(config.gradient_accumulation_steps, 4);
  EXPECT_TRUE(config.bf16);
  EXPECT_EQ(config.optimizer.kind, compute::optimizer_kind::lamb);
  EXPECT_DOUBLE_EQ(config.optimizer.beta2, 0.98);
  EXPECT_DOUBLE_EQ(config.optimizer.max_trust, 5.0);
  EXPECT_EQ(config.scheduler.kind, compute::schedule_kind::warmup_decay);
  EXPECT_EQ(config.scheduler.total_num_steps, config.train_steps);
  EXPECT_EQ(config.model.intermediate_size, 256);
  config.set_train_steps(777);
  EXPECT_EQ(config.scheduler.total_num_steps, 777);
}

json fp16_config() {
  auto config = valid_config();
  config.erase("bf16");
  config["fp16"] = {{"enabled", true}};
  config["runtime"]["device"] = "cuda:0";
  return config;
}

TEST(job_config, fp16_takes_deepspeeds_loss_scaling_names_and_defaults) {
  auto config = parse_job_config(fp16_config(), "job.json");
  EXPECT_TRUE(config.fp16);
  EXPECT_FALSE(config.bf16);
  EXPECT_TRUE(config.loss_scaling.dynamic());
  EXPECT_EQ(config.loss_scaling.initial_scale_power, 16);
  EXPECT_EQ(config.loss_scaling.loss_scale_window, 1000);
  EXPECT_EQ(config.loss_scaling.hysteresis, 2);
  EXPECT_FALSE(config.loss_scaling.consecutive_hysteresis);
  EXPECT_EQ(config.loss_scaling.min_loss_scale, 1.0);
  auto given = fp16_config();
  given["fp16"] = {{"enabled", true},          {"loss_scale", 0},         {"initial_scale_power", 12},
                   {"loss_scale_window", 500}, {"hysteresis", 4},         {"consecutive_hysteresis", true},
                   {"min_loss_scale", 0.25}};
  config = parse_job_config(given, "job.json");
  EXPECT_EQ(config.loss_scaling.initial_scale_power, 12);
  EXPECT_EQ(config.loss_scaling.loss_scale_window, 500);
  EXPECT_EQ(config.loss_scaling.hysteresis, 4);
  EXPECT_TRUE(config.loss_scaling.consecutive_hysteresis);
  EXPECT_EQ(config.loss_scaling.min_loss_scale, 0.25);
  given["fp16"]["loss_scale"] = 1024;
  EXPECT_FALSE(parse_job_config(given, "job.json").loss_scaling.dynamic());
}

TEST(job_config, fp16_refusals_name_the_field) {
  auto config = fp16_config();
  config["runtime"]["device"] = "cpu";
  expect_error(config, {"job.json", "fp16.enabled", "runtime.device \"cpu\"", "bf16.enabled"});
  config = fp16_config();
  config["fp16"]["hysteresis"] = 0;
  expect_error(config, {"fp16.hysteresis"});
  config = fp16_config();
  config["fp16"]["loss_scale_window"] = 0;
  expect_error(config, {"fp16.loss_scale_window"});
  config = fp16_config();
  config["fp16"]["min_loss_scale"] = 0;
  expect_error(config, {"fp16.min_loss_scale"});
  config = fp16_config();
  config["fp16"]["initial_scale_power"] = 65;
  expect_error(config, {"fp16.initial_scale_power"});
  config = fp16_config();
  config["fp16"]["initial_scale_power"] = 2;
  config["fp16"]["min_loss_scale"] = 8;
  expect_error(config, {"fp16.initial_scale_power", "min_loss_scale"});
  config = fp16_config();
  config["fp16"]["loss_scale_windw"] = 10;
  expect_error(config, {"fp16", "loss_scale_windw"});
}

TEST(job_config, zero_optimization_takes_deepspeeds_bucket_names_at_stage_0_only) {
  auto config = valid_config();
  const auto defaults = parse_job_config(config, "job.json");
  EXPECT_TRUE(defaults.overlap_comm);
  EXPECT_EQ(defaults.reduce_bucket_size, 1'000'000);
  config["zero_optimization"] = {{"stage", 0}, {"overlap_comm", false}, {"reduce_bucket_size", 5e5}};
  const auto set = parse_job_config(config, "job.json");
  EXPECT_FALSE(set.overlap_comm);
  EXPECT_EQ(set.reduce_bucket_size, 500'000);
  config["zero_optimization"] = {{"stage", 2}};
  expect_error(config, {"job.json", "zero_optimization.stage", "no ZeRO partitioning"});
  config["zero_optimization"] = {{"reduce_bucket_size", 0}};
  expect_error(config, {"zero_optimization.reduce_bucket_size"});
  config["zero_optimization"] = {{"reduce_bucket_size", 2.5}};
  expect_error(config, {"zero_optimization.reduce_bucket_size", "whole number"});
  config["zero_optimization"] = {{"overlap_com", true}};
  expect_error(config, {"zero_optimization", "overlap_com", "overlap_comm"});
}

TEST(job_config, communication_data_type_takes_deepspeeds_names) {
  auto config = valid_config();
  EXPECT_EQ(parse_job_config(config, "job.json").communication_data_type, "fp32");
  for (const std::string type : {"fp32", "bf16", "fp16"}) {
    config["communication_data_type"] = type;
    EXPECT_EQ(parse_job_config(config, "job.json").communication_data_type, type);
  }
  config["communication_data_type"] = "int8";
  expect_error(config, {"job.json", "communication_data_type", "\"int8\"", "bf16"});
  config["communication_data_type"] = 16;
  expect_error(config, {"communication_data_type"});
}

// The `profiler` block takes the PyTorch profiler schedule's names (wait, active); off by default.
TEST(job_config, profiler_block_takes_the_schedule_and_refuses_what_it_cannot_do) {
  auto config = valid_config();
  EXPECT_FALSE(parse_job_config(config, "job.json").profiler.enabled);
  config["profiler"] = {{"enabled", true}, {"wait", 3}, {"active", 2}, {"output_path", "traces"}};
  const auto parsed = parse_job_config(config, "job.json");
  EXPECT_TRUE(parsed.profiler.enabled);
  EXPECT_EQ(parsed.profiler.wait, 3);
  EXPECT_EQ(parsed.profiler.active, 2);
  EXPECT_EQ(parsed.profiler.output_path, "traces");
  config["profiler"]["active"] = 0;
  expect_error(config, {"job.json", "profiler.active"});
  config["profiler"]["active"] = 1;
  config["profiler"]["wait"] = -1;
  expect_error(config, {"profiler.wait"});
  config["profiler"]["wait"] = 1;
  config["profiler"]["warmup"] = 1;  // torch.profiler.schedule's, not (yet) troupe's
  expect_error(config, {"profiler", "warmup"});
}

TEST(job_config, batch_sizes_are_derived_like_deepspeed) {
  auto config = valid_config();
  config.erase("gradient_accumulation_steps");
  EXPECT_EQ(parse_job_config(config, "job.json", 2).gradient_accumulation_steps, 2);
  config = valid_config();
  config.erase("train_batch_size");
  EXPECT_EQ(parse_job_config(config, "job.json", 3).train_batch_size, 96);
}

TEST(job_config, unknown_keys_are_refused_with_the_nearest_valid_one) {
  auto config = valid_config();
  config["gradient_acumulation_steps"] = 4;
  expect_error(config, {"job.json", "gradient_acumulation_steps", "unknown key", "did you mean 'gradient_accumulation_steps'"});
  config = valid_config();
  config["optimizer"]["params"]["weight_decai"] = 0.1;
  expect_error(config, {"optimizer.params.weight_decai", "optimizer.params.weight_decay"});
  config = valid_config();
  config["model"]["hiden_size"] = 3;
  expect_error(config, {"model.hiden_size", "did you mean 'model.hidden_size'"});
}

TEST(job_config, wrong_types_name_the_path_and_the_expectation) {
  auto config = valid_config();
  config["optimizer"]["params"]["lr"] = "fast";
  expect_error(config, {"optimizer.params.lr", "expected a number", "\"fast\""});
  config = valid_config();
  config["bf16"]["enabled"] = 1;
  expect_error(config, {"bf16.enabled", "true or false"});
  config = valid_config();
  config["model"] = 7;
  expect_error(config, {"model", "JSON object"});
  config = valid_config();
  config["train_micro_batch_size_per_gpu"] = 8.5;
  expect_error(config, {"train_micro_batch_size_per_gpu", "an integer"});
}

TEST(job_config, out_of_range_values_are_refused) {
  auto config = valid_config();
  config["optimizer"]["params"]["lr"] = -1;
  expect_error(config, {"optimizer.params.lr", "[0, 10]"});
  config = valid_config();
  config["optimizer"]["params"]["betas"] = {0.9, 1.0};
  expect_error(config, {"optimizer.params.betas", "[0, 1)"});
  config = valid_config();
  config["model"]["num_attention_heads"] = 3;
  expect_error(config, {"model.hidden_size", "multiple of num_attention_heads"});
  config = valid_config();
  config["data"]["mask_probability"] = 0.95;
  expect_error(config, {"data.mask_probability"});
  config = valid_config();
  config["runtime"]["device"] = "tpu";
  expect_error(config, {"runtime.device"});
  config = valid_config();
  config["scheduler"]["params"]["warmup_type"] = "cosine";
  expect_error(config, {"scheduler.params.warmup_type", "\"linear\", \"log\""});
  config = valid_config();
  config["checkpoint"]["when_busy"] = "drop";
  expect_error(config, {"checkpoint.when_busy", "\"wait\", \"skip\""});
  config = valid_config();
  config["fp16"]["enabled"] = true;
  expect_error(config, {"fp16.enabled", "bf16.enabled is true"});
  config = valid_config();
  config["eval_every_windows"] = -1;
  expect_error(config, {"eval_every_windows"});
  config = valid_config();
  config["eval_samples"] = 0;
  expect_error(config, {"eval_samples"});
  config = valid_config();
  config["data"]["whole_word_masking"] = true;
  config["data"]["max_ngram"] = 3;
  expect_error(config, {"data.whole_word_masking", "max_ngram"});
  config = valid_config();
  config["data"]["whole_word_masking"] = "yes";
  expect_error(config, {"data.whole_word_masking"});
}

TEST(job_config, monitor_blocks_use_deepspeeds_names) {
  auto config = valid_config();
  auto parsed = parse_job_config(config, "job.json");
  EXPECT_TRUE(parsed.tensorboard.enabled) << "TensorBoard files by default";
  EXPECT_FALSE(parsed.csv_monitor.enabled);
  config["tensorboard"] = {{"enabled", false}};
  config["csv_monitor"] = {{"enabled", true}, {"output_path", "logs"}, {"job_name", "bert"}};
  parsed = parse_job_config(config, "job.json");
  EXPECT_FALSE(parsed.tensorboard.enabled);
  EXPECT_EQ(parsed.csv_monitor.output_path, "logs");
  EXPECT_EQ(parsed.csv_monitor.job_name, "bert");
  config["csv_monitor"]["job_name"] = "a/b";
  expect_error(config, {"csv_monitor.job_name", "a folder name"});
  config = valid_config();
  config["tensorboard"] = {{"enabled", "yes"}};
  expect_error(config, {"tensorboard.enabled", "true or false"});
  config = valid_config();
  config["tensorboard"] = {{"outputpath", "x"}};
  expect_error(config, {"tensorboard.outputpath", "did you mean 'tensorboard.output_path'"});
}

TEST(job_config, inconsistent_batch_sizes_are_refused) {
  auto config = valid_config();
  config["train_batch_size"] = 30;
  expect_error(config, {"train_batch_size", "8 × 4 × 1 = 32", "30"});
  expect_error(valid_config(), {"train_batch_size", "8 × 4 × 2 = 64"}, /*workers=*/2);
  config = valid_config();
  config.erase("gradient_accumulation_steps");
  config["train_batch_size"] = 20;
  expect_error(config, {"train_batch_size", "multiple of"});
  config = valid_config();
  config.erase("train_batch_size");
  config.erase("train_micro_batch_size_per_gpu");
  expect_error(config, {"train_micro_batch_size_per_gpu"});
}

TEST(job_config, missing_file_and_bad_json_name_the_file) {
  troupe::testing::temp_dir dir;
  try {
    load_job_config(dir / "absent.json");
    FAIL();
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.json: config file not found"), std::string::npos) << e.what();
  }
  troupe::testing::write_text(dir / "bad.json", "{\"train_batch_size\": 32,");
  try {
    load_job_config(dir / "bad.json");
    FAIL();
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(job_config, model_and_data_vocabularies_must_agree) {
  troupe::testing::temp_dir dir;
  write_synthetic_dataset(dir / "data", 20, 16, 200, 1);
  token_dataset data(dir / "data", "train");
  auto config = parse_job_config(valid_config(), "job.json");
  config.data.dir = dir / "data";
  reconcile_with_data(config, data.manifest(), "job.json");
  EXPECT_EQ(config.model.vocab_size, 200);
  config.model.vocab_size = 30522;
  try {
    reconcile_with_data(config, data.manifest(), "job.json");
    FAIL();
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("model.vocab_size: 30522 differs from the data's vocabulary of 200"),
              std::string::npos)
        << e.what();
  }
  config.model.vocab_size = 200;
  config.model.max_position_embeddings = 8;
  try {
    reconcile_with_data(config, data.manifest(), "job.json");
    FAIL();
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("job.json: model.max_position_embeddings: 8 is shorter than the data's "
                                         "max_seq_length 16 ("),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace troupe::io

namespace troupe::io {
namespace {

TEST(job_config, the_task_block_makes_a_fine_tuning_job_and_its_refusals_name_the_field) {
  auto c = valid_config();
  c.erase("model");
  c["task"] = {{"type", "sequence_classification"}, {"pretrained", "runs/pretrain"}, {"dropout", 0.2}};
  auto config = parse_job_config(c, "job.json");
  ASSERT_TRUE(config.task.has_value());
  EXPECT_EQ(config.task->head.type, compute::task_type::sequence_classification);
  EXPECT_EQ(config.task->pretrained, "runs/pretrain");
  EXPECT_EQ(config.task->head.dropout, 0.2);
  EXPECT_TRUE(config.model_from_pretrained) << "no model block: the pretrained model's";
  c["model"] = {{"hidden_size", 64}, {"num_attention_heads", 2}};
  EXPECT_FALSE(parse_job_config(c, "job.json").model_from_pretrained);
  EXPECT_FALSE(parse_job_config(valid_config(), "job.json").task.has_value());
  auto evaluated = c;
  evaluated["eval_every_windows"] = 10;  // the held-out task loss and accuracy every 10 steps
  EXPECT_EQ(parse_job_config(evaluated, "job.json").eval_every_windows, 10);

  auto bad = c;
  bad["task"]["type"] = "ner";
  expect_error(bad, {"job.json", "task.type", "question_answering"});
  bad = c;
  bad["task"].erase("type");
  expect_error(bad, {"task.type", "\"question_answering\" or \"sequence_classification\""});
  bad = c;
  bad["task"]["pretrianed"] = "x";
  expect_error(bad, {"task.pretrianed", "pretrained"});
  bad = c;
  bad["task"]["dropout"] = 1.5;
  expect_error(bad, {"task.dropout"});
  auto rescaled = c;
  rescaled["task"]["rescale_embeddings"] = true;
  EXPECT_TRUE(parse_job_config(rescaled, "job.json").task->rescale_embeddings);
  EXPECT_FALSE(config.task->rescale_embeddings) << "HF's behaviour unless asked";
  bad = rescaled;
  bad["task"]["rescale_embeddings"] = "yes";
  expect_error(bad, {"task.rescale_embeddings"});
  bad = rescaled;
  bad["task"].erase("pretrained");
  expect_error(bad, {"task.rescale_embeddings", "task.pretrained"});
  EXPECT_EQ(config.task->frozen_encoder_steps, 0) << "everything learns from the first step unless asked";
  auto probed = c;
  probed["task"]["frozen_encoder_steps"] = 250;
  EXPECT_EQ(parse_job_config(probed, "job.json").task->frozen_encoder_steps, 250);
  for (const json& wrong : {json(-1), json(2.5), json("all")}) {
    bad = probed;
    bad["task"]["frozen_encoder_steps"] = wrong;
    expect_error(bad, {"task.frozen_encoder_steps"});
  }
  bad = c;
  bad["distillation"] = {{"teacher", "runs/teacher"}};
  expect_error(bad, {"distillation", "fine-tuning job"});
}

TEST(job_config, fine_tuning_takes_its_labels_from_the_data_and_refuses_the_wrong_data) {
  dataset_manifest classify;
  classify.vocab_size = 30522;
  classify.max_seq_length = 64;
  classify.fine_tuning_task = "classify";
  classify.labels = {"negative", "positive"};
  auto c = valid_config();
  c["task"] = {{"type", "sequence_classification"}};
  auto config = parse_job_config(c, "job.json");
  reconcile_with_data(config, classify, "job.json");
  EXPECT_EQ(config.task->head.num_labels, 2);
  EXPECT_EQ(config.task->head.labels, classify.labels);

  c["task"]["type"] = "question_answering";
  auto qa = parse_job_config(c, "job.json");
  try {
    reconcile_with_data(qa, classify, "job.json");
    FAIL() << "question answering on classification data";
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("task.type: \"question_answering\" trains on `troupe prepare --task squad` "
                                         "examples; data/x/manifest.json holds classify examples"),
              std::string::npos)
        << e.what();
  }
  auto pretraining = parse_job_config(valid_config(), "job.json");
  try {
    reconcile_with_data(pretraining, classify, "job.json");
    FAIL() << "pretraining on classification data";
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("holds classify fine-tuning examples"), std::string::npos) << e.what();
  }
  dataset_manifest text;
  text.vocab_size = 30522;
  text.max_seq_length = 64;
  try {
    reconcile_with_data(qa, text, "job.json");
    FAIL() << "question answering on pretraining text";
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("holds pretraining text"), std::string::npos) << e.what();
  }
}

TEST(job_config, sync_block_reads_diloco_and_defaults_to_window) {
  EXPECT_FALSE(parse_job_config(valid_config(), "job.json").sync.diloco_mode());
  auto c = valid_config();
  c["sync"] = json::parse(R"({"mode": "diloco", "inner_steps": 50, "communication_data_type": "bf16",
                               "outer_optimizer": {"type": "nesterov", "params": {"lr": 0.7, "momentum": 0.9}}})");
  const auto config = parse_job_config(c, "job.json");
  ASSERT_TRUE(config.sync.diloco_mode());
  EXPECT_EQ(config.sync.diloco.inner_steps, 50);
  EXPECT_TRUE(config.sync.diloco.nesterov);
  EXPECT_DOUBLE_EQ(config.sync.diloco.outer_lr, 0.7);
  EXPECT_DOUBLE_EQ(config.sync.diloco.outer_momentum, 0.9);
  EXPECT_EQ(config.sync.diloco.communication_data_type, "bf16");
  EXPECT_TRUE(config.sync.outer_step_after(100));
  EXPECT_FALSE(config.sync.outer_step_after(99));
  c["sync"] = {{"mode", "diloco"}, {"outer_optimizer", {{"type", "sgd"}}}};
  EXPECT_FALSE(parse_job_config(c, "job.json").sync.diloco.nesterov);
  c["sync"] = {{"mode", "diloco"}, {"communication_data_type", "int8"}, {"inner_steps", 8}, {"fragments", 4}};
  const auto streaming = parse_job_config(c, "job.json").sync;
  EXPECT_EQ(streaming.diloco.communication_data_type, "int8");
  EXPECT_EQ(streaming.diloco.fragments, 4);
  // Fragment f after steps 2(f + 1) + 8k: 2 → 0, 4 → 1, 6 → 2, 8 → 3, 10 → 0; none between.
  for (const auto& [step, fragment] : std::vector<std::pair<int64_t, int64_t>>{{1, -1}, {2, 0}, {3, -1}, {4, 1}, {6, 2}, {8, 3}, {10, 0}, {16, 3}})
    EXPECT_EQ(streaming.fragment_due_after(step), fragment) << "step " << step;
  EXPECT_EQ(streaming.outer_steps_through(8), 4);
  EXPECT_EQ(streaming.outer_steps_through(9), 5);  // a run's end off the schedule: every fragment steps
  c["sync"] = {{"mode", "diloco"}, {"inner_steps", 8}, {"fragments", 4}, {"overlap_steps", 1}, {"fragment_update_alpha", 0.5}};
  const auto overlapped = parse_job_config(c, "job.json").sync;
  EXPECT_EQ(overlapped.diloco.overlap_steps, 1);
  EXPECT_EQ(overlapped.diloco.fragment_update_alpha, 0.5);
  EXPECT_EQ(overlapped.outer_steps_through(2), 0);  // fragment 0's, sent after step 2, lands after step 3
  EXPECT_EQ(overlapped.outer_steps_through(3), 1);
}

TEST(job_config, bad_sync_blocks_are_refused_naming_the_field) {
  const auto with_sync = [](json sync) {
    auto c = valid_config();
    c["sync"] = std::move(sync);
    return c;
  };
  expect_error(with_sync({{"mode", "local"}}), {"job.json", "sync.mode", "diloco"});
  expect_error(with_sync({{"mode", "window"}, {"inner_steps", 5}}), {"sync.inner_steps"});
  expect_error(with_sync({{"mode", "diloco"}, {"inner_steps", 0}}), {"sync.inner_steps"});
  expect_error(with_sync({{"mode", "diloco"}, {"outer_optimizer", {{"type", "adam"}}}}), {"sync.outer_optimizer.type"});
  expect_error(with_sync({{"mode", "diloco"}, {"outer_optimizer", {{"params", {{"lr", 0}}}}}}),
               {"sync.outer_optimizer.params.lr", "positive"});
  expect_error(with_sync({{"mode", "diloco"}, {"outer_optimizer", {{"params", {{"momentum", 1.5}}}}}}),
               {"sync.outer_optimizer.params.momentum"});
  expect_error(with_sync({{"mode", "diloco"}, {"communication_data_type", "fp8"}}),
               {"sync.communication_data_type", "\"int8\""});
  expect_error(with_sync({{"mode", "diloco"}, {"inner_steps", 10}, {"fragments", 4}}),
               {"sync.fragments", "divisor of inner_steps (10)"});
  expect_error(with_sync({{"mode", "diloco"}, {"fragments", 0}}), {"sync.fragments"});
  expect_error(with_sync({{"mode", "diloco"}, {"inner_steps", 10}, {"fragments", 5}, {"overlap_steps", 2}}),
               {"sync.overlap_steps", "less than inner_steps / fragments (2)"});
  expect_error(with_sync({{"mode", "diloco"}, {"overlap_steps", -1}}), {"sync.overlap_steps"});
  expect_error(with_sync({{"mode", "diloco"}, {"fragment_update_alpha", 1.5}}), {"sync.fragment_update_alpha"});
  auto c = with_sync({{"mode", "diloco"}, {"inner_steps", 10}});
  c["checkpoint"] = {{"every_windows", 15}};
  expect_error(c, {"checkpoint.every_windows", "multiple of sync.inner_steps (10)"});
  c["checkpoint"] = {{"every_windows", 20}};
  c["eval_every_windows"] = 5;
  expect_error(c, {"eval_every_windows", "multiple of sync.inner_steps"});
  c.erase("eval_every_windows");
  c["sync_every_micro_batch"] = true;
  expect_error(c, {"sync_every_micro_batch", "diloco"});
  c.erase("sync_every_micro_batch");
  c["communication_data_type"] = "bf16";
  expect_error(c, {"communication_data_type", "sync.communication_data_type"});
}

TEST(job_config, sgd_takes_torch_s_parameters_and_nothing_of_adam) {
  auto c = valid_config();
  c["optimizer"] = json::parse(R"({"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "nesterov": true}})");
  const auto config = parse_job_config(c, "job.json");
  EXPECT_EQ(config.optimizer.kind, compute::optimizer_kind::sgd);
  EXPECT_DOUBLE_EQ(config.optimizer.momentum, 0.9);
  EXPECT_TRUE(config.optimizer.nesterov);
  EXPECT_DOUBLE_EQ(config.optimizer.weight_decay, 0.0);  // torch.optim.SGD's default
  c["optimizer"]["params"]["betas"] = {0.9, 0.99};
  expect_error(c, {"optimizer.params.betas"});
  c["optimizer"]["params"].erase("betas");
  c["optimizer"]["params"]["momentum"] = 0;
  expect_error(c, {"optimizer.params.nesterov", "momentum > 0"});
}

TEST(job_config, adamw_takes_torch_s_fused_switch_and_lamb_does_not) {
  auto c = valid_config();
  c["optimizer"] = json::parse(R"({"type": "AdamW", "params": {"lr": 0.001}})");
  EXPECT_TRUE(parse_job_config(c, "job.json").optimizer.fused);  // one pass, as before
  c["optimizer"]["params"]["fused"] = false;
  EXPECT_FALSE(parse_job_config(c, "job.json").optimizer.fused);
  c["optimizer"]["params"]["fused"] = "yes";
  expect_error(c, {"optimizer.params.fused"});
  c["optimizer"] = json::parse(R"({"type": "Lamb", "params": {"lr": 0.001, "fused": true}})");
  expect_error(c, {"optimizer.params", "fused"});
}

}  // namespace
}  // namespace troupe::io
