#pragma once
/// What this machine's CPU can do that changes how fast troupe trains on it.

namespace troupe::io {

/// Whether the CPU has bf16 arithmetic (AVX512-BF16 or AMX-BF16, /proc/cpuinfo's avx512_bf16 or
/// amx_bf16 flags). Without it LibTorch emulates bf16 on the CPU, many times slower than fp32
/// (the quick start on a 2-core AMD EPYC: 8.6 samples/s in bf16, ~140 in fp32). False when
/// /proc/cpuinfo cannot be read.
bool cpu_has_bf16_instructions();

}  // namespace troupe::io
