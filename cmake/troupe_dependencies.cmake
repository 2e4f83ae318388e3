# Finds every dependency and reports it; a missing one is a configure error that names the
# Debian package to install (tools/install-deps installs them all).

function(troupe_report_found what)
  message(STATUS "troupe: found ${what}")
endfunction()

function(troupe_require_package found what package)
  if(NOT ${found})
    message(FATAL_ERROR "troupe: ${what} not found. Install it with: apt-get install ${package} "
                        "(or run tools/install-deps)")
  endif()
  troupe_report_found("${what}")
endfunction()

if(TROUPE_ENABLE_CCACHE)
  find_program(TROUPE_CCACHE ccache)
  if(TROUPE_CCACHE)
    set(CMAKE_CXX_COMPILER_LAUNCHER "${TROUPE_CCACHE}")
    troupe_report_found("ccache (${TROUPE_CCACHE})")
  endif()
endif()

find_package(Threads REQUIRED)

# LibTorch: any build >= 1.13, CPU or CUDA, through its own CMake package.
find_package(Torch QUIET)
troupe_require_package(Torch_FOUND "LibTorch (TorchConfig.cmake)" "libtorch-dev")
message(STATUS "troupe: LibTorch ${Torch_VERSION}")

# troupe's own CUDA kernels (compute/keyed_dropout_kernel.cu): where LibTorch has CUDA and its CMake
# package found nvcc (it enables the CUDA language then). Elsewhere the same maths runs as tensor
# operations, so nothing but speed depends on them.
option(TROUPE_WITH_CUDA_KERNELS "Build troupe's CUDA kernels where LibTorch has CUDA and nvcc is found" ON)
# Volta (70) where nvcc still has it (CUDA 13 dropped it); on a GPU none of these fits, the kernel
# is not launched and the tensor operations run instead (compute/keyed_dropout.cpp).
set(troupe_default_cuda_architectures "75-real;80-real;90-real;90-virtual")
if(CMAKE_CUDA_COMPILER_VERSION AND CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 13)
  set(troupe_default_cuda_architectures "70-real;${troupe_default_cuda_architectures}")
endif()
set(TROUPE_CUDA_ARCHITECTURES "${troupe_default_cuda_architectures}" CACHE STRING
    "GPU architectures troupe's CUDA kernels are compiled for (CMake's CUDA_ARCHITECTURES)")
set(TROUPE_HAS_CUDA_KERNELS FALSE)
if(TROUPE_WITH_CUDA_KERNELS AND TORCH_CUDA_LIBRARIES AND CMAKE_CUDA_COMPILER)
  set(TROUPE_HAS_CUDA_KERNELS TRUE)
  troupe_report_found("nvcc ${CMAKE_CUDA_COMPILER_VERSION}: troupe's CUDA kernels are built (${TROUPE_CUDA_ARCHITECTURES})")
endif()

find_package(CapnProto QUIET)
troupe_require_package(CapnProto_FOUND "Cap'n Proto" "libcapnp-dev capnproto")

find_package(spdlog QUIET)
troupe_require_package(spdlog_FOUND "spdlog" "libspdlog-dev")
# LibTorch 2.x ships its own {fmt} (v11 and later) in its include directory, and Debian's spdlog
# is built against Debian's fmt 9: where both are on the include path, fmt's own directory goes
# first (a no-op where it is a system directory, as on Debian).
foreach(torch_include IN LISTS TORCH_INCLUDE_DIRS)
  if(EXISTS "${torch_include}/fmt/core.h" AND TARGET fmt::fmt)
    get_target_property(fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
    include_directories(BEFORE SYSTEM ${fmt_includes})
    troupe_report_found("{fmt} at ${fmt_includes}, ahead of LibTorch's own copy")
    break()
  endif()
endforeach()

find_package(nlohmann_json QUIET)
troupe_require_package(nlohmann_json_FOUND "nlohmann-json" "nlohmann-json3-dev")

find_package(CLI11 QUIET)
troupe_require_package(CLI11_FOUND "CLI11" "libcli11-dev")

# UCX (the reducer rings' host-memory transport) ships a pkg-config file, not a CMake package.
find_package(PkgConfig QUIET)
troupe_require_package(PKG_CONFIG_FOUND "pkg-config" "pkg-config")
pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
troupe_require_package(UCX_FOUND "UCX ${UCX_VERSION} (pkg-config ucx)" "libucx-dev")
# cpp-httplib (the dashboard's HTTP server): Debian builds it as a library with a pkg-config file.
pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
troupe_require_package(HTTPLIB_FOUND "cpp-httplib ${HTTPLIB_VERSION} (pkg-config cpp-httplib)" "libcpp-httplib-dev")
# OpenSSL's libcrypto (base64 for etcd's JSON gateway; cpp-httplib is built with OpenSSL).
find_package(OpenSSL QUIET COMPONENTS Crypto)
troupe_require_package(OpenSSL_FOUND "OpenSSL ${OPENSSL_VERSION}" "libssl-dev")

# troupe_find_plain_library(TARGET HEADER LIBRARIES PACKAGE DESCRIPTION)
#   For libraries without a CMake package: finds HEADER and every library in LIBRARIES and
#   defines the imported-style INTERFACE target TARGET, or stops with the Debian package name.
function(troupe_find_plain_library target header libraries package description)
  string(MAKE_C_IDENTIFIER "${target}" id)
  find_path(TROUPE_${id}_INCLUDE_DIR ${header})
  set(found TRUE)
  if(NOT TROUPE_${id}_INCLUDE_DIR)
    set(found FALSE)
  endif()
  set(paths)
  foreach(library IN LISTS libraries)
    find_library(TROUPE_${id}_${library}_LIBRARY ${library})
    if(NOT TROUPE_${id}_${library}_LIBRARY)
      set(found FALSE)
    endif()
    list(APPEND paths ${TROUPE_${id}_${library}_LIBRARY})
  endforeach()
  troupe_require_package(found "${description}" "${package}")
  add_library(${id}_interface INTERFACE)
  target_include_directories(${id}_interface SYSTEM INTERFACE ${TROUPE_${id}_INCLUDE_DIR})
  target_link_libraries(${id}_interface INTERFACE ${paths})
  add_library(${target} ALIAS ${id}_interface)
endfunction()

# CAF 0.17 ships no CMake package.
troupe_find_plain_library(CAF::caf caf/all.hpp "caf_core;caf_io" libcaf-dev "CAF (caf_core, caf_io)")
troupe_find_plain_library(xxHash::xxhash xxhash.h "xxhash" libxxhash-dev "xxHash")
troupe_find_plain_library(FP16::fp16 fp16.h "" libfp16-dev "FP16 (header-only)")
troupe_find_plain_library(SLEEF::sleef sleef.h "sleef" libsleef-dev "SLEEF")
troupe_find_plain_library(utf8proc::utf8proc utf8proc.h "utf8proc" libutf8proc-dev "utf8proc")
# zlib and Zstandard: `troupe prepare` reads .gz and .zst corpora (io/data/compressed_lines.hpp).
troupe_find_plain_library(ZLIB::zlib zlib.h "z" zlib1g-dev "zlib")
troupe_find_plain_library(zstd::zstd zstd.h "zstd" libzstd-dev "Zstandard")
troupe_find_plain_library(sentencepiece::sentencepiece sentencepiece_trainer.h
                          "sentencepiece_train;sentencepiece" libsentencepiece-dev "SentencePiece")

if(TROUPE_ENABLE_TESTS)
  find_package(GTest QUIET)
  troupe_require_package(GTest_FOUND "GoogleTest" "libgtest-dev")
  include(GoogleTest)
endif()

# NCCL and CUDA's runtime (the reducer rings' GPU transport, io/comm/nccl): optional. Looked for
# in $CUDA_HOME, /usr/local/cuda and the system. When both are there the transport is compiled
# in every build, GPU or not, so it cannot rot on the machines that have none; without them
# troupe builds without it and `troupe --version` says so.
option(TROUPE_WITH_NCCL "Build the NCCL transport when NCCL and the CUDA runtime are found" ON)
set(TROUPE_HAS_NCCL FALSE)
if(TROUPE_WITH_NCCL)
  set(cuda_hints $ENV{CUDA_HOME} /usr/local/cuda)
  find_path(TROUPE_NCCL_INCLUDE_DIR nccl.h HINTS ${cuda_hints} PATH_SUFFIXES include)
  find_library(TROUPE_NCCL_LIBRARY nccl HINTS ${cuda_hints} PATH_SUFFIXES lib lib64)
  find_path(TROUPE_CUDART_INCLUDE_DIR cuda_runtime_api.h HINTS ${cuda_hints} PATH_SUFFIXES include)
  find_library(TROUPE_CUDART_LIBRARY cudart HINTS ${cuda_hints} PATH_SUFFIXES lib64 lib)
  if(TROUPE_NCCL_INCLUDE_DIR AND TROUPE_NCCL_LIBRARY AND TROUPE_CUDART_INCLUDE_DIR AND TROUPE_CUDART_LIBRARY)
    set(TROUPE_HAS_NCCL TRUE)
    add_library(troupe_nccl_libraries INTERFACE)
    target_include_directories(troupe_nccl_libraries SYSTEM INTERFACE ${TROUPE_NCCL_INCLUDE_DIR}
                                                                       ${TROUPE_CUDART_INCLUDE_DIR})
    target_link_libraries(troupe_nccl_libraries INTERFACE ${TROUPE_NCCL_LIBRARY} ${TROUPE_CUDART_LIBRARY})
    troupe_report_found("NCCL (${TROUPE_NCCL_LIBRARY}) and the CUDA runtime: the NCCL transport is built")
  else()
    message(STATUS "troupe: NCCL or the CUDA runtime not found: the NCCL transport is not built")
  endif()
endif()
