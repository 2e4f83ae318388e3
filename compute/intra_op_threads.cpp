#include "compute/intra_op_threads.hpp"

#include <dlfcn.h>

#include <ATen/Parallel.h>

namespace troupe::compute {

namespace {

/// A BLAS library's "set the pool's size" entry point, as the process already loaded it.
struct blas_pool_setter {
  const char* library;
  const char* symbol;
};

constexpr blas_pool_setter blas_pool_setters[] = {
    {"openblas", "openblas_set_num_threads"},
    {"blis", "bli_thread_set_num_threads"},
};

}  // namespace

std::string set_intra_op_threads(int64_t threads) {
  const int count = static_cast<int>(threads);
  at::set_num_threads(count);
  // Looked up among the libraries already loaded (LibTorch's dependencies), not linked: the build
  // does not know which libblas.so.3 the host's alternatives select.
  for (const auto& setter : blas_pool_setters) {
    if (void* entry = ::dlsym(RTLD_DEFAULT, setter.symbol)) {
      reinterpret_cast<void (*)(int)>(entry)(count);
      return setter.library;
    }
  }
  return "";
}

}  // namespace troupe::compute
