#include "compute/training_flops.hpp"

#include <cstring>

namespace troupe::compute {

double training_flops_per_token(const bert_config& config, int64_t sequence_length, double masked_fraction) {
  const double h = static_cast<double>(config.hidden_size);
  const double i = static_cast<double>(config.intermediate_size);
  const double layers = static_cast<double>(config.num_hidden_layers);
  const double s = static_cast<double>(sequence_length);
  const double v = static_cast<double>(config.vocab_size);
  const bool albert = config.model_type == "albert";
  const double head_width = albert ? static_cast<double>(config.embedding_size) : h;
  double flops = layers * (6.0 * (4.0 * h * h + 2.0 * h * i) + 12.0 * s * h);
  if (albert) flops += 6.0 * static_cast<double>(config.embedding_size) * h;
  flops += masked_fraction * 6.0 * (h * head_width + head_width * v);
  return flops;
}

double gpu_peak_tflops(const char* device_name, const char* precision) {
  const auto named = [&](const char* part) { return std::strstr(device_name, part) != nullptr; };
  const bool half = std::strcmp(precision, "bf16") == 0 || std::strcmp(precision, "fp16") == 0;
  if (named("H200") || (named("H100") && !named("PCIe"))) return half ? 989.4 : 66.9;  // SXM, dense
  if (named("H100")) return half ? 756.0 : 51.2;                                          // PCIe
  if (named("A100")) return half ? 312.0 : 19.5;
  return 0.0;
}

}  // namespace troupe::compute
