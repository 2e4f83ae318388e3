#pragma once
/// A PyTorch profiler trace of a stretch of one thread's work (the `profiler` block,
/// docs/configuration.md#profiler): LibTorch's Kineto profiler records every operator the calling
/// thread runs (and the threads autograd hands its work to), and on a CUDA LibTorch every kernel
/// and memory copy on the device, until stop() writes them as a Chrome trace
/// (`*.pt.trace.json`, as torch.profiler's tensorboard_trace_handler writes it): Perfetto,
/// chrome://tracing and TensorBoard's profile plugin read it.
///
/// The profiler's state is per thread: start() and stop() must run on the same thread, and one
/// trace at a time per process is what LibTorch supports.

#include <filesystem>

namespace troupe::compute {

class kineto_trace {
 public:
  kineto_trace() = default;
  kineto_trace(const kineto_trace&) = delete;
  kineto_trace& operator=(const kineto_trace&) = delete;
  ~kineto_trace();  ///< a trace still running is stopped and dropped

  /// Starts recording on this thread; `with_cuda` adds the device's kernels (CUDA LibTorch).
  void start(bool with_cuda);
  /// Stops and writes the trace to `file` (its folder is made); throws troupe::error naming it.
  void stop(const std::filesystem::path& file);
  bool running() const { return running_; }

 private:
  bool running_ = false;
};

}  // namespace troupe::compute
