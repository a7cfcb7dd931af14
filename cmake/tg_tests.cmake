# Tests register themselves by file name, so adding a test is adding a file:
#   tests/unit/test_*.c     -> label unit
#   props/prop_*.c          -> label props
#   tests/cuda/test_*.c     -> label cuda (exit 77 = skipped without a GPU)
#   tests/backend/          -> label backend: the conformance harness (tests/backend/tests.cmake)
# Each test runs from the source root so it can read corpus/.
set(TG_TEST_LIBS tgsched)
foreach(lib tgoracle tggen)
  if(TARGET ${lib})
    list(APPEND TG_TEST_LIBS ${lib})
  endif()
endforeach()

# The op grid and the backend conformance harness (docs/backends.md): shared
# by test_cuda_ops and the conformance runs, and linkable into a backend
# author's own test program.
add_library(tgconformance STATIC ${CMAKE_SOURCE_DIR}/tests/backend/op_grid.c ${CMAKE_SOURCE_DIR}/tests/backend/sched_compare.c
            ${CMAKE_SOURCE_DIR}/tests/backend/conformance.c)
target_include_directories(tgconformance PUBLIC ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/tests/backend
                           PRIVATE ${CMAKE_SOURCE_DIR}/impl ${CMAKE_SOURCE_DIR}/backends)
target_link_libraries(tgconformance PUBLIC ${TG_TEST_LIBS})
list(APPEND TG_TEST_LIBS tgconformance)

function(tg_add_test_dir pattern label timeout)
  file(GLOB srcs CONFIGURE_DEPENDS ${pattern})
  foreach(src ${srcs})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/impl
                               ${CMAKE_SOURCE_DIR}/backends)
    target_link_libraries(${name} PRIVATE ${TG_TEST_LIBS})
    add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${name} PROPERTIES LABELS ${label} TIMEOUT ${timeout} SKIP_RETURN_CODE 77)
  endforeach()
endfunction()

tg_add_test_dir("${CMAKE_SOURCE_DIR}/tests/unit/test_*.c" unit 300)
tg_add_test_dir("${CMAKE_SOURCE_DIR}/props/prop_*.c" props 600)
tg_add_test_dir("${CMAKE_SOURCE_DIR}/tests/cuda/test_*.c" cuda 600)

# Extra registrations (command-line tests, fuzz replay, examples) live next to
# what they test, in optional fragments.
foreach(frag tools/tests.cmake tools/tests_plan.cmake tools/tests_cli_output.cmake tools/tests_cli_args.cmake
             tools/tests_graphs.cmake fuzz/replay.cmake examples/tests.cmake
             tests/api/tests.cmake tests/ggml/tests.cmake tests/backend/tests.cmake)
  include(${CMAKE_SOURCE_DIR}/${frag} OPTIONAL)
endforeach()
