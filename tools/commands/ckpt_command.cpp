#include <spdlog/spdlog.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

#include "compute/tensor_difference.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/checkpoint/hf_interchange.hpp"
#include "messages/error.hpp"
#include "tools/commands/commands.hpp"

namespace troupe::tools {
namespace {

struct ckpt_arguments {
  std::string run_dir = "runs/default";
  std::string dir;
  std::string other;
  std::string to;
  std::string vocab;
  int64_t keep = 2;
  bool overwrite = false;
};

std::string format_time(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t seconds = unix_ms / 1000;
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", std::gmtime(&seconds));
  return text;
}

void list(const ckpt_arguments& args) {
  auto listings = io::list_checkpoints(args.run_dir);
  if (listings.empty()) throw make_error(args.run_dir, ": no checkpoints");
  std::printf("%-24s %10s  %-19s %10s  %s\n", "checkpoint", "step", "time (UTC)", "MiB", "valid");
  for (const auto& l : listings)
    std::printf("%-24s %10lld  %-19s %10.1f  %s%s\n", l.dir.filename().c_str(), static_cast<long long>(l.step),
                format_time(l.created_unix_ms).c_str(), static_cast<double>(l.bytes) / (1 << 20),
                l.valid ? "yes" : ("NO: " + l.problem).c_str(), l.latest ? "  (latest)" : "");
}

/// A checkpoint with every rank's part in its optimizer state ("rank<r>/…").
io::checkpoint_contents load_with_every_part(const std::string& spec) {
  auto contents = io::load_checkpoint(io::resolve_checkpoint(spec, spec));
  std::vector<int64_t> ranks;
  for (const auto& part : contents.parts) ranks.push_back(part.rank);
  for (auto& entry : io::rank_part_tensors(contents.parts, ranks)) contents.optimizer.push_back(std::move(entry));
  return contents;
}

void diff(const ckpt_arguments& args) {
  auto a = load_with_every_part(args.dir);
  auto b = load_with_every_part(args.other);
  for (const auto& [section, left, right] :
       {std::tuple{"model", &a.parameters, &b.parameters}, std::tuple{"optimizer", &a.optimizer, &b.optimizer}})
    for (const auto& d : compute::tensor_differences(*left, *right))
      std::printf("%s\n", nlohmann::json{{"section", section},
                                         {"tensor", d.name},
                                         {"max_abs_diff", d.max_abs_difference},
                                         {"note", d.note}}
                              .dump()
                              .c_str());
}

}  // namespace

void add_ckpt_command(CLI::App& app) {
  auto args = std::make_shared<ckpt_arguments>();
  auto* ckpt = app.add_subcommand("ckpt", "list, verify, inspect, export, import, prune and diff checkpoints");
  ckpt->require_subcommand(1);

  auto* list_command = ckpt->add_subcommand("list", "every checkpoint of a run: step, time, size, valid?");
  list_command->add_option("run_dir,--run-dir", args->run_dir, "run directory")->capture_default_str();
  list_command->callback([args] { list(*args); });

  auto* verify = ckpt->add_subcommand("verify", "check manifest, sizes and checksums; non-zero exit names the bad file");
  verify->add_option("dir", args->dir, "checkpoint directory (or run directory: its latest)")->required();
  verify->callback([args] {
    auto dir = io::resolve_checkpoint(args->dir, args->dir);
    auto manifest = io::verify_checkpoint(dir);
    std::printf("ok: %s (step %lld, %zu files)\n", dir.c_str(), static_cast<long long>(manifest.step),
                manifest.files.size());
  });

  auto* inspect = ckpt->add_subcommand("inspect", "print the manifest as JSON");
  inspect->add_option("dir", args->dir, "checkpoint directory (or run directory: its latest)")->required();
  inspect->callback([args] {
    std::printf("%s\n", io::verify_checkpoint(io::resolve_checkpoint(args->dir, args->dir)).to_json().c_str());
  });

  auto* export_command = ckpt->add_subcommand("export", "write a HuggingFace BertForMaskedLM directory");
  export_command->add_option("dir", args->dir, "checkpoint directory (or run directory: its latest)")->required();
  export_command->add_option("--to", args->to, "HF directory to create")->required();
  export_command->add_option("--vocab", args->vocab, "vocab.txt (default: the data directory's)");
  export_command->add_flag("--overwrite", args->overwrite, "replace an existing directory");
  export_command->callback([args] {
    io::export_hf(io::resolve_checkpoint(args->dir, args->dir), args->to, args->vocab, args->overwrite);
    spdlog::info("exported {} to {}", args->dir, args->to);
  });

  auto* import_command = ckpt->add_subcommand("import", "make a troupe checkpoint from HF BERT weights");
  import_command->add_option("hf_dir", args->dir, "directory with config.json and model.safetensors")->required();
  import_command->add_option("--to", args->to, "checkpoint directory to create")->required();
  import_command->add_option("--vocab", args->vocab, "vocab.txt (default: HF_DIR/vocab.txt)");
  import_command->add_flag("--overwrite", args->overwrite, "replace an existing directory");
  import_command->callback([args] {
    io::import_hf(args->dir, args->to, args->vocab, args->overwrite);
    spdlog::info("imported {} into {}", args->dir, args->to);
  });

  auto* prune = ckpt->add_subcommand("prune", "keep only the newest K checkpoints of a run");
  prune->add_option("run_dir,--run-dir", args->run_dir, "run directory")->capture_default_str();
  prune->add_option("--keep", args->keep, "checkpoints to keep")->required()->check(CLI::PositiveNumber);
  prune->callback([args] {
    for (const auto& removed : io::prune_checkpoints(args->run_dir, args->keep))
      std::printf("removed %s\n", removed.c_str());
  });

  auto* diff_command = ckpt->add_subcommand("diff", "per-tensor max |a - b| of two checkpoints (JSON lines)");
  diff_command->add_option("a", args->dir, "first checkpoint")->required();
  diff_command->add_option("b", args->other, "second checkpoint")->required();
  diff_command->callback([args] { diff(*args); });
}

}  // namespace troupe::tools
