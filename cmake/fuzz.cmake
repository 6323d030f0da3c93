# The op-sequence fuzzer (tests/fuzz/fuzz_ops.c; docs/testing.md).
#  - fuzz_ops_replay, in every build: the harness with a plain main (tests/fuzz/replay.c)
#    that runs files; ctest's fuzz_corpus replays the committed corpus (tests/fuzz/corpus:
#    the structured seeds and every input the fuzzer found) in the Debug, ASan, TSan and
#    LD_PRELOAD runs alike.
#  - fuzz_ops, with -DPRD_FUZZ=ON (clang; make fuzz configures build-fuzz): the harness
#    linked with libFuzzer, library and harness instrumented for coverage, with ASan+UBSan.
set(PRD_FUZZ_SRC ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_ops.c)

function(prd_fuzz_target name)
  add_executable(${name} ${ARGN})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src
                                             ${CMAKE_SOURCE_DIR}/tests/fuzz)
  target_compile_options(${name} PRIVATE ${PRD_WARNINGS})
  target_link_libraries(${name} PRIVATE prudence_static Threads::Threads m)
endfunction()

prd_fuzz_target(fuzz_ops_replay ${PRD_FUZZ_SRC} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay.c)
add_test(NAME fuzz_corpus COMMAND fuzz_ops_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus)
set_tests_properties(fuzz_corpus PROPERTIES LABELS "unit;fuzz" TIMEOUT 300
  ENVIRONMENT "PRUDENCE_TEST=1")

if(PRD_FUZZ)
  prd_fuzz_target(fuzz_ops ${PRD_FUZZ_SRC})
  target_compile_options(fuzz_ops PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_ops PRIVATE -fsanitize=fuzzer)
endif()
