/// `troupe`: the one binary of the runtime. Subcommands live in tools/commands/.

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "actors/warning_log.hpp"
#include "compute/host_memory.hpp"
#include "io/os/open_file_limit.hpp"
#include "messages/error.hpp"
#include "tools/build_info.hpp"
#include "tools/commands/commands.hpp"

namespace {

/// Parses the command line and runs the subcommand it names; the process's exit status.
int run_command_line(int argc, char** argv) {
  // A child process whose pipe closes (the SentencePiece helper dying) is an error a write
  // reports (EPIPE, named by io::child_process), not a signal that kills troupe silently.
  std::signal(SIGPIPE, SIG_IGN);
  spdlog::set_pattern("%^%l%$: %v");
  troupe::actors::warning_log::install();  // before any thread logs
  troupe::compute::keep_freed_memory_mapped();
  CLI::App app{"troupe: actor-model data-parallel training for BERT-family models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return troupe::tools::build_description(); });
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging");
  app.parse_complete_callback([&] {
    if (verbose) spdlog::set_level(spdlog::level::debug);
  });
  troupe::tools::add_prepare_command(app);
  troupe::tools::add_train_command(app);
  troupe::tools::add_eval_command(app);
  troupe::tools::add_fill_mask_command(app);
  troupe::tools::add_predict_command(app);
  troupe::tools::add_bench_command(app);
  troupe::tools::add_ckpt_command(app);
  troupe::tools::add_launch_command(app);
  troupe::tools::add_node_command(app);
  troupe::tools::add_dashboard_command(app);
  troupe::tools::add_metrics_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const troupe::tools::exit_status& e) {
    return e.status;
  } catch (const troupe::error& e) {
    std::fprintf(stderr, "troupe: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe: internal error: %s\n", e.what());
    return 70;
  }
  return 0;
}

}  // namespace

// Everything troupe made is gone when run_command_line returns (actor systems, files, sockets,
// threads: each owned by a scope inside it). What is left are the static objects of the
// libraries, above all LibTorch's operator registry, whose destructors cost ~0.2 s of CPU a
// process and matter to nobody: the process ends without running them, as after a fatal
// signal, once standard output, standard error and the log are flushed (docs/architecture.md).
int main(int argc, char** argv) {
  troupe::io::raise_open_file_limit();
  const int status = run_command_line(argc, argv);
  spdlog::shutdown();
  std::fflush(nullptr);
  std::_Exit(status);
}
