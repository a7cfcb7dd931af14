# Command-line tests of plan / check / run (label unit): exit codes, the report,
# the SVG, the JSON, and clear errors for bad input.
function(tg_cli_test name)
  cmake_parse_arguments(T "" "EXPECT;EXIT" "ARGS" ${ARGN})
  add_test(NAME ${name} COMMAND tgsched-cli ${T_ARGS} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120)
  if(T_EXPECT)
    set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${T_EXPECT}")
  elseif(T_EXIT AND NOT T_EXIT EQUAL 0)
    set_tests_properties(${name} PROPERTIES WILL_FAIL TRUE)
  endif()
  if(T_EXIT)
    # exit status checked through a wrapper: ctest only knows zero / non-zero
    add_test(NAME ${name}_status COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:tgsched-cli> "-DARGS=${T_ARGS}"
             -DWANT=${T_EXIT} -P ${CMAKE_SOURCE_DIR}/cmake/tg_exit_status.cmake WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${name}_status PROPERTIES LABELS unit TIMEOUT 120)
  endif()
endfunction()

set(tiny corpus/graphs/llama-tiny-prefill32.tg)
set(tl corpus/graphs/tinyllama-1.1b-prefill512.tg)
tg_cli_test(cli_plan_tiny ARGS plan ${tiny} EXPECT "cpu .*ratio|1\\.000" EXIT 0)
tg_cli_test(cli_plan_reasons ARGS plan ${tiny} EXPECT "weights +mul_mat")
tg_cli_test(cli_plan_sim_layers ARGS plan ${tl} --backends sim:gpu0,cpu --layers-on gpu0:11
            EXPECT "3 splits" EXIT 0)
tg_cli_test(cli_plan_json ARGS plan ${tiny} --json EXPECT "\"buffers\":\\[\\{\"backend\":\"cpu\"")
tg_cli_test(cli_plan_ggml ARGS plan ${tl} --plan ggml EXPECT "1\\.193")
tg_cli_test(cli_check_corpus ARGS check ${tl} --svg ${CMAKE_BINARY_DIR}/cli_check.svg EXPECT "0 violations" EXIT 0)
tg_cli_test(cli_check_7b_sim ARGS check corpus/graphs/llama-7b-decode-flash.tg --backends sim:gpu0,cpu
            --layers-on gpu0:16 EXPECT "0 violations" EXIT 0)
tg_cli_test(cli_run_tiny ARGS run ${tiny} EXPECT "0 mismatches" EXIT 0)
tg_cli_test(cli_run_tiny_sim ARGS run ${tiny} --backends sim:gpu0,cpu --layers-on gpu0:1
            EXPECT "0 mismatches \\(3 splits" EXIT 0)
# a device without set_rows cannot hold the KV cache it must write: a clear error
tg_cli_test(cli_run_cache_on_device_without_set_rows ARGS run ${tiny} --backends sim:gpu0:ops=mul_mat+add,cpu
            --layers-on gpu0:1 EXIT 2)
tg_cli_test(cli_run_quantized ARGS run corpus/graphs/tinyllama-1.1b-decode.tg EXIT 2)
tg_cli_test(cli_plan_bad_spec ARGS plan ${tiny} --backends sim:gpu0 EXIT 2)
tg_cli_test(cli_plan_bad_op ARGS plan ${tiny} --backends sim:gpu0:ops=frobnicate,cpu EXIT 2)
tg_cli_test(cli_plan_missing ARGS plan no-such-file.tg EXIT 2)
tg_cli_test(cli_plan_bad_option ARGS plan ${tiny} --frob EXIT 2)
tg_cli_test(cli_check_help ARGS check --help EXPECT "usage: tgsched check" EXIT 0)
