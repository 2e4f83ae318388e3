# troupe_add_component(NAME SOURCES ... DEPENDS ...)
#   Declares one component library, troupe_<NAME>, built from the folder of the same name.
#   Headers are included as "<folder>/<file>.hpp" from the repository root.
#
# troupe_add_test(NAME SOURCES ... DEPENDS ... [TIMEOUT seconds] [LABELS ...])
#   One GoogleTest executable per test file and one ctest entry per executable, each with a
#   timeout so a hang fails instead of stalling the suite; skipped tests are reported as such
#   (tests/support/run_gtest).

function(troupe_add_component name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  add_library(troupe_${name} STATIC ${ARG_SOURCES})
  target_include_directories(troupe_${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(troupe_${name} PUBLIC ${ARG_DEPENDS})
  target_compile_options(troupe_${name} PRIVATE -Wall -Wextra)
endfunction()

function(troupe_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPENDS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPENDS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  # Through tests/support/run_gtest: a program whose every test skipped shows as skipped (77).
  add_test(NAME ${name} COMMAND ${PROJECT_SOURCE_DIR}/tests/support/run_gtest $<TARGET_FILE:${name}>)
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} SKIP_RETURN_CODE 77
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1;TROUPE_BINARY=$<TARGET_FILE:troupe>;TROUPE_SKIP_LOG=${PROJECT_BINARY_DIR}/skipped-tests.log"
                       LABELS "${ARG_LABELS}")
endfunction()

# Sharing the machine's cores (tools/check): under `ctest --resource-spec-file` every test of
# this directory takes one of the machine's cores (a resource named `cores`, as many as nproc),
# except the tests named WAITING_ON_LINKS, which mostly wait on network links and so run beside
# as many others as there are cores (ctest's -j one higher). Alone, as RUN_SERIAL had them, they
# left the machine idle for minutes. Plain ctest, with no resource spec, ignores the groups.
function(troupe_share_cores)
  cmake_parse_arguments(ARG "" "" "WAITING_ON_LINKS" ${ARGN})
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    if(NOT test IN_LIST ARG_WAITING_ON_LINKS)
      set_property(TEST ${test} PROPERTY RESOURCE_GROUPS "cores:1")
    endif()
  endforeach()
endfunction()
