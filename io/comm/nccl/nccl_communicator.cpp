#include "io/comm/nccl/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <mutex>
#include <thread>

#include "io/comm/idle_backoff.hpp"
#include "io/comm/transport.hpp"

namespace troupe::io {
namespace {

static_assert(sizeof(ncclUniqueId) == std::tuple_size<nccl_unique_id>::value, "ncclUniqueId is 128 bytes");

std::string nccl_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') text += std::string(" (") + last + ")";
  }
  return text;
}

}  // namespace

nccl_unique_id make_nccl_unique_id() {
  ncclUniqueId id;
  const auto result = ncclGetUniqueId(&id);
  if (result != ncclSuccess) throw transport_error(-1, "NCCL: cannot make a unique id: " + nccl_text(result, nullptr));
  nccl_unique_id bytes;
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

std::string nccl_version() {
  int code = 0;
  ncclGetVersion(&code);
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

struct nccl_communicator::state {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  double* scratch = nullptr;  ///< device memory for allreduce_host_doubles
  std::size_t scratch_count = 0;
  int device = 0, rank = 0, world = 0;
  std::string ring;
  std::mutex mutex;
  std::string abort_reason;  ///< set by abort(); guarded by mutex

  std::string where() const { return "NCCL " + ring + ", rank " + std::to_string(rank) + " of " + std::to_string(world); }

  /// Aborts the communicator (nothing may wait on it afterwards) and throws.
  [[noreturn]] void fail(const std::string& what, const std::string& reason) {
    if (comm != nullptr) {
      ncclCommAbort(comm);
      comm = nullptr;
    }
    throw transport_error(-1, where() + ": " + what + ": " + reason);
  }

  void check_cuda(cudaError_t error, const std::string& what) {
    if (error != cudaSuccess) fail(what, std::string("CUDA: ") + cudaGetErrorString(error));
  }

  /// Enqueues an in-place sum of `count` values at device address `buffer` on the stream (a
  /// non-blocking communicator may still be enqueuing when ncclAllReduce returns: polled).
  void enqueue_sum(void* buffer, std::size_t count, ncclDataType_t type, clock::time_point deadline,
                   const std::string& what) {
    if (comm == nullptr) fail(what, "the communicator was aborted earlier");
    const auto result = ncclAllReduce(buffer, buffer, count, type, ncclSum, comm, stream);
    if (result != ncclSuccess && result != ncclInProgress) fail(what, nccl_text(result, comm));
    poll(deadline, what, [] { return true; });
  }

  /// One look at the event recorded after the last work started: true once it has run.
  bool stream_done(const std::string& what) {
    const auto query = cudaEventQuery(done);
    if (query == cudaErrorNotReady) return false;
    check_cuda(query, what);
    return true;
  }

  std::string aborted() {
    std::lock_guard lock(mutex);
    return abort_reason;
  }

  /// One look: fails on an abort, the communicator's asynchronous error or the deadline; else
  /// whether the communicator is idle and `finished` says so.
  template <class Finished>
  bool look(clock::time_point deadline, const std::string& what, Finished finished) {
    if (comm == nullptr) fail(what, "the communicator was aborted earlier");
    if (const auto reason = aborted(); !reason.empty()) fail(what, "aborted: " + reason);
    ncclResult_t async = ncclSuccess;
    const auto result = ncclCommGetAsyncError(comm, &async);
    if (result != ncclSuccess) fail(what, nccl_text(result, comm));
    if (async != ncclSuccess && async != ncclInProgress) fail(what, nccl_text(async, comm));
    if (async == ncclSuccess && finished()) return true;
    if (clock::now() >= deadline) fail(what, "timed out (timeouts.collective_s)");
    return false;
  }

  /// Polls until `finished` says so; fails as look() does.
  template <class Finished>
  void poll(clock::time_point deadline, const std::string& what, Finished finished) {
    idle_backoff backoff;
    while (!look(deadline, what, finished)) backoff.pause(clock::now());
  }
};

nccl_communicator::nccl_communicator(const nccl_unique_id& id, int world, int rank, int device, std::string ring,
                                     clock::time_point deadline)
    : state_(std::make_unique<state>()) {
  auto& s = *state_;
  s.device = device;
  s.rank = rank;
  s.world = world;
  s.ring = std::move(ring);
  const std::string joining = "joining the communicator on cuda:" + std::to_string(device);
  s.check_cuda(cudaSetDevice(device), joining);
  s.check_cuda(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), joining);
  s.check_cuda(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), joining);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId unique;
  std::memcpy(&unique, id.data(), sizeof unique);
  const auto result = ncclCommInitRankConfig(&s.comm, world, unique, rank, &config);
  if (result != ncclSuccess && result != ncclInProgress) s.fail(joining, nccl_text(result, s.comm));
  s.poll(deadline, joining, [] { return true; });
}

nccl_communicator::~nccl_communicator() {
  auto& s = *state_;
  if (s.comm != nullptr) {
    // A healthy communicator is finalised (its pending work flushed) for a bounded time, then
    // destroyed; one that does not finish in time is aborted instead.
    const auto finalize = ncclCommFinalize(s.comm);
    ncclResult_t async = finalize == ncclSuccess || finalize == ncclInProgress ? ncclInProgress : finalize;
    const auto deadline = clock::now() + std::chrono::seconds(10);
    while (async == ncclInProgress && clock::now() < deadline) {
      if (ncclCommGetAsyncError(s.comm, &async) != ncclSuccess) async = ncclInternalError;
      if (async == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (async == ncclSuccess)
      ncclCommDestroy(s.comm);
    else
      ncclCommAbort(s.comm);
  }
  if (s.scratch != nullptr) cudaFree(s.scratch);
  if (s.done != nullptr) cudaEventDestroy(s.done);
  if (s.stream != nullptr) cudaStreamDestroy(s.stream);
}

void nccl_communicator::start_allreduce(float* data, std::size_t count, void* ready, clock::time_point deadline,
                                        const std::string& what) {
  auto& s = *state_;
  s.check_cuda(cudaSetDevice(s.device), what);
  if (ready != nullptr) s.check_cuda(cudaStreamWaitEvent(s.stream, static_cast<cudaEvent_t>(ready), 0), what);
  s.enqueue_sum(data, count, ncclFloat32, deadline, what);
  s.check_cuda(cudaEventRecord(s.done, s.stream), what);
}

void nccl_communicator::start_allreduce_host_doubles(double* values, std::size_t count, clock::time_point deadline,
                                                     const std::string& what) {
  auto& s = *state_;
  s.check_cuda(cudaSetDevice(s.device), what);
  if (s.scratch_count < count) {
    if (s.scratch != nullptr) cudaFree(s.scratch);
    s.scratch = nullptr;
    s.scratch_count = 0;
    s.check_cuda(cudaMalloc(reinterpret_cast<void**>(&s.scratch), count * sizeof(double)), what);
    s.scratch_count = count;
  }
  const auto bytes = count * sizeof(double);
  s.check_cuda(cudaMemcpyAsync(s.scratch, values, bytes, cudaMemcpyHostToDevice, s.stream), what);
  s.enqueue_sum(s.scratch, count, ncclFloat64, deadline, what);
  s.check_cuda(cudaMemcpyAsync(values, s.scratch, bytes, cudaMemcpyDeviceToHost, s.stream), what);
  s.check_cuda(cudaEventRecord(s.done, s.stream), what);
}

bool nccl_communicator::finished(clock::time_point deadline, const std::string& what) {
  auto& s = *state_;
  return s.look(deadline, what, [&] { return s.stream_done(what); });
}

void nccl_communicator::wait_done(clock::time_point deadline, const std::string& what) {
  auto& s = *state_;
  s.poll(deadline, what, [&] { return s.stream_done(what); });
}

void nccl_communicator::allreduce_sum(float* data, std::size_t count, void* ready, clock::time_point deadline,
                                      const std::string& what) {
  start_allreduce(data, count, ready, deadline, what);
  wait_done(deadline, what);
}

void nccl_communicator::allreduce_host_doubles(double* values, std::size_t count, clock::time_point deadline,
                                               const std::string& what) {
  start_allreduce_host_doubles(values, count, deadline, what);
  wait_done(deadline, what);
}

void nccl_communicator::abort(const std::string& reason) {
  std::lock_guard lock(state_->mutex);
  state_->abort_reason = reason;
}

}  // namespace troupe::io
