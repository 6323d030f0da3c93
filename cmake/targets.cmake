# Tests, benchmarks, examples and tools.  Everything is discovered by glob so that each
# layer adds its files without touching this one.  A test source may carry directives in
# comments, read here:
#   // prd-test-labels: stress no-tsan      ctest labels (unit/stress/torture/example by dir)
#   // prd-test-timeout: 300                seconds (default 120)
#   // prd-test-needs: urcu                 built only when liburcu is installed; links it
#   // prd-test-wants: urcu                 always built; links liburcu (and defines
#                                           PRD_HAVE_URCU) when installed
#   // prd-test-run: NAME ARGS...           one ctest test per line (default: one, no args)
#   // prd-test-run-fail: NAME ARGS...      a test that must exit non-zero (proves a check can fail)
# A test that exits 77 is reported as skipped (e.g. a liburcu run in a build without liburcu).
# Labels no-asan / no-tsan keep a test out of the sanitizer runs, no-preload out of
# make test-preload (say why beside the label).

enable_testing()

# What a program that uses liburcu links: the adapter library when it is built, and liburcu.
set(PRD_URCU_LIBS)
if(PRD_HAVE_URCU)
  if(TARGET prudence-urcu)
    list(APPEND PRD_URCU_LIBS prudence-urcu)
  endif()
  list(APPEND PRD_URCU_LIBS PkgConfig::URCU_MEMB PkgConfig::URCU_QSBR)
endif()

function(prd_add_program src kind)
  get_filename_component(name ${src} NAME_WE)
  file(STRINGS ${src} needs REGEX "prd-test-needs:")
  set(uses_urcu OFF)
  if(needs MATCHES "urcu")
    if(NOT PRD_HAVE_URCU)
      message(STATUS "skipping ${name}: needs liburcu")
      return()
    endif()
    set(uses_urcu ON)
  endif()
  file(STRINGS ${src} wants REGEX "prd-test-wants:")
  if(wants MATCHES "urcu" AND PRD_HAVE_URCU)
    set(uses_urcu ON)
  endif()
  add_executable(${name} ${src})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
  if(src MATCHES "\\.cpp$")
    target_compile_options(${name} PRIVATE ${PRD_CXX_WARNINGS})
  else()
    target_compile_options(${name} PRIVATE ${PRD_WARNINGS})
  endif()
  target_compile_definitions(${name} PRIVATE PRD_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  # the adapter first: its references to the core pull the core's objects from the archive
  if(uses_urcu)
    target_link_libraries(${name} PRIVATE ${PRD_URCU_LIBS})
    target_compile_definitions(${name} PRIVATE PRD_HAVE_URCU=1)
  endif()
  target_link_libraries(${name} PRIVATE prudence_static Threads::Threads m)

  file(STRINGS ${src} labels_line REGEX "prd-test-labels:")
  set(labels ${kind})
  if(labels_line)
    string(REGEX REPLACE ".*prd-test-labels:[ ]*" "" l "${labels_line}")
    string(REPLACE " " ";" l "${l}")
    list(APPEND labels ${l})
  endif()
  file(STRINGS ${src} timeout_line REGEX "prd-test-timeout:")
  set(timeout 120)
  if(timeout_line)
    string(REGEX REPLACE ".*prd-test-timeout:[ ]*([0-9]+).*" "\\1" timeout "${timeout_line}")
  endif()

  file(STRINGS ${src} runs REGEX "prd-test-run(-fail)?:")
  if(NOT runs)
    set(runs "prd-test-run: ${name}")
  endif()
  foreach(run IN LISTS runs)
    set(will_fail FALSE)
    if(run MATCHES "prd-test-run-fail:")
      set(will_fail TRUE)
    endif()
    string(REGEX REPLACE ".*prd-test-run(-fail)?:[ ]*" "" run "${run}")
    string(REPLACE " " ";" run "${run}")
    list(POP_FRONT run tname)
    add_test(NAME ${tname} COMMAND ${name} ${run})
    set_tests_properties(${tname} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout}
      WILL_FAIL ${will_fail} SKIP_RETURN_CODE 77 ENVIRONMENT "PRUDENCE_TEST=1")
  endforeach()
endfunction()

foreach(dir unit stress torture misuse)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${dir}/*.c ${CMAKE_SOURCE_DIR}/tests/${dir}/*.cpp)
  foreach(src IN LISTS srcs)
    prd_add_program(${src} ${dir})
  endforeach()
endforeach()

file(GLOB example_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/examples/*.c)
foreach(src IN LISTS example_srcs)
  prd_add_program(${src} example)
endforeach()

# ---- prd-bench: every bench/*.c registers its benchmarks (bench/bench.h)
file(GLOB bench_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bench/*.c)
if(NOT PRD_HAVE_URCU)
  list(FILTER bench_srcs EXCLUDE REGEX ".*/bench/urcu_.*\\.c$")
endif()
if(bench_srcs)
  add_executable(prd-bench ${bench_srcs})
  target_include_directories(prd-bench PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/bench
                             ${CMAKE_SOURCE_DIR}/tests)
  target_compile_options(prd-bench PRIVATE ${PRD_WARNINGS})
  if(PRD_HAVE_URCU)
    target_link_libraries(prd-bench PRIVATE ${PRD_URCU_LIBS})
    target_compile_definitions(prd-bench PRIVATE PRD_HAVE_URCU=1)
  endif()
  target_link_libraries(prd-bench PRIVATE prudence_static Threads::Threads m)
  # a smoke run of every benchmark in its quick mode keeps them from rotting
  add_test(NAME bench_smoke COMMAND prd-bench --smoke)
  set_tests_properties(bench_smoke PROPERTIES LABELS "bench;no-tsan" TIMEOUT 300)
  # endurance with a reader of the built-in source beside its writers (not in --smoke's set)
  add_test(NAME bench_endurance_readers
           COMMAND prd-bench endurance --smoke --readers 1 --modes prudence,malloc)
  set_tests_properties(bench_endurance_readers PROPERTIES LABELS "bench;no-tsan" TIMEOUT 120)
  # kv's per-SET timing (--latency, not in --smoke's set): both phases report it
  add_test(NAME bench_kv_latency COMMAND prd-bench kv --smoke --latency --json)
  set_tests_properties(bench_kv_latency PROPERTIES LABELS "bench;no-tsan" TIMEOUT 120
    PASS_REGULAR_EXPRESSION "\"phase\":\"B\".*\"max_set_ms\":[0-9.]+,\"sets_over_1ms\":[0-9]+}")
endif()

file(GLOB tool_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/*.c)
foreach(src IN LISTS tool_srcs)
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${PRD_WARNINGS})
  target_link_libraries(${name} PRIVATE prudence_static Threads::Threads m)
endforeach()

# ---- tools/prdstat (Python): copied to bin/ beside the programs (installed by install.cmake)
if(EXISTS ${CMAKE_SOURCE_DIR}/tools/prdstat)
  configure_file(${CMAKE_SOURCE_DIR}/tools/prdstat ${CMAKE_BINARY_DIR}/bin/prdstat COPYONLY
    FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endif()

# ---- shell-driven tests of the tools (tests/tools/*.sh SOURCE_DIR BUILD_DIR): label from a
# "# prd-test-labels:" line, like the C tests
file(GLOB tool_tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/tools/*.sh)
foreach(script IN LISTS tool_tests)
  get_filename_component(tname ${script} NAME_WE)
  file(STRINGS ${script} labels_line REGEX "prd-test-labels:")
  set(labels tools)
  if(labels_line)
    string(REGEX REPLACE ".*prd-test-labels:[ ]*" "" l "${labels_line}")
    string(REPLACE " " ";" l "${l}")
    list(APPEND labels ${l})
  endif()
  add_test(NAME ${tname} COMMAND sh ${script} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
  set_tests_properties(${tname} PROPERTIES LABELS "${labels}" TIMEOUT 300)
endforeach()

# dlopen and dlclose of the shared core by a program not linked with it (tests/dlopen): not in
# the sanitizer builds, whose runtime must be loaded before any instrumented library, nor under
# make test-preload (no-preload): the preloaded copy would serve some of the dlopened copy's
# calls, two allocators over one set of blocks.
if(NOT PRD_SANITIZE)
  add_executable(test_dlclose ${CMAKE_SOURCE_DIR}/tests/dlopen/dlclose.c)
  target_compile_options(test_dlclose PRIVATE ${PRD_WARNINGS})
  target_link_libraries(test_dlclose PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  foreach(how local global)
    add_test(NAME test_dlclose_${how} COMMAND test_dlclose $<TARGET_FILE:prudence> ${how})
    set_tests_properties(test_dlclose_${how} PROPERTIES LABELS "unit;no-asan;no-tsan;no-preload" TIMEOUT 60)
  endforeach()
  # a plugin with its own copy of the library from the static archive
  add_library(test_dlclose_plugin MODULE ${CMAKE_SOURCE_DIR}/tests/dlopen/plugin.c)
  target_include_directories(test_dlclose_plugin PRIVATE ${CMAKE_SOURCE_DIR}/include)
  target_compile_options(test_dlclose_plugin PRIVATE ${PRD_WARNINGS})
  target_link_libraries(test_dlclose_plugin PRIVATE prudence_static)
  add_test(NAME test_dlclose_static COMMAND test_dlclose $<TARGET_FILE:test_dlclose_plugin> local)
  set_tests_properties(test_dlclose_static PROPERTIES LABELS "unit;no-asan;no-tsan;no-preload" TIMEOUT 60)
endif()

# prd::cache_allocator across shared libraries (tests/dso): a library built with hidden
# visibility fills a std::map that the program changes and frees.  Both link the shared core
# (two static copies would be two allocators).
add_library(test_cpp_dso_lib SHARED ${CMAKE_SOURCE_DIR}/tests/dso/node_lib.cpp)
set_target_properties(test_cpp_dso_lib PROPERTIES CXX_VISIBILITY_PRESET hidden
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                      VISIBILITY_INLINES_HIDDEN ON)
target_include_directories(test_cpp_dso_lib PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_compile_options(test_cpp_dso_lib PRIVATE ${PRD_CXX_WARNINGS})
target_link_libraries(test_cpp_dso_lib PRIVATE prudence)
add_executable(test_cpp_dso ${CMAKE_SOURCE_DIR}/tests/dso/node_main.cpp)
target_include_directories(test_cpp_dso PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_compile_options(test_cpp_dso PRIVATE ${PRD_CXX_WARNINGS})
target_link_libraries(test_cpp_dso PRIVATE test_cpp_dso_lib prudence)
add_test(NAME test_cpp_dso COMMAND test_cpp_dso)
set_tests_properties(test_cpp_dso PROPERTIES LABELS "unit" TIMEOUT 60 ENVIRONMENT "PRUDENCE_TEST=1")
