#include "compute/kineto_trace.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <set>
#include <type_traits>
#include <utility>

#include "messages/error.hpp"

namespace troupe::compute {

namespace {

namespace profiler = torch::profiler::impl;

// LibTorch 1.13's events count microseconds (startUs), 2.x's nanoseconds (startNs).
template <class E, class = void>
struct counts_microseconds : std::false_type {};
template <class E>
struct counts_microseconds<E, std::void_t<decltype(std::declval<const E&>().startUs())>> : std::true_type {};

template <class E>
std::pair<double, double> start_and_duration_us(const E& event) {
  if constexpr (counts_microseconds<E>::value)
    return {static_cast<double>(event.startUs()), static_cast<double>(event.durationUs())};
  else
    return {static_cast<double>(event.startNs()) / 1e3, static_cast<double>(event.durationNs()) / 1e3};
}

std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      quoted += escaped;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

/// A LibTorch built without Kineto (Debian's) records the operators but cannot save them: the
/// same Chrome trace format, written from the recorded events (operators on the host, kernels
/// where the events name a device).
void write_trace(const torch::autograd::profiler::ProfilerResult& result, const std::filesystem::path& file) {
  std::ofstream out(file);
  // Timestamps are microseconds since the epoch (~1.8e15): printed whole with three decimals (a
  // double there resolves 0.25 µs), not in the stream's default six significant digits, which put
  // every event at one instant.
  out << std::fixed << std::setprecision(3) << "{\"traceEvents\": [";
  const char* separator = "\n";
  for (const auto& event : result.events()) {
    const auto [start, duration] = start_and_duration_us(event);
    const bool on_host = event.deviceType() == c10::DeviceType::CPU;
    out << separator << "{\"ph\": \"X\", \"cat\": \"" << (on_host ? "cpu_op" : "kernel")
        << "\", \"name\": " << json_string(event.name()) << ", \"pid\": " << (on_host ? 0 : 1)
        << ", \"tid\": " << event.startThreadId() << ", \"ts\": " << start << ", \"dur\": " << duration << "}";
    separator = ",\n";
  }
  out << "\n], \"displayTimeUnit\": \"ms\"}\n";
  if (!out.flush()) throw std::runtime_error("write failed");
}

}  // namespace

void kineto_trace::start(bool with_cuda) {
  std::set<profiler::ActivityType> activities{profiler::ActivityType::CPU};
  if (with_cuda) activities.insert(profiler::ActivityType::CUDA);
  const profiler::ProfilerConfig config(profiler::ProfilerState::KINETO, /*report_input_shapes=*/true);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  running_ = true;
}

void kineto_trace::stop(const std::filesystem::path& file) {
  if (!running_) return;
  running_ = false;
  auto result = torch::autograd::profiler::disableProfiler();
  std::error_code made;
  std::filesystem::create_directories(file.parent_path(), made);
  try {
    if (made) throw std::runtime_error(made.message());
    try {
      result->save(file.string());  // Kineto's own trace: with a CUDA LibTorch, every kernel too
    } catch (const c10::Error&) {
      write_trace(*result, file);   // built without Kineto
    }
  } catch (const std::exception& e) {
    throw make_error(file.string(), ": cannot write the profiler trace: ", e.what());
  }
}

kineto_trace::~kineto_trace() {
  if (!running_) return;
  try {
    torch::autograd::profiler::disableProfiler();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor drops what it cannot stop
  }
}

}  // namespace troupe::compute
