#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "compute/device_check.hpp"
#include "compute/mlm_evaluation.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/data/mlm_batch_builder.hpp"
#include "messages/error.hpp"
#include "tools/commands/commands.hpp"

namespace troupe::tools {
namespace {

struct eval_arguments {
  std::string checkpoint;
  std::string data;
  std::string device = "cpu";
  int64_t max_samples = 0;
  int64_t pseudo_samples = 16;
  int64_t batch_size = 32;
  uint64_t seed = 1234;
  bool bf16 = false;
  bool json = false;
};

double share(int64_t part, int64_t whole) { return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0; }

/// Masked-LM perplexity over the validation split with masks keyed by (seed, epoch 0, sample),
/// the unigram perplexity of the same predicted tokens, and pseudo-perplexity over the first
/// `pseudo_samples` validation sequences.
nlohmann::json evaluate(const eval_arguments& args) {
  compute::check_device(args.device, "--device");
  auto dir = io::resolve_checkpoint(args.checkpoint, args.checkpoint);
  auto checkpoint = io::load_checkpoint(dir, /*with_optimizer=*/false);
  std::string data_dir = args.data;
  if (data_dir.empty()) data_dir = checkpoint.job.value("data", nlohmann::json::object()).value("dir", "");
  if (data_dir.empty()) throw make_error("--data: not given, and the checkpoint's job.json names no data.dir");
  io::token_dataset validation(data_dir, "validation");
  io::token_dataset train(data_dir, "train");
  if (validation.manifest().vocab_hash != checkpoint.state.vocab_hash)
    throw make_error(data_dir, ": vocabulary ", validation.manifest().vocab_hash, " differs from the checkpoint's ",
                     checkpoint.state.vocab_hash, " (", dir.string(), ")");

  compute::mlm_evaluator evaluator(checkpoint.model, checkpoint.parameters, c10::Device(args.device), args.bf16);
  io::mlm_batch_builder builder(validation, 0.15, args.seed);
  const auto counts = io::count_tokens(train);
  const uint64_t samples = args.max_samples > 0 ? std::min<uint64_t>(args.max_samples, validation.size())
                                                : validation.size();
  compute::nll_sum model_nll, unigram;
  compute::top_k_hits model_hits, unigram_guessed;
  const auto& specials = validation.manifest().specials;
  const std::vector<int64_t> special_ids{specials.pad, specials.cls, specials.sep, specials.mask};
  const auto unigram_guesses = compute::unigram_top5(counts, special_ids);
  const bool sentence_order = validation.manifest().sentence_order && checkpoint.model.model_type == "albert";
  int64_t order_correct = 0;
  for (uint64_t start = 0; start < samples; start += static_cast<uint64_t>(args.batch_size)) {
    std::vector<compute::sample_ref> refs;
    for (uint64_t i = start; i < std::min<uint64_t>(samples, start + args.batch_size); ++i) refs.push_back({0, i});
    auto batch = builder.build(refs);
    model_nll.add(evaluator.masked_lm(batch, sentence_order ? &order_correct : nullptr, &model_hits));
    unigram.add(compute::unigram_nll(counts, batch.labels));
    unigram_guessed.add(compute::unigram_hits(unigram_guesses, batch.labels));
  }

  compute::nll_sum pseudo;
  const uint64_t pseudo_samples = std::min<uint64_t>(static_cast<uint64_t>(args.pseudo_samples), validation.size());
  for (uint64_t i = 0; i < pseudo_samples; ++i) {
    auto [tokens, types] = io::sequence_tensors(validation, i);
    pseudo.add(evaluator.pseudo_log_likelihood(tokens, types, validation.sequence(i).length, specials.mask, special_ids,
                                               args.batch_size * 2));
  }

  nlohmann::json result = {{"checkpoint", dir.string()},
                           {"step", checkpoint.state.optimizer_steps},
                           {"data", data_dir},
                           {"validation_sequences", samples},
                           {"masked_tokens", model_nll.tokens},
                           {"mlm_loss", model_nll.mean()},
                           {"perplexity", model_nll.perplexity()},
                           {"unigram_perplexity", unigram.perplexity()},
                           {"accuracy_counts", "masked tokens (each masked sub-word piece once)"},
                           {"top1_accuracy", share(model_hits.top1, model_nll.tokens)},
                           {"top5_accuracy", share(model_hits.top5, model_nll.tokens)},
                           {"unigram_top1_accuracy", share(unigram_guessed.top1, model_nll.tokens)},
                           {"unigram_top5_accuracy", share(unigram_guessed.top5, model_nll.tokens)}};
  if (sentence_order) result["sop_accuracy"] = static_cast<double>(order_correct) / static_cast<double>(samples);
  if (pseudo.tokens > 0) {
    result["pseudo_perplexity"] = pseudo.perplexity();
    result["pseudo_perplexity_sequences"] = pseudo_samples;
    result["pseudo_perplexity_tokens"] = pseudo.tokens;
  }
  return result;
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<eval_arguments>();
  auto* command = app.add_subcommand("eval", "masked-LM perplexity, pseudo-perplexity and the unigram baseline");
  command->add_option("--checkpoint", args->checkpoint, "checkpoint directory or run directory")->required();
  command->add_option("--data", args->data, "data directory (default: the checkpoint's data.dir)");
  command->add_option("--device", args->device, "cpu or cuda:N")->capture_default_str();
  command->add_option("--max-samples", args->max_samples, "validation sequences for perplexity (0: all)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--pseudo-samples", args->pseudo_samples, "sequences scored for pseudo-perplexity")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--batch-size", args->batch_size, "sequences per forward pass")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", args->seed, "seed of the evaluation masks")->capture_default_str();
  command->add_flag("--bf16", args->bf16, "run the model under bf16 autocast");
  command->add_flag("--json", args->json, "print one JSON object");
  command->callback([args] {
    auto result = evaluate(*args);
    if (args->json) {
      std::printf("%s\n", result.dump().c_str());
      return;
    }
    std::printf("checkpoint          %s (step %lld)\n", result["checkpoint"].get<std::string>().c_str(),
                static_cast<long long>(result["step"].get<int64_t>()));
    std::printf("validation          %llu sequences, %lld masked tokens\n",
                static_cast<unsigned long long>(result["validation_sequences"].get<uint64_t>()),
                static_cast<long long>(result["masked_tokens"].get<int64_t>()));
    std::printf("perplexity          %.3f (loss %.4f)\n", result["perplexity"].get<double>(),
                result["mlm_loss"].get<double>());
    std::printf("unigram perplexity  %.3f\n", result["unigram_perplexity"].get<double>());
    std::printf("masked tokens right %.1f%% first guess, %.1f%% in the top 5 (unigram: %.1f%%, %.1f%%; each masked "
                "sub-word piece counts once)\n",
                100 * result["top1_accuracy"].get<double>(), 100 * result["top5_accuracy"].get<double>(),
                100 * result["unigram_top1_accuracy"].get<double>(), 100 * result["unigram_top5_accuracy"].get<double>());
    if (result.contains("sop_accuracy"))
      std::printf("sentence order      %.1f%% right (ALBERT SOP, chance 50%%)\n", 100 * result["sop_accuracy"].get<double>());
    if (result.contains("pseudo_perplexity"))
      std::printf("pseudo-perplexity   %.3f over %lld tokens\n", result["pseudo_perplexity"].get<double>(),
                  static_cast<long long>(result["pseudo_perplexity_tokens"].get<int64_t>()));
  });
}

}  // namespace troupe::tools
