#include "io/config/job_config.hpp"

#include <spdlog/spdlog.h>

#include <cmath>

#include "io/config/json_fields.hpp"
#include "io/config/sync_block.hpp"
#include "io/os/cpu_features.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr int64_t big = int64_t{1} << 40;

compute::bert_config parse_model(json_fields& fields) {
  compute::bert_config model;
  model.model_type = fields.choice("type", "bert", {"bert", "distilbert", "albert"});
  const bool distilbert = model.model_type == "distilbert", albert = model.model_type == "albert";
  model.vocab_size = fields.integer("vocab_size", 0, 0, 1 << 24);
  model.hidden_size = fields.integer("hidden_size", model.hidden_size, 1, 1 << 16);
  model.num_hidden_layers = fields.integer("num_hidden_layers", model.num_hidden_layers, 1, 1024);
  model.num_attention_heads = fields.integer("num_attention_heads", model.num_attention_heads, 1, 1024);
  model.intermediate_size = fields.integer("intermediate_size", 4 * model.hidden_size, 1, 1 << 18);
  model.max_position_embeddings = fields.integer("max_position_embeddings", model.max_position_embeddings, 8, 65536);
  if (distilbert && fields.has("type_vocab_size"))
    fields.fail("type_vocab_size", "no value: DistilBERT has no token-type embeddings");
  model.type_vocab_size = fields.integer("type_vocab_size", model.type_vocab_size, 2, 16);
  model.hidden_dropout_prob = fields.number("hidden_dropout_prob", model.hidden_dropout_prob, 0.0, 0.99);
  model.attention_probs_dropout_prob =
      fields.number("attention_probs_dropout_prob", model.attention_probs_dropout_prob, 0.0, 0.99);
  model.layer_norm_eps = fields.number("layer_norm_eps", model.layer_norm_eps, 1e-20, 1e-1);
  if (distilbert && model.layer_norm_eps != 1e-12)
    fields.fail("layer_norm_eps", "1e-12: HF's DistilBertConfig has no layer_norm_eps and uses 1e-12");
  model.initializer_range = fields.number("initializer_range", model.initializer_range, 1e-6, 1.0);
  if (model.hidden_size % model.num_attention_heads != 0)
    fields.fail("hidden_size", detail::concat("a multiple of num_attention_heads (", model.num_attention_heads, ")"));
  model.hidden_act = distilbert ? fields.choice("hidden_act", "gelu", {"gelu"})
                                : fields.choice("hidden_act", albert ? "gelu_new" : "gelu", {"gelu", "gelu_new"});
  for (const char* key : {"embedding_size", "num_hidden_groups", "inner_group_num", "classifier_dropout_prob",
                          "sentence_order_prediction"})
    if (!albert && fields.has(key)) fields.fail(key, "no value: only ALBERT (\"type\": \"albert\") has it");
  if (albert) {
    model.embedding_size = fields.integer("embedding_size", model.embedding_size, 1, 1 << 16);
    model.num_hidden_groups = fields.integer("num_hidden_groups", 1, 1, model.num_hidden_layers);
    model.inner_group_num = fields.integer("inner_group_num", 1, 1, 64);
    model.classifier_dropout_prob = fields.number("classifier_dropout_prob", model.classifier_dropout_prob, 0.0, 0.99);
    model.sentence_order_prediction = fields.boolean("sentence_order_prediction", true);
  }
  fields.finish();
  return model;
}

/// The `distillation` block (compute/distillation_config.hpp); the teacher itself is checked
/// against the student and the data when it is read (io/checkpoint/teacher_checkpoint.hpp).
compute::distillation_config parse_distillation(json_fields& fields) {
  compute::distillation_config d;
  d.enabled = true;
  d.teacher = fields.string("teacher", "");
  if (d.teacher.empty()) fields.fail("teacher", "the run directory or checkpoint directory of a trained BERT");
  auto& w = d.weights;
  w.temperature = fields.number("temperature", w.temperature, 1e-3, 1e3);
  w.alpha_ce = fields.number("alpha_ce", w.alpha_ce, 0.0, 1e4);
  w.alpha_mlm = fields.number("alpha_mlm", w.alpha_mlm, 0.0, 1e4);
  w.alpha_cos = fields.number("alpha_cos", w.alpha_cos, 0.0, 1e4);
  w.alpha_mse = fields.number("alpha_mse", w.alpha_mse, 0.0, 1e4);
  if (w.alpha_ce + w.alpha_mlm + w.alpha_cos + w.alpha_mse <= 0)
    fields.fail("alpha_ce", "a positive weight on at least one of alpha_ce, alpha_mlm, alpha_cos, alpha_mse");
  d.restrict_ce_to_mask = fields.boolean("restrict_ce_to_mask", false);
  d.student_from_teacher = fields.choice("student_init", "teacher", {"teacher", "random"}) == "teacher";
  const auto layers = fields.array("teacher_layers");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (!layers[i].is_number_integer() || layers[i].get<int64_t>() < 0)
      fields.fail("teacher_layers", detail::concat("a list of teacher layer indices (element ", i, " is ",
                                                   layers[i].dump(), ")"));
    d.teacher_layers.push_back(layers[i].get<int64_t>());
  }
  if (!d.teacher_layers.empty() && !d.student_from_teacher)
    fields.fail("teacher_layers", "no value with \"student_init\": \"random\" (nothing is copied)");
  fields.finish();
  return d;
}

/// The `task` block; the labels come from the data, the pretrained model is read and checked
/// when the job starts (io/checkpoint/pretrained_encoder.hpp).
task_config parse_task(json_fields& fields) {
  task_config task;
  if (!fields.has("type")) fields.fail("type", "\"question_answering\" or \"sequence_classification\"");
  task.head.type = compute::parse_task_type(fields.choice("type", "", {"question_answering", "sequence_classification"}),
                                            "task.type");
  task.pretrained = fields.string("pretrained", "");
  task.rescale_embeddings = fields.boolean("rescale_embeddings", false);
  if (task.rescale_embeddings && task.pretrained.empty())
    fields.fail("rescale_embeddings", "true only with task.pretrained (it rescales the pretrained embeddings)");
  task.frozen_encoder_steps = fields.integer("frozen_encoder_steps", 0, 0, int64_t{1} << 40);
  task.head.dropout = fields.number("dropout", -1.0, 0.0, 0.99);
  fields.finish();
  return task;
}

/// torch.optim.SGD's parameters (DeepSpeed hands "SGD" to torch): no betas or eps.
void parse_sgd(json_fields& params, compute::optimizer_config& optimizer) {
  optimizer.weight_decay = params.number("weight_decay", 0.0, 0.0, 10.0);
  optimizer.momentum = params.number("momentum", 0.0, 0.0, 1.0);
  optimizer.dampening = params.number("dampening", 0.0, 0.0, 1.0);
  optimizer.nesterov = params.boolean("nesterov", false);
  if (optimizer.nesterov && (optimizer.momentum <= 0.0 || optimizer.dampening != 0.0))
    params.fail("nesterov", "false unless momentum > 0 and dampening is 0 (as torch.optim.SGD requires)");
}

compute::optimizer_config parse_optimizer(json_fields& fields) {
  compute::optimizer_config optimizer;
  auto type = fields.choice("type", "AdamW", {"AdamW", "Adam", "Lamb", "LAMB", "SGD"});
  optimizer.kind = (type == "Lamb" || type == "LAMB") ? compute::optimizer_kind::lamb
                   : type == "SGD"                    ? compute::optimizer_kind::sgd
                                                      : compute::optimizer_kind::adamw;
  if (optimizer.kind == compute::optimizer_kind::lamb) optimizer.eps = 1e-6;
  auto params = fields.object("params");
  optimizer.lr = params.number("lr", optimizer.lr, 0.0, 10.0);
  if (optimizer.kind == compute::optimizer_kind::sgd) {
    parse_sgd(params, optimizer);
    params.finish();
    fields.finish();
    return optimizer;
  }
  auto betas = params.numbers("betas", {optimizer.beta1, optimizer.beta2}, 2);
  for (double beta : betas)
    if (beta < 0.0 || beta >= 1.0) params.fail("betas", "two numbers in [0, 1)");
  optimizer.beta1 = betas[0];
  optimizer.beta2 = betas[1];
  optimizer.eps = params.number("eps", optimizer.eps, 0.0, 1.0);
  optimizer.weight_decay = params.number("weight_decay", optimizer.weight_decay, 0.0, 10.0);
  if (optimizer.kind == compute::optimizer_kind::adamw) optimizer.fused = params.boolean("fused", optimizer.fused);
  if (optimizer.kind == compute::optimizer_kind::lamb) {
    optimizer.bias_correction = params.boolean("bias_correction", true);
    optimizer.max_trust = params.number("max_coeff", optimizer.max_trust, 0.0, 1e6);
    optimizer.min_trust = params.number("min_coeff", optimizer.min_trust, 0.0, optimizer.max_trust);
  }
  params.finish();
  fields.finish();
  return optimizer;
}

compute::schedule_config parse_scheduler(json_fields& fields, double base_lr, int64_t train_steps) {
  compute::schedule_config schedule;
  schedule.warmup_max_lr = base_lr;
  schedule.total_num_steps = train_steps;
  if (!fields.has("type")) {
    if (fields.has("params")) fields.fail("type", "one of \"WarmupDecayLR\", \"WarmupLinearDecayExp\", \"Constant\"");
    fields.finish();
    return schedule;
  }
  auto type = fields.choice("type", "", {"WarmupDecayLR", "WarmupLinearDecayExp", "Constant"});
  auto params = fields.object("params");
  if (type == "WarmupDecayLR") {
    schedule.kind = compute::schedule_kind::warmup_decay;
    schedule.warmup_min_lr = params.number("warmup_min_lr", 0.0, 0.0, 10.0);
    schedule.warmup_max_lr = params.number("warmup_max_lr", base_lr, 0.0, 10.0);
    schedule.warmup_num_steps = params.integer("warmup_num_steps", 0, 0, big);
    schedule.total_num_steps = params.integer("total_num_steps", train_steps, 1, big);
    schedule.shape = params.choice("warmup_type", "linear", {"linear", "log"}) == "log"
                         ? compute::warmup_shape::log
                         : compute::warmup_shape::linear;
    if (schedule.warmup_num_steps > schedule.total_num_steps)
      params.fail("warmup_num_steps", "at most total_num_steps");
  } else if (type == "WarmupLinearDecayExp") {
    schedule.kind = compute::schedule_kind::warmup_linear_decay_exp;
    schedule.warmup_max_lr = params.number("lr", base_lr, 0.0, 10.0);
    schedule.warmup_proportion = params.number("warmup_proportion", schedule.warmup_proportion, 0.0, 1.0);
    schedule.decay_rate = params.number("decay_rate", schedule.decay_rate, 0.0, 1.0);
    schedule.decay_steps = params.integer("decay_steps", schedule.decay_steps, 1, big);
    schedule.total_num_steps = params.integer("total_num_steps", train_steps, 1, big);
  }
  params.finish();
  fields.finish();
  return schedule;
}

void resolve_batch_sizes(job_config& config, json_fields& root, int64_t workers) {
  int64_t& total = config.train_batch_size;
  int64_t& micro = config.micro_batch_size;
  int64_t& accumulation = config.gradient_accumulation_steps;
  if (total > 0 && micro > 0 && accumulation > 0) {
    if (total != micro * accumulation * workers)
      root.fail("train_batch_size",
                detail::concat("train_micro_batch_size_per_gpu × gradient_accumulation_steps × workers = ", micro,
                               " × ", accumulation, " × ", workers, " = ", micro * accumulation * workers));
  } else if (total > 0 && micro > 0) {
    if (total % (micro * workers) != 0)
      root.fail("train_batch_size", detail::concat("a multiple of train_micro_batch_size_per_gpu × workers = ",
                                                   micro * workers));
    accumulation = total / (micro * workers);
  } else if (total > 0 && accumulation > 0) {
    if (total % (accumulation * workers) != 0)
      root.fail("train_batch_size", detail::concat("a multiple of gradient_accumulation_steps × workers = ",
                                                   accumulation * workers));
    micro = total / (accumulation * workers);
  } else if (micro > 0) {
    if (accumulation == 0) accumulation = 1;
    total = micro * accumulation * workers;
  } else if (total > 0) {
    accumulation = 1;
    if (total % workers != 0) root.fail("train_batch_size", detail::concat("a multiple of workers = ", workers));
    micro = total / workers;
  } else {
    root.fail("train_micro_batch_size_per_gpu", "a positive integer (or train_batch_size)");
  }
}

void parse_data(json_fields& root, job_config& config) {
  auto data = root.object("data");
  config.data.dir = data.string("dir", "");
  if (config.data.dir.empty()) data.fail("dir", "the path of a directory written by `troupe prepare`");
  config.data.prefetch = data.integer("prefetch", config.data.prefetch, 1, 1024);
  config.data.mask_probability = data.number("mask_probability", config.data.mask_probability, 0.01, 0.9);
  config.data.mlm_smoothing = data.number("mlm_smoothing", 0.0, 0.0, 10.0);
  config.data.max_ngram = data.integer("max_ngram", 1, 1, 10);
  if (config.data.max_ngram > 1 && config.data.mlm_smoothing > 0)
    data.fail("max_ngram", "1 when mlm_smoothing is set (choose frequency-smoothed tokens or n-gram spans)");
  config.data.whole_word_masking = data.boolean("whole_word_masking", false);
  if (config.data.whole_word_masking && (config.data.max_ngram > 1 || config.data.mlm_smoothing > 0))
    data.fail("whole_word_masking", "false when max_ngram > 1 or mlm_smoothing is set (one way of choosing what to mask)");
  data.finish();
}

void parse_checkpoint(json_fields& root, job_config& config) {
  auto checkpoint = root.object("checkpoint");
  config.checkpoint.every_windows = checkpoint.integer("every_windows", 0, 0, big);
  config.checkpoint.keep = checkpoint.integer("keep", 2, 1, 1000);
  config.checkpoint.max_staging_bytes =
      checkpoint.integer("max_staging_bytes", config.checkpoint.max_staging_bytes, 1, INT64_MAX);
  config.checkpoint.skip_when_busy = checkpoint.choice("when_busy", "wait", {"wait", "skip"}) == "skip";
  checkpoint.finish();
}

/// DeepSpeed's tensorboard and csv_monitor blocks.
void parse_monitors(json_fields& root, job_config& config) {
  for (auto [name, monitor] : {std::pair{"tensorboard", &config.tensorboard}, std::pair{"csv_monitor", &config.csv_monitor}}) {
    auto block = root.object(name);
    monitor->enabled = block.boolean("enabled", monitor->enabled);
    monitor->output_path = block.string("output_path", "");
    monitor->job_name = block.string("job_name", "");
    if (monitor->job_name.find('/') != std::string::npos || monitor->job_name == "..")
      block.fail("job_name", "a folder name (no '/')");
    block.finish();
  }
}

void parse_profiler(json_fields& root, job_config& config) {
  auto block = root.object("profiler");
  config.profiler.enabled = block.boolean("enabled", false);
  config.profiler.wait = block.integer("wait", config.profiler.wait, 0, big);
  config.profiler.active = block.integer("active", config.profiler.active, 1, 100);
  config.profiler.output_path = block.string("output_path", "");
  block.finish();
}

/// The `sync` block and what DiLoCo rules out elsewhere: its outer steps are the only moments
/// the replicas agree, so checkpoints and held-out evaluations fall on them.
void parse_sync_block(json_fields& root, job_config& config) {
  auto block = root.object("sync");
  config.sync = parse_sync(block);
  if (!config.sync.diloco_mode()) return;
  const int64_t inner = config.sync.diloco.inner_steps;
  if (config.sync_every_micro_batch)
    root.fail("sync_every_micro_batch", "false with sync.mode \"diloco\" (its workers step alone between outer steps)");
  if (config.communication_data_type != "fp32")
    root.fail("communication_data_type", "no value with sync.mode \"diloco\": no gradient crosses the links; set "
                                         "sync.communication_data_type for the pseudo-gradient");
  if (config.checkpoint.every_windows % inner != 0)
    root.object("checkpoint").fail("every_windows", detail::concat("a multiple of sync.inner_steps (", inner,
                                   "): a checkpoint holds the replicas' state right after an outer step"));
  if (config.eval_every_windows % inner != 0)
    root.fail("eval_every_windows", detail::concat("a multiple of sync.inner_steps (", inner,
                                                   "): the held-out score is of the parameters after an outer step"));
}

void parse_runtime(json_fields& root, job_config& config) {
  auto runtime = root.object("runtime");
  config.runtime.device = runtime.string("device", "cpu");
  if (config.runtime.device != "cpu" && config.runtime.device.rfind("cuda", 0) != 0)
    runtime.fail("device", "\"cpu\" or \"cuda:N\"");
  config.runtime.threads = runtime.integer("threads", 1, 1, 1024);
  runtime.finish();
}

}  // namespace

job_config parse_job_config(const nlohmann::json& root_json, const std::string& source, int64_t workers) {
  TROUPE_ENFORCE(workers >= 1, "workers=", workers);
  json_fields root(root_json, source);
  job_config config;
  config.source = root_json;
  config.train_batch_size = root.integer("train_batch_size", 0, 1, big);
  config.micro_batch_size = root.integer("train_micro_batch_size_per_gpu", 0, 1, 1 << 20);
  config.gradient_accumulation_steps = root.integer("gradient_accumulation_steps", 0, 1, 1 << 20);
  resolve_batch_sizes(config, root, workers);
  config.train_steps = root.integer("train_steps", config.train_steps, 1, big);
  config.steps_per_print = root.integer("steps_per_print", config.steps_per_print, 1, big);
  config.eval_every_windows = root.integer("eval_every_windows", 0, 0, big);
  config.eval_samples = root.integer("eval_samples", config.eval_samples, 1, 1 << 24);
  config.seed = static_cast<uint64_t>(root.integer("seed", 42, 0, INT64_MAX));
  config.gradient_clipping = root.number("gradient_clipping", config.gradient_clipping, 0.0, 1e9);
  config.sync_every_micro_batch = root.boolean("sync_every_micro_batch", false);
  config.communication_data_type = root.choice("communication_data_type", "fp32", {"fp32", "bf16", "fp16"});
  auto zero = root.object("zero_optimization");
  if (zero.integer("stage", 0, 0, 3) != 0)
    zero.fail("stage", "0: every worker keeps a whole replica (troupe has no ZeRO partitioning)");
  config.overlap_comm = zero.boolean("overlap_comm", config.overlap_comm);
  // DeepSpeed's examples write it as a float ("5e8"): any whole number of elements.
  const double bucket = zero.number("reduce_bucket_size", static_cast<double>(config.reduce_bucket_size), 1, 1e15);
  if (bucket != std::floor(bucket)) zero.fail("reduce_bucket_size", "a whole number of elements, at least 1 (5e8 is fine)");
  config.reduce_bucket_size = static_cast<int64_t>(bucket);
  zero.finish();

  auto bf16 = root.object("bf16");
  config.bf16 = bf16.boolean("enabled", false);
  bf16.finish();
  auto fp16 = root.object("fp16");
  config.fp16 = fp16.boolean("enabled", false);
  auto& scaling = config.loss_scaling;
  scaling.loss_scale = fp16.number("loss_scale", 0.0, 0.0, 1e30);
  scaling.initial_scale_power = static_cast<int>(fp16.integer("initial_scale_power", 16, 0, 64));
  scaling.loss_scale_window = fp16.integer("loss_scale_window", 1000, 1, INT64_MAX);
  scaling.hysteresis = static_cast<int>(fp16.integer("hysteresis", 2, 1, 1000000));
  scaling.consecutive_hysteresis = fp16.boolean("consecutive_hysteresis", false);
  scaling.min_loss_scale = fp16.number("min_loss_scale", 1.0, 1e-30, 1e30);
  fp16.finish();
  if (config.fp16 && config.bf16)
    fp16.fail("enabled", "false while bf16.enabled is true (one mixed precision at a time)");
  if (config.fp16 && scaling.dynamic() && std::ldexp(1.0, scaling.initial_scale_power) < scaling.min_loss_scale)
    fp16.fail("initial_scale_power", "a scale 2^initial_scale_power of at least min_loss_scale " +
                                         std::to_string(scaling.min_loss_scale));

  auto model = root.object("model");
  config.model = parse_model(model);
  if (root.has("distillation")) {
    auto distillation = root.object("distillation");
    config.distillation = parse_distillation(distillation);
  }
  if (root.has("task")) {
    auto task = root.object("task");
    config.task = parse_task(task);
    config.model_from_pretrained = !root.has("model") && !config.task->pretrained.empty();
    if (config.distillation.enabled) root.fail("distillation", "no value in a fine-tuning job (a `task` block)");
  }
  auto optimizer = root.object("optimizer");
  config.optimizer = parse_optimizer(optimizer);
  auto scheduler = root.object("scheduler");
  config.schedule_follows_train_steps = !scheduler.object("params").has("total_num_steps");
  config.scheduler = parse_scheduler(scheduler, config.optimizer.lr, config.train_steps);

  parse_data(root, config);
  parse_checkpoint(root, config);
  parse_monitors(root, config);
  parse_profiler(root, config);
  parse_runtime(root, config);
  parse_sync_block(root, config);
  if (config.fp16 && config.runtime.device == "cpu")
    fp16.fail("enabled", "false on runtime.device \"cpu\": CPU autocast has no fp16 (use bf16.enabled there); "
                         "fp16 with loss scaling needs a \"cuda:N\" device");

  root.finish();
  return config;
}

void job_config::set_train_steps(int64_t steps) {
  train_steps = steps;
  if (schedule_follows_train_steps) scheduler.total_num_steps = steps;
}

std::filesystem::path output_folder(const std::filesystem::path& output_path, const std::filesystem::path& run_dir,
                                    const char* default_folder) {
  if (output_path.empty()) return run_dir / default_folder;
  return output_path.is_absolute() ? output_path : run_dir / output_path;
}

job_config load_job_config(const std::filesystem::path& file, int64_t workers) {
  if (!std::filesystem::is_regular_file(file)) throw make_error(file.string(), ": config file not found");
  auto config = parse_job_config(parse_json_file(file), file.string(), workers);
  if (config.bf16 && config.runtime.device == "cpu" && !cpu_has_bf16_instructions())
    spdlog::warn("{}: bf16.enabled on a CPU without bf16 instructions (no avx512_bf16 or amx_bf16 in /proc/cpuinfo): "
                 "LibTorch emulates bf16 here, many times slower than fp32 (8.6 against ~140 samples/s for the quick "
                 "start on a 2-core AMD EPYC); \"bf16\": {{\"enabled\": false}} trains in fp32",
                 file.string());
  return config;
}

}  // namespace troupe::io

#include "io/data/token_dataset.hpp"

namespace troupe::io {

namespace {

/// A fine-tuning job needs its task's examples, a pretraining job text; classification takes its
/// labels from the data.
void reconcile_task_with_data(job_config& config, const dataset_manifest& data, const std::string& source,
                              const std::string& manifest) {
  if (!config.task) {
    if (!data.fine_tuning_task.empty())
      throw make_error(source, ": data.dir: ", manifest, " holds ", data.fine_tuning_task,
                       " fine-tuning examples (`troupe prepare --task ", data.fine_tuning_task,
                       "`); a pretraining job reads text prepared without --task or with --task sop, a fine-tuning ",
                       "job has a `task` block (docs/configuration.md#task)");
    return;
  }
  const auto type = config.task->head.type;
  const std::string wanted = type == compute::task_type::question_answering ? "squad" : "classify";
  if (data.fine_tuning_task != wanted)
    throw make_error(source, ": task.type: \"", compute::task_type_name(type), "\" trains on `troupe prepare --task ",
                     wanted, "` examples; ", manifest, " holds ",
                     data.fine_tuning_task.empty() ? "pretraining text" : data.fine_tuning_task + " examples");
  if (type == compute::task_type::sequence_classification) {
    if (data.labels.size() < 2)
      throw make_error(source, ": data.dir: ", manifest, " lists ", data.labels.size(),
                       " label(s); classification needs at least 2");
    config.task->head.labels = data.labels;
    config.task->head.num_labels = static_cast<int64_t>(data.labels.size());
  }
}

}  // namespace

void reconcile_with_data(job_config& config, const dataset_manifest& data, const std::string& source) {
  const std::string manifest = (config.data.dir / "manifest.json").string();
  reconcile_task_with_data(config, data, source, manifest);
  if (config.model.vocab_size == 0) {
    config.model.vocab_size = data.vocab_size;
  } else if (config.model.vocab_size != data.vocab_size) {
    throw make_error(source, ": model.vocab_size: ", config.model.vocab_size,
                     " differs from the data's vocabulary of ", data.vocab_size, " tokens (", manifest,
                     "); the model and the dataset must use the same vocabulary");
  }
  if (config.model.sentence_order_prediction && !data.sentence_order && !config.task)
    throw make_error(source, ": model.sentence_order_prediction: ", manifest,
                     " was prepared without sentence-order labels; prepare the corpus with `troupe prepare --task sop`, "
                     "or set model.sentence_order_prediction to false (masked-LM only)");
  if (static_cast<int64_t>(data.max_seq_length) > config.model.max_position_embeddings)
    throw make_error(source, ": model.max_position_embeddings: ", config.model.max_position_embeddings,
                     " is shorter than the data's max_seq_length ", data.max_seq_length, " (", manifest, ")");
}

}  // namespace troupe::io
