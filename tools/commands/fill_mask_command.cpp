// `troupe fill-mask`: what a checkpoint guesses for [MASK], as HF's fill-mask pipeline shows it,
// for the user's sentences or for held-out ones with a word hidden (the quick start's last
// step: learning shown as guesses beside the truth, not only as a perplexity).

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
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
#include "io/text/word_pieces.hpp"
#include "messages/error.hpp"
#include "tools/commands/checkpoint_data.hpp"
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
  int64_t show = -1;  ///< --held-out sentences printed after the summary (-1: all)
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
  std::vector<bool> continues_word;  ///< per id: the piece continues the word before it
  std::unique_ptr<compute::mlm_evaluator> model;
  int64_t max_positions = 0;

  std::string text(const std::vector<int64_t>& ids) const { return io::join_tokens(manifest.tokenizer_kind, pieces, ids); }
  std::vector<int64_t> special_ids;  ///< [PAD] [CLS] [SEP] [MASK] [UNK]
  bool is_special(int64_t id) const {
    return std::find(special_ids.begin(), special_ids.end(), id) != special_ids.end();
  }
  bool continues(int64_t id) const { return continues_word.at(static_cast<std::size_t>(id)); }
  /// A piece that can begin a hidden word: starts a word, has a letter, is not special.
  bool starts_a_word(int64_t id) const {
    return !is_special(id) && !continues(id) && io::has_letter(pieces.at(static_cast<std::size_t>(id)));
  }
};

fill_mask_session open_session(const fill_mask_arguments& args) {
  compute::check_device(args.device, "--device");
  fill_mask_session s;
  s.checkpoint_dir = io::resolve_checkpoint(args.checkpoint, args.checkpoint);
  auto checkpoint = io::load_checkpoint(s.checkpoint_dir, /*with_optimizer=*/false);
  if (checkpoint.task)
    throw make_error(s.checkpoint_dir.string(), ": a fine-tuned ", compute::task_type_name(checkpoint.task->type),
                     " model has no masked-LM head to fill [MASK] with; ask it with `troupe predict`");
  s.data_dir = checkpoint_data_dir(args.data, checkpoint);
  s.manifest = io::dataset_manifest::from_file(s.data_dir / "manifest.json");
  require_checkpoint_vocabulary(s.manifest, s.data_dir, checkpoint, s.checkpoint_dir);
  s.tokenizer = io::open_data_tokenizer(s.manifest, s.data_dir);
  s.pieces = s.tokenizer->pieces();
  const auto& specials = s.manifest.specials;
  s.special_ids = {specials.pad, specials.cls, specials.sep, specials.mask, specials.unk};
  s.continues_word = io::word_continuations(s.manifest.tokenizer_kind, s.pieces, s.special_ids);
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

/// The most pieces a hidden word may have (longer words are rare and their guesses unreadable).
constexpr int64_t max_hidden_pieces = 3;

/// A whole word of a sequence: its first position and how many pieces it has.
struct word_span {
  int64_t first = 0;
  int64_t pieces = 0;
};

/// A whole word (a word-start piece with a letter and its continuation pieces, at most
/// max_hidden_pieces) of `ids`, chosen by `seed` for sequence `index`; nullopt if there is none.
std::optional<word_span> word_to_hide(const fill_mask_session& s, const std::vector<int64_t>& ids, uint64_t seed,
                                      uint64_t index) {
  std::vector<word_span> candidates;
  const auto end = static_cast<int64_t>(ids.size()) - 1;  // the [SEP]
  for (int64_t p = 1; p < end; ++p) {
    if (!s.starts_a_word(ids[static_cast<std::size_t>(p)])) continue;
    int64_t pieces = 1;
    while (p + pieces < end && s.continues(ids[static_cast<std::size_t>(p + pieces)])) ++pieces;
    if (pieces <= max_hidden_pieces) candidates.push_back({p, pieces});
  }
  if (candidates.empty()) return std::nullopt;
  return candidates[compute::below(compute::keyed_random(seed, index), candidates.size())];
}

/// A guess for a hidden word: its pieces and the product of their probabilities.
struct word_guess {
  std::vector<int64_t> ids;
  double score = 1.0;
};

/// The `top_k` most probable words of `word.pieces` pieces for the masked span of `ids`: at each
/// position the model's best pieces of the right kind (a word start first, continuations after),
/// combined by a beam that keeps the `top_k` best products (the model predicts each masked
/// position on its own, as HF's pipeline does for several masks).
std::vector<word_guess> guess_word(const fill_mask_session& s, const std::vector<int64_t>& ids, std::size_t type_boundary,
                                   word_span word, int64_t top_k) {
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < word.pieces; ++i) positions.push_back(word.first + i);
  const auto per_position = s.model->top_tokens(ids, positions, std::max<int64_t>(top_k, 500), type_boundary);
  std::vector<word_guess> beam{word_guess{}};
  for (std::size_t i = 0; i < per_position.size(); ++i) {
    std::vector<word_guess> next;
    for (const auto& partial : beam) {
      int64_t taken = 0;
      for (const auto& piece : per_position[i]) {
        const bool fits = i == 0 ? s.starts_a_word(piece.id) : s.continues(piece.id) && !s.is_special(piece.id);
        if (!fits || taken++ == top_k) continue;
        auto extended = partial;
        extended.ids.push_back(piece.id);
        extended.score *= piece.probability;
        next.push_back(std::move(extended));
      }
    }
    std::sort(next.begin(), next.end(), [](const word_guess& a, const word_guess& b) { return a.score > b.score; });
    if (static_cast<int64_t>(next.size()) > top_k) next.resize(static_cast<std::size_t>(top_k));
    beam = std::move(next);
  }
  return beam;
}

/// What --held-out found: a result per sentence, and the unigram baseline's guesses.
struct held_out_results {
  nlohmann::json sentences = nlohmann::json::array();
  std::vector<std::string> unigram_guesses;
};

/// Up to 12 pieces either side of the word, starting at a word, so the line fits a terminal.
std::string context_of(const fill_mask_session& s, const std::vector<int64_t>& masked, word_span word) {
  auto first = std::max<int64_t>(1, word.first - 12);
  while (first > 1 && s.continues(masked[static_cast<std::size_t>(first)])) --first;
  const auto sep = static_cast<int64_t>(masked.size()) - 1;
  const auto last = std::min<int64_t>(sep, word.first + word.pieces + 12);
  const std::vector<int64_t> context(masked.begin() + first, masked.begin() + last);
  return (first > 1 ? "… " : "") + s.text(context) + (last < sep ? " …" : "");
}

/// `count` validation sequences drawn at random (a permutation keyed by `seed`) with one whole
/// word hidden (all its pieces): the model's `top_k` guesses beside the truth, and whether the
/// unigram baseline's `top_k` guesses (the most frequent word-start pieces of the training
/// split; it knows no words of several pieces) hold it.
held_out_results held_out(const fill_mask_session& s, int64_t count, int64_t top_k, uint64_t seed) {
  const io::token_dataset validation(s.data_dir, "validation");
  const auto unigram = compute::most_frequent_ids(io::count_tokens(io::token_dataset(s.data_dir, "train")),
                                                  static_cast<std::size_t>(top_k),
                                                  [&](int64_t id) { return s.starts_a_word(id); });
  held_out_results results;
  for (const auto id : unigram) results.unigram_guesses.push_back(s.text({id}));
  compute::sample_order order(validation.size(), seed);
  for (uint64_t drawn = 0; drawn < validation.size() && static_cast<int64_t>(results.sentences.size()) < count; ++drawn) {
    const uint64_t i = order.at(drawn).sample_id;
    const auto view = validation.sequence(i);
    std::vector<int64_t> ids;
    for (std::size_t p = 0; p < view.length; ++p) ids.push_back(view.token(p));
    const auto word = word_to_hide(s, ids, seed, i);
    if (!word) continue;
    const std::vector<int64_t> truth(ids.begin() + word->first, ids.begin() + word->first + word->pieces);
    for (int64_t p = 0; p < word->pieces; ++p) ids[static_cast<std::size_t>(word->first + p)] = s.manifest.specials.mask;
    nlohmann::json guesses = nlohmann::json::array();
    for (const auto& guess : guess_word(s, ids, view.type_boundary, *word, top_k))
      guesses.push_back({{"token_str", s.text(guess.ids)}, {"score", guess.score}, {"correct", guess.ids == truth}});
    const bool unigram_correct = truth.size() == 1 && std::find(unigram.begin(), unigram.end(), truth[0]) != unigram.end();
    results.sentences.push_back({{"sequence", i},
                                 {"context", context_of(s, ids, *word)},
                                 {"truth", s.text(truth)},
                                 {"pieces", word->pieces},
                                 {"guesses", guesses},
                                 {"unigram_correct", unigram_correct}});
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

/// How many hidden words the model's guesses hold, next to the unigram baseline's, in words.
void print_held_out_summary(const held_out_results& results, int64_t top_k) {
  int64_t found = 0, unigram_found = 0;
  for (const auto& sentence : results.sentences) {
    for (const auto& guess : sentence["guesses"]) found += guess["correct"].get<bool>() ? 1 : 0;
    unigram_found += sentence["unigram_correct"].get<bool>() ? 1 : 0;
  }
  const auto total = static_cast<int64_t>(results.sentences.size());
  const auto percent = [total](int64_t part) { return total > 0 ? 100.0 * static_cast<double>(part) / total : 0.0; };
  std::string unigram;
  for (const auto& word : results.unigram_guesses) unigram += (unigram.empty() ? "" : ", ") + word;
  std::printf("hidden words found among the model's %lld guesses: %lld of %lld (%.0f%%); among the %lld most frequent "
              "words (%s), the unigram baseline: %lld of %lld (%.0f%%)\n",
              static_cast<long long>(top_k), static_cast<long long>(found), static_cast<long long>(total),
              percent(found), static_cast<long long>(top_k), unigram.c_str(), static_cast<long long>(unigram_found),
              static_cast<long long>(total), percent(unigram_found));
}

}  // namespace

void add_fill_mask_command(CLI::App& app) {
  auto args = std::make_shared<fill_mask_arguments>();
  auto* command =
      app.add_subcommand("fill-mask", "a checkpoint's top guesses for [MASK] in sentences (as HF's fill-mask pipeline)");
  command->add_option("checkpoint,--checkpoint", args->checkpoint, "checkpoint directory or run directory")->required();
  command->add_option("texts", args->texts, "sentences with [MASK] (quote each)");
  command->add_option("--data", args->data, "data directory whose tokenizer to use (default: the checkpoint's data.dir)");
  command->add_option("--top-k", args->top_k, "guesses per mask")->capture_default_str()->check(CLI::Range(1, 100));
  command->add_option("--held-out", args->held_out,
                      "instead of texts: this many validation sequences drawn at random, one whole word hidden in each")
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", args->seed, "which sequences --held-out draws and which word it hides")
      ->capture_default_str();
  command->add_option("--show", args->show, "with --held-out: print the share found, then only this many sentences")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--device", args->device, "cpu or cuda:N")->capture_default_str();
  command->add_flag("--json", args->json, "print one JSON array");
  command->callback([args] {
    if (args->texts.empty() == (args->held_out == 0))
      throw error("fill-mask: give sentences with [MASK], or --held-out N (not both)");
    const auto session = open_session(*args);
    if (args->held_out > 0) {
      const auto results = held_out(session, args->held_out, args->top_k, args->seed);
      if (args->json) return (void)std::printf("%s\n", results.sentences.dump().c_str());
      print_held_out_summary(results, args->top_k);
      const auto shown = args->show < 0 ? results.sentences.size() : static_cast<std::size_t>(args->show);
      for (std::size_t i = 0; i < std::min(shown, results.sentences.size()); ++i) print_held_out(results.sentences[i]);
      return;
    }
    nlohmann::json results = nlohmann::json::array();
    for (const auto& text : args->texts) results.push_back(fill(session, text, args->top_k));
    if (args->json) return (void)std::printf("%s\n", results.dump().c_str());
    for (const auto& result : results) print_fill(result);
  });
}

}  // namespace troupe::tools
