// MFU's numerator, term by term for BERT-base at sequence 128 (the benchmark), and the
// peak table's lookups.
#include "compute/training_flops.hpp"

#include <gtest/gtest.h>

namespace troupe::compute {
namespace {

TEST(training_flops, bert_base_at_128_tokens_counts_layers_attention_and_the_masked_head) {
  bert_config base;
  base.hidden_size = 768;
  base.num_hidden_layers = 12;
  base.intermediate_size = 3072;
  base.vocab_size = 30522;
  const double layers = 12 * 6.0 * (4.0 * 768 * 768 + 2.0 * 768 * 3072);  // 509,607,936
  const double attention = 12 * 12.0 * 128 * 768;                         // 14,155,776
  const double head = 0.15 * 6.0 * (768.0 * 768 + 768.0 * 30522);         // 21,627,648
  EXPECT_DOUBLE_EQ(training_flops_per_token(base, 128, 0.15), layers + attention + head);
  EXPECT_NEAR(training_flops_per_token(base, 128, 0.15), 545.39e6, 0.01e6);
}

TEST(training_flops, albert_counts_every_executed_layer_and_the_embedding_mapping) {
  bert_config albert;
  albert.model_type = "albert";
  albert.hidden_size = 768;
  albert.num_hidden_layers = 12;
  albert.num_hidden_groups = 1;  // one shared layer, executed 12 times
  albert.intermediate_size = 3072;
  albert.embedding_size = 128;
  albert.vocab_size = 30000;
  const double expected = 12 * (6.0 * (4.0 * 768 * 768 + 2.0 * 768 * 3072) + 12.0 * 512 * 768) +
                          6.0 * 128 * 768 + 0.1 * 6.0 * (768.0 * 128 + 128.0 * 30000);
  EXPECT_DOUBLE_EQ(training_flops_per_token(albert, 512, 0.1), expected);
}

TEST(training_flops, peaks_come_from_the_data_sheets_and_unknown_devices_have_none) {
  EXPECT_EQ(gpu_peak_tflops("NVIDIA H100 80GB HBM3", "bf16"), 989.4);
  EXPECT_EQ(gpu_peak_tflops("NVIDIA H200", "fp16"), 989.4);
  EXPECT_EQ(gpu_peak_tflops("NVIDIA H100 PCIe", "bf16"), 756.0);
  EXPECT_EQ(gpu_peak_tflops("NVIDIA A100-SXM4-80GB", "fp32"), 19.5);
  EXPECT_EQ(gpu_peak_tflops("Some CPU", "bf16"), 0.0);
}

}  // namespace
}  // namespace troupe::compute
