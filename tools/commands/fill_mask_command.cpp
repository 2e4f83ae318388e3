// `troupe fill-mask`: what a checkpoint guesses for [MASK], as HF's fill-mask pipeline shows it,
// for the user's sentences or for held-out ones with a word hidden (the quick start's last
// step: learning shown as guesses beside the truth, not only as a perplexity).

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "compute/counter_random.hpp"
#include "compute/sample_order.hpp"
#include "compute/device_check.hpp"
#include "compute/mlm_evaluation.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/data/data_tokenizer.hpp"
#include "io/data/mlm_batch_builder.hpp"
#include "io/data/token_dataset.hpp"
#include "io/text/detokenize.hpp"
#include "messages/error.hpp"
#include "tools/commands/commands.hpp"

namespace troupe::tools {
namespace {

struct fill_mask_arguments {
  std::string checkpoint;
  std::string data;
  std::vector<std::string> texts;
  int64_t top_k = 5;
  int64_t held_out = 0;
  uint64_t seed = 7;
  std::string device = "cpu";
  bool json = false;
};

constexpr const char* mask_text = "[MASK]";

/// Everything fill-mask needs: the model, the data's tokenizer and its pieces.
struct fill_mask_session {
  std::filesystem::path checkpoint_dir;
  std::filesystem::path data_dir;
  io::dataset_manifest manifest;
  std::unique_ptr<io::tokenizer> tokenizer;
  std::vector<std::string> pieces;
  std::unique_ptr<compute::mlm_evaluator> model;
  int64_t max_positions = 0;

  std::string text(const std::vector<int64_t>& ids) const { return io::join_tokens(manifest.tokenizer_kind, pieces, ids); }
};

fill_mask_session open_session(const fill_mask_arguments& args) {
  compute::check_device(args.device, "--device");
  fill_mask_session s;
  s.checkpoint_dir = io::resolve_checkpoint(args.checkpoint, args.checkpoint);
  auto checkpoint = io::load_checkpoint(s.checkpoint_dir, /*with_optimizer=*/false);
  std::string data_dir = args.data;
  if (data_dir.empty()) data_dir = checkpoint.job.value("data", nlohmann::json::object()).value("dir", "");
  if (data_dir.empty()) throw make_error("--data: not given, and the checkpoint's job config names no data.dir");
  s.data_dir = data_dir;
  s.manifest = io::dataset_manifest::from_file(s.data_dir / "manifest.json");
  if (!checkpoint.state.vocab_hash.empty() && s.manifest.vocab_hash != checkpoint.state.vocab_hash)
    throw make_error(data_dir, ": vocabulary ", s.manifest.vocab_hash, " differs from the checkpoint's ",
                     checkpoint.state.vocab_hash, " (", s.checkpoint_dir.string(), ")");
  s.tokenizer = io::open_data_tokenizer(s.manifest, s.data_dir);
  s.pieces = s.tokenizer->pieces();
  s.max_positions = checkpoint.model.max_position_embeddings;
  s.model = std::make_unique<compute::mlm_evaluator>(checkpoint.model, checkpoint.parameters, c10::Device(args.device),
                                                     false);
  return s;
}

/// [CLS] text [SEP] with every "[MASK]" in the text as the mask token; the mask positions.
std::pair<std::vector<int64_t>, std::vector<int64_t>> encode_with_masks(const fill_mask_session& s,
                                                                        const std::string& text) {
  const auto& specials = s.manifest.specials;
  std::vector<int64_t> ids{specials.cls}, masks;
  std::size_t from = 0;
  while (true) {
    const auto at = text.find(mask_text, from);
    for (auto id : s.tokenizer->encode(std::string_view(text).substr(from, at == std::string::npos ? std::string::npos : at - from)))
      ids.push_back(id);
    if (at == std::string::npos) break;
    masks.push_back(static_cast<int64_t>(ids.size()));
    ids.push_back(specials.mask);
    from = at + std::string(mask_text).size();
  }
  ids.push_back(specials.sep);
  if (masks.empty()) throw make_error("fill-mask: \"", text, "\" has no ", mask_text, " to fill");
  if (static_cast<int64_t>(ids.size()) > s.max_positions)
    throw make_error("fill-mask: \"", text.substr(0, 40), "…\" is ", ids.size(), " tokens; the model takes at most ",
                     s.max_positions);
  return {ids, masks};
}

/// One text's guesses as HF's pipeline returns them: per mask, [{score, token, token_str, sequence}].
nlohmann::json fill(const fill_mask_session& s, const std::string& text, int64_t top_k) {
  auto [ids, masks] = encode_with_masks(s, text);
  const auto guesses = s.model->top_tokens(ids, masks, top_k);
  nlohmann::json per_mask = nlohmann::json::array();
  for (std::size_t m = 0; m < masks.size(); ++m) {
    nlohmann::json options = nlohmann::json::array();
    for (const auto& guess : guesses[m]) {
      auto filled = ids;
      filled[static_cast<std::size_t>(masks[m])] = guess.id;
      const std::vector<int64_t> inner(filled.begin() + 1, filled.end() - 1);
      options.push_back({{"score", guess.probability},
                         {"token", guess.id},
                         {"token_str", s.text(std::vector<int64_t>{guess.id})},
                         {"sequence", s.text(inner)}});
    }
    per_mask.push_back(options);
  }
  return {{"text", text}, {"masks", per_mask}};
}

/// A position of a whole word of one token, chosen by `seed` for sequence `index`; -1 if none.
int64_t word_to_hide(const fill_mask_session& s, const std::vector<int64_t>& ids, uint64_t seed, uint64_t index) {
  const bool sentencepiece = s.manifest.tokenizer_kind == "sentencepiece";
  const std::string word_start = "\xe2\x96\x81";
  auto piece = [&](std::size_t p) -> const std::string& { return s.pieces.at(static_cast<std::size_t>(ids[p])); };
  auto is_word = [&](const std::string& text) {
    for (unsigned char c : text)
      if (std::isalpha(c) || c >= 0x80) return true;
    return false;
  };
  std::vector<int64_t> candidates;
  for (std::size_t p = 1; p + 1 < ids.size(); ++p) {
    const auto id = ids[p];
    if (id == s.manifest.specials.unk || id == s.manifest.specials.cls || id == s.manifest.specials.sep) continue;
    const auto& here = piece(p);
    const auto& next = piece(p + 1);
    const bool whole = sentencepiece ? here.rfind(word_start, 0) == 0 && here.size() > word_start.size() &&
                                           (next.rfind(word_start, 0) == 0 || ids[p + 1] == s.manifest.specials.sep)
                                     : here.rfind("##", 0) != 0 && next.rfind("##", 0) != 0;
    if (whole && is_word(here)) candidates.push_back(static_cast<int64_t>(p));
  }
  if (candidates.empty()) return -1;
  return candidates[compute::below(compute::keyed_random(seed, index), candidates.size())];
}

/// `count` validation sequences drawn at random (a permutation keyed by `seed`) with one word
/// hidden: the guesses beside the truth.
nlohmann::json held_out(const fill_mask_session& s, int64_t count, int64_t top_k, uint64_t seed) {
  const io::token_dataset validation(s.data_dir, "validation");
  compute::sample_order order(validation.size(), seed);
  nlohmann::json results = nlohmann::json::array();
  for (uint64_t drawn = 0; drawn < validation.size() && static_cast<int64_t>(results.size()) < count; ++drawn) {
    const uint64_t i = order.at(drawn).sample_id;
    const auto view = validation.sequence(i);
    std::vector<int64_t> ids;
    for (std::size_t p = 0; p < view.length; ++p) ids.push_back(view.token(p));
    const auto hidden = word_to_hide(s, ids, seed, i);
    if (hidden < 0) continue;
    // Up to 12 tokens either side of the word, so the line fits a terminal.
    auto first = std::max<int64_t>(1, hidden - 12);
    while (first > 1 && s.pieces.at(static_cast<std::size_t>(ids[static_cast<std::size_t>(first)])).rfind("##", 0) == 0)
      --first;  // start at a word
    const auto last = std::min<int64_t>(static_cast<int64_t>(ids.size()) - 1, hidden + 13);
    const auto truth = ids[static_cast<std::size_t>(hidden)];
    ids[static_cast<std::size_t>(hidden)] = s.manifest.specials.mask;
    const auto guesses = s.model->top_tokens(ids, {hidden}, top_k);
    std::vector<int64_t> context(ids.begin() + first, ids.begin() + last);
    nlohmann::json options = nlohmann::json::array();
    for (const auto& guess : guesses[0])
      options.push_back({{"token_str", s.text(std::vector<int64_t>{guess.id})}, {"score", guess.probability}, {"correct", guess.id == truth}});
    results.push_back({{"sequence", i},
                       {"context", (first > 1 ? "… " : "") + s.text(context) + (last < static_cast<int64_t>(ids.size()) - 1 ? " …" : "")},
                       {"truth", s.text(std::vector<int64_t>{truth})},
                       {"guesses", options}});
  }
  return results;
}

void print_fill(const nlohmann::json& result) {
  std::printf("%s\n", result["text"].get<std::string>().c_str());
  for (const auto& options : result["masks"]) {
    for (const auto& option : options)
      std::printf("  %6.3f  %-14s %s\n", option["score"].get<double>(), option["token_str"].get<std::string>().c_str(),
                  option["sequence"].get<std::string>().c_str());
    if (result["masks"].size() > 1) std::printf("\n");
  }
}

void print_held_out(const nlohmann::json& result) {
  std::printf("%s\n  truth: %-12s guesses:", result["context"].get<std::string>().c_str(),
              result["truth"].get<std::string>().c_str());
  for (const auto& guess : result["guesses"])
    std::printf(" %s%s %.2f", guess["token_str"].get<std::string>().c_str(), guess["correct"].get<bool>() ? " ✓" : "",
                guess["score"].get<double>());
  std::printf("\n");
}

}  // namespace

void add_fill_mask_command(CLI::App& app) {
  auto args = std::make_shared<fill_mask_arguments>();
  auto* command =
      app.add_subcommand("fill-mask", "a checkpoint's top guesses for [MASK] in sentences (as HF's fill-mask pipeline)");
  command->add_option("--checkpoint", args->checkpoint, "checkpoint directory or run directory")->required();
  command->add_option("texts", args->texts, "sentences with [MASK] (quote each)");
  command->add_option("--data", args->data, "data directory whose tokenizer to use (default: the checkpoint's data.dir)");
  command->add_option("--top-k", args->top_k, "guesses per mask")->capture_default_str()->check(CLI::Range(1, 100));
  command->add_option("--held-out", args->held_out,
                      "instead of texts: this many validation sequences drawn at random, one whole word hidden in each")
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", args->seed, "which sequences --held-out draws and which word it hides")
      ->capture_default_str();
  command->add_option("--device", args->device, "cpu or cuda:N")->capture_default_str();
  command->add_flag("--json", args->json, "print one JSON array");
  command->callback([args] {
    if (args->texts.empty() == (args->held_out == 0))
      throw error("fill-mask: give sentences with [MASK], or --held-out N (not both)");
    const auto session = open_session(*args);
    nlohmann::json results = nlohmann::json::array();
    if (args->held_out > 0) {
      results = held_out(session, args->held_out, args->top_k, args->seed);
    } else {
      for (const auto& text : args->texts) results.push_back(fill(session, text, args->top_k));
    }
    if (args->json) {
      std::printf("%s\n", results.dump().c_str());
      return;
    }
    for (const auto& result : results) args->held_out > 0 ? print_held_out(result) : print_fill(result);
  });
}

}  // namespace troupe::tools
