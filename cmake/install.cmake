# make install PREFIX=...: headers, libraries, prudence.pc and a CMake package config
# (find_package(prudence) gives prudence::prudence, prudence::prudence_static, and
# prudence::malloc / prudence::urcu when those libraries are built; prudence-urcu.pc and
# prudence::urcu keep the adapter linked under --as-needed).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PRD_INSTALL_TARGETS prudence prudence_static)
set_target_properties(prudence_static PROPERTIES EXPORT_NAME prudence_static)
if(TARGET prudence-malloc)
  list(APPEND PRD_INSTALL_TARGETS prudence-malloc)
  set_target_properties(prudence-malloc PROPERTIES EXPORT_NAME malloc)
endif()
if(TARGET prudence-urcu)
  # exported as prudence::urcu_shared; prudenceConfig.cmake wraps it as prudence::urcu, which
  # keeps it linked under --as-needed (see there)
  list(APPEND PRD_INSTALL_TARGETS prudence-urcu)
  set_target_properties(prudence-urcu PROPERTIES EXPORT_NAME urcu_shared)
endif()

install(TARGETS ${PRD_INSTALL_TARGETS} EXPORT prudenceTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(EXISTS ${CMAKE_SOURCE_DIR}/tools/prdstat)
  install(PROGRAMS ${CMAKE_SOURCE_DIR}/tools/prdstat DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

install(EXPORT prudenceTargets NAMESPACE prudence::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/prudence)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/prudenceConfig.cmake.in
  ${CMAKE_BINARY_DIR}/prudenceConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/prudence)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/prudenceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/prudenceConfig.cmake ${CMAKE_BINARY_DIR}/prudenceConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/prudence)

set(PRD_PC_LIBS "-lprudence")
file(RELATIVE_PATH PRD_PC_UP /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_SOURCE_DIR}/cmake/prudence.pc.in ${CMAKE_BINARY_DIR}/prudence.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/prudence.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET prudence-malloc)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/prudence-malloc.pc.in ${CMAKE_BINARY_DIR}/prudence-malloc.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/prudence-malloc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
if(TARGET prudence-urcu)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/prudence-urcu.pc.in ${CMAKE_BINARY_DIR}/prudence-urcu.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/prudence-urcu.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# The installed copy is tested by building a consumer and every example against it, once
# with pkg-config and once with find_package (tests/install/run.sh).
add_test(NAME install_consumer
  COMMAND sh ${CMAKE_SOURCE_DIR}/tests/install/run.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(install_consumer PROPERTIES LABELS "install;no-asan;no-tsan" TIMEOUT 300)
