# Fuzz targets (fuzz/targets/fuzz_*.c, each defines LLVMFuzzerTestOneInput):
#  - always: <target>_replay linked with fuzz/replay_main.c, and a ctest
#    `replay_<target>` (label fuzz-replay) over corpus/<target>/ and
#    corpus/regressions/<target>/, so every crash ever found stays a test;
#  - with TG_FUZZ (clang): the libFuzzer binary <target>.
# AFL++ binaries are built by ci/fuzz-smoke (afl-clang-fast + fuzz/afl_main.c).
file(GLOB TG_FUZZ_TARGETS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/targets/fuzz_*.c)
foreach(src ${TG_FUZZ_TARGETS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name}_replay ${src} ${CMAKE_SOURCE_DIR}/fuzz/replay_main.c)
  # impl/: a target may also hold an internal search against its references
  target_include_directories(${name}_replay PRIVATE ${CMAKE_SOURCE_DIR}/fuzz ${CMAKE_SOURCE_DIR}/impl)
  target_link_libraries(${name}_replay PRIVATE ${TG_TEST_LIBS})
  add_test(NAME replay_${name}
           COMMAND ${name}_replay corpus/${name} corpus/regressions/${name}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(replay_${name} PROPERTIES LABELS fuzz-replay TIMEOUT 600 SKIP_RETURN_CODE 77)
  if(TG_FUZZ)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/fuzz ${CMAKE_SOURCE_DIR}/impl)
    target_link_libraries(${name} PRIVATE ${TG_TEST_LIBS})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  endif()
endforeach()

# The decoder tool: prints what a fuzz input or a property seed decodes to.
add_executable(tg-fuzz-decode ${CMAKE_SOURCE_DIR}/fuzz/tg_fuzz_decode.c)
target_link_libraries(tg-fuzz-decode PRIVATE ${TG_TEST_LIBS})
add_test(NAME fuzz_decode_seed COMMAND tg-fuzz-decode --target sched --seed 7 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(fuzz_decode_seed PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "tgraph 1")
