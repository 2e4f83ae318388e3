#pragma once
/// Model FLOPs of training, for model FLOPs utilisation (MFU) in `troupe bench train`.

#include <cstdint>

#include "compute/bert_config.hpp"

namespace troupe::compute {

// Per real token of a masked-LM training step (forward + backward = 3 × forward), counting
// matrix multiplications only (2 FLOPs per multiply-add), as PaLM's MFU does:
//  - each executed encoder layer: 6 · (4H² + 2HI) for the QKV and output projections and the
//    feed-forward pair — ALBERT's shared layers count once per execution, not per parameter;
//  - attention scores and the weighted sum: 12 · S · H per layer (S the sequence length);
//  - ALBERT's E → H embedding mapping: 6 · E · H;
//  - the MLM head (H² transform and the V-wide decoder, through E for ALBERT) only at the masked
//    share of the tokens, `masked_fraction`.
// Embedding lookups, LayerNorm, softmax and GELU are not counted (not matmuls). A
// distillation teacher's forward is not part of the student's training FLOPs.
double training_flops_per_token(const bert_config& config, int64_t sequence_length, double masked_fraction);

/// The dense peak of a GPU by its name (cudaDeviceProp::name) for a training precision
/// ("bf16", "fp16" or "fp32"), in TFLOP/s from NVIDIA's data sheets; 0 when unknown.
double gpu_peak_tflops(const char* device_name, const char* precision);

}  // namespace troupe::compute
