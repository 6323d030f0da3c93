# The malloc replacement run under real programs (tests/preload/run.sh): python3, sort, git,
# gcc, a multi-threaded C++ program, a forking program that reads long lines while another
# thread flushes every stream (tests/preload/fork_stdio.c), examples/preload.c, ls under
# failing mappings and the library threads' manners (tests/preload/threads.c), with
# LD_PRELOAD=libprudence-malloc.so.  Not in the sanitizer builds: a sanitizer's runtime must
# be the first library and owns malloc itself.
if(TARGET prudence-malloc AND NOT PRD_SANITIZE)
  add_executable(preload_cxx_threads ${CMAKE_SOURCE_DIR}/tests/preload/cxx_threads.cpp)
  target_compile_options(preload_cxx_threads PRIVATE ${PRD_CXX_WARNINGS})
  target_link_libraries(preload_cxx_threads PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  add_executable(preload_cxx_new_handler ${CMAKE_SOURCE_DIR}/tests/preload/cxx_new_handler.cpp)
  target_compile_options(preload_cxx_new_handler PRIVATE ${PRD_CXX_WARNINGS})
  target_link_libraries(preload_cxx_new_handler PRIVATE ${CMAKE_DL_LIBS})
  add_executable(preload_fork_stdio ${CMAKE_SOURCE_DIR}/tests/preload/fork_stdio.c)
  target_compile_options(preload_fork_stdio PRIVATE ${PRD_WARNINGS})
  target_link_libraries(preload_fork_stdio PRIVATE Threads::Threads)
  add_executable(preload_threads ${CMAKE_SOURCE_DIR}/tests/preload/threads.c)
  target_compile_options(preload_threads PRIVATE ${PRD_WARNINGS})
  target_link_libraries(preload_threads PRIVATE Threads::Threads)
  add_executable(preload_libc_names ${CMAKE_SOURCE_DIR}/tests/preload/libc_names.c)
  target_compile_options(preload_libc_names PRIVATE ${PRD_WARNINGS})
  # threads that come and go, deferring (docs/benchmarks.md): built to be run by hand
  add_executable(preload_storm ${CMAKE_SOURCE_DIR}/tests/preload/storm.c)
  target_compile_options(preload_storm PRIVATE ${PRD_WARNINGS})
  target_link_libraries(preload_storm PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  # what a fork child of a threaded program pays (docs/benchmarks.md): built to be run by hand
  add_executable(preload_fork_cost ${CMAKE_SOURCE_DIR}/tests/preload/fork_cost.c)
  target_compile_options(preload_fork_cost PRIVATE ${PRD_WARNINGS})
  target_link_libraries(preload_fork_cost PRIVATE Threads::Threads)
  # what fork() costs the forking thread beside other threads: built to be run by hand
  add_executable(preload_fork_lat ${CMAKE_SOURCE_DIR}/tests/preload/fork_lat.c)
  target_compile_options(preload_fork_lat PRIVATE ${PRD_WARNINGS})
  target_link_libraries(preload_fork_lat PRIVATE Threads::Threads)
  foreach(what python sort git gcc cxx example faults fork-stdio threads libc-names)
    add_test(NAME preload_${what}
             COMMAND sh ${CMAKE_SOURCE_DIR}/tests/preload/run.sh ${what}
                     $<TARGET_FILE:prudence-malloc> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/bin)
    set_tests_properties(preload_${what} PROPERTIES LABELS "preload;no-asan;no-tsan" TIMEOUT 300)
  endforeach()
endif()
