// End to end through `troupe launch` on 127.0.0.1: 2 and 3 node processes train bert-tiny with
// ring allreduce over UCX. Replicas must agree bitwise after every window (the workers check
// every rank's parameter hash each window and fail otherwise), the loss curve must match one
// process with the same global batch, two runs must be bitwise identical, and killing a node
// must stop the job with a message naming it and leave no process behind.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "tests/e2e/cluster_job.hpp"

namespace troupe {
namespace {

class cluster_e2e : public cluster_job_test {};

TEST_F(cluster_e2e, two_and_three_nodes_match_one_process_and_repeat_bitwise) {
  const auto config = write_config(20, false, 0.1);  // with dropout: its masks are keyed by sample
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "single").string());
  ASSERT_EQ(single.status, 0) << single.output;
  const auto reference = read_metrics("single");
  ASSERT_EQ(reference.size(), 20u);

  auto two = launch(write_manifest(2, "two.json"), config, "two");
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("[a]"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("[b]"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("gradients are summed through shared memory"), std::string::npos) << two.output;
  const auto two_nodes = read_metrics("two");
  expect_same_curve(reference, two_nodes, "2 nodes");
  for (const auto& w : two_nodes) EXPECT_EQ(w.world_size, 2);

  const auto three_manifest = write_manifest(3, "three.json");
  auto three = launch(three_manifest, config, "three");
  ASSERT_EQ(three.status, 0) << three.output;
  expect_startup_events(*dir_ / "three", 3);
  auto again = launch(three_manifest, config, "three-again");
  ASSERT_EQ(again.status, 0) << again.output;
  const auto first = read_metrics("three"), second = read_metrics("three-again");
  expect_same_curve(reference, first, "3 nodes");
  ASSERT_EQ(first.size(), second.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].loss, second[i].loss) << "window " << i + 1;  // bitwise
    EXPECT_EQ(first[i].parameter_hash, second[i].parameter_hash) << "window " << i + 1;
  }
  // The first window starts from the same initial parameters everywhere.
  EXPECT_EQ(first[0].parameter_hash, reference[0].parameter_hash);

  // Three ranks again, two of them workers of one node process (a ring inside the process), and
  // every byte over UCX (as between hosts): the gradient sums give the same bits as the
  // shared-memory rings above, so the parameters match the 3-node run's bitwise.
  json m = json::parse(io_text(three_manifest));
  m["head"]["port"] = io::free_local_port();
  m["rings"]["shared_memory"] = false;
  m["nodes"] = json::parse(R"([{"name": "a", "host": "127.0.0.1", "workers": 2}, {"name": "b", "host": "127.0.0.1"}])");
  const auto mixed_manifest = *dir_ / "mixed.json";
  testing::write_text(mixed_manifest, m.dump());
  auto mixed = launch(mixed_manifest.string(), config, "mixed");
  ASSERT_EQ(mixed.status, 0) << mixed.output;
  EXPECT_EQ(mixed.output.find("shared memory"), std::string::npos) << mixed.output;
  const auto over_ucx = read_metrics("mixed");
  expect_same_curve(reference, over_ucx, "2 + 1 workers");
  ASSERT_EQ(over_ucx.size(), first.size());
  for (std::size_t i = 0; i < first.size(); ++i)
    EXPECT_EQ(over_ucx[i].parameter_hash, first[i].parameter_hash) << "window " << i + 1;
}

/// `base` (a config file) with the gradient in buckets of `bucket_elements`, overlapping the
/// backward pass or not.
std::string with_buckets(const std::string& base, int64_t bucket_elements, bool overlap) {
  json c = json::parse(io_text(base));
  c["zero_optimization"] = {{"stage", 0}, {"overlap_comm", overlap}, {"reduce_bucket_size", bucket_elements}};
  const auto path = base + (overlap ? ".overlap" : ".after") + ".json";
  testing::write_text(path, c.dump(2));
  return path;
}

TEST_F(cluster_e2e, overlapped_allreduce_sums_the_same_bits_as_after_the_backward_pass) {
  // Buckets of 3000 elements: the model's gradient in about 40 buckets, most of them handed to
  // the reducers while the backward pass still runs. Parameters must match a run that sends
  // every bucket after the backward pass bit for bit, window after window, for every ring count.
  const auto base = write_config(5, false, 0.1);
  const auto overlapped = with_buckets(base, 3000, true), after = with_buckets(base, 3000, false);
  const auto compare = [&](int nodes, int rings, const std::string& on, const std::string& off,
                           const std::string& label = "") {
    const std::string name = std::to_string(nodes) + "n" + std::to_string(rings) + "r" + label;
    json m = json::parse(io_text(write_manifest(nodes, name + ".json")));
    m["rings"]["count"] = rings;
    testing::write_text(*dir_ / (name + ".json"), m.dump(2));
    const auto manifest = (*dir_ / (name + ".json")).string();
    auto with = launch(manifest, on, name + "-overlap");
    ASSERT_EQ(with.status, 0) << with.output;
    auto without = launch(manifest, off, name + "-after");
    ASSERT_EQ(without.status, 0) << without.output;
    const auto a = read_metrics(name + "-overlap"), b = read_metrics(name + "-after");
    ASSERT_EQ(a.size(), 5u) << name;
    ASSERT_EQ(b.size(), 5u) << name;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].parameter_hash, b[i].parameter_hash) << name << ": window " << i + 1;
      EXPECT_EQ(a[i].loss, b[i].loss) << name << ": window " << i + 1;  // bitwise
    }
    const auto lines = io_text((*dir_ / (name + "-overlap") / "metrics.jsonl").string());
    const auto first = json::parse(lines.substr(0, lines.find('\n')));
    EXPECT_TRUE(first.contains("exposed_comm_s")) << first.dump();
  };
  for (int rings = 1; rings <= 2; ++rings) compare(2, rings, overlapped, after);
  for (int rings = 1; rings <= 3; ++rings) compare(3, rings, overlapped, after);
  // Every micro-batch's backward pass overlapped and summed.
  const auto every = write_config(5, true, 0.1);
  compare(3, 2, with_buckets(every, 3000, true), with_buckets(every, 3000, false), "-every");
}

// communication_data_type "bf16" / "fp16": the same bits over shared memory and over UCX (every
// hop rounds what crosses it the same way), parameters that differ from fp32 communication's
// (the rounding happened), and a loss curve near fp32's. The replicas' hash check stops a job
// whose ranks disagree, so finishing also says every rank held the same bits.
TEST_F(cluster_e2e, sixteen_bit_communication_gives_one_result_on_both_paths_near_fp32) {
  const auto base = write_config(6, false, 0.1);
  const auto shared_manifest = write_manifest(2, "wire-shm.json");
  json m = json::parse(io_text(shared_manifest));
  m["rings"]["shared_memory"] = false;
  const auto ucx_manifest = (*dir_ / "wire-ucx.json").string();
  testing::write_text(ucx_manifest, m.dump(2));
  auto fp32 = launch(ucx_manifest, base, "wire-fp32");
  ASSERT_EQ(fp32.status, 0) << fp32.output;
  const auto reference = read_metrics("wire-fp32");
  for (const std::string type : {"bf16", "fp16"}) {
    json c = json::parse(io_text(base));
    c["communication_data_type"] = type;
    const auto config = base + "." + type + ".json";
    testing::write_text(config, c.dump(2));
    auto over_shared_memory = launch(shared_manifest, config, "wire-" + type + "-shm");
    ASSERT_EQ(over_shared_memory.status, 0) << over_shared_memory.output;
    EXPECT_NE(over_shared_memory.output.find("shared memory"), std::string::npos) << over_shared_memory.output;
    auto over_ucx = launch(ucx_manifest, config, "wire-" + type + "-ucx");
    ASSERT_EQ(over_ucx.status, 0) << over_ucx.output;
    const auto a = read_metrics("wire-" + type + "-shm"), b = read_metrics("wire-" + type + "-ucx");
    ASSERT_EQ(a.size(), 6u);
    ASSERT_EQ(b.size(), 6u);
    double largest = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].parameter_hash, b[i].parameter_hash) << type << ": window " << i + 1;
      largest = std::max(largest, std::fabs(b[i].loss - reference[i].loss) / std::fabs(reference[i].loss));
    }
    // AdamW's first step is close to lr · sign(g), which fp16's 11 bits rarely change: the
    // rounding shows in the parameters of later windows.
    EXPECT_NE(b.back().parameter_hash, reference.back().parameter_hash) << type << ": the same parameters as fp32";
    std::printf("communication_data_type %s: largest relative loss difference to fp32 %.2e over 6 windows\n",
                type.c_str(), largest);
    EXPECT_LT(largest, 1e-3) << type;
  }
}

// Uneven windows: 3 nodes, 9 samples a window in micro-batches of 3; node c is killed in window
// 3 (elastic policy), and the two survivors then share each window 5 + 4, in micro-batches of
// 2 + 3 and 2 + 2, all short of the configured 3 and unequal between the ranks (the worker's
// share is cut evenly: compute/sample_order.hpp). With and without overlap the parameters are
// the same bits every window, before the loss and after it.
TEST_F(cluster_e2e, overlap_keeps_the_bits_in_uneven_windows) {
  json c = json::parse(io_text(write_config(7, false, 0.1)));
  c["train_batch_size"] = 9;
  c["train_micro_batch_size_per_gpu"] = 3;
  const auto base = (*dir_ / "short-micro.json").string();
  testing::write_text(base, c.dump(2));
  const auto manifest = write_manifest(3, "short-micro-manifest.json");
  auto with = launch(manifest, with_buckets(base, 3000, true), "short-overlap", "--inject kill:c@3:forward");
  ASSERT_EQ(with.status, 0) << with.output;
  auto without = launch(manifest, with_buckets(base, 3000, false), "short-after", "--inject kill:c@3:forward");
  ASSERT_EQ(without.status, 0) << without.output;
  const auto a = read_metrics("short-overlap"), b = read_metrics("short-after");
  ASSERT_EQ(a.size(), 7u);
  ASSERT_EQ(b.size(), 7u);
  EXPECT_EQ(a.back().world_size, 2);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].parameter_hash, b[i].parameter_hash) << "window " << i + 1;
    EXPECT_EQ(a[i].loss, b[i].loss) << "window " << i + 1;  // bitwise
  }
}

TEST_F(cluster_e2e, sync_every_micro_batch_gives_the_same_curve) {
  auto delayed = launch(write_manifest(2, "sync.json"), write_config(6), "delayed");
  ASSERT_EQ(delayed.status, 0) << delayed.output;
  auto every = launch(write_manifest(2, "sync2.json"), write_config(6, true), "every");
  ASSERT_EQ(every.status, 0) << every.output;
  expect_same_curve(read_metrics("delayed"), read_metrics("every"), "sync every micro-batch");
}

/// Launches a long 2-node job, sends `signal` to node b once two windows are done, and returns the
/// launcher's output with "launch-status=N" and "left=N" (node processes still there a second
/// after the launcher ended); prints how long the whole job took.
std::string signal_node_b_of_a_running_job(const std::string& name, const std::string& signal) {
  const auto manifest = cluster_e2e::write_manifest(2, name + ".json", "abort");
  const auto run = (*cluster_e2e::dir_ / name).string();
  // "NAM[E]" and "[b]" match the node's command line but not the shell's own, which holds the
  // patterns.
  const auto pattern = run.substr(0, run.size() - 1) + "[" + run.back() + "]";
  const std::string script =
      "sh -c '" + troupe_binary() + " launch --manifest " + manifest + " --config " +
      cluster_e2e::write_config(100000) + " --run-dir " + run + " > " + run + ".log 2>&1 & launcher=$!; " +
      "i=0; while [ $i -lt 600 ] && [ $(cat " + run + "/metrics.jsonl 2>/dev/null | wc -l) -lt 2 ]; do sleep 0.1; i=$((i+1)); done; " +
      "pkill -" + signal + " -f -- \"" + pattern + " .*--node [b]\"; wait $launcher; echo launch-status=$?; " +
      "sleep 1; echo left=$(pgrep -f -- \"" + pattern + "( --|$)\" | wc -l); cat " + run + ".log'";
  const auto start = std::chrono::steady_clock::now();
  auto result = run_command(script, 300);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("SIG%s to node b; the job ended after %.1f s (including startup)\n", signal.c_str(), seconds);
  return result.output;
}

TEST_F(cluster_e2e, under_the_abort_policy_killing_a_node_stops_the_others_naming_it) {
  const auto output = signal_node_b_of_a_running_job("killed", "KILL");
  EXPECT_NE(output.find("launch-status=1"), std::string::npos) << output;
  EXPECT_NE(output.find("left=0"), std::string::npos) << output;
  EXPECT_NE(output.find("node b was killed by signal 9"), std::string::npos) << output;
  EXPECT_NE(output.find("[a] troupe: error: node a:"), std::string::npos) << output;
  EXPECT_NE(output.find("node b (127.0.0.1)"), std::string::npos) << output;
}

// The launcher itself SIGKILLed mid-run (it cannot forward anything): every local node dies
// with it (PR_SET_PDEATHSIG), none survives for more than a few seconds.
TEST_F(cluster_e2e, no_node_outlives_a_launcher_killed_with_sigkill) {
  const auto manifest = write_manifest(3, "orphans.json");
  const auto run = (*dir_ / "orphans").string();
  const auto pattern = run.substr(0, run.size() - 1) + "[" + run.back() + "]";
  const std::string script =
      "sh -c '" + troupe_binary() + " launch --manifest " + manifest + " --config " + write_config(100000) +
      " --run-dir " + run + " > " + run + ".log 2>&1 & launcher=$!; " +
      "i=0; while [ $i -lt 600 ] && [ $(cat " + run + "/metrics.jsonl 2>/dev/null | wc -l) -lt 2 ]; do sleep 0.1; i=$((i+1)); done; " +
      "echo before=$(pgrep -f -- \"" + pattern + " .*--node [abc]\" | wc -l); kill -KILL $launcher; sleep 3; " +
      "echo after=$(pgrep -f -- \"" + pattern + " .*--node [abc]\" | wc -l)'";
  auto result = run_command(script, 120);
  EXPECT_NE(result.output.find("before=3"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("after=0"), std::string::npos) << result.output;
  run_command("pkill -KILL -f -- \"" + pattern + " .*--node [abc]\"", 10);  // never leave one behind
}

// The replica check in the failing direction: node b's replica (rank 1) is nudged before step 3
// (`--inject diverge:b@3`), so the hashes summed with that window's gradient disagree and every
// rank stops the job naming the diverged rank and the step.
TEST_F(cluster_e2e, a_diverged_replica_stops_the_job_naming_the_rank_and_step) {
  auto diverged = run_command(troupe_binary() + " launch --manifest " + write_manifest(2, "diverge.json") +
                                  " --config " + write_config(6) + " --run-dir " + (*dir_ / "diverged").string() +
                                  " --inject diverge:b@3",
                              300);
  EXPECT_NE(diverged.status, 0) << diverged.output;
  EXPECT_NE(diverged.output.find("replicas diverged before step 3: rank 1's parameters hash to"), std::string::npos)
      << diverged.output;
  EXPECT_NE(diverged.output.find("rank 0's to"), std::string::npos) << diverged.output;
  const auto windows = read_metrics("diverged");
  EXPECT_EQ(windows.size(), 2u) << "only the windows before the divergence are reported";
}

// A rank that is slow every window (`--inject slow:150:b@1`: node b sleeps 150 ms per
// micro-batch, 3 per window) is named in every window's metrics and, after three windows, in a
// warning.
TEST_F(cluster_e2e, a_slow_rank_is_named_as_the_straggler) {
  auto run = launch(write_manifest(2, "slow.json"), write_config(4), "slow", "--inject slow:150:b@1");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("injecting faults: slow:150:b@1"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 1 is a straggler"), std::string::npos) << run.output;
  std::ifstream in(*dir_ / "slow" / "metrics.jsonl");
  int windows = 0;
  for (std::string line; std::getline(in, line); ++windows) {
    const auto j = json::parse(line);
    EXPECT_EQ(j.at("straggler_rank").get<int>(), 1) << line;
    EXPECT_GT(j.at("straggler_lateness_s").get<double>(), 0.3) << line;  // 3 × 150 ms, less what rank 0 did meanwhile
  }
  EXPECT_EQ(windows, 4);
}

// Under faults.policy "abort", `--inject kill:b@3` and `--inject hang:b@3`: the node kills or
// stops itself at the start of its third window; the job ends naming it (a stopped node fenced by
// the launcher), with the two windows before it in metrics.jsonl and no process left.
TEST_F(cluster_e2e, injected_kill_and_hang_end_an_abort_policy_job_naming_the_node) {
  for (const std::string kind : {"kill", "hang"}) {
    const auto run = "injected-" + kind;
    auto result = launch(write_manifest(2, run + ".json", "abort"), write_config(20), run, "--inject " + kind + ":b@3");
    EXPECT_NE(result.status, 0) << result.output;
    EXPECT_NE(result.output.find(kind == "kill" ? "node b was killed by signal 9" : "node b was stopped by signal 19"),
              std::string::npos)
        << result.output;
    EXPECT_EQ(read_metrics(run).size(), 2u) << kind;
  }
  auto refused = launch(write_manifest(2, "inject-bad.json"), write_config(5), "never-injected", "--inject kill:zz@3");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("--inject kill:zz@3: "), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find(": no node called \"zz\" (nodes: a, b)"), std::string::npos) << refused.output;
  EXPECT_FALSE(std::filesystem::exists(*dir_ / "never-injected"));
}

// transport "nccl" on this CPU machine: each node makes its rings' NCCL ids and joins, the plan
// carries rank 0's to both, and each worker then stops before training on its manifest device,
// which this LibTorch does not have (a build without NCCL says so instead; a machine with one GPU
// lacks node b's cuda:1). With two GPUs and a CUDA LibTorch the same job trains. Elastic NCCL
// jobs are refused before any node starts.
TEST_F(cluster_e2e, an_nccl_job_passes_its_ids_through_the_plan_and_names_the_missing_gpu) {
  const auto path = write_manifest(2, "nccl.json", "abort");
  auto m = json::parse(io_text(path));
  m["transport"] = "nccl";
  m["nodes"][0]["devices"] = json::array({"cuda:0"});
  m["nodes"][1]["devices"] = json::array({"cuda:1"});  // one host: a GPU each (docs/cluster.md)
  testing::write_text(path, m.dump(2));
  auto result = launch(path, write_config(3), "nccl");
  const bool trained = result.status == 0;
  if (!trained) {
    const bool no_gpu = result.output.find("manifest: nodes[a].devices: \"cuda:0\" requested, but this LibTorch") !=
                        std::string::npos;
    const bool no_nccl = result.output.find("this troupe was built without NCCL") != std::string::npos;
    const bool one_gpu = result.output.find("nodes[b].devices: \"cuda:1\" requested, but only 1 CUDA device(s) exist") !=
                         std::string::npos;
    EXPECT_TRUE(no_gpu || no_nccl || one_gpu) << result.output;
    EXPECT_EQ(result.output.find("NCCL ids for"), std::string::npos) << result.output;
    EXPECT_FALSE(std::filesystem::exists(*dir_ / "nccl" / "metrics.jsonl") &&
                 !io_text((*dir_ / "nccl" / "metrics.jsonl").string()).empty());
  } else {
    EXPECT_EQ(read_metrics("nccl").size(), 3u);
  }
  m["faults"]["policy"] = "elastic";
  testing::write_text(path, m.dump(2));
  auto elastic = launch(path, write_config(3), "nccl-elastic");
  EXPECT_NE(elastic.status, 0);
  EXPECT_NE(elastic.output.find("transport: \"nccl\" with faults.policy \"elastic\""), std::string::npos) << elastic.output;
}

// `troupe bench … --json` runs its ranks as launched nodes; their log lines go to stderr, so
// stdout is the JSON result alone and a script can parse it (it once carried "[rank0] info: …").
TEST_F(cluster_e2e, bench_json_on_stdout_is_the_result_alone) {
  auto bench = run_command("sh -c '" + troupe_binary() + " bench allreduce --world 2 --bytes 4K --json 2>/dev/null'", 120);
  ASSERT_EQ(bench.status, 0) << bench.output;
  json result;
  ASSERT_NO_THROW(result = json::parse(bench.output)) << bench.output;
  EXPECT_TRUE(result["correct"].get<bool>()) << bench.output;
}

// A frozen node (SIGSTOP) is a dead node: the launcher fences it at once and the job stops
// naming it, instead of waiting out the collective timeout.
TEST_F(cluster_e2e, a_frozen_node_is_fenced_and_named) {
  const auto output = signal_node_b_of_a_running_job("frozen", "STOP");
  EXPECT_NE(output.find("launch-status=1"), std::string::npos) << output;
  EXPECT_NE(output.find("left=0"), std::string::npos) << output;
  EXPECT_NE(output.find("node b was stopped by signal 19"), std::string::npos) << output;
}

// faults.policy "elastic" (the default for 2+ nodes): node c of three kills itself (or stops
// itself, and the launcher fences it) at the start of window 3. The coordinator names it, the
// survivors abandon window 3, join generation 1 as two ranks and redo it with uneven shares of
// the same 12 samples. The job ends with status 0 and the loss curve of one process running
// straight (dropout on: masks are keyed by sample, so the split does not matter); every sample
// is consumed, and only those of the abandoned window (and the prefetched next) were sent twice.
TEST_F(cluster_e2e, elastic_survivors_redo_the_window_and_match_the_uninterrupted_run) {
  const auto config = write_config(8, false, 0.1);
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "elastic-reference").string());
  ASSERT_EQ(single.status, 0) << single.output;
  const auto reference = read_metrics("elastic-reference");
  for (const std::string kind : {"kill", "hang"}) {
    const auto run = "elastic-" + kind;
    const auto log_dir = *dir_ / (run + "-samples");
    std::filesystem::create_directories(log_dir);
    const auto start = std::chrono::steady_clock::now();
    auto result = run_command(troupe_binary() + " launch --manifest " + write_manifest(3, run + ".json") +
                                  " --config " + config + " --run-dir " + (*dir_ / run).string() + " --inject " +
                                  kind + ":c@3 --record-samples " + log_dir.string(),
                              300);
    std::printf("%s: the 3-node job with node c lost at window 3 took %.1f s\n", kind.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    ASSERT_EQ(result.status, 0) << result.output;
    EXPECT_NE(result.output.find(kind == "kill" ? "node c was killed by signal 9 (Killed); the job goes on without it"
                                                : "node c was stopped by signal 19 (Stopped (signal)) and is killed"),
              std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("redo the window in flight as generation 1"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("ranks 0..0 of 2, 2 ring(s), generation 1"), std::string::npos) << result.output;
    // Nobody joined generation 1: each survivor's plan came with the news.
    EXPECT_NE(result.output.find("generation 1: the plans go with the news, on the 2 survivors' standby transports"),
              std::string::npos)
        << result.output;
    EXPECT_EQ(result.output.find("joined generation 1"), std::string::npos) << result.output;
    const auto windows = read_metrics(run);
    expect_same_curve(reference, windows, "elastic, " + kind + " c@3");
    ASSERT_EQ(windows.size(), 8u);
    for (std::size_t i = 0; i < windows.size(); ++i) EXPECT_EQ(windows[i].world_size, i < 2 ? 3 : 2) << "window " << i + 1;

    std::map<uint64_t, int> sent;
    for (const auto& file : std::filesystem::directory_iterator(log_dir)) {
      std::ifstream in(file.path());
      for (uint64_t position, epoch, id; in >> position >> epoch >> id;) ++sent[position];
    }
    for (uint64_t p = 0; p < 8 * 12; ++p) {
      // Window 3 was abandoned and redone; the loaders of generation 0 may also have sent some of
      // window 4 ahead (prefetch) before it ended.
      const bool redone = p >= 2 * 12 && p < 4 * 12;
      EXPECT_GE(sent[p], 1) << "global position " << p << " was never consumed";
      EXPECT_LE(sent[p], redone ? 2 : 1) << "global position " << p;
    }
    EXPECT_EQ(sent.size(), 8u * 12u);

    // events.jsonl: the fault, the coordinator's decision and the new generation, in that order
    // (what `troupe bench recovery` measures); the launch, the nodes' start-ups and their
    // heartbeat round trips beside them.
    std::ifstream events(*dir_ / run / "events.jsonl");
    std::vector<json> lines;
    const std::set<std::string> beside = {"launch", "node_startup", "heartbeat_round_trips"};
    for (std::string line; std::getline(events, line);)
      if (auto event = json::parse(line); beside.count(event.at("event")) == 0) lines.push_back(std::move(event));
    ASSERT_EQ(lines.size(), 3u) << io_text((*dir_ / run / "events.jsonl").string());
    EXPECT_EQ(lines[0].at("event"), "fault");
    EXPECT_EQ(lines[0].at("kind"), kind);
    EXPECT_EQ(lines[0].at("step"), 3);
    EXPECT_EQ(lines[1].at("event"), "node_lost");
    EXPECT_EQ(lines[1].at("node"), "c");
    EXPECT_EQ(lines[2].at("event"), "generation");
    EXPECT_EQ(lines[2].at("start_steps"), 2);
    EXPECT_EQ(lines[2].at("nodes"), json::parse(R"(["a", "b"])"));
    EXPECT_LE(lines[0].at("unix_s").get<double>(), lines[1].at("unix_s").get<double>());
    EXPECT_LE(lines[1].at("unix_s").get<double>(), lines[2].at("unix_s").get<double>());
  }
}

// faults.max_restarts 1: node c kills itself at window 3, the launcher starts it again with
// --rejoin, and the coordinator admits it into the next generation; the live replicas copy their
// state (parameters, moments, step) to it over the rings before the first window. The loss curve
// is still that of one process running straight, and the last windows are on three ranks again.
TEST_F(cluster_e2e, a_restarted_node_rejoins_with_a_live_replicas_state) {
  const auto config = write_config(30, false, 0.1);
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "rejoin-reference").string());
  ASSERT_EQ(single.status, 0) << single.output;
  json m = json::parse(io_text(write_manifest(3, "rejoin.json")));
  m["faults"]["max_restarts"] = 1;
  const auto manifest = *dir_ / "rejoin.json";
  testing::write_text(manifest, m.dump());
  // Node a sleeps 150 ms per micro-batch, so the job is still running when c is back (about 1 s
  // alone; CI once saw a restarted c not join within the 4 s that 30 ms left, the cores busy).
  auto result = launch(manifest.string(), config, "rejoin", "--inject kill:c@3 --inject slow:150:a@1");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("restarting node c (1 of 1)"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("node c (127.0.0.1) restarted and joins as generation 2"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("[c] info: rank 2 copies the state of step"), std::string::npos) << result.output;
  const auto windows = read_metrics("rejoin");
  expect_same_curve_by_step(read_metrics("rejoin-reference"), windows, "a node lost and rejoined", 1);
  EXPECT_EQ(windows.front().world_size, 3);
  EXPECT_EQ(windows.back().world_size, 3) << "node c did not rejoin before the end";
  // The survivors went on without c first. Whether they also finished a window before c was
  // back is a race with c's restart: on a fresh 2-core VM c was back within generation 1's first
  // window in six runs of six (2026-11-26, with the binaries before and after that day's changes), and the
  // window was redone by all three.
  EXPECT_NE(result.output.find("generation 1: 2 nodes go on from step"), std::string::npos) << result.output;
}

// Two losses in one run: of four nodes, d is killed in window 3 and c frozen in window 5 (its
// allreduce phase). The job goes on as generation 1 (three nodes), then 2 (two), and still ends
// with the uninterrupted curve.
TEST_F(cluster_e2e, two_losses_in_one_run_leave_two_nodes_on_the_same_curve) {
  auto c = json::parse(io_text(write_config(8, false, 0.1)));
  c["train_batch_size"] = 24;  // 4 workers × 3 micro-batches of 2; then 3 × 4, then 2 × 6
  const auto config = (*dir_ / "two-losses-config.json").string();
  testing::write_text(config, c.dump());
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "two-losses-reference").string());
  ASSERT_EQ(single.status, 0) << single.output;
  auto result = launch(write_manifest(4, "two-losses.json"), config, "two-losses",
                       "--inject kill:d@3 --inject hang:c@5:allreduce");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("as generation 2"), std::string::npos) << result.output;
  const auto windows = read_metrics("two-losses");
  expect_same_curve(read_metrics("two-losses-reference"), windows, "two losses");
  ASSERT_EQ(windows.size(), 8u);
  EXPECT_EQ(windows.front().world_size, 4);
  EXPECT_EQ(windows.back().world_size, 2);
}

// faults.min_nodes 3 on three nodes: losing one would leave two, so the job stops, saying why.
TEST_F(cluster_e2e, a_loss_below_min_nodes_stops_the_job_naming_the_limit) {
  json m = json::parse(io_text(write_manifest(3, "min-nodes.json")));
  m["faults"]["min_nodes"] = 3;
  const auto manifest = *dir_ / "min-nodes.json";
  testing::write_text(manifest, m.dump());
  auto result = launch(manifest.string(), write_config(8), "min-nodes", "--inject kill:c@3");
  EXPECT_NE(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("node c (127.0.0.1) left the job before finishing"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("2 node(s) would remain, fewer than faults.min_nodes 3"), std::string::npos)
      << result.output;
  EXPECT_EQ(read_metrics("min-nodes").size(), 2u);
}

// faults.policy "restart" (torchrun's way, for comparison): b is killed in window 5; every node
// stops, and the launcher starts them all again from the checkpoint of step 4. The run ends with
// all 8 windows, each reported once, on the uninterrupted curve (resume is exact).
TEST_F(cluster_e2e, the_restart_policy_starts_the_job_again_from_the_latest_checkpoint) {
  auto c = json::parse(io_text(write_config(8, false, 0.1)));
  c["checkpoint"]["every_windows"] = 2;
  const auto config = *dir_ / "restart-config.json";
  testing::write_text(config, c.dump());
  auto single = run_command(troupe_binary() + " train --config " + config.string() + " --run-dir " +
                            (*dir_ / "restart-reference").string());
  ASSERT_EQ(single.status, 0) << single.output;
  json m = json::parse(io_text(write_manifest(2, "restart.json", "restart")));
  m["faults"]["max_restarts"] = 1;
  const auto manifest = *dir_ / "restart.json";
  testing::write_text(manifest, m.dump());
  auto result = launch(manifest.string(), config.string(), "restart", "--inject kill:b@5");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("starting every node again from the latest checkpoint in 1 s (restart 1 of 1"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("resuming from"), std::string::npos) << result.output;
  const auto windows = read_metrics("restart");
  expect_same_curve(read_metrics("restart-reference"), windows, "restart policy");
  EXPECT_EQ(windows.size(), 8u);
}

// Every join carries the job's secret (troupe launch generates one per job): a node started with
// another is refused, named, and the head logs it; a node whose stdin closes (its ssh session or
// launcher gone, --watch-stdin) stops at once instead of waiting to join.
TEST_F(cluster_e2e, a_join_without_the_job_secret_is_refused_and_a_watched_stdin_ends_a_node) {
  const auto manifest = write_manifest(2, "secret.json");
  const auto run = (*dir_ / "secret").string();
  const auto node = troupe_binary() + " node --manifest " + manifest + " --config " + write_config(4) + " --run-dir " + run;
  const std::string script = "sh -c '" + std::string("TROUPE_JOB_SECRET=one ") + node + " --node a > " + run +
                             ".a.log 2>&1 & a=$!; TROUPE_JOB_SECRET=two " + node + " --node b; echo b-status=$?; " +
                             "kill -KILL $a; wait $a; cat " + run + ".a.log'";
  auto result = run_command(script, 120);
  EXPECT_NE(result.output.find("b-status=1"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("the head refused the join: it did not carry this job's secret (TROUPE_JOB_SECRET"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("refused a join claiming to be node b"), std::string::npos) << result.output;

  const auto start = std::chrono::steady_clock::now();
  auto watched = run_command("echo | " + node + " --node b --watch-stdin", 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(watched.status, 0) << watched.output;
  EXPECT_NE(watched.output.find("stdin closed: the launcher or its ssh session ended"), std::string::npos)
      << watched.output;
  EXPECT_LT(seconds, 20.0) << "the node waited for the head instead (timeouts.join_s is 30)";
}

// Checkpoint faults on node a, which writes the checkpoints (every 2 windows of 6):
//  - enospc:a@4 — writing step 4's model.safetensors fails halfway with ENOSPC: the job stops,
//    naming the file and the errno; step 2's checkpoint stays `latest` and valid, and the run
//    resumes from it;
//  - corrupt-checkpoint:a@6 — a byte of the final checkpoint's model.safetensors is flipped after
//    its checksum was taken: the job ends normally, `troupe ckpt verify` names the file, and a
//    resume from `latest` falls back to step 4's;
//  - kill:a@4:checkpoint and hang:a@4:checkpoint (abort policy) — the writer dies, or freezes and
//    is fenced, with the checkpoint half written: step 2's stays `latest` and valid.
TEST_F(cluster_e2e, checkpoint_faults_keep_the_previous_checkpoint_valid) {
  auto c = json::parse(io_text(write_config(6)));
  c["checkpoint"]["every_windows"] = 2;
  c["checkpoint"]["keep"] = 3;
  const auto config = (*dir_ / "ckpt-faults-config.json").string();
  testing::write_text(config, c.dump());
  auto verify = [](const std::string& run) {
    return run_command(troupe_binary() + " ckpt verify " + (*dir_ / run).string(), 60);
  };

  auto full = launch(write_manifest(2, "enospc.json"), config, "enospc", "--inject enospc:a@4");
  EXPECT_NE(full.status, 0) << full.output;
  EXPECT_NE(full.output.find("step-00000004.tmp/model.safetensors.tmp: write failed: No space left on device"),
            std::string::npos)
      << full.output;
  auto still = verify("enospc");
  EXPECT_EQ(still.status, 0) << still.output;
  EXPECT_NE(still.output.find("step-00000002"), std::string::npos) << still.output;
  auto resumed = launch(write_manifest(2, "enospc-resume.json"), config, "enospc", "--resume latest");
  EXPECT_EQ(resumed.status, 0) << resumed.output;

  auto corrupt = launch(write_manifest(2, "corrupt.json"), config, "corrupt", "--inject corrupt-checkpoint:a@6");
  ASSERT_EQ(corrupt.status, 0) << corrupt.output;
  auto bad = verify("corrupt");
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_NE(bad.output.find("model.safetensors"), std::string::npos) << bad.output;
  auto fallback = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "corrupt").string() +
                                  " --resume latest",
                              120);
  EXPECT_EQ(fallback.status, 0) << fallback.output;
  EXPECT_NE(fallback.output.find("falling back to the previous valid checkpoint"), std::string::npos) << fallback.output;
  EXPECT_NE(fallback.output.find("step-00000004"), std::string::npos) << fallback.output;

  for (const std::string kind : {"kill", "hang"}) {
    const auto run = "ckpt-" + kind;
    auto stopped = launch(write_manifest(2, run + ".json", "abort"), config, run, "--inject " + kind + ":a@4:checkpoint");
    EXPECT_NE(stopped.status, 0) << stopped.output;
    auto survived = verify(run);
    EXPECT_EQ(survived.status, 0) << kind << ": " << survived.output;
    EXPECT_NE(survived.output.find("step-00000002"), std::string::npos) << kind << ": " << survived.output;
  }
}

// A replacement started by hand (`troupe node --join`, as on another host): node c of three is
// killed at window 3 with no restarts; once the others have gone on as generation 1, a new
// `troupe node --join --node c` (not the launcher's child) reads the job's secret from the run
// directory, is admitted into generation 2, copies the live state, and the job ends on three
// ranks and on the uninterrupted curve.
TEST_F(cluster_e2e, a_replacement_started_by_hand_joins_the_running_job) {
  const auto config = write_config(30, false, 0.1);
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "join-reference").string());
  ASSERT_EQ(single.status, 0) << single.output;
  const auto manifest = write_manifest(3, "join.json");
  const auto run = (*dir_ / "join").string();
  const std::string script =
      "sh -c '" + troupe_binary() + " launch --manifest " + manifest + " --config " + config + " --run-dir " + run +
      " --inject kill:c@3 --inject slow:100:a@1 > " + run + ".log 2>&1 & launcher=$!; " +
      "i=0; while [ $i -lt 300 ] && ! grep -q generation " + run + "/events.jsonl 2>/dev/null; do sleep 0.1; i=$((i+1)); done; " +
      "timeout 120 " + troupe_binary() + " node --join --node c --manifest " + manifest + " --config " + config +
      " --run-dir " + run + " > " + run + ".c.log 2>&1; echo joined-status=$?; wait $launcher; echo launch-status=$?; " +
      "cat " + run + ".c.log; ls " + run + "'";
  auto result = run_command(script, 300);
  EXPECT_NE(result.output.find("joined-status=0"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("launch-status=0"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("copies the state of step"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("job-secret"), std::string::npos) << "the launcher leaves its secret behind";
  const auto windows = read_metrics("join");
  expect_same_curve_by_step(read_metrics("join-reference"), windows, "a replacement joined", 1);
  EXPECT_EQ(windows.back().world_size, 3);
}

/// Starts nodes a (the head) and b by hand (no launcher watching them), SIGSTOPs `frozen` after
/// two windows, waits for the other node to exit, then kills the frozen one. Returns the other
/// node's log with "status=N" and "detected-ms=N" (from the stop to its exit) appended.
std::string freeze_one_of_two_hand_started_nodes(const std::string& frozen, const std::string& name) {
  const std::string other = frozen == "a" ? "b" : "a";
  json m = json::parse(io_text(cluster_e2e::write_manifest(2, name + ".json", "abort")));
  m["timeouts"]["collective_s"] = 60;
  m["timeouts"]["heartbeat_ms"] = 1000;
  const auto manifest = *cluster_e2e::dir_ / (name + ".json");
  testing::write_text(manifest, m.dump());
  const auto run = (*cluster_e2e::dir_ / name).string();
  const auto node = troupe_binary() + " node --manifest " + manifest.string() + " --config " +
                    cluster_e2e::write_config(100000) + " --run-dir " + run;
  const std::string script =
      "sh -c '" + node + " --node a > " + run + ".a.log 2>&1 & a=$!; " + node + " --node b > " + run +
      ".b.log 2>&1 & b=$!; " +
      "i=0; while [ $i -lt 600 ] && [ $(cat " + run + "/metrics.jsonl 2>/dev/null | wc -l) -lt 2 ]; do sleep 0.1; i=$((i+1)); done; " +
      "kill -STOP $" + frozen + "; start=$(date +%s%N); wait $" + other + "; echo status=$?; " +
      "echo detected-ms=$(( ($(date +%s%N) - start) / 1000000 )); kill -KILL $" + frozen + "; wait $" + frozen +
      "; cat " + run + "." + other + ".log'";
  return run_command(script, 300).output;
}

void report_detection(const std::string& output, const std::string& what) {
  const auto at = output.find("detected-ms=");
  ASSERT_NE(at, std::string::npos) << output;
  std::printf("%s: the other node exited %s ms after the stop\n", what.c_str(),
              output.substr(at + 12, output.find('\n', at) - at - 12).c_str());
}

// Without a launcher to see the stop (nodes started by hand, or on other hosts), a frozen node
// falls silent: the head hears no heartbeat for timeouts.heartbeat_ms and stops the job naming
// it, instead of waiting for the collective timeout (60 s here).
TEST_F(cluster_e2e, a_silent_node_is_declared_dead_by_its_missing_heartbeats) {
  const auto output = freeze_one_of_two_hand_started_nodes("b", "silent");
  EXPECT_NE(output.find("status=1"), std::string::npos) << output;
  EXPECT_NE(output.find("node b (127.0.0.1) stopped answering: no heartbeat for "), std::string::npos) << output;
  report_detection(output, "node b frozen");
}

// A frozen head keeps its connections open (no down message): the other nodes' heartbeat
// requests go unanswered, and they stop naming the head.
TEST_F(cluster_e2e, a_silent_head_is_noticed_by_the_unanswered_heartbeats) {
  const auto output = freeze_one_of_two_hand_started_nodes("a", "silent-head");
  EXPECT_NE(output.find("status=1"), std::string::npos) << output;
  EXPECT_NE(output.find("stopped answering: no heartbeat reply for 1000 ms (timeouts.heartbeat_ms)"),
            std::string::npos)
      << output;
  report_detection(output, "head frozen");
}

// The data cursor is global: a job checkpointed on 2 nodes resumes on 1 process and again on 2,
// and every global position is consumed exactly once (the loaders log what they send).
TEST_F(cluster_e2e, resume_on_a_different_number_of_workers_consumes_each_sample_once) {
  const auto log_dir = *dir_ / "samples";
  std::filesystem::create_directories(log_dir);
  const std::string record = " --record-samples " + log_dir.string();
  const auto config = write_config(8);
  const auto manifest = write_manifest(2, "resume.json");
  const auto run = (*dir_ / "resumed").string();
  auto first = run_command(troupe_binary() + " launch --manifest " + manifest + " --config " + config +
                           " --run-dir " + run + " --max-windows 3" + record);
  ASSERT_EQ(first.status, 0) << first.output;
  auto second = run_command(troupe_binary() + " train --config " + config + " --run-dir " + run +
                            " --resume latest --max-windows 3" + record);
  ASSERT_EQ(second.status, 0) << second.output;
  auto third = run_command(troupe_binary() + " launch --manifest " + manifest + " --config " + config +
                           " --run-dir " + run + " --resume latest" + record);
  ASSERT_EQ(third.status, 0) << third.output;

  std::map<uint64_t, int> positions;
  std::map<uint64_t, std::set<uint64_t>> ids_per_epoch;
  std::size_t logged = 0;
  for (const auto& file : std::filesystem::directory_iterator(log_dir)) {
    std::ifstream in(file.path());
    for (uint64_t position, epoch, id; in >> position >> epoch >> id; ++logged) {
      ++positions[position];
      EXPECT_TRUE(ids_per_epoch[epoch].insert(id).second) << "sample " << id << " repeated in epoch " << epoch;
    }
  }
  EXPECT_EQ(logged, 8u * 12u);  // 8 windows of 12 samples: 3 on 2 nodes, 3 on 1, 2 on 2
  for (uint64_t p = 0; p < 8 * 12; ++p) EXPECT_EQ(positions[p], 1) << "global position " << p;
  EXPECT_EQ(read_metrics("resumed").size(), 8u);
}

// Every rank's dropout stream must continue where it stopped (the checkpoint saves the writer's
// count; every rank makes as many calls), or rank 1's masks after the resume would differ.
TEST_F(cluster_e2e, resuming_two_nodes_with_dropout_is_bitwise_identical_to_running_straight) {
  const auto config = write_config(6, false, 0.1);
  const auto manifest = write_manifest(2, "dropout.json");
  auto straight = launch(manifest, config, "dropout-straight");
  ASSERT_EQ(straight.status, 0) << straight.output;
  auto first = launch(manifest, config, "dropout-resumed", "--max-windows 3");
  ASSERT_EQ(first.status, 0) << first.output;
  auto second = launch(manifest, config, "dropout-resumed", "--resume latest");
  ASSERT_EQ(second.status, 0) << second.output;
  const auto a = read_metrics("dropout-straight"), b = read_metrics("dropout-resumed");
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].loss, b[i].loss) << "window " << i + 1;
    EXPECT_EQ(a[i].parameter_hash, b[i].parameter_hash) << "window " << i + 1;
  }
}

TEST_F(cluster_e2e, unreachable_head_and_bad_manifest_fail_with_clear_errors) {
  const int port = io::free_local_port();
  const std::string head = "127.0.0.1:" + std::to_string(port);
  json m{{"head", {{"host", "127.0.0.1"}, {"port", port}}},
         {"nodes", {{{"name", "a"}, {"host", "127.0.0.1"}}, {{"name", "b"}, {"host", "127.0.0.1"}}}},
         {"timeouts", {{"join_s", 2}}}};
  const auto manifest = *dir_ / "lonely.json";
  testing::write_text(manifest, m.dump());
  auto lonely = run_command(troupe_binary() + " node --manifest " + manifest.string() + " --config " +
                            write_config(5) + " --node b --run-dir " + (*dir_ / "lonely").string(), 60);
  EXPECT_NE(lonely.status, 0);
  EXPECT_NE(lonely.output.find("cannot reach the head at " + head + " within 2 s"), std::string::npos)
      << lonely.output;

  // A node started with a different config is refused by the head, naming what differs; the
  // head then gives up on the missing node after join_s.
  const auto node = troupe_binary() + " node --manifest " + manifest.string() + " --run-dir " +
                    (*dir_ / "mismatch").string();
  auto mismatch = run_command("sh -c '" + node + " --node a --config " + write_config(5) + " > " +
                                  (*dir_ / "a.log").string() + " 2>&1 & " + node + " --node b --config " +
                                  write_config(6) + "; echo b-status=$?; wait $!; echo a-status=$?; cat " +
                                  (*dir_ / "a.log").string() + "'",
                              60);
  EXPECT_NE(mismatch.output.find("parsed a different job config than the head"), std::string::npos)
      << mismatch.output;
  EXPECT_NE(mismatch.output.find("b-status=1"), std::string::npos) << mismatch.output;
  EXPECT_NE(mismatch.output.find("a-status=1"), std::string::npos) << mismatch.output;
  EXPECT_NE(mismatch.output.find("did not join the head at " + head + " within 2 s"), std::string::npos)
      << mismatch.output;

  m["nodes"][1]["name"] = "a";
  testing::write_text(manifest, m.dump());
  auto duplicate = launch(manifest.string(), write_config(5), "never");
  EXPECT_NE(duplicate.status, 0);
  EXPECT_NE(duplicate.output.find("nodes[1].name"), std::string::npos) << duplicate.output;
  EXPECT_FALSE(std::filesystem::exists(*dir_ / "never"));

  auto dry = launch(write_manifest(2, "dry.json"), write_config(5), "dry", "--dry-run");
  ASSERT_EQ(dry.status, 0) << dry.output;
  EXPECT_NE(dry.output.find("a: "), std::string::npos) << dry.output;
  EXPECT_NE(dry.output.find("--node b"), std::string::npos) << dry.output;
  EXPECT_FALSE(std::filesystem::exists(*dir_ / "dry"));
}

}  // namespace
}  // namespace troupe
