#include "io/checkpoint/run_directory.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/support/error_text.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

using troupe::testing::expect_error;

TEST(run_directory, one_job_at_a_time_and_the_holder_is_named) {
  troupe::testing::temp_dir dir;
  const auto run = dir / "run";
  {
    const run_directory_lock first(run);
    expect_error([&] { run_directory_lock second(run); },
                 run.string() + ": the run directory is in use by another troupe job (host ");
    expect_error([&] { run_directory_lock second(run); }, ", pid " + std::to_string(::getpid()) + ")");
  }
  const run_directory_lock again(run);  // released with the first holder
}

TEST(run_directory, a_fresh_run_refuses_an_older_run_s_files_unless_told_to_overwrite) {
  troupe::testing::temp_dir dir;
  const auto run = dir / "run";
  prepare_fresh_run(run, false);  // nothing there yet
  troupe::testing::write_text(run / "metrics.jsonl", "{\"step\": 1}\n");
  expect_error([&] { prepare_fresh_run(run, false); },
               ": already holds an earlier run's metrics.jsonl (a run stopped before its first checkpoint)");
  EXPECT_TRUE(std::filesystem::exists(run / "metrics.jsonl")) << "a refusal touches nothing";
  std::filesystem::create_directories(run / "checkpoints" / "step-00000007");
  expect_error([&] { prepare_fresh_run(run, false); }, ": already holds checkpoints (newest step-00000007)");
  prepare_fresh_run(run, true);
  EXPECT_FALSE(std::filesystem::exists(run / "metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(run / "checkpoints"));
}

}  // namespace
}  // namespace troupe::io
