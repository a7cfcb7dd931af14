# The backend conformance harness (docs/backends.md): the project's backends
# must conform; a small host backend must conform, and each of its broken
# variants must be caught by the part that exists to catch it.
add_executable(backend_conformance ${CMAKE_SOURCE_DIR}/tests/backend/backend_conformance.c)
target_link_libraries(backend_conformance PRIVATE ${TG_TEST_LIBS})
foreach(target cpu sim host-mul-mat host-queued cuda)
  add_test(NAME conformance_${target} COMMAND backend_conformance ${target} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(conformance_${target} PROPERTIES LABELS backend TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
set_property(TEST conformance_cuda APPEND PROPERTY LABELS cuda)
# name, then the part that must fail
foreach(pair "host-strides;ops" "host-claims-none;ops"
             "host-alloc-size;buffers" "host-set-offset;buffers" "host-get-offset;buffers" "host-memset-offset;buffers"
             "host-clear-last;buffers" "host-base-header;buffers" "host-align-zero;buffers" "host-no-empty;buffers"
             "host-alloc-cap;buffers" "host-twin-type;buffers" "host-init-view;buffers" "host-get-async-offset;buffers"
             "host-inverted;buffers" "host-skip-last;graphs" "host-first-only;graphs" "host-claims-broadcast;graphs"
             "host-take-failure;async" "host-sync-forgets;async" "host-event-compute;async" "host-event-transfer;async")
  list(GET pair 0 target)
  list(GET pair 1 part)
  add_test(NAME conformance_catches_${target} COMMAND backend_conformance ${target} --expect-failure ${part}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(conformance_catches_${target} PROPERTIES LABELS backend TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "the ${part} part caught the defect")
endforeach()

# A backend of your own (docs/backends.md):
#   cmake -S . -B build/rel -DTG_CONFORMANCE_BACKEND=path/mybackend.c -DTG_CONFORMANCE_FACTORY=my_backend
#   cmake --build build/rel --target backend_conformance_external
#   ctest --test-dir build/rel -R conformance_external --output-on-failure
set(TG_CONFORMANCE_BACKEND "" CACHE FILEPATH "C sources of a backend to hold to the conformance harness")
set(TG_CONFORMANCE_FACTORY "" CACHE STRING "Its function making the backend: tg_backend *FACTORY(void)")
set(TG_CONFORMANCE_GRAPH_NMSE 0 CACHE STRING "NMSE its random-graph results may have against the CPU (0: bit for bit)")
if(TG_CONFORMANCE_BACKEND)
  if(NOT TG_CONFORMANCE_FACTORY)
    message(FATAL_ERROR "TG_CONFORMANCE_BACKEND needs TG_CONFORMANCE_FACTORY: the function that makes the backend")
  endif()
  add_executable(backend_conformance_external ${CMAKE_SOURCE_DIR}/tests/backend/backend_conformance.c
                 ${TG_CONFORMANCE_BACKEND})
  target_compile_definitions(backend_conformance_external PRIVATE TG_CONFORMANCE_FACTORY=${TG_CONFORMANCE_FACTORY}
                             TG_CONFORMANCE_GRAPH_NMSE=${TG_CONFORMANCE_GRAPH_NMSE})
  target_link_libraries(backend_conformance_external PRIVATE ${TG_TEST_LIBS})
  add_test(NAME conformance_external COMMAND backend_conformance_external external WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(conformance_external PROPERTIES LABELS backend TIMEOUT 300)
endif()
