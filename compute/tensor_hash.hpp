#pragma once
/// A 64-bit fingerprint of a float32 tensor computed where the tensor lives.

#include <ATen/Tensor.h>

#include <cstdint>

namespace troupe::compute {

// Replicas check every window that they hold the same parameters (docs/architecture.md#contracts). On a GPU the
// flat parameter buffer must not be read from the host each window, so the fingerprint is
// computed with tensor operations on its device and only its 8 bytes cross: the values' bit
// patterns (as signed 32-bit integers) are weighted by odd position weights 2i + 1 and summed
// modulo 2^64, then mixed by splitmix64's finaliser. Integer sums do not depend on the order
// of addition, so every device and every reduction order gives the same bits; any single
// changed value changes the sum (odd weights are invertible modulo 2^64), and so does moving
// a value to another position. The work goes in chunks, each chunk's two sums combined on the
// device: Σ x_j (2(b + j) + 1) = Σ x_j (2j + 1) + 2b Σ x_j for a chunk starting at b. Chunks
// bound the int64 temporaries: 2^20 elements (16 MiB) on the CPU; 2^24 (128 MiB) on a GPU,
// where each chunk's eight kernel launches cost more than its arithmetic (a BERT-base buffer
// is 7 chunks there, not 105). The bits do not depend on the chunk size.
//
// It is not xxh64, so it is compared only with fingerprints computed the same way (a world's
// ranks all hash on the same kind of device).
uint64_t tensor_fingerprint(const at::Tensor& values);

}  // namespace troupe::compute
