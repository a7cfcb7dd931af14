# ctest script: the installed package as a user outside the tree meets it.
# For the library of this build (static by default) and for a shared build
# made here: install into a scratch prefix, move the prefix elsewhere (the
# package must be relocatable), then build and run the example against it
# with find_package(tgsched 0) and with plain `cc $(pkg-config ...)`.
# Vars: BUILD_DIR, SOURCE_DIR, C_COMPILER.
set(root ${BUILD_DIR}/install-test)
file(REMOVE_RECURSE ${root})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
endfunction()

function(check_package variant build_dir shared)
  set(staged ${root}/${variant}/staged)
  set(prefix ${root}/${variant}/moved-prefix)
  set(consumer ${root}/${variant}/consumer)
  run("installing ${variant}" ${CMAKE_COMMAND} --install ${build_dir} --prefix ${staged} --component dev)
  file(RENAME ${staged} ${prefix}) # relocated: nothing may point back to ${staged}
  file(GLOB loose ${prefix}/include/*.h)
  if(loose OR NOT EXISTS ${prefix}/include/tgsched/tg-sched.h)
    message(FATAL_ERROR "${variant}: headers must be in include/tgsched/ only (found: ${loose})")
  endif()
  # CMake: find_package(tgsched 0)
  run("${variant}: configuring a consumer with find_package(tgsched 0)" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer
      -B ${consumer} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER})
  run("${variant}: building the consumer" ${CMAKE_COMMAND} --build ${consumer})
  run("${variant}: running the find_package build" ${consumer}/schedule_cpu_sim)
  # pkg-config, with nothing but the moved prefix's pkgconfig directory
  find_program(PKG_CONFIG pkg-config REQUIRED)
  file(GLOB pcdir ${prefix}/lib*/pkgconfig ${prefix}/lib/*/pkgconfig)
  set(ENV{PKG_CONFIG_PATH} ${pcdir})
  set(ENV{PKG_CONFIG_LIBDIR} ${pcdir})
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs tgsched OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc)
    message(FATAL_ERROR "${variant}: pkg-config does not know tgsched (${rc})")
  endif()
  string(REGEX MATCH "-I([^ ]+)" inc "${flags}")
  get_filename_component(inc "${CMAKE_MATCH_1}" REALPATH)
  get_filename_component(want "${prefix}/include" REALPATH)
  if(NOT inc STREQUAL want)
    message(FATAL_ERROR "${variant}: pkg-config's include directory is not the moved prefix's ${want}: ${flags}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("${variant}: cc with pkg-config's flags" ${C_COMPILER} -std=c11 -D_POSIX_C_SOURCE=200809L
      ${SOURCE_DIR}/examples/schedule_cpu_sim.c ${flags} -o ${consumer}/schedule_pkgconfig)
  if(shared)
    file(GLOB so ${prefix}/lib*/libtgsched.so.0)
    if(NOT so)
      message(FATAL_ERROR "${variant}: no libtgsched.so.0 installed")
    endif()
    get_filename_component(sodir ${so} DIRECTORY)
    set(ENV{LD_LIBRARY_PATH} ${sodir})
  endif()
  run("${variant}: running the pkg-config build" ${consumer}/schedule_pkgconfig)
  message(STATUS "${variant}: relocated package built and ran with find_package and pkg-config")
endfunction()

check_package(static ${BUILD_DIR} FALSE)

# the shared library, from a fresh build of the library alone
set(shared_build ${root}/shared-build)
run("configuring a shared build" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${shared_build} -DTG_SHARED=ON -DTG_BUILD_TESTS=OFF
    -DTG_CUDA=OFF -DTG_GGML=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${C_COMPILER})
run("building the shared library" ${CMAKE_COMMAND} --build ${shared_build} --target tgsched -j2)
check_package(shared ${shared_build} TRUE)
message(STATUS "installed package: find_package and pkg-config builds ran")
