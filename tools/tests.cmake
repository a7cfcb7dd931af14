# Command-line tests of `tgsched` (label unit), included by cmake/tg_tests.cmake.
# Tests that expect a failure run the command through sh and print its exit
# status, so one regular expression checks the message and the exit code 2.
if(NOT TARGET tgsched-cli)
  return()
endif()

function(tg_cli_test name regex)
  add_test(NAME ${name} COMMAND tgsched-cli ${ARGN} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120 PASS_REGULAR_EXPRESSION "${regex}")
endfunction()

function(tg_cli_test_exit name regex)
  add_test(NAME ${name}
           COMMAND sh -c "\"$0\" \"$@\" 2>&1; echo \"exit=$?\"" $<TARGET_FILE:tgsched-cli> ${ARGN}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120 PASS_REGULAR_EXPRESSION "${regex}")
endfunction()

tg_cli_test_exit(cli_help "usage: tgsched VERB.*info .*exit=0" --help)
tg_cli_test_exit(cli_info_help "usage: tgsched info FILE.tg.*exit=0" info --help)

# Every corpus graph: counts from corpus/graphs (../shared/graphs/README.md).
foreach(entry "llama-tiny-prefill32:80:31" "tinyllama-1.1b-prefill512:798:251" "tinyllama-1.1b-decode:796:250"
              "llama-7b-prefill512-flash:999:361" "llama-7b-decode-flash:997:360")
  string(REPLACE ":" ";" parts "${entry}")
  list(GET parts 0 graph)
  list(GET parts 1 n_nodes)
  list(GET parts 2 n_leafs)
  tg_cli_test_exit(cli_info_${graph} "nodes +${n_nodes}\nleafs +${n_leafs}\n.*exit=0"
                   info corpus/graphs/${graph}.tg)
endforeach()

# Byte totals of the tiny graph, summed independently from its lines (f16 = 2, f32 = 4 bytes).
tg_cli_test(cli_info_tiny_bytes "weights +4.2 MiB \\(4436992 bytes\\) in 21 tensors.*data +0.2 MiB \\(262144 bytes\\) in 4 tensors"
            info corpus/graphs/llama-tiny-prefill32.tg)
tg_cli_test(cli_info_json "\"n_nodes\":999,\"n_leafs\":361,.*\"flash_attn_ext\":32"
            info --json corpus/graphs/llama-7b-prefill512-flash.tg)

# Bad input: the reader's message (file and line) on stderr, exit 2.
tg_cli_test_exit(cli_info_bad_source "tgsched info: tests/io/later_source.tg:5: source 2 is not defined.*exit=2"
                 info tests/io/later_source.tg)
tg_cli_test_exit(cli_info_bad_view "tests/io/view_out_of_range.tg:3: .*falls outside.*exit=2"
                 info tests/io/view_out_of_range.tg)
tg_cli_test_exit(cli_info_bad_rule
                 "tests/io/mul_mat_inner_dims.tg:5: node 2 'wx' \\(op mul_mat\\) breaks a rule of its op: the shared dimension.*exit=2"
                 info tests/io/mul_mat_inner_dims.tg)
tg_cli_test_exit(cli_info_missing_file "cannot open 'tests/io/absent.tg': No such file or directory.*exit=2"
                 info tests/io/absent.tg)

# Bad arguments: a usage message, exit 2.
tg_cli_test_exit(cli_no_verb "usage: tgsched VERB.*exit=2")
tg_cli_test_exit(cli_unknown_verb "unknown verb 'frobnicate'.*exit=2" frobnicate)
tg_cli_test_exit(cli_info_no_file "tgsched info: missing FILE.tg.*exit=2" info)
tg_cli_test_exit(cli_info_bad_option "unknown option '--colour'.*exit=2" info --colour corpus/graphs/llama-tiny-prefill32.tg)
tg_cli_test_exit(cli_info_two_files "one file at a time.*exit=2"
                 info corpus/graphs/llama-tiny-prefill32.tg corpus/graphs/llama-tiny-prefill32.tg)
