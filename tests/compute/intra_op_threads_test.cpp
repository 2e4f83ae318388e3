// compute::set_intra_op_threads sizes LibTorch's intra-op pool and the BLAS library's own, which
// LibTorch leaves to OPENBLAS_NUM_THREADS or the host's cores (docs/architecture.md#contracts).

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include "compute/intra_op_threads.hpp"

namespace troupe::compute {
namespace {

/// OpenBLAS's own count of its pool, where OpenBLAS is the process's BLAS; -1 elsewhere.
int openblas_threads() {
  void* entry = ::dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
  return entry ? reinterpret_cast<int (*)()>(entry)() : -1;
}

TEST(intra_op_threads, sizes_libtorchs_pool_and_openblass_own) {
  // tools/install-deps installs OpenBLAS as libblas.so.3; a host with another BLAS skips.
  if (openblas_threads() < 0) GTEST_SKIP() << "this process's BLAS is not OpenBLAS";
  EXPECT_EQ(set_intra_op_threads(2), "openblas");
  EXPECT_EQ(at::get_num_threads(), 2);
  EXPECT_EQ(openblas_threads(), 2);

  EXPECT_EQ(set_intra_op_threads(1), "openblas");
  EXPECT_EQ(at::get_num_threads(), 1);
  EXPECT_EQ(openblas_threads(), 1) << "OPENBLAS_NUM_THREADS or the host's cores would decide otherwise";
}

}  // namespace
}  // namespace troupe::compute
