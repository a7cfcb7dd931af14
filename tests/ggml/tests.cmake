# Checks against upstream ggml (label ggml): built only when the pinned ggml
# is there (cmake/tg_ggml.cmake, TG_GGML); without it one test, ggml_checks_off,
# skips saying why.  The harness library tgggml holds the import, ggml buffer
# types and backends written against ggml's backend interface, and the
# differentials; each tests/ggml/test_*.c is one test.  Executables link as
# C++: ggml's core is C++.
if(NOT TG_GGML)
  add_executable(ggml_checks_off ${CMAKE_SOURCE_DIR}/tests/ggml/checks_off.c)
  add_test(NAME ggml_checks_off COMMAND ggml_checks_off "${TG_GGML_STATUS}")
  set_tests_properties(ggml_checks_off PROPERTIES LABELS ggml SKIP_RETURN_CODE 77)
  return()
endif()
file(GLOB TG_GGML_HARNESS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/ggml/ggml_*.c)
# the export users compile into their programs (README "Check your own ggml graphs")
add_library(tgggml STATIC ${TG_GGML_HARNESS} ${CMAKE_SOURCE_DIR}/tools/ggml-export/tg-ggml-export.c)
# ggml's internal headers (ggml-impl.h, ggml-backend-impl.h) are the backend
# author's interface; as system headers their own warnings stay theirs.
target_include_directories(tgggml SYSTEM PUBLIC ${TG_GGML_DIR}/src ${TG_GGML_DIR}/include)
target_include_directories(tgggml PUBLIC ${CMAKE_SOURCE_DIR}/tests/ggml ${CMAKE_SOURCE_DIR}/tools/ggml-export)
target_include_directories(tgggml PRIVATE ${CMAKE_SOURCE_DIR}/tests) # tg_test_child.h
target_link_libraries(tgggml PUBLIC ${TG_TEST_LIBS} tg_ggml_ref)

# the export as a user without ggml's internal headers compiles it
add_library(tg_ggml_export_headers_only OBJECT ${CMAKE_SOURCE_DIR}/tools/ggml-export/tg-ggml-export.c)
target_compile_definitions(tg_ggml_export_headers_only PRIVATE TG_EXPORT_NO_GGML_IMPL=1)
target_link_libraries(tg_ggml_export_headers_only PRIVATE tg_ggml_ref)

file(GLOB TG_GGML_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/ggml/test_*.c)
foreach(src ${TG_GGML_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/impl ${CMAKE_SOURCE_DIR}/backends)
  if(name STREQUAL "test_ggml_export_headers_only")
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tools/ggml-export)
    target_link_libraries(${name} PRIVATE tg_ggml_export_headers_only tgsched tg_ggml_ref)
  else()
    target_link_libraries(${name} PRIVATE tgggml)
  endif()
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE CXX)
  if(name STREQUAL "test_ggml_cli")
    if(NOT TARGET tgsched-cli)
      continue()
    endif()
    add_test(NAME ${name} COMMAND ${name} $<TARGET_FILE:tgsched-cli> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  else()
    add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS ggml TIMEOUT 300)
endforeach()

# fuzz_ggml (fuzz/ggml/fuzz_ggml.c): the allocator differential on fuzzed
# bytes; fuzz_ggml_sched (fuzz/ggml/fuzz_ggml_sched.c): the scheduler
# differential, values included.  As the targets of fuzz/replay.cmake: a
# replay of each corpus and its regressions always (labels ggml and
# fuzz-replay), the libFuzzer binaries with TG_FUZZ (link with clang++:
# -DCMAKE_CXX_COMPILER=clang++); ci/fuzz-smoke builds the AFL++ ones.
foreach(name fuzz_ggml fuzz_ggml_sched)
  add_executable(${name}_replay ${CMAKE_SOURCE_DIR}/fuzz/ggml/${name}.c ${CMAKE_SOURCE_DIR}/fuzz/replay_main.c)
  target_link_libraries(${name}_replay PRIVATE tgggml)
  set_target_properties(${name}_replay PROPERTIES LINKER_LANGUAGE CXX)
  add_test(NAME replay_${name} COMMAND ${name}_replay corpus/${name} corpus/regressions/${name}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(replay_${name} PROPERTIES LABELS "ggml;fuzz-replay" TIMEOUT 300)
  if(TG_FUZZ)
    add_executable(${name} ${CMAKE_SOURCE_DIR}/fuzz/ggml/${name}.c)
    target_link_libraries(${name} PRIVATE tgggml)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    set_target_properties(${name} PROPERTIES LINKER_LANGUAGE CXX)
  endif()
endforeach()

# The model graphs corpus/graphs adds to ../shared/graphs, written from ggml's
# own graphs by the export: rebuilt here and compared byte for byte with the corpus.
add_executable(export_model_graphs ${CMAKE_SOURCE_DIR}/tests/ggml/export_model_graphs.c)
target_link_libraries(export_model_graphs PRIVATE tgggml)
set_target_properties(export_model_graphs PROPERTIES LINKER_LANGUAGE CXX)
set(TG_EXPORTED ${CMAKE_BINARY_DIR}/exported-graphs)
add_test(NAME ggml_model_graphs_export COMMAND export_model_graphs ${TG_EXPORTED})
set_tests_properties(ggml_model_graphs_export PROPERTIES LABELS ggml FIXTURES_SETUP tg_exported_graphs)
foreach(graph llama-7b-decode llama-7b-prefill512 llama-tiny-decode-flash whisper-base-encoder)
  add_test(NAME ggml_model_graph_${graph}
           COMMAND ${CMAKE_COMMAND} -E compare_files ${TG_EXPORTED}/${graph}.tg ${CMAKE_SOURCE_DIR}/corpus/graphs/${graph}.tg)
  set_tests_properties(ggml_model_graph_${graph} PROPERTIES LABELS ggml FIXTURES_REQUIRED tg_exported_graphs)
endforeach()
