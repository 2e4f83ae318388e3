#pragma once
/// How many threads one worker's maths may use: LibTorch's intra-op pool and the BLAS library's
/// own pool, both set from the config (`threads_per_worker`, `runtime.threads`), never from the
/// environment.

#include <cstdint>
#include <string>

namespace troupe::compute {

/// Sets LibTorch's intra-op threads and, where the process's BLAS keeps a thread pool of its own
/// that LibTorch does not size (OpenBLAS, BLIS: Debian's LibTorch calls the system's libblas.so.3),
/// that pool too, to `threads`. Without the second, OpenBLAS starts as many threads as the host
/// has cores, or OPENBLAS_NUM_THREADS when the process inherited it, and a matrix product's bits
/// depend on how many threads split it: a node started over ssh (no variable, all the host's
/// cores) and the same node started from a shell that set OPENBLAS_NUM_THREADS=1 trained
/// different bits (docs/architecture.md#contracts), and several workers per host each ran a pool
/// as large as the host. Returns the BLAS library whose pool was sized ("openblas", "blis"), or
/// "" when none was found (MKL is sized by LibTorch itself; a reference BLAS has no threads).
std::string set_intra_op_threads(int64_t threads);

}  // namespace troupe::compute
