#include "tools/commands/bench_allreduce_rank.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "actors/node_session.hpp"
#include "actors/reducer.hpp"
#include "actors/protocol/sum_handle.hpp"
#include "io/comm/ring_collective.hpp"
#include "io/comm/ring_schedule.hpp"
#include "io/comm/ring_allreduce.hpp"
#include "io/comm/shared_region.hpp"
#include "io/comm/wire_format.hpp"
#include "io/config/byte_count.hpp"
#include "io/os/file_util.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "actors/protocol/reduce_request.hpp"
#ifdef TROUPE_HAS_NCCL
#include <cuda_runtime_api.h>

#include "io/comm/nccl/nccl_communicator.hpp"
#endif

namespace troupe::tools {

// How a rank measures, so that every number is honest
// ===================================================
//
// Each size is measured three ways, every one checked:
//   in place      the rings sum a buffer in this rank's shared region, called directly (one
//                 thread per ring, started once; ring 0 on the calling thread);
//   out of place  a private send buffer (ordinary memory, as MPI and gloo are measured) is
//                 copied into the region and summed there: troupe's rings only sum in place,
//                 so the copy is part of what an out-of-place allreduce costs it;
//   via reducers  the reducer actors do the sums, as a training worker drives them (a request
//                 per ring, awaited), so the actor hops are in the number.
//
// Every iteration, timed or warm-up: each rank refills its buffer with a known non-zero
// pattern, rank r writing (r+1)·(i mod 13 + 1) at element i (untimed); the ranks meet at a
// barrier (a one-element sum, untimed); the sum is timed alone; then every element is compared
// with the closed form W(W+1)/2·(i mod 13 + 1), exact in float (untimed; with 16 bits on the
// wire, --wire, within the rounding's bound W·u relative, u = 2⁻⁸ bf16, 2⁻¹¹ fp16; int8, whose
// error is relative to a block's largest value, 13× the smallest here, within W·13/254; sums are
// still timed and reported per fp32 byte, what the gradient holds). A sum in place multiplies the values by W every call, so without the refill they would soon be inexact.
// After the iterations the ranks sum a vector holding each rank's mean time and wrong-element
// count: the reported time is the slowest rank's (as nccl-tests reports), and a wrong element
// on any rank makes the whole benchmark fail.

namespace {

using clock = std::chrono::steady_clock;
using nlohmann::json;

/// Ring r's part of a sum runs on thread r (ring 0 on the caller's thread); the threads start
/// once, with the benchmark, so none is started inside a timed loop.
class ring_threads {
 public:
  explicit ring_threads(int rings) {
    for (int r = 1; r < rings; ++r) threads_.emplace_back([this, r] { serve(r); });
  }
  ~ring_threads() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    start_.notify_all();
    for (auto& thread : threads_) thread.join();
  }
  ring_threads(const ring_threads&) = delete;
  ring_threads& operator=(const ring_threads&) = delete;

  /// Runs job(r) for every ring at once; returns when all are done, rethrowing the first failure.
  void run(const std::function<void(int)>& job) {
    if (threads_.empty()) return job(0);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      pending_ = static_cast<int>(threads_.size());
      failures_.assign(threads_.size() + 1, nullptr);
      ++generation_;
    }
    start_.notify_all();
    try {
      job(0);
    } catch (...) {
      failures_[0] = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [this] { return pending_ == 0; });
    for (auto& failure : failures_)
      if (failure) std::rethrow_exception(failure);
  }

 private:
  void serve(int ring) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      std::exception_ptr failure;
      try {
        (*job)(ring);
      } catch (...) {
        failure = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failures_[static_cast<std::size_t>(ring)] = failure;
        --pending_;
      }
      finished_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, finished_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> failures_;
};

/// One way of summing: `sum(data, count)` over all rings, `barrier()`, and `gather(values)`
/// (an element-wise sum of a few doubles over all ranks). A method whose values live in device
/// memory also says how to `load` the pattern there and how many elements came back `wrong`;
/// by default both work on `data` in host memory.
struct summing_method {
  std::function<void(float*, std::size_t)> sum;
  std::function<void()> barrier;
  std::function<void(std::vector<double>&)> gather;
  std::function<void(const std::vector<float>&)> load;
  std::function<std::size_t(const std::vector<float>& expected)> wrong;
};

/// The pattern and its check (see the prose above).
float contribution(int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1)); }

/// The closed form of every element's sum over `world` ranks.
std::vector<float> expected_sums(std::size_t count, int world) {
  const int triangle = world * (world + 1) / 2;
  std::vector<float> expected(count);
  for (std::size_t i = 0; i < count; ++i) expected[i] = static_cast<float>(triangle * static_cast<int>(i % 13 + 1));
  return expected;
}

/// Elements off `expected` by more than `tolerance` (relative). The sums are computed once per
/// size, not per element and iteration: a rank that finished its sum checks it while slower ranks
/// may still be summing, on cores they may share.
std::size_t wrong_elements(const float* data, const std::vector<float>& expected, double tolerance = 0) {
  const auto relative = static_cast<float>(tolerance);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < expected.size(); ++i)
    wrong += static_cast<std::size_t>(std::fabs(data[i] - expected[i]) > relative * expected[i]);
  return wrong;
}

/// How far a sum of `world` ranks with `wire` on the links may be from the exact one, relative.
double wire_tolerance(io::wire_format wire, int world) {
  switch (wire) {
    case io::wire_format::fp32:
      return 0;
    case io::wire_format::bf16:
      return world * 0x1.0p-8;
    case io::wire_format::fp16:
      return world * 0x1.0p-11;
    case io::wire_format::int8:  // max|x|/254 of a block each rounding; a block's largest is 13× its smallest here
      return world * 13.0 / 254.0 * 1.01;
  }
  return 0;
}

struct measurement {
  double time_us = 0;  ///< the slowest rank's mean per timed iteration
  double wrong = 0;    ///< wrong elements over all ranks and iterations
};

/// Measures `iterations` timed sums (after warm-up ones) of `count` floats at `data`. With a
/// `private_source`, each timed sum includes copying it into `data` (out of place).
measurement measure(const summing_method& method, float* data, std::size_t count, int iterations, int rank,
                    int world, const float* private_source = nullptr, double tolerance = 0) {
  std::vector<float> pattern(count);
  for (std::size_t i = 0; i < count; ++i) pattern[i] = contribution(rank, i);
  const std::vector<float> expected = expected_sums(count, world);
  const int warm_up = std::max(3, iterations / 5);
  double timed_seconds = 0;
  std::size_t wrong = 0;
  for (int i = 0; i < warm_up + iterations; ++i) {
    if (method.load)
      method.load(pattern);
    else if (!private_source)
      std::copy(pattern.begin(), pattern.end(), data);
    method.barrier();
    const auto start = clock::now();
    if (private_source) std::copy(private_source, private_source + count, data);
    method.sum(data, count);
    const auto seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (i >= warm_up) timed_seconds += seconds;
    wrong += method.wrong ? method.wrong(expected) : wrong_elements(data, expected, tolerance);
  }
  std::vector<double> gathered(static_cast<std::size_t>(world) + 1, 0.0);
  gathered[static_cast<std::size_t>(rank)] = timed_seconds / iterations;
  gathered.back() = static_cast<double>(wrong);
  method.gather(gathered);
  measurement result;
  result.time_us = *std::max_element(gathered.begin(), gathered.end() - 1) * 1e6;
  result.wrong = gathered.back();
  return result;
}

json figures(uint64_t bytes, const measurement& m, int world) {
  const double algbw = static_cast<double>(bytes) / (m.time_us * 1e-6) / 1e9;
  return {{"time_us", m.time_us}, {"algbw_GBs", algbw}, {"busbw_GBs", algbw * 2 * (world - 1) / world},
          {"wrong_elements", m.wrong}, {"correct", m.wrong == 0}};
}

int iterations_for(uint64_t bytes) { return bytes >= (16u << 20) ? 10 : bytes >= (1u << 20) ? 50 : 1000; }

#ifdef TROUPE_HAS_NCCL
/// Transport "nccl": each size summed in place in device memory by the ring-0 communicator, as
/// a worker's NCCL reducer sums its slice (the pattern goes in and the check reads back outside
/// the timed sum); the barrier and the gather are fp64 sums through the same communicator.
json measure_nccl(const actors::cluster_role& role, const std::vector<uint64_t>& sizes, json results) {
  const int rank = role.first_rank, world = role.world;
  const auto deadline = [&] { return clock::now() + role.collective_timeout; };
  io::nccl_communicator communicator(role.nccl_ids[0], world, rank, role.cuda_devices[0], "ring 0", deadline());
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  float* device = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&device), largest) != cudaSuccess)
    throw make_error("bench allreduce: cannot allocate ", largest, " bytes on cuda:", role.cuda_devices[0]);
  const std::unique_ptr<float, decltype(&cudaFree)> owned(device, &cudaFree);
  const auto copy = [](void* to, const void* from, std::size_t bytes, cudaMemcpyKind kind) {
    if (cudaMemcpy(to, from, bytes, kind) != cudaSuccess) throw error("bench allreduce: a CUDA copy failed");
  };
  summing_method nccl;
  nccl.sum = [&](float*, std::size_t count) { communicator.allreduce_sum(device, count, nullptr, deadline(), "bench"); };
  nccl.barrier = [&] {
    double one = 1.0;
    communicator.allreduce_host_doubles(&one, 1, deadline(), "bench barrier");
  };
  nccl.gather = [&](std::vector<double>& values) {
    communicator.allreduce_host_doubles(values.data(), values.size(), deadline(), "bench gather");
  };
  nccl.load = [&](const std::vector<float>& pattern) {
    copy(device, pattern.data(), pattern.size() * sizeof(float), cudaMemcpyHostToDevice);
  };
  nccl.wrong = [&](const std::vector<float>& expected) {
    std::vector<float> back(expected.size());
    copy(back.data(), device, back.size() * sizeof(float), cudaMemcpyDeviceToHost);
    return wrong_elements(back.data(), expected);
  };
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const auto count = static_cast<std::size_t>(sizes[k] / sizeof(float));
    results[k]["in_place"] = figures(sizes[k], measure(nccl, nullptr, count, iterations_for(sizes[k]), rank, world), world);
    for (const char* key : {"time_us", "algbw_GBs", "busbw_GBs", "correct"}) results[k][key] = results[k]["in_place"][key];
  }
  return results;
}
#endif

/// In place and out of place, the rings called directly (no actors). Returns whether every
/// ring summed through shared memory.
bool measure_direct(const actors::cluster_role& role, io::shared_region& region, const std::vector<uint64_t>& sizes,
                    io::wire_format wire, json& results, uint64_t& sequence) {
  const int rank = role.first_rank, world = role.world, rings = static_cast<int>(role.ring_orders.size());
  float* data = reinterpret_cast<float*>(region.data());
  std::vector<std::unique_ptr<io::ring_allreduce>> ring;
  for (int r = 0; r < rings; ++r) {
    ring.push_back(std::make_unique<io::ring_allreduce>(*role.transports[0][static_cast<std::size_t>(r)], rank,
                                                        role.ring_settings(r)));
    if (role.shared_memory) ring.back()->share_memory(region);
  }
  ring_threads threads(rings);
  summing_method direct;
  direct.sum = [&](float* values, std::size_t count) {
    const uint64_t s = sequence++;
    threads.run([&](int r) {
      const auto slice = io::ring_slice(count, rings, r);
      ring[static_cast<std::size_t>(r)]->sum(values + slice.begin, slice.size(), s, wire);
    });
  };
  direct.barrier = [&] {
    float one = 1.0f;
    ring[0]->sum(&one, 1, sequence++);
  };
  direct.gather = [&](std::vector<double>& values) { ring[0]->sum(values.data(), values.size(), sequence++); };
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::size_t count = sizes[k] / sizeof(float);
    const int iterations = iterations_for(sizes[k]);
    const double tolerance = wire_tolerance(wire, world);
    results[k]["in_place"] =
        figures(sizes[k], measure(direct, data, count, iterations, rank, world, nullptr, tolerance), world);
    std::vector<float> source(count);
    for (std::size_t i = 0; i < count; ++i) source[i] = contribution(rank, i);
    results[k]["out_of_place"] =
        figures(sizes[k], measure(direct, data, count, iterations, rank, world, source.data(), tolerance), world);
  }
  return std::all_of(ring.begin(), ring.end(), [](const auto& r) { return r->uses_shared_memory(); });
}

/// Through the reducer actors, as a training worker drives them.
void measure_via_reducers(actors::cluster_membership& membership, const std::shared_ptr<io::shared_region>& region,
                          const std::vector<uint64_t>& sizes, io::wire_format wire, json& results,
                          uint64_t& sequence) {
  const auto& role = membership.role();
  const int rank = role.first_rank, world = role.world, rings = static_cast<int>(role.ring_orders.size());
  float* data = reinterpret_cast<float*>(region->data());
  auto& system = membership.system();
  std::vector<caf::actor> reducers;
  for (int r = 0; r < rings; ++r) {
    actors::reducer_settings settings;
    settings.open = [transport = role.transports[0][static_cast<std::size_t>(r)], rank, ring = role.ring_settings(r),
                     shared = role.shared_memory ? region : nullptr] {
      return std::make_unique<io::ring_collective>(transport, rank, ring, shared);
    };
    settings.ring_index = r;
    settings.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(role.collective_timeout);
    reducers.push_back(system.spawn<caf::detached>(actors::reducer, settings));
  }
  const auto timeout = std::chrono::duration_cast<std::chrono::seconds>(role.collective_timeout) + std::chrono::seconds(30);
  auto await_sum = [&](const actors::sum_handle& sum) {
    try {
      sum.wait(timeout, "a reducer");
    } catch (const actors::sum_failed& failure) {
      throw make_error("bench allreduce: ", system.render(failure.error()));
    }
  };
  auto request = [&](int r, actors::reduce_request request) {
    await_sum(actors::start_sum(reducers[static_cast<std::size_t>(r)], std::move(request)));
  };
  summing_method via_reducers;
  via_reducers.sum = [&](float* values, std::size_t count) {
    const uint64_t s = sequence++;
    // All rings' requests go out before the first answer is awaited, as the worker sends them.
    std::vector<actors::sum_handle> answers;
    for (int r = 0; r < rings; ++r) {
      actors::reduce_request request;
      const auto slice = io::ring_slice(count, rings, r);
      request.gradient = values + slice.begin;
      request.gradient_count = slice.size();
      request.gradient_wire = wire;
      request.sequence = s;
      answers.push_back(actors::start_sum(reducers[static_cast<std::size_t>(r)], request));
    }
    for (const auto& answer : answers) await_sum(answer);
  };
  auto statistics_only = [&](double* values, std::size_t count) {
    actors::reduce_request r;
    r.statistics = values;
    r.statistic_count = count;
    r.sequence = sequence++;
    request(0, r);
  };
  via_reducers.barrier = [&] {
    double one = 1.0;
    statistics_only(&one, 1);
  };
  via_reducers.gather = [&](std::vector<double>& values) { statistics_only(values.data(), values.size()); };
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::size_t count = sizes[k] / sizeof(float);
    results[k]["via_reducers"] = figures(
        sizes[k],
        measure(via_reducers, data, count, iterations_for(sizes[k]), rank, world, nullptr, wire_tolerance(wire, world)),
        world);
  }
  for (const auto& reducer : reducers) caf::anon_send_exit(reducer, caf::exit_reason::user_shutdown);
}

#ifdef TROUPE_HAS_NCCL
/// Transport "nccl": the in-place sums of measure_nccl, written by rank 0.
void run_nccl_rank(actors::cluster_membership& membership, const std::vector<uint64_t>& sizes,
                   const allreduce_rank_options& options) {
  const auto& role = membership.role();
  const int rank = role.first_rank, world = role.world;
  json results = json::array();
  for (const auto bytes : sizes) results.push_back({{"bytes", bytes}, {"iterations", iterations_for(bytes)}});
  results = measure_nccl(role, sizes, std::move(results));
  bool correct = true;
  for (const auto& result : results) correct = correct && result["correct"].get<bool>();
  membership.finish();
  if (rank == 0)
    io::write_file_atomically(options.out, json{{"benchmark", "allreduce"}, {"world", world}, {"rings", 1},
                                                {"transport", "nccl"}, {"nccl_version", io::nccl_version()},
                                                {"correct", correct}, {"results", results}}
                                               .dump());
  if (!correct) throw error("bench allreduce: some sums were wrong (see wrong_elements in the result)");
}
#endif

/// This rank's ring links as UCX reports them, beside the result file: the driver gathers every
/// rank's into the result's "links".
void write_links(const std::filesystem::path& out, const std::vector<messages::ring_link>& links) {
  for (const auto& link : links)
    io::write_file_atomically(links_file(out, link.rank, link.ring),
                              json{{"ring", link.ring}, {"rank", link.rank}, {"peer", link.peer},
                                   {"transport", link.transport}, {"device", link.device}}.dump());
}

}  // namespace

std::filesystem::path links_file(const std::filesystem::path& out, int rank, int ring) {
  return out.string() + ".link-" + std::to_string(rank) + "-" + std::to_string(ring) + ".json";
}

std::vector<uint64_t> parse_allreduce_sizes(const std::string& list) {
  std::vector<uint64_t> sizes;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    const auto bytes = io::parse_byte_count(item, "--bytes");
    if (bytes % sizeof(float) != 0) throw make_error("--bytes: ", item, " is not a whole number of floats");
    sizes.push_back(bytes);
  }
  if (sizes.empty()) throw error("--bytes: expected a comma-separated list such as 4K,1M,64M");
  return sizes;
}

void run_allreduce_rank(const allreduce_rank_options& options) {
  actors::node_identity node;
  node.manifest = cluster::load_manifest(options.manifest);
  node.name = options.node;
  const auto sizes = parse_allreduce_sizes(options.bytes);
  actors::cluster_membership membership(node, io::xxh64(options.bytes.data(), options.bytes.size()), {});
  const auto& role = membership.role();
  write_links(options.out, role.links);
  const int rank = role.first_rank;
  const int world = role.world;
  const int rings = static_cast<int>(role.ring_orders.size());
  if (!role.nccl_ids.empty()) {
#ifdef TROUPE_HAS_NCCL
    run_nccl_rank(membership, sizes, options);
    return;
#endif
  }
  // The buffer lives in a shared region (as a worker's gradient does), which the rings use
  // when the manifest allows and every rank can map its neighbours'.
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  auto region = std::make_shared<io::shared_region>(largest, "bench allreduce buffer");
  uint64_t sequence = 0;
  json results = json::array();
  for (const auto bytes : sizes) results.push_back({{"bytes", bytes}, {"iterations", iterations_for(bytes)}});

  const auto wire = io::parse_wire_format(options.wire);
  if (!wire) throw make_error("--wire: \"", options.wire, "\" (expected fp32, bf16 or fp16)");
  const bool shared = measure_direct(role, *region, sizes, *wire, results, sequence);
  // The direct rings are gone before the reducers' rings use the same transports and region.
  measure_via_reducers(membership, region, sizes, *wire, results, sequence);

  bool correct = true;
  for (auto& result : results) {
    for (const char* way : {"in_place", "out_of_place", "via_reducers"}) correct = correct && result[way]["correct"].get<bool>();
    // The headline numbers (what earlier versions reported) are the in-place ones.
    for (const char* key : {"time_us", "algbw_GBs", "busbw_GBs", "correct"}) result[key] = result["in_place"][key];
  }
  membership.finish();
  if (rank == 0) {
    json out = {{"benchmark", "allreduce"}, {"world", world}, {"rings", rings},
                {"chunk_bytes", role.chunk_bytes}, {"transport", shared ? "shared memory" : "ucx"},
                {"wire", options.wire},
                {"correct", correct}, {"results", results}};
    io::write_file_atomically(options.out, out.dump());
  }
  if (!correct) throw error("bench allreduce: some sums were wrong (see wrong_elements in the result)");
}

}  // namespace troupe::tools
