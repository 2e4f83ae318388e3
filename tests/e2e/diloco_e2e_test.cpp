// DiLoCo end to end (issue 24): `sync.mode "diloco"` through `troupe train` and `troupe launch`.
// The equivalences the issue states — H = 1 with SGD and an outer step of lr 1 without momentum
// is window synchronisation; one worker with H inner steps and outer lr 1 is plain training —
// each checked against a control that must differ; two nodes with Nesterov momentum and bf16 or
// int8 pseudo-gradients: replicas agree at every window (the statistics carry the agreed hash), the
// outer steps fall every H windows and at the end, and their bytes are reported; exact resumes
// from a checkpoint taken at an outer step, alone and on two nodes (each rank its own inner
// optimizer state); a node lost mid-round and one that rejoins; streaming fragments, also with
// their exchange behind the next inner steps (sync.overlap_steps); the window statistics summed
// during the backward pass.

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>

#include "tests/e2e/cluster_job.hpp"

namespace troupe {
namespace {

class diloco_e2e : public cluster_job_test {
 public:  // the helpers below the fixture use its writers
  /// The cluster tests' model and data with `sync` and `optimizer` as given, clipping off.
  static std::string config(const std::string& name, const json& sync, const json& optimizer, int64_t steps,
                            int64_t checkpoint_every = 0) {
    auto c = json::parse(io_text(write_config(steps)));
    c["gradient_clipping"] = 0.0;
    c["optimizer"] = optimizer;
    if (!sync.is_null()) c["sync"] = sync;
    c["checkpoint"]["every_windows"] = checkpoint_every;
    const auto path = *dir_ / (name + ".json");
    testing::write_text(path, c.dump(2));
    return path.string();
  }

  static json diloco(int64_t inner_steps, double lr, double momentum, const std::string& wire = "fp32",
                     int64_t fragments = 1) {
    return {{"mode", "diloco"},
            {"inner_steps", inner_steps},
            {"communication_data_type", wire},
            {"fragments", fragments},
            {"outer_optimizer", {{"type", "nesterov"}, {"params", {{"lr", lr}, {"momentum", momentum}}}}}};
  }

  /// diloco() with the exchange behind `overlap_steps` inner steps and fragment_update_alpha.
  static json overlapped(json sync, int64_t overlap_steps, double alpha = 0.0) {
    sync["overlap_steps"] = overlap_steps;
    sync["fragment_update_alpha"] = alpha;
    return sync;
  }

  static json sgd() { return {{"type", "SGD"}, {"params", {{"lr", 0.05}}}}; }
  static json adamw() { return {{"type", "AdamW"}, {"params", {{"lr", 2e-3}}}}; }

  /// Every metrics.jsonl line of `run` (a directory of this suite's).
  static std::vector<json> lines(const std::string& run) {
    std::vector<json> out;
    std::ifstream in(*dir_ / run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }

  /// The largest relative difference of two runs' window losses (same number of windows).
  static double loss_gap(const std::vector<window_line>& a, const std::vector<window_line>& b) {
    EXPECT_EQ(a.size(), b.size());
    double gap = 0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      gap = std::max(gap, std::abs(a[i].loss - b[i].loss) / std::abs(a[i].loss));
    return gap;
  }
};

TEST_F(diloco_e2e, one_inner_step_of_sgd_with_a_plain_outer_step_is_window_synchronisation) {
  const auto manifest = write_manifest(2, "two-abort.json", "abort");
  auto result = launch(manifest, config("window-sgd", nullptr, sgd(), 6), "window-sgd");
  ASSERT_EQ(result.status, 0) << result.output;
  result = launch(manifest, config("diloco-h1", diloco(1, 1.0, 0.0), sgd(), 6), "diloco-h1");
  ASSERT_EQ(result.status, 0) << result.output;
  // The control: an outer lr of 0.5 halves every update, and the curve must leave the tolerance.
  result = launch(manifest, config("diloco-h1-half", diloco(1, 0.5, 0.0), sgd(), 6), "diloco-h1-half");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto window = read_metrics("window-sgd"), h1 = read_metrics("diloco-h1"), half = read_metrics("diloco-h1-half");
  ASSERT_EQ(window.size(), 6u);
  const double gap = loss_gap(window, h1), control = loss_gap(window, half);
  std::printf("H=1 vs window sync: max relative loss gap %.3g (control, outer lr 0.5: %.3g)\n", gap, control);
  EXPECT_LT(gap, 1e-5);  // float tolerance: the pseudo-gradient is a difference of parameters
  EXPECT_GT(control, 1e-3);
  for (const auto& line : lines("diloco-h1")) EXPECT_TRUE(line.at("diloco").at("outer_step").get<bool>());
}

TEST_F(diloco_e2e, one_worker_with_h_inner_steps_and_outer_lr_one_is_plain_training) {
  auto result = train(config("plain-adamw", nullptr, adamw(), 6), "plain-adamw");
  ASSERT_EQ(result.status, 0) << result.output;
  result = train(config("alone-h3", diloco(3, 1.0, 0.0), adamw(), 6), "alone-h3");
  ASSERT_EQ(result.status, 0) << result.output;
  result = train(config("alone-h3-nesterov", diloco(3, 0.7, 0.9), adamw(), 6), "alone-h3-nesterov");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto plain = read_metrics("plain-adamw"), alone = read_metrics("alone-h3");
  const auto nesterov = read_metrics("alone-h3-nesterov");
  std::printf("one worker, H=3, outer lr 1 vs plain: max relative loss gap %.3g (control, Nesterov 0.7/0.9: %.3g)\n",
              loss_gap(plain, alone), loss_gap(plain, nesterov));
  EXPECT_LT(loss_gap(plain, alone), 1e-5);
  EXPECT_GT(loss_gap(plain, nesterov), 1e-4);  // an outer step that moves elsewhere shows after step 3
  const auto steps = lines("alone-h3");
  ASSERT_EQ(steps.size(), 6u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].at("diloco").at("outer_step").get<bool>(), (i + 1) % 3 == 0) << "step " << i + 1;
    EXPECT_EQ(steps[i].at("diloco").at("outer_bytes").get<int64_t>(), 0);  // alone: nothing crosses a link
  }
}

TEST_F(diloco_e2e, two_nodes_agree_after_every_outer_step_and_send_bf16_or_int8_pseudo_gradients) {
  const auto manifest = write_manifest(2, "two-abort.json", "abort");
  // 7 windows with H = 3: outer steps after 3, 6 and the run's last, 7.
  for (const std::string wire : {"fp32", "bf16", "int8"}) {
    auto result = launch(manifest, config("two-" + wire, diloco(3, 0.7, 0.9, wire), adamw(), 7), "two-" + wire);
    ASSERT_EQ(result.status, 0) << wire << ": " << result.output;
  }
  const auto fp32 = lines("two-fp32");
  ASSERT_EQ(fp32.size(), 7u);
  // The counters: outer steps so far and rank 0's bytes for them, summed over the lines.
  int64_t bytes_so_far = 0;
  for (std::size_t i = 0; i < fp32.size(); ++i) {
    const auto& counters = fp32[i].at("diloco");
    bytes_so_far += counters.at("outer_bytes").get<int64_t>();
    EXPECT_EQ(counters.at("outer_steps").get<int64_t>(), i < 2 ? 0 : i < 5 ? 1 : i < 6 ? 2 : 3) << "step " << i + 1;
    EXPECT_EQ(counters.at("outer_bytes_total").get<int64_t>(), bytes_so_far) << "step " << i + 1;
    EXPECT_EQ(counters.at("outer_bytes_per_hour").get<double>() > 0, i >= 2) << "step " << i + 1;
  }
  // Bytes per value on the wire against fp32's 4: bf16 2, int8 1 and a 4-byte scale per 256.
  for (const auto& [wire, fp32_bytes_per_byte, tolerance] :
       {std::tuple{std::string("bf16"), 2.0, 0.01}, std::tuple{std::string("int8"), 4.0 / (1.0 + 4.0 / 256.0), 0.02}}) {
    const auto narrow = lines("two-" + wire);
    ASSERT_EQ(narrow.size(), 7u) << wire;
    for (std::size_t i = 0; i < narrow.size(); ++i) {
      const bool outer = (i + 1) % 3 == 0 || i + 1 == 7;
      EXPECT_EQ(narrow[i].at("diloco").at("outer_step").get<bool>(), outer) << wire << ", step " << i + 1;
      EXPECT_EQ(narrow[i].at("reported_ranks").get<int>(), 2);
      const auto bytes = narrow[i].at("diloco").at("outer_bytes").get<int64_t>();
      const auto fp32_bytes = fp32[i].at("diloco").at("outer_bytes").get<int64_t>();
      if (outer) {
        ASSERT_GT(bytes, 0) << wire;
        EXPECT_NEAR(static_cast<double>(fp32_bytes) / static_cast<double>(bytes), fp32_bytes_per_byte, 0.01) << wire;
      } else {
        EXPECT_EQ(bytes, 0) << wire;
      }
    }
    // Until the first outer step the runs train alike; after it the rounding shows, within 1%
    // (bf16) or 2% (int8) of the loss.
    EXPECT_DOUBLE_EQ(narrow[2].at("loss").get<double>(), fp32[2].at("loss").get<double>()) << wire;
    EXPECT_NEAR(narrow[6].at("loss").get<double>(), fp32[6].at("loss").get<double>(),
                tolerance * fp32[6].at("loss").get<double>())
        << wire;
    EXPECT_NE(narrow[6].at("parameter_hash"), fp32[6].at("parameter_hash")) << wire;
  }
  EXPECT_LT(fp32[6].at("loss").get<double>(), fp32[0].at("loss").get<double>());
}

// Without loss scaling a window's statistics leave between its last forward and backward pass
// (actors/window_sums.cpp, statistics_window_sums): ring 0 sums them while the backward runs. With
// one micro-batch per rank and window, each window's allreduce then began before that backward
// pass did and ended after it, so the allreduce time minus what was left exposed after the
// backward pass contains the backward pass (the same steady clock; not a speed).
TEST_F(diloco_e2e, the_window_statistics_are_summed_while_the_backward_pass_runs) {
  const auto path = config("early-statistics", diloco(3, 0.7, 0.9), adamw(), 5);
  auto c = json::parse(io_text(path));
  c["train_batch_size"] = 4;  // 2 ranks × micro-batches of 2: one each per window
  testing::write_text(path, c.dump(2));
  const auto manifest = write_manifest(2, "two-abort-early.json", "abort");
  const auto result = launch(manifest, path, "early-statistics");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto windows = lines("early-statistics");
  ASSERT_EQ(windows.size(), 5u);
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const double before_backward_ended = windows[i].at("time_allreduce_s").get<double>() -
                                         windows[i].at("exposed_comm_s").get<double>();
    const double backward = windows[i].at("time_backward_s").get<double>();
    EXPECT_GT(backward, 0.0) << "step " << i + 1;
    EXPECT_GE(before_backward_ended + 1e-9, backward) << "step " << i + 1;
  }
}

/// Runs an 8-window DiLoCo job (H 2, a checkpoint at every outer step) straight, and again
/// interrupted after window 4 (`interruption`: stopped there, or killed as window 5 starts) and
/// resumed: every window must be the same bits. `run(job, dir, extra)` trains or launches it.
/// Windows 7 and 8 start from the outer step of window 6, which needs the outer momentum (and
/// every rank's inner state) the checkpoint kept.
template <typename Run>
void expect_resume_bit_for_bit(const std::string& job, const std::string& name, Run run,
                               const std::string& interruption = "--steps 4") {
  auto result = run(job, name + "-straight", "");
  ASSERT_EQ(result.status, 0) << result.output;
  result = run(job, name + "-resumed", interruption);
  if (interruption.rfind("--inject kill", 0) == 0)
    ASSERT_NE(result.status, 0) << result.output;
  else
    ASSERT_EQ(result.status, 0) << result.output;
  result = run(job, name + "-resumed", "--resume latest");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto straight = cluster_job_test::read_metrics(name + "-straight");
  const auto resumed = cluster_job_test::read_metrics(name + "-resumed");
  ASSERT_EQ(resumed.size(), 8u) << result.output;
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(resumed[i].loss, straight[i].loss) << name << ", step " << i + 1;
    EXPECT_EQ(resumed[i].parameter_hash, straight[i].parameter_hash) << name << ", step " << i + 1;
  }
  // The resumed process counts the outer steps on from the checkpoint's.
  const auto straight_lines = diloco_e2e::lines(name + "-straight"), resumed_lines = diloco_e2e::lines(name + "-resumed");
  ASSERT_EQ(resumed_lines.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i)
    EXPECT_EQ(resumed_lines[i].at("diloco").at("outer_steps"), straight_lines[i].at("diloco").at("outer_steps"))
        << name << ", step " << i + 1;
}

TEST_F(diloco_e2e, resuming_from_an_outer_step_continues_bit_for_bit) {
  expect_resume_bit_for_bit(config("resume", diloco(2, 0.7, 0.9), adamw(), 8, 2), "alone",
                            [](const std::string& job, const std::string& run, const std::string& extra) {
                              return train(job, run, extra);
                            });
}

TEST_F(diloco_e2e, two_nodes_resume_each_with_its_own_inner_state_bit_for_bit) {
  // Each rank's AdamW moments are its own under DiLoCo: rank 1 writes them to its part of the
  // checkpoint (rank-00001.safetensors; io/checkpoint/rank_parts.hpp), and a resume on two nodes
  // gives each its own back.
  const auto manifest = write_manifest(2, "two-abort-resume.json", "abort");
  expect_resume_bit_for_bit(config("two-resume", diloco(2, 0.7, 0.9), adamw(), 8, 2), "two",
                            [&](const std::string& job, const std::string& run, const std::string& extra) {
                              return launch(manifest, job, run, extra);
                            });
  const auto checkpoints = *dir_ / "two-straight" / "checkpoints";
  const auto latest = checkpoints / "step-00000008";
  const auto inspected = run_command(troupe_binary() + " ckpt verify " + latest.string());
  EXPECT_EQ(inspected.status, 0) << inspected.output;
  EXPECT_TRUE(std::filesystem::exists(latest / "rank-00001.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(latest / "rank-00000.safetensors")) << "rank 0's own is the optimizer file's";
  EXPECT_EQ(io_text((latest / "optimizer.safetensors").string()).find("rank1/"), std::string::npos)
      << "rank 1's state went to the writer as well";
  for (const auto& entry : std::filesystem::directory_iterator(checkpoints))
    EXPECT_NE(entry.path().filename().string().rfind("parts-", 0), 0u) << "staged parts left behind: " << entry.path();
}

// Streaming DiLoCo: with H 4 and 2 fragments, fragment 0 steps after steps 2, 6, …, fragment 1
// after 4, 8, …, each sending half the parameters; every fragment at the run's end.
TEST_F(diloco_e2e, streamed_fragments_step_on_their_schedule_and_alone_with_lr_one_are_plain_training) {
  auto result = train(config("plain-adamw-8", nullptr, adamw(), 8), "plain-adamw-8");
  ASSERT_EQ(result.status, 0) << result.output;
  result = train(config("alone-f2", diloco(4, 1.0, 0.0, "fp32", 2), adamw(), 8), "alone-f2");
  ASSERT_EQ(result.status, 0) << result.output;
  std::printf("one worker, H=4, 2 fragments, outer lr 1 vs plain: max relative loss gap %.3g\n",
              loss_gap(read_metrics("plain-adamw-8"), read_metrics("alone-f2")));
  EXPECT_LT(loss_gap(read_metrics("plain-adamw-8"), read_metrics("alone-f2")), 1e-5);

  const auto manifest = write_manifest(2, "two-abort-f2.json", "abort");
  for (const int64_t fragments : {1, 2}) {
    const std::string run = "two-f" + std::to_string(fragments);
    result = launch(manifest, config(run, diloco(4, 0.7, 0.9, "fp32", fragments), adamw(), 7), run);
    ASSERT_EQ(result.status, 0) << result.output;
  }
  const auto one = lines("two-f1"), two = lines("two-f2");
  ASSERT_EQ(two.size(), 7u);
  ASSERT_EQ(one.size(), 7u);
  const auto bytes = [&](std::size_t i) { return two[i].at("diloco").at("outer_bytes").get<int64_t>(); };
  for (std::size_t i = 0; i < two.size(); ++i) {
    const bool due = (i + 1) % 2 == 0 || i + 1 == 7;
    EXPECT_EQ(two[i].at("diloco").at("outer_step").get<bool>(), due) << "step " << i + 1;
    EXPECT_EQ(two[i].at("diloco").at("outer_steps").get<int64_t>(), static_cast<int64_t>(i + 1) / 2 + (i + 1 == 7))
        << "step " << i + 1;
  }
  // A fragment's exchange is half the whole's (step 4's is rank 0's whole buffer under F = 1).
  const auto whole = one[3].at("diloco").at("outer_bytes").get<int64_t>();
  EXPECT_NEAR(static_cast<double>(bytes(1) + bytes(3)), static_cast<double>(whole), 2.0);
  EXPECT_NEAR(static_cast<double>(bytes(1)), whole / 2.0, 2.0);
  EXPECT_NEAR(static_cast<double>(bytes(6)), static_cast<double>(whole), 2.0);  // the end: every fragment
  // The first two steps are the same inner steps; from step 3 on fragment 0's outer step shows.
  EXPECT_DOUBLE_EQ(two[1].at("loss").get<double>(), one[1].at("loss").get<double>());
  EXPECT_NE(two[2].at("loss").get<double>(), one[2].at("loss").get<double>());
  EXPECT_LT(two[6].at("loss").get<double>(), two[0].at("loss").get<double>());
}

TEST_F(diloco_e2e, streamed_fragments_resume_after_a_crash_mid_round_bit_for_bit) {
  // H 2 with 2 fragments: at the checkpoint of step 4 fragment 1 has just stepped and fragment
  // 0 is one step into its round, so each rank's own parameters and round weights (and every
  // rank's round totals) must come back. The job is killed as window 5 starts (a stop would
  // end the run with an outer step of every fragment).
  const auto manifest = write_manifest(2, "two-abort-f2-resume.json", "abort");
  expect_resume_bit_for_bit(
      config("two-f2-resume", diloco(2, 0.7, 0.9, "fp32", 2), adamw(), 8, 2), "two-f2",
      [&](const std::string& job, const std::string& run, const std::string& extra) {
        return launch(manifest, job, run, extra);
      },
      "--inject kill:b@5");
}

TEST_F(diloco_e2e, streamed_fragments_resumed_on_another_world_size_start_their_rounds_again) {
  // Two nodes, H 2 and 2 fragments, killed after the checkpoint of step 4 (fragment 0 one step
  // into its round); resumed by one process, whose rounds were two replicas': it starts every
  // round again from the round start and trains on to the end.
  const auto manifest = write_manifest(2, "two-abort-f2-world.json", "abort");
  const auto job = config("two-f2-world", diloco(2, 0.7, 0.9, "fp32", 2), adamw(), 8, 2);
  auto result = launch(manifest, job, "two-f2-world", "--inject kill:b@5");
  ASSERT_NE(result.status, 0) << result.output;
  result = train(job, "two-f2-world", "--resume latest");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("resuming streaming DiLoCo on 1 ranks from a checkpoint of 2: every fragment's round "
                               "starts again from the round start"),
            std::string::npos)
      << result.output;
  const auto windows = lines("two-f2-world");
  ASSERT_EQ(windows.size(), 8u);
  EXPECT_EQ(windows.back().at("world_size").get<int>(), 1);
  EXPECT_TRUE(std::isfinite(windows.back().at("loss").get<double>()));
}

// Streaming with overlap (τ = 1): H 4 and 2 fragments, fragment 0 sent after steps 2, 6, …
// and landing after 3, 7, …, fragment 1 sent after 4, 8, … and landing after 5, 9, ….
TEST_F(diloco_e2e, overlapped_fragments_land_tau_steps_later_and_alone_with_alpha_one_are_plain_training) {
  // Alone, with outer lr 1 and α = 1, a landing leaves the replica's own parameters as they are.
  auto result = train(config("plain-adamw-8-tau", nullptr, adamw(), 8), "plain-adamw-8-tau");
  ASSERT_EQ(result.status, 0) << result.output;
  result = train(config("alone-tau", overlapped(diloco(4, 1.0, 0.0, "fp32", 2), 1, 1.0), adamw(), 8), "alone-tau");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto plain = read_metrics("plain-adamw-8-tau"), alone = read_metrics("alone-tau");
  ASSERT_EQ(alone.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(alone[i].loss, plain[i].loss) << "step " << i + 1;

  // Two nodes (rings through shared memory: the carrier lies in each worker's region), int8.
  const auto manifest = write_manifest(2, "two-abort-tau.json", "abort");
  result = launch(manifest, config("two-f1-int8", diloco(4, 0.7, 0.9, "int8", 1), adamw(), 7), "two-f1-int8");
  ASSERT_EQ(result.status, 0) << result.output;
  result = launch(manifest, config("two-tau", overlapped(diloco(4, 0.7, 0.9, "int8", 2), 1), adamw(), 7), "two-tau");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto whole = lines("two-f1-int8"), tau = lines("two-tau");
  ASSERT_EQ(tau.size(), 7u);
  const std::vector<bool> landed{false, false, true, false, true, false, true};  // and at 7, the run's end, fragment 1
  const std::vector<int64_t> steps_so_far{0, 0, 1, 1, 2, 2, 4};
  for (std::size_t i = 0; i < tau.size(); ++i) {
    EXPECT_EQ(tau[i].at("diloco").at("outer_step").get<bool>(), landed[i]) << "step " << i + 1;
    EXPECT_EQ(tau[i].at("diloco").at("outer_steps").get<int64_t>(), steps_so_far[i]) << "step " << i + 1;
    const bool sent = i + 1 == 2 || i + 1 == 4 || i + 1 == 6 || i + 1 == 7;
    EXPECT_EQ(tau[i].at("diloco").at("outer_bytes").get<int64_t>() > 0, sent) << "step " << i + 1;
  }
  // Until fragment 0 lands after step 3 the inner steps are the same as with no outer step yet.
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_DOUBLE_EQ(tau[i].at("loss").get<double>(), whole[i].at("loss").get<double>()) << "step " << i + 1;
  EXPECT_NE(tau[3].at("loss").get<double>(), whole[3].at("loss").get<double>());
  EXPECT_LT(tau[6].at("loss").get<double>(), tau[0].at("loss").get<double>());
}

TEST_F(diloco_e2e, overlapped_fragments_resume_after_a_crash_bit_for_bit) {
  // H 4, 2 fragments, τ 1, a checkpoint every 4 steps: step 4's falls while fragment 1's
  // exchange is in flight and is taken after step 5, where it lands. Killed as window 6 starts.
  const auto manifest = write_manifest(2, "two-abort-tau-resume.json", "abort");
  expect_resume_bit_for_bit(
      config("two-tau-resume", overlapped(diloco(4, 0.7, 0.9, "int8", 2), 1), adamw(), 8, 4), "two-tau",
      [&](const std::string& job, const std::string& run, const std::string& extra) {
        return launch(manifest, job, run, extra);
      },
      "--inject kill:b@6");
}

/// Three nodes under `elastic`, DiLoCo with H `inner_steps`, `fragments` and `overlap_steps`,
/// node c killed as window 5 starts: the survivors redo window 5 as generation 1 after
/// finishing, among themselves, the round of the `finished` fragments under way (each
/// pseudo-gradient weighted by what its replica trained on in the round; an exchange in flight
/// is dropped, its round finished so); then the schedule goes on: the windows in `landing`
/// (1-based) end with an outer step.
void expect_survivors_finish_the_rounds(const std::string& run, int64_t inner_steps, int64_t fragments, int64_t steps,
                                        int finished, const std::set<int64_t>& landing, int64_t overlap_steps = 0) {
  const auto manifest = diloco_e2e::write_manifest(3, run + "-manifest.json");  // elastic: the default for three nodes
  const auto job = diloco_e2e::config(
      run, diloco_e2e::overlapped(diloco_e2e::diloco(inner_steps, 0.7, 0.9, "fp32", fragments), overlap_steps),
      diloco_e2e::adamw(), steps);
  const auto result = diloco_e2e::launch(manifest, job, run, "--inject kill:c@5");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("redo the window in flight as generation 1"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("the 2 members of the new generation finish the round of " + std::to_string(finished) +
                               " of " + std::to_string(fragments) +
                               " fragment(s) among themselves: an outer step before step 5"),
            std::string::npos)
      << result.output;
  const auto windows = diloco_e2e::lines(run);
  ASSERT_EQ(windows.size(), static_cast<std::size_t>(steps));
  for (std::size_t i = 0; i < windows.size(); ++i) {
    EXPECT_EQ(windows[i].at("world_size").get<int>(), i < 4 ? 3 : 2) << run << ", window " << i + 1;
    EXPECT_EQ(windows[i].at("diloco").at("outer_step").get<bool>(), landing.count(static_cast<int64_t>(i + 1)) > 0)
        << run << ", window " << i + 1;
    EXPECT_TRUE(std::isfinite(windows[i].at("loss").get<double>()));
  }
  EXPECT_LT(windows.back().at("loss").get<double>(), windows.front().at("loss").get<double>());
}

TEST_F(diloco_e2e, a_node_lost_mid_round_leaves_the_survivors_to_finish_the_round_and_the_job) {
  // H 3: c is lost in the second round's second step; the outer steps stay at 3, 6 and 9.
  expect_survivors_finish_the_rounds("elastic-kill", 3, 1, 9, 1, {3, 6, 9});
}

TEST_F(diloco_e2e, a_node_lost_under_streaming_leaves_the_survivors_to_finish_the_rounds_under_way) {
  // H 4 with 2 fragments: fragment 1 stepped after step 4, so only fragment 0 (stepped after
  // step 2) has a round to finish; then the schedule goes on (fragment 0 after 6, 1 after 8).
  expect_survivors_finish_the_rounds("elastic-kill-f2", 4, 2, 8, 1, {2, 4, 6, 8});
}

TEST_F(diloco_e2e, a_node_lost_with_an_exchange_in_flight_leaves_the_survivors_to_finish_both_rounds) {
  // H 4, 2 fragments, τ 1: fragment 1, sent after step 4, is in flight when c is lost, so both
  // fragments have a round to finish (fragment 0 landed after step 3 and trained on step 4);
  // the next landings are fragment 0's after 7 and at the run's end (9) fragment 1's.
  expect_survivors_finish_the_rounds("elastic-kill-tau", 4, 2, 9, 2, {3, 7, 9}, 1);
}

TEST_F(diloco_e2e, a_restarted_node_rejoins_with_the_round_start_and_outer_momentum_of_a_live_replica) {
  json m = json::parse(io_text(write_manifest(3, "three-rejoin.json")));
  m["faults"]["max_restarts"] = 1;
  const auto manifest = *dir_ / "three-rejoin.json";
  testing::write_text(manifest, m.dump());
  // Node a sleeps 150 ms per micro-batch, so the job still runs when c is back. c comes back
  // either while the survivors' generation 1 is being formed (it joins that one) or after it
  // started (it joins as generation 2, "restarted and joins as generation 2"); which one depends
  // on how fast the machine starts a process. This test expected the second only; a slower node a
  // (300 ms) gives the first here, which is the likely cause of e2e_diloco_test's one failure
  // under `ctest -j12` on a GPU machine (output not kept; docs/gpu.md). Either way c copies a
  // live replica's state.
  const auto result = launch(manifest.string(), config("rejoin", diloco(3, 0.7, 0.9), adamw(), 30), "diloco-rejoin",
                             "--inject kill:c@4 --inject slow:150:a@1");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("troupe launch: restarting node c"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rank 2 copies the state of step"), std::string::npos) << result.output;
  const auto windows = lines("diloco-rejoin");
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows.back().at("world_size").get<int>(), 3) << "node c did not rejoin before the end";
  // Every window after the rejoin passed the replica check (the summed hashes of the round start).
  EXPECT_LT(windows.back().at("loss").get<double>(), windows.front().at("loss").get<double>());
}

}  // namespace
}  // namespace troupe
