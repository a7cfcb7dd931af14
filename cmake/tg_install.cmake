# Install: the library, its public headers, a CMake package (tgsched::tgsched)
# and a pkg-config file, so `find_package(tgsched)` and `pkg-config tgsched` work.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tgsched EXPORT tgschedTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "tg*.h")
if(TARGET tgsched-cli)
  install(TARGETS tgsched-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT tgschedTargets NAMESPACE tgsched:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tgsched)

file(WRITE ${CMAKE_BINARY_DIR}/tgschedConfig.cmake.in [=[
@PACKAGE_INIT@
include(CMakeFindDependencyMacro)
find_dependency(Threads)
if(@TG_CUDA@)
  find_dependency(CUDAToolkit)
endif()
include("${CMAKE_CURRENT_LIST_DIR}/tgschedTargets.cmake")
]=])
configure_package_config_file(${CMAKE_BINARY_DIR}/tgschedConfig.cmake.in ${CMAKE_BINARY_DIR}/tgschedConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tgsched)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tgschedConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/tgschedConfig.cmake ${CMAKE_BINARY_DIR}/tgschedConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tgsched)

set(TG_PC_LIBS "-ltgsched -lpthread -lm")
if(TG_CUDA)
  set(TG_PC_LIBS "${TG_PC_LIBS} -lcudart -lcublas")
endif()
file(WRITE ${CMAKE_BINARY_DIR}/tgsched.pc.in [=[
prefix=@CMAKE_INSTALL_PREFIX@
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: tgsched
Description: tensor-graph scheduler and memory allocator with an oracle and fuzzers
Version: @PROJECT_VERSION@
Cflags: -I${includedir}
Libs: -L${libdir} @TG_PC_LIBS@
]=])
configure_file(${CMAKE_BINARY_DIR}/tgsched.pc.in ${CMAKE_BINARY_DIR}/tgsched.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/tgsched.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
