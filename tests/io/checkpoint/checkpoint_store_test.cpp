#include "io/checkpoint/checkpoint_store.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "compute/tensor_difference.hpp"
#include "io/checkpoint/checkpoint_manifest.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tests/support/error_text.hpp"
#include "tests/support/sample_checkpoint.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

using troupe::testing::sample_checkpoint_contents;

void flip_byte(const std::filesystem::path& file, std::size_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x20));
}

using troupe::testing::error_of;

TEST(checkpoint_store, save_load_round_trip_with_manifest) {
  troupe::testing::temp_dir run;
  auto saved = sample_checkpoint_contents(5);
  auto dir = save_checkpoint(run.path(), saved, 2);
  EXPECT_EQ(dir.filename(), "step-00000005");
  EXPECT_EQ(read_whole_file(run / "checkpoints" / "latest"), "step-00000005\n");
  auto loaded = load_checkpoint(resolve_checkpoint("latest", run.path()));
  EXPECT_EQ(loaded.state.optimizer_steps, 5);
  EXPECT_EQ(loaded.state.next_position, 1005u);
  ASSERT_EQ(loaded.state.rng.size(), 1u);
  EXPECT_EQ(loaded.state.rng[0].counter, 123u);
  EXPECT_EQ(loaded.job["train_steps"], 10);
  EXPECT_EQ(loaded.model.hidden_size, 8);
  for (const auto& d : compute::tensor_differences(saved.parameters, loaded.parameters))
    EXPECT_EQ(d.max_abs_difference, 0.0) << d.name << " " << d.note;
  for (const auto& d : compute::tensor_differences(saved.optimizer, loaded.optimizer))
    EXPECT_EQ(d.max_abs_difference, 0.0) << d.name << " " << d.note;
  auto manifest = verify_checkpoint(dir);
  EXPECT_EQ(manifest.epoch, 1u);  // 1005 / 600
  EXPECT_EQ(manifest.files.size(), 3u);
  EXPECT_NE(manifest.to_json().find("\"next_position\": 1005"), std::string::npos);
}

TEST(checkpoint_store, the_loss_scalers_state_round_trips_and_the_schedule_step_leaves_out_skipped_steps) {
  troupe::testing::temp_dir run;
  auto saved = sample_checkpoint_contents(9);
  EXPECT_FALSE(load_checkpoint(save_checkpoint(run.path(), saved, 3)).state.loss_scale.has_value());
  compute::loss_scale_state scaler;
  scaler.scale = 8192;
  scaler.iteration = 9;
  scaler.last_overflow_iteration = 6;
  scaler.hysteresis_left = 1;
  scaler.skipped_steps = 3;
  saved = sample_checkpoint_contents(10);
  saved.state.loss_scale = scaler;
  const auto dir = save_checkpoint(run.path(), saved, 3);
  const auto loaded = load_checkpoint(dir);
  ASSERT_TRUE(loaded.state.loss_scale.has_value());
  EXPECT_TRUE(*loaded.state.loss_scale == scaler);
  const auto manifest = verify_checkpoint(dir);
  EXPECT_EQ(manifest.scheduler_step, 7);  // 10 windows, 3 of them skipped
  const auto json = nlohmann::json::parse(manifest.to_json());
  EXPECT_EQ(json["loss_scaler"]["scale"], 8192.0);
  EXPECT_EQ(json["loss_scaler"]["skipped_steps"], 3);

  // A manifest whose scaler state cannot be (more skipped windows than windows) is refused.
  auto bad = manifest;
  bad.loss_scaler->skipped_steps = 12;
  const auto bytes = encode_manifest(bad);
  write_file_atomically(dir / "manifest.bin", std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  const auto message = error_of([&] { verify_checkpoint(dir); });
  EXPECT_NE(message.find("manifest.bin: the loss scaler's state is inconsistent"), std::string::npos) << message;
  EXPECT_NE(message.find("skipped 12"), std::string::npos) << message;
}

TEST(checkpoint_store, keeps_the_newest_k) {
  troupe::testing::temp_dir run;
  for (int64_t step : {1, 2, 3, 4}) save_checkpoint(run.path(), sample_checkpoint_contents(step), 2);
  auto listings = list_checkpoints(run.path());
  ASSERT_EQ(listings.size(), 2u);
  EXPECT_EQ(listings[0].step, 3);
  EXPECT_EQ(listings[1].step, 4);
  EXPECT_TRUE(listings[1].latest);
  EXPECT_TRUE(listings[0].valid && listings[1].valid);
  auto removed = prune_checkpoints(run.path(), 1);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].filename(), "step-00000003");
}

TEST(checkpoint_store, a_flipped_byte_is_caught_and_resume_falls_back) {
  troupe::testing::temp_dir run;
  save_checkpoint(run.path(), sample_checkpoint_contents(1), 3);
  auto newest = save_checkpoint(run.path(), sample_checkpoint_contents(2), 3);
  flip_byte(newest / "model.safetensors", std::filesystem::file_size(newest / "model.safetensors") - 5);
  auto message = error_of([&] { verify_checkpoint(newest); });
  EXPECT_NE(message.find("model.safetensors fails its xxh64 checksum"), std::string::npos) << message;
  auto resumed = load_for_resume("latest", run.path());
  EXPECT_EQ(resumed.state.optimizer_steps, 1);
  auto listings = list_checkpoints(run.path());
  EXPECT_FALSE(listings.back().valid);
  // Naming the damaged checkpoint directly gets no silent substitute.
  message = error_of([&] { load_for_resume(newest.string(), run.path()); });
  EXPECT_NE(message.find("model.safetensors fails its xxh64 checksum (corrupt)"), std::string::npos) << message;
  EXPECT_EQ(message.find("no valid checkpoint to resume from"), std::string::npos) << message;
}

TEST(checkpoint_store, loads_in_place_into_targets_that_fit_and_allocates_the_rest) {
  troupe::testing::temp_dir run;
  auto saved = sample_checkpoint_contents(3);
  auto dir = save_checkpoint(run.path(), saved, 2);
  load_targets into;
  into.parameters["a.weight"] = torch::zeros({4, 3});
  into.parameters["a.bias"] = torch::zeros({4});  // wrong shape: not used, left alone
  into.optimizer["exp_avg"] = torch::zeros({15}, torch::kDouble);  // wrong dtype: not used
  into.optimizer["exp_avg_sq"] = torch::zeros({15});
  auto loaded = load_checkpoint(dir, true, into);
  auto tensor_named = [](const compute::named_tensors& tensors, const std::string& name) {
    for (const auto& [n, t] : tensors)
      if (n == name) return t;
    return at::Tensor();
  };
  EXPECT_EQ(tensor_named(loaded.parameters, "a.weight").data_ptr(), into.parameters["a.weight"].data_ptr());
  EXPECT_TRUE(torch::equal(into.parameters["a.weight"], tensor_named(saved.parameters, "a.weight")));
  EXPECT_EQ(tensor_named(loaded.optimizer, "exp_avg_sq").data_ptr(), into.optimizer["exp_avg_sq"].data_ptr());
  EXPECT_TRUE(torch::equal(into.optimizer["exp_avg_sq"], tensor_named(saved.optimizer, "exp_avg_sq")));
  EXPECT_NE(tensor_named(loaded.parameters, "a.bias").data_ptr(), into.parameters["a.bias"].data_ptr());
  EXPECT_TRUE(torch::equal(tensor_named(loaded.parameters, "a.bias"), tensor_named(saved.parameters, "a.bias")));
  EXPECT_EQ(into.parameters["a.bias"].abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(into.optimizer["exp_avg"].abs().sum().item<double>(), 0.0);
}

TEST(checkpoint_store, a_fallback_leaves_the_older_state_in_the_targets) {
  troupe::testing::temp_dir run;
  auto older = sample_checkpoint_contents(1);
  save_checkpoint(run.path(), older, 3);
  auto newest = save_checkpoint(run.path(), sample_checkpoint_contents(2), 3);
  flip_byte(newest / "model.safetensors", std::filesystem::file_size(newest / "model.safetensors") - 5);
  load_targets into;
  into.parameters["a.weight"] = torch::zeros({4, 3});
  into.parameters["a.bias"] = torch::zeros({3});
  auto resumed = load_for_resume("latest", run.path(), into);
  EXPECT_EQ(resumed.state.optimizer_steps, 1);
  for (const auto& [name, tensor] : older.parameters) EXPECT_TRUE(torch::equal(into.parameters[name], tensor)) << name;
}

TEST(checkpoint_store, incomplete_and_hostile_manifests_are_rejected) {
  troupe::testing::temp_dir run;
  auto dir = save_checkpoint(run.path(), sample_checkpoint_contents(3), 2);
  const auto manifest = read_whole_file(dir / "manifest.bin");
  const std::string malformed = "manifest.bin: checkpoint manifest: malformed Cap'n Proto message: ";
  // The first half in whole 8-byte words: the framing is readable but the segment ends early.
  write_file_atomically(dir / "manifest.bin", manifest.substr(0, manifest.size() / 2 / 8 * 8));
  auto message = error_of([&] { verify_checkpoint(dir); });
  EXPECT_NE(message.find(malformed), std::string::npos) << message;
  write_file_atomically(dir / "manifest.bin", std::string(64, '\xff'));
  message = error_of([&] { verify_checkpoint(dir); });
  EXPECT_NE(message.find(malformed), std::string::npos) << message;
  write_file_atomically(dir / "manifest.bin", "");
  message = error_of([&] { verify_checkpoint(dir); });
  EXPECT_NE(message.find("manifest.bin: checkpoint manifest: 0 bytes: truncated, "
                         "or not a whole number of Cap'n Proto words"),
            std::string::npos) << message;
  std::filesystem::remove(dir / "manifest.bin");
  EXPECT_NE(error_of([&] { verify_checkpoint(dir); }).find("manifest.bin is missing"), std::string::npos);
  message = error_of([&] { load_for_resume("latest", run.path()); });  // nothing older to fall back to
  EXPECT_NE(message.find("checkpoints: no valid checkpoint to resume from (the newest, step-00000003, is damaged: "),
            std::string::npos) << message;
  EXPECT_NE(message.find("manifest.bin is missing (an incomplete checkpoint))"), std::string::npos) << message;
}

TEST(checkpoint_store, a_truncated_tensor_file_is_named) {
  troupe::testing::temp_dir run;
  auto dir = save_checkpoint(run.path(), sample_checkpoint_contents(3), 2);
  const auto bytes = read_whole_file(dir / "optimizer.safetensors");
  write_file_atomically(dir / "optimizer.safetensors", bytes.substr(0, bytes.size() - 8));
  auto message = error_of([&] { verify_checkpoint(dir); });
  EXPECT_NE(message.find("optimizer.safetensors has"), std::string::npos) << message;
}

TEST(checkpoint_store, an_oversized_manifest_is_refused_before_it_is_read) {
  troupe::testing::temp_dir run;
  const auto dir = save_checkpoint(run.path(), sample_checkpoint_contents(2), 2);
  std::filesystem::resize_file(dir / "manifest.bin", 17u << 20);
  const auto message = error_of([&] { verify_checkpoint(dir); });
  EXPECT_NE(message.find("manifest.bin: 17825792 bytes is too large for a checkpoint manifest (at most 16777216)"),
            std::string::npos)
      << message;
}

TEST(checkpoint_store, checkpoints_are_ordered_by_step_past_eight_digits) {
  troupe::testing::temp_dir run;
  save_checkpoint(run.path(), sample_checkpoint_contents(99'999'999), 5);
  save_checkpoint(run.path(), sample_checkpoint_contents(100'000'000), 5);  // "step-100000000" < "step-99999999" as text
  const auto committed = committed_checkpoints(run.path());
  ASSERT_EQ(committed.size(), 2u);
  EXPECT_EQ(committed.back().filename(), "step-100000000");
  const auto listed = list_checkpoints(run.path());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed.back().step, 100'000'000);
  EXPECT_TRUE(listed.back().latest);
  EXPECT_EQ(prune_checkpoints(run.path(), 1), std::vector<std::filesystem::path>{committed.front()});
}

}  // namespace
}  // namespace troupe::io
