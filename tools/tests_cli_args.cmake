# Argument handling of plan / check / run (label unit): values that are not
# what an option takes, options a file cannot use, and input from a pipe.
# Each test runs tgsched through sh and prints its exit status, so that one
# regular expression checks the message and the code.  They run in the build
# tree: a bad value taken as a path (`--svg --json`) must not land in the sources.
if(NOT TARGET tgsched-cli)
  return()
endif()

set(args_dir ${CMAKE_BINARY_DIR}/cli_args)
file(MAKE_DIRECTORY ${args_dir})
set(args_tiny ${CMAKE_SOURCE_DIR}/corpus/graphs/llama-tiny-prefill32.tg)
set(args_alloc ${CMAKE_SOURCE_DIR}/corpus/upstream/alloc-free-blocks.tg)

# name, the regular expression, then tgsched's arguments
function(tg_cli_args_test name regex)
  add_test(NAME ${name} COMMAND sh -c "\"$0\" \"$@\" 2>&1; echo \"exit=$?\"" $<TARGET_FILE:tgsched-cli> ${ARGN}
           WORKING_DIRECTORY ${args_dir})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120 PASS_REGULAR_EXPRESSION "${regex}")
endfunction()

# name, the regular expression, a shell command with $0 for tgsched
function(tg_cli_args_sh name regex script)
  add_test(NAME ${name} COMMAND sh -c "${script} 2>&1; echo \"exit=$?\"" $<TARGET_FILE:tgsched-cli>
           WORKING_DIRECTORY ${args_dir})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120 PASS_REGULAR_EXPRESSION "${regex}")
endfunction()

# --seed: a decimal number of 64 bits (-1 and 10^23 read as 2^64 - 1, "" as 0)
set(seed_error "--seed takes a decimal number from 0 to 18446744073709551615, not")
tg_cli_args_test(cli_args_seed_negative "${seed_error} '-1'.*exit=2" run ${args_tiny} --seed -1)
tg_cli_args_test(cli_args_seed_too_large "${seed_error} '99999999999999999999999'.*exit=2"
                 run ${args_tiny} --seed 99999999999999999999999)
tg_cli_args_sh(cli_args_seed_empty "${seed_error} ''.*exit=2" "\"$0\" run ${args_tiny} --seed ''")
tg_cli_args_test(cli_args_seed_max "0 mismatches.*exit=0" run ${args_tiny} --seed 18446744073709551615)

# Layer numbers past what --layers-on can name are part of a weight's name, not
# layers (docs/json.md: n_layers counts the layers blk.N.* name)
tg_cli_args_test(cli_args_layer_huge "\"n_layers\":1}.*exit=0"
                 plan --json ${CMAKE_SOURCE_DIR}/tests/io/cli_args_layer_huge.tg)
tg_cli_args_test(cli_args_layer_int_max "\"n_layers\":1}.*exit=0"
                 plan --json ${CMAKE_SOURCE_DIR}/tests/io/cli_args_layer_int_max.tg)
# --layers-on naming a backend --backends lacks: the message blames the option, not the file
tg_cli_args_test(cli_args_layers_on_undefined_backend
                 "--layers-on gpu1:1 names backend 'gpu1', which --backends does not define \\(add e.g. sim:gpu1.*exit=2"
                 plan ${args_tiny} --backends sim:gpu0,cpu --layers-on gpu1:1)

# --layers-on N past the most it takes is refused, not cut to an int (2^32 + 1 would read as 1)
tg_cli_args_test(cli_args_layers_on_past_max "--layers-on 'gpu0:4294967297': N must be a number of layers from 1 to 1000000.*exit=2"
                 plan ${args_tiny} --backends sim:gpu0,cpu --layers-on gpu0:4294967297)
tg_cli_args_test(cli_args_layer_no_dot "\"n_layers\":1}.*exit=0"
                 plan --json ${CMAKE_SOURCE_DIR}/tests/io/cli_args_layer_no_dot.tg)
tg_cli_args_test(cli_args_layers_on_long_name "--layers-on 'a2345678901234567890123456789012:1': the backend name must be 1 to 31.*exit=2"
                 plan ${args_tiny} --backends sim:gpu0,cpu --layers-on a2345678901234567890123456789012:1)
tg_cli_args_test(cli_args_plan_unknown "--plan takes 'ggml' or 'best'.*exit=2" plan ${args_tiny} --plan greedy)
# a file with the most backends it may hold: --layers-on cannot add one more
tg_cli_args_test(cli_args_layers_on_past_max_backends "too many backends.*exit=2"
                 plan ${CMAKE_SOURCE_DIR}/tests/io/cli_args_sixteen_backends.tg
                 --backends sim:g0,sim:g1,sim:g2,sim:g3,sim:g4,sim:g5,sim:g6,sim:g7,sim:g8,sim:g9,sim:g10,sim:g11,sim:g12,sim:g13,sim:g14,cpu
                 --layers-on extra:1)
# --threads and --n-copies: their bounds and only the values they take
tg_cli_args_test(cli_args_threads_zero "--threads takes 1..64.*exit=2" run ${args_tiny} --threads 0)
tg_cli_args_test(cli_args_n_copies_two "--n-copies takes 1 or 4 \\(pipeline parallel\\).*exit=2" plan ${args_tiny} --n-copies 2)
tg_cli_args_test(cli_args_layer_huge_placed "placed the 1 weight and KV-cache tensors of layers 0..0 \\(of 1\\).*exit=0"
                 plan ${CMAKE_SOURCE_DIR}/tests/io/cli_args_layer_huge.tg --backends sim:gpu0,cpu --layers-on gpu0:1)

# A file that states its allocator setup is planned by the graph allocator
# alone: options it cannot use are refused by name, not ignored (no SVG, exit 0)
tg_cli_args_test(cli_args_alloc_case_refuses
                 "--backends, --n-copies, --layers-on, --svg do not apply to .*alloc-free-blocks.tg: the file states its own allocator setup.*exit=2"
                 plan ${args_alloc} --svg up.svg --backends sim:zzz,cpu --n-copies 4 --layers-on foo:3)
tg_cli_args_test(cli_args_alloc_case_nodes "--nodes does not apply to .*only --plan and --json apply.*exit=2"
                 check ${args_alloc} --nodes)
tg_cli_args_test(cli_args_alloc_case_default_copies "--n-copies does not apply.*exit=2" plan ${args_alloc} --n-copies 1)
tg_cli_args_test(cli_args_alloc_case_honoured "\"policy\":\"ggml\",\"allocator_case\":true.*exit=0"
                 check ${args_alloc} --plan ggml --json)

# A value that is an option: the value is missing, not named --json
tg_cli_args_test(cli_args_svg_then_option "--svg needs an output path, not the option '--json'.*exit=2"
                 plan ${args_tiny} --svg --json)
set_tests_properties(cli_args_svg_then_option PROPERTIES FAIL_REGULAR_EXPRESSION "memory map written")
tg_cli_args_test(cli_args_backends_then_option "--backends needs a spec, not the option '--nodes'.*exit=2"
                 plan ${args_tiny} --backends --nodes)
tg_cli_args_test(cli_args_layers_on_then_option "--layers-on needs BACKEND:N, not the option '--json'.*exit=2"
                 check ${args_tiny} --layers-on --json)

# --layers-on names a backend as --backends and the file's backends line do
set(name_error "the backend name must be 1 to 31 letters, digits, '_', '.' or '-'")
tg_cli_args_test(cli_args_layers_on_comma "--layers-on 'a,b:1': ${name_error}.*exit=2" plan ${args_tiny} --layers-on a,b:1)
tg_cli_args_test(cli_args_layers_on_space "--layers-on 'bad name!:1': ${name_error}.*exit=2"
                 plan ${args_tiny} --layers-on "bad name!:1")
tg_cli_args_test(cli_args_layers_on_dotted "on gpu.0.*exit=0"
                 plan ${args_tiny} --backends sim:gpu.0,cpu --layers-on gpu.0:1)

# Piped input: the file is read once (every verb parses it more than once)
tg_cli_args_sh(cli_args_stdin_plan "graph +/dev/stdin: 80 nodes.*exit=0" "cat ${args_tiny} | \"$0\" plan /dev/stdin")
tg_cli_args_sh(cli_args_stdin_run "0 mismatches.*exit=0" "cat ${args_tiny} | \"$0\" run /dev/stdin")
tg_cli_args_sh(cli_args_stdin_alloc_case "an allocator case.*0 violations.*the plan is legal.*exit=0"
               "cat ${args_alloc} | \"$0\" check /dev/stdin")
