// The NCCL transport's communicator. Without a usable GPU (CI) it must fail to join with the
// ring, the rank and CUDA's reason named; with one (the GPU machine) a world of one rank sums
// a device buffer in place — the "NCCL with world 1" check.
#include "io/comm/nccl/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "io/comm/transport.hpp"

namespace troupe::io {
namespace {

bool gpu_present() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

TEST(nccl_communicator, unique_ids_are_fresh_and_the_version_is_nccls) {
  const auto a = make_nccl_unique_id(), b = make_nccl_unique_id();
  EXPECT_NE(a, b);
  const auto version = nccl_version();
  EXPECT_EQ(version.rfind("2.", 0), 0u) << version;
}

TEST(nccl_communicator, without_a_gpu_joining_fails_naming_the_ring_the_rank_and_cuda) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present: the world-1 test runs instead";
  try {
    nccl_communicator communicator(make_nccl_unique_id(), 1, 0, 0, "ring 0",
                                   nccl_communicator::clock::now() + std::chrono::seconds(10));
    FAIL() << "joined without a GPU";
  } catch (const transport_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("NCCL ring 0, rank 0 of 1: joining the communicator on cuda:0: CUDA: "), std::string::npos)
        << message;
    EXPECT_EQ(e.peer(), -1);
  }
}

TEST(nccl_communicator, a_world_of_one_sums_a_device_buffer_in_place) {
  if (!gpu_present()) GTEST_SKIP() << "no usable CUDA device here";
  const auto deadline = nccl_communicator::clock::now() + std::chrono::seconds(60);
  nccl_communicator communicator(make_nccl_unique_id(), 1, 0, 0, "ring 0", deadline);
  std::vector<float> host(1 << 20);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 977) * 0.5f;
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), host.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  communicator.allreduce_sum(device, host.size(), nullptr, deadline, "window 1");
  std::vector<float> back(host.size());
  ASSERT_EQ(cudaMemcpy(back.data(), device, back.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(device);
  EXPECT_EQ(back, host);  // the sum over one rank is the buffer itself
  // Started and looked at until done (nccl_collective's pending sums): the statistics' path.
  std::vector<double> statistics{1.5, 3.0, 1e15 + 1};
  const auto expected = statistics;
  communicator.start_allreduce_host_doubles(statistics.data(), statistics.size(), deadline, "statistics 1");
  while (!communicator.finished(deadline, "statistics 1")) {
  }
  EXPECT_EQ(statistics, expected);
  communicator.abort("the test ended it");
  float* again = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&again), sizeof(float)), cudaSuccess);
  EXPECT_THROW(communicator.allreduce_sum(again, 1, nullptr, deadline, "window 2"), transport_error);
  cudaFree(again);
}

}  // namespace
}  // namespace troupe::io
