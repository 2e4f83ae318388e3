#pragma once
/// What this CPU offers, for the kernels that pick a vectorised path at run time.

namespace troupe::compute {

/// AVX2 and FMA: what compute/cross_entropy_rows.cpp is compiled for.
inline bool cpu_has_avx2_and_fma() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace troupe::compute
