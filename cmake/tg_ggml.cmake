# The pinned upstream ggml (../shared/ggml, see its PINNED.md) as a test-time
# reference: the checks against real ggml build when it is there, and the
# project builds and passes its tests without it.  Included before the
# project's warning and sanitizer flags, so ggml builds with its own.
set(TG_GGML_DIR "${CMAKE_CURRENT_SOURCE_DIR}/../shared/ggml" CACHE PATH
    "Upstream ggml source tree to hold tgsched against (empty: none)")
if(EXISTS "${TG_GGML_DIR}/CMakeLists.txt" AND NOT TG_SANITIZE STREQUAL "memory")
  set(TG_GGML_DEFAULT ON)
else()
  set(TG_GGML_DEFAULT OFF) # absent; or MemorySanitizer, which needs every library instrumented
endif()
option(TG_GGML "Build the checks against upstream ggml (TG_GGML_DIR)" ${TG_GGML_DEFAULT})

# One line, on or off and why: without it a build that lacks ggml looks the
# same as one that has it, and `ctest -L ggml` would pass having run nothing
# (tests/ggml/tests.cmake registers a skipped test with this reason instead).
if(TG_GGML)
  if(NOT EXISTS "${TG_GGML_DIR}/CMakeLists.txt")
    message(FATAL_ERROR "TG_GGML is on but TG_GGML_DIR (${TG_GGML_DIR}) holds no ggml: set -DTG_GGML_DIR=")
  endif()
  set(TG_GGML_STATUS "on (${TG_GGML_DIR})")
elseif(NOT EXISTS "${TG_GGML_DIR}/CMakeLists.txt")
  set(TG_GGML_STATUS "off (no ggml in '${TG_GGML_DIR}'; set -DTG_GGML_DIR= to a ggml source tree)")
elseif(TG_SANITIZE STREQUAL "memory")
  set(TG_GGML_STATUS "off (MemorySanitizer build: ggml is not instrumented)")
else()
  set(TG_GGML_STATUS "off (TG_GGML=OFF; -DTG_GGML=ON builds them)")
endif()
message(STATUS "tgsched: checks against ggml: ${TG_GGML_STATUS}")

if(TG_GGML)
  # ggml's core is C++.  With clang as the C compiler, C++ is its clang++: a
  # sanitizer or libFuzzer runtime links only with the compiler that made it.
  if(NOT CMAKE_CXX_COMPILER AND CMAKE_C_COMPILER MATCHES "^(.*/)?clang(-[0-9.]+)?$")
    set(tg_clangxx "${CMAKE_MATCH_1}clang++${CMAKE_MATCH_2}")
    if(EXISTS "${tg_clangxx}")
      set(CMAKE_CXX_COMPILER "${tg_clangxx}")
    endif()
  endif()
  enable_language(CXX)
  # Portable CPU code, no OpenMP/BLAS, static, nothing but the libraries.
  foreach(opt GGML_NATIVE GGML_OPENMP GGML_BLAS GGML_CCACHE GGML_CPU_KLEIDIAI GGML_BUILD_TESTS GGML_BUILD_EXAMPLES)
    set(${opt} OFF CACHE BOOL "set by tgsched" FORCE)
  endforeach()
  set(TG_SAVED_BUILD_SHARED_LIBS ${BUILD_SHARED_LIBS})
  set(BUILD_SHARED_LIBS OFF)
  add_subdirectory("${TG_GGML_DIR}" "${CMAKE_BINARY_DIR}/ggml" EXCLUDE_FROM_ALL)
  set(BUILD_SHARED_LIBS ${TG_SAVED_BUILD_SHARED_LIBS})
  # ggml as its users' release builds run it, in every build type: the checks
  # feed it the cases that show its defects (docs/upstream.md), and in a Debug
  # build one of its C asserts (ggml-alloc.c, a node allocated twice) stops
  # the whole process there instead of letting the check see what it does.
  foreach(tg_ggml_lib ggml-base ggml-cpu ggml)
    if(TARGET ${tg_ggml_lib})
      target_compile_definitions(${tg_ggml_lib} PRIVATE NDEBUG)
    endif()
  endforeach()
  # What a check against ggml links: ggml with its CPU backend.  ggml's core is
  # C++ (ggml-backend.cpp): an executable linking it links as C++.
  add_library(tg_ggml_ref INTERFACE)
  target_link_libraries(tg_ggml_ref INTERFACE ggml m)
  target_compile_definitions(tg_ggml_ref INTERFACE TG_HAVE_GGML=1)
endif()
