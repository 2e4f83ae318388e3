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

# CAF 0.17 ships no CMake package: find the libraries and headers ourselves.
find_path(TROUPE_CAF_INCLUDE_DIR caf/all.hpp)
find_library(TROUPE_CAF_CORE_LIBRARY caf_core)
find_library(TROUPE_CAF_IO_LIBRARY caf_io)
if(TROUPE_CAF_INCLUDE_DIR AND TROUPE_CAF_CORE_LIBRARY AND TROUPE_CAF_IO_LIBRARY)
  set(TROUPE_CAF_FOUND TRUE)
endif()
troupe_require_package(TROUPE_CAF_FOUND "CAF (caf_core, caf_io)" "libcaf-dev")
add_library(troupe_caf INTERFACE)
target_include_directories(troupe_caf SYSTEM INTERFACE ${TROUPE_CAF_INCLUDE_DIR})
target_link_libraries(troupe_caf INTERFACE ${TROUPE_CAF_CORE_LIBRARY} ${TROUPE_CAF_IO_LIBRARY}
                      Threads::Threads)
add_library(CAF::caf ALIAS troupe_caf)

find_package(CapnProto QUIET)
troupe_require_package(CapnProto_FOUND "Cap'n Proto" "libcapnp-dev capnproto")

find_package(spdlog QUIET)
troupe_require_package(spdlog_FOUND "spdlog" "libspdlog-dev")

find_package(nlohmann_json QUIET)
troupe_require_package(nlohmann_json_FOUND "nlohmann-json" "nlohmann-json3-dev")

find_package(CLI11 QUIET)
troupe_require_package(CLI11_FOUND "CLI11" "libcli11-dev")

find_path(TROUPE_XXHASH_INCLUDE_DIR xxhash.h)
find_library(TROUPE_XXHASH_LIBRARY xxhash)
if(TROUPE_XXHASH_INCLUDE_DIR AND TROUPE_XXHASH_LIBRARY)
  set(TROUPE_XXHASH_FOUND TRUE)
endif()
troupe_require_package(TROUPE_XXHASH_FOUND "xxHash" "libxxhash-dev")
add_library(troupe_xxhash INTERFACE)
target_include_directories(troupe_xxhash SYSTEM INTERFACE ${TROUPE_XXHASH_INCLUDE_DIR})
target_link_libraries(troupe_xxhash INTERFACE ${TROUPE_XXHASH_LIBRARY})
add_library(xxHash::xxhash ALIAS troupe_xxhash)

find_path(TROUPE_UTF8PROC_INCLUDE_DIR utf8proc.h)
find_library(TROUPE_UTF8PROC_LIBRARY utf8proc)
if(TROUPE_UTF8PROC_INCLUDE_DIR AND TROUPE_UTF8PROC_LIBRARY)
  set(TROUPE_UTF8PROC_FOUND TRUE)
endif()
troupe_require_package(TROUPE_UTF8PROC_FOUND "utf8proc" "libutf8proc-dev")
add_library(troupe_utf8proc INTERFACE)
target_include_directories(troupe_utf8proc SYSTEM INTERFACE ${TROUPE_UTF8PROC_INCLUDE_DIR})
target_link_libraries(troupe_utf8proc INTERFACE ${TROUPE_UTF8PROC_LIBRARY})
add_library(utf8proc::utf8proc ALIAS troupe_utf8proc)

find_path(TROUPE_SENTENCEPIECE_INCLUDE_DIR sentencepiece_trainer.h)
find_library(TROUPE_SENTENCEPIECE_LIBRARY sentencepiece)
find_library(TROUPE_SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train)
if(TROUPE_SENTENCEPIECE_INCLUDE_DIR AND TROUPE_SENTENCEPIECE_LIBRARY
   AND TROUPE_SENTENCEPIECE_TRAIN_LIBRARY)
  set(TROUPE_SENTENCEPIECE_FOUND TRUE)
endif()
troupe_require_package(TROUPE_SENTENCEPIECE_FOUND "SentencePiece" "libsentencepiece-dev")
add_library(troupe_sentencepiece INTERFACE)
target_include_directories(troupe_sentencepiece SYSTEM INTERFACE ${TROUPE_SENTENCEPIECE_INCLUDE_DIR})
target_link_libraries(troupe_sentencepiece INTERFACE ${TROUPE_SENTENCEPIECE_TRAIN_LIBRARY}
                      ${TROUPE_SENTENCEPIECE_LIBRARY})
add_library(sentencepiece::sentencepiece ALIAS troupe_sentencepiece)

if(TROUPE_ENABLE_TESTS)
  find_package(GTest QUIET)
  troupe_require_package(GTest_FOUND "GoogleTest" "libgtest-dev")
  include(GoogleTest)
endif()
