/// troupe-members: one process of `troupe bench membership`'s simulated members
/// (tools/commands/membership_members.hpp), started by the benchmark, never by hand.
///
/// A program of its own, not a subcommand of troupe: a member needs the membership protocol,
/// not LibTorch, whose hundreds of libraries and static initialisers cost each troupe process
/// about 0.9 s of CPU to start (measured on this 2-core VM), and whose threads' TLS costs each of
/// a member's threads 120 KiB of zeroed memory. Sixteen such processes at 1,024 members spent
/// that on the two cores the benchmark measures the head on (docs/benchmarks.md#membership-at-scale-issue-54).

#include <CLI/CLI.hpp>

#include <cstdio>

#include "messages/error.hpp"
#include "tools/commands/membership_members.hpp"

int main(int argc, char** argv) {
  CLI::App app{"troupe-members: simulated members of troupe bench membership (started by it)"};
  troupe::tools::membership_members_options options;
  app.add_option("--manifest", options.manifest, "the benchmark's manifest")->required();
  app.add_option("--first", options.first, "this process's first member among the manifest's nodes")->required();
  app.add_option("--count", options.count, "members this process runs")->required()->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
    troupe::tools::run_membership_members(options);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-members: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
