# Install: the library, its public headers under include/tgsched/, a CMake
# package (find_package(tgsched 0), target tgsched::tgsched) and a pkg-config
# file.  Both are relocatable: the package finds itself from its own path,
# and tgsched.pc sets prefix from ${pcfiledir}, so an installed tree may be
# moved or installed with `cmake --install BUILD --prefix P`.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tgsched EXPORT tgschedTargets COMPONENT dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/tgsched DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "tg*.h")
if(TARGET tgsched-cli)
  install(TARGETS tgsched-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
endif()
install(EXPORT tgschedTargets NAMESPACE tgsched:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tgsched COMPONENT dev)

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
# 0.x: any 0.y satisfies find_package(tgsched 0)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tgschedConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/tgschedConfig.cmake ${CMAKE_BINARY_DIR}/tgschedConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tgsched COMPONENT dev)

# pkg-config: the prefix is found from the .pc file's own directory
# (<prefix>/<libdir>/pkgconfig), so no configure-time path is baked in.
file(RELATIVE_PATH TG_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
# Libs.private: what a static libtgsched needs at link time; the C++ runtime
# because the CUDA objects are C++ (linking with plain gcc needs it named).
set(TG_PC_LIBS_PRIVATE "-lpthread -lm")
if(TG_CUDA)
  set(TG_PC_LIBS_PRIVATE "${TG_PC_LIBS_PRIVATE} -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas -lstdc++")
endif()
# A static libtgsched needs them on every link, not only with --static.
set(TG_PC_LIBS "-L\${libdir} -ltgsched")
if(NOT TG_SHARED)
  set(TG_PC_LIBS "${TG_PC_LIBS} ${TG_PC_LIBS_PRIVATE}")
endif()
file(WRITE ${CMAKE_BINARY_DIR}/tgsched.pc.in [=[
prefix=${pcfiledir}/@TG_PC_TO_PREFIX@
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: tgsched
Description: tensor-graph scheduler and memory allocator with an oracle and fuzzers
Version: @PROJECT_VERSION@
Cflags: -I${includedir}
Libs: @TG_PC_LIBS@
Libs.private: @TG_PC_LIBS_PRIVATE@
]=])
configure_file(${CMAKE_BINARY_DIR}/tgsched.pc.in ${CMAKE_BINARY_DIR}/tgsched.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/tgsched.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
