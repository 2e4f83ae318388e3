// The fused keyed-dropout kernel (compute/keyed_dropout_kernel.hpp). The grid's y dimension walks
// the batch rows, x the elements of a row, each thread a stride of them: one read and one write
// per element, the row's key read once per thread and the hash computed in 32-bit registers.
#include "compute/keyed_dropout_kernel.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "compute/lowbias_hash.hpp"

namespace troupe::compute::cuda {
namespace {

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ inline T from_float(float v);
template <> __device__ inline float from_float<float>(float v) { return v; }
template <> __device__ inline __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename In, typename Out>
__global__ void scale_rows_by_keyed_mask(const In* in, Out* out, int64_t rows, int64_t per_row,
                                         const int32_t* row_keys, uint32_t threshold, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const uint32_t key = static_cast<uint32_t>(row_keys[row]);
    const In* source = in + row * per_row;
    Out* target = out + row * per_row;
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < per_row; j += stride) {
      // A multiply by 0, not a select: a NaN or an infinity stays one (fp16's overflow check sees it).
      const float mask = keyed_keep(static_cast<uint32_t>(j), key, threshold) ? scale : 0.0f;
      target[j] = from_float<Out>(to_float(source[j]) * mask);
    }
  }
}

template <typename In, typename Out> int launch_typed(const keyed_mask_launch& l, cudaStream_t stream) {
  constexpr int threads = 256;
  constexpr int64_t max_row_blocks = 65535;  // the grid's y limit
  const int64_t blocks_per_row = std::min<int64_t>((l.per_row + threads - 1) / threads, 1024);
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(blocks_per_row, 1)),
                  static_cast<unsigned>(std::min(std::max<int64_t>(l.rows, 1), max_row_blocks)));
  scale_rows_by_keyed_mask<In, Out><<<grid, threads, 0, stream>>>(
      static_cast<const In*>(l.in), static_cast<Out*>(l.out), l.rows, l.per_row, l.row_keys, l.threshold, l.scale);
  return static_cast<int>(cudaGetLastError());
}

/// The launch for input type In, by the output's type.
template <typename In> int launch_from(const keyed_mask_launch& l, cudaStream_t stream) {
  switch (l.out_type) {
    case element_type::float16: return launch_typed<In, __half>(l, stream);
    case element_type::bfloat16: return launch_typed<In, __nv_bfloat16>(l, stream);
    case element_type::float32: break;
  }
  return launch_typed<In, float>(l, stream);
}

}  // namespace

int scale_by_keyed_mask(const keyed_mask_launch& launch, void* stream) {
  if (launch.rows == 0 || launch.per_row == 0) return 0;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  switch (launch.in_type) {
    case element_type::float16: return launch_from<__half>(launch, cuda_stream);
    case element_type::bfloat16: return launch_from<__nv_bfloat16>(launch, cuda_stream);
    case element_type::float32: break;
  }
  return launch_from<float>(launch, cuda_stream);
}

}  // namespace troupe::compute::cuda
