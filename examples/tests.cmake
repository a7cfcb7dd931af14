# The library example, built in-tree and run by ctest; and the install test:
# install into a scratch prefix, build the example against the installed
# package with find_package(tgsched) and with pkg-config's flags, run both.
add_executable(schedule_cpu_sim ${CMAKE_SOURCE_DIR}/examples/schedule_cpu_sim.c)
target_link_libraries(schedule_cpu_sim PRIVATE tgsched)
add_test(NAME example_schedule_cpu_sim COMMAND schedule_cpu_sim)
set_tests_properties(example_schedule_cpu_sim PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "results identical")

# Packaging is checked in plain builds only: an instrumented library needs the
# sanitizer / coverage runtime the consumer project does not link.
if(TG_SANITIZE OR TG_COVERAGE OR TG_FUZZ)
  return()
endif()
add_test(NAME example_installed_package
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
                 -DC_COMPILER=${CMAKE_C_COMPILER} -P ${CMAKE_SOURCE_DIR}/cmake/tg_install_test.cmake)
set_tests_properties(example_installed_package PROPERTIES LABELS unit TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "installed package: find_package and pkg-config builds ran")
