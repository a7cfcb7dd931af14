# Command-line tests of plan / check / run (label unit): exit codes, the report,
# the SVG, the JSON, and clear errors for bad input.  No ';' in an expected
# expression ('.' stands for it): cmake splits it there into a list, and a test
# passes when any one part matches.
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
# the cpu row of the memory table (size, lower bound, ratio, tensors): the
# plan meets its lower bound (ratio 1.000)
tg_cli_test(cli_plan_tiny ARGS plan ${tiny} EXPECT "\n +cpu +[0-9.]+ KiB +[0-9.]+ KiB +1\\.000 +[0-9]+ " EXIT 0)
tg_cli_test(cli_plan_reasons ARGS plan ${tiny} --nodes EXPECT "weights +mul_mat")
tg_cli_test(cli_plan_sim_layers ARGS plan ${tl} --backends sim:gpu0,cpu --layers-on gpu0:11
            EXPECT "3 splits" EXIT 0)
tg_cli_test(cli_plan_json ARGS plan ${tiny} --json EXPECT "\"buffers\":\\[\\{\"backend\":\"cpu\"")
tg_cli_test(cli_plan_ggml ARGS plan ${tl} --plan ggml EXPECT "1\\.193")
# A file with an allocator setup (buft/buffers lines): the graph allocator alone
tg_cli_test(cli_plan_alloc_case ARGS plan corpus/upstream/alloc-stale-plan-a.tg
            EXPECT "an allocator case: 1 buffer ids over 1 buffer types" EXIT 0)
tg_cli_test(cli_check_alloc_case ARGS check corpus/upstream/alloc-input-inplace.tg EXPECT "0 violations in [0-9]+ tensors: the plan is legal" EXIT 0)
# a read through a view with op none holds its root (both planners)
tg_cli_test(cli_check_none_view_read ARGS check corpus/upstream/alloc-none-view-read.tg --plan ggml
            EXPECT "0 violations in [0-9]+ tensors: the plan is legal" EXIT 0)
tg_cli_test(cli_check_none_view_read_best ARGS check corpus/upstream/alloc-none-view-read.tg
            EXPECT "0 violations in [0-9]+ tensors: the plan is legal" EXIT 0)
tg_cli_test(cli_check_corpus ARGS check ${tl} --svg ${CMAKE_BINARY_DIR}/cli_check.svg EXPECT "0 violations" EXIT 0)
# ggml's CPU plan judged with the 32-aligned buffer type it was made in (the 64-aligned default: 86 violations)
tg_cli_test(cli_check_plan_ggml ARGS check ${tl} --plan ggml EXPECT "0 violations" EXIT 0)
# pipeline copies are checked too (they were skipped, and the plan called legal)
tg_cli_test(cli_check_pipeline ARGS check ${tl} --backends sim:gpu,cpu --layers-on gpu:1 --n-copies 4
            EXPECT "0 violations" EXIT 0)
tg_cli_test(cli_check_7b_sim ARGS check corpus/graphs/llama-7b-decode-flash.tg --backends sim:gpu0,cpu
            --layers-on gpu0:16 EXPECT "0 violations" EXIT 0)
tg_cli_test(cli_run_tiny ARGS run ${tiny} EXPECT "compared, 0 mismatches" EXIT 0)
# counts in the singular where they are one ("1 splits on 1 backends", "1 CPU threads")
tg_cli_test(cli_run_singular ARGS run ${tiny} --threads 1 EXIT 0
            EXPECT "\n2 outputs compared, 0 mismatches \\(1 split on 1 backend\\)\n.*\ntime: [0-9.]+ s on 1 backend, [0-9.]+ s for the reference \\(1 CPU thread\\)")
tg_cli_test(cli_run_tiny_sim ARGS run ${tiny} --backends sim:gpu0,cpu --layers-on gpu0:1
            EXPECT "0 mismatches \\(3 splits" EXIT 0)
# a device without set_rows cannot hold the KV cache it must write: a clear error
tg_cli_test(cli_run_cache_on_device_without_set_rows ARGS run ${tiny} --backends sim:gpu0:ops=mul_mat+add,cpu
            --layers-on gpu0:1 EXIT 2)
# a node no CPU kernel computes: named with its op and every source's type and layout
tg_cli_test(cli_run_no_kernel ARGS run tests/io/no_kernel.tg
            EXPECT "node 0 'wx' \\(op mul_mat, f32 \\[8, 2, 1, 1\\] from 'w' q4_1 .*'x' f16 .*has no CPU kernel" EXIT 2)
tg_cli_test(cli_plan_bad_spec ARGS plan ${tiny} --backends sim:gpu0 EXIT 2)
tg_cli_test(cli_plan_bad_op ARGS plan ${tiny} --backends sim:gpu0:ops=frobnicate,cpu EXIT 2)
# a negative size is refused, not read as 2^64 - 5 (which wrapped the padding and crashed the planner)
tg_cli_test(cli_plan_negative_pad ARGS plan ${tiny} --backends sim:gpu0:pad=-5,cpu --layers-on gpu0:1
            EXPECT "bad option 'pad=-5'" EXIT 2)
# a padding that takes a tensor past the address space: refused, naming the tensor (it wrapped to a
# plan of 2,048 bytes that overlapped two live tensors)
tg_cli_test(cli_check_pad_past_address_space ARGS check tests/io/alloc_pad_past_address_space.tg
            EXPECT "tensor 'y' needs more bytes than any buffer can hold" EXIT 3)
# a device name a .tg backends line could not hold is refused
tg_cli_test(cli_plan_bad_sim_name ARGS plan ${tiny} "--backends" "sim:bad name!,cpu"
            EXPECT "a name is made of letters, digits" EXIT 2)
# a device name --layers-on could not name whole is refused, not cut short
tg_cli_test(cli_plan_long_sim_name ARGS plan ${tiny} --backends sim:gpu0123456789012345678901234567890,cpu
            EXPECT "the name is longer than 31 characters" EXIT 2)
tg_cli_test(cli_plan_missing ARGS plan no-such-file.tg EXIT 2)
tg_cli_test(cli_plan_bad_option ARGS plan ${tiny} --frob EXIT 2)
tg_cli_test(cli_check_help ARGS check --help EXPECT "usage: tgsched check" EXIT 0)

# ---- what a new user meets (issue 27) ----
# The summary leads; the per-node listing only with --nodes, and then with a
# legend of every reason it prints.
tg_cli_test(cli_plan_summary ARGS plan ${tl} EXIT 0
            EXPECT "memory .*lower bound.*cpu +41.50 MiB +41.50 MiB +1.000.*fullest at step [0-9]+ \\(kq-[0-9]+\\) with 41.50 MiB live.*more +--nodes")
set_tests_properties(cli_plan_summary PROPERTIES FAIL_REGULAR_EXPRESSION "\n +[0-9]+ cpu +(weights|expand)")
tg_cli_test(cli_plan_nodes_legend ARGS plan ${tiny} --nodes
            EXPECT "step backend +reason.*\n +0 cpu +weights +get_rows +inp_embd.*reasons \\(why.*\n  weights +reads weights.*\n  expand down +took")
tg_cli_test(cli_run_nodes_refused ARGS run ${tiny} --nodes EXIT 2)
# A device that gets no work says why and what to do; --layers-on is
# documented and checked against the graph's layers.
tg_cli_test(cli_plan_idle_device ARGS plan ${tl} --backends sim:gpu0,cpu EXIT 0
            EXPECT "note +gpu0 runs no node: an op runs where its weights are.*--layers-on gpu0:N \\(N from 1 to 22")
tg_cli_test(cli_plan_help_layers ARGS plan --help EXPECT "--layers-on B:N +weights and KV cache of layers 0..N-1" EXIT 0)
tg_cli_test(cli_run_help_layers ARGS run --help EXPECT "--layers-on B:N" EXIT 0)
tg_cli_test_exit(cli_layers_past_the_graph "--layers-on gpu0:100: the graph has 22 layers \\(0..21\\). give N from 1 to 22.*exit=2"
                 plan ${tl} --backends sim:gpu0,cpu --layers-on gpu0:100)
tg_cli_test_exit(cli_layers_zero "--layers-on gpu0:0: the graph has 22 layers.*exit=2"
                 plan ${tl} --backends sim:gpu0,cpu --layers-on gpu0:0)
tg_cli_test(cli_layers_note ARGS plan ${tl} --backends sim:gpu0,cpu --layers-on gpu0:22
            EXPECT "placed the 242 weight and KV-cache tensors of layers 0..21 \\(of 22\\)")
tg_cli_test_exit(cli_run_svg_refused "--svg is an option of plan and check only.*exit=2" run ${tiny} --svg out.svg)
tg_cli_test_exit(cli_plan_seed_refused "--seed is an option of run only.*exit=2" plan ${tiny} --seed 3)
# A buffer the device cannot hold is a resource failure: exit 3, not "bad input".
tg_cli_test_exit(cli_plan_resource_exit "max buffer size.*exit=3" plan ${tiny} --backends sim:gpu0:max=1K,cpu --layers-on gpu0:1)
tg_cli_test_exit(cli_run_resource_exit "max buffer size.*exit=3" run ${tiny} --backends sim:gpu0:max=1K,cpu --layers-on gpu0:1)
tg_cli_test(cli_help_exit_codes ARGS --help EXPECT "3 out of resources" EXIT 0)

# A device whose max buffer size splits its compute buffer into two chunks: the table counts the
# tensors of both (it counted the first chunk's 171 of 226), each chunk's fullest step is its own,
# and the JSON's peak is the backend's over both chunks (it was the first chunk's 17.50 MiB, below
# the lower bound of 41.50 MiB)
set(chunked ${tl} --backends sim:gpu0:max=36M,cpu --layers-on gpu0:11)
tg_cli_test(cli_plan_chunks ARGS plan ${chunked} EXIT 0
            EXPECT "\n +gpu0 +50.50 MiB +41.50 MiB +1.217 +226 +1.58 GiB\n.*gpu0 chunk 1 of 2 is fullest at step [0-9]+ .*gpu0 chunk 2 of 2 is fullest")
# the SVG's panels in the text report's order (by backend), a chunk not measured against the
# backend's lower bound (it read "17.50 MiB against a lower bound of 41.50 MiB (ratio 0.422)")
add_test(NAME cli_svg_chunks_order
         COMMAND sh -c "out=$1.svg && shift && \"$0\" plan \"$@\" --svg \"$out\" >/dev/null 2>&1 && grep -o '[a-z0-9]* compute buffer[^<]*' \"$out\""
                 $<TARGET_FILE:tgsched-cli> ${CMAKE_BINARY_DIR}/cli_svg_chunks ${chunked} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_svg_chunks_order PROPERTIES LABELS unit TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "^gpu0 compute buffer, chunk 1 of 2: 171 tensors, 17.50 MiB\ngpu0 compute buffer, chunk 2 of 2: 55 tensors, 33.00 MiB\ncpu compute buffer: 233 tensors, 41.50 MiB against a lower bound of 41.50 MiB \\(ratio 1.000\\)\n$")

# --json: exactly one document per call, errors included, its exit_code the
# process's (tests/cli/check_json.py parses it with Python's json module).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  function(tg_json_test name)
    cmake_parse_arguments(T "" "" "EXPECT;ARGS" ${ARGN})
    add_test(NAME ${name} COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/cli/check_json.py
             $<TARGET_FILE:tgsched-cli> ${T_EXPECT} -- ${T_ARGS} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120 PASS_REGULAR_EXPRESSION "1 passed, 0 failed")
  endfunction()
  tg_json_test(cli_json_info ARGS info --json ${tiny} EXPECT verb="info" n_nodes=80)
  tg_json_test(cli_json_info_missing ARGS info --json tests/io/absent.tg EXPECT status="bad_input")
  tg_json_test(cli_json_plan_offsets ARGS plan ${tiny} --json
               EXPECT verb="plan" buffers.0.backend="cpu" buffers.0.tensors.0.offset? buffers.0.tensors.0.first_step?
                      buffers.0.peak_step? splits.0.inputs?)
  # --plan ggml: the CPU's buffer in ggml's CPU buffer type (aligned to 32): ggml_gallocr's 344,480 bytes
  # for this graph (test_ggml_cli compares every offset where ggml is built)
  tg_json_test(cli_json_plan_ggml ARGS plan ${tiny} --plan ggml --json EXPECT policy="ggml" buffers.0.size=344480)
  tg_json_test(cli_json_alloc_case ARGS check corpus/upstream/alloc-inplace-other-buffer.tg --json
               EXPECT allocator_case=true buffers.1.buffer_id=1 buffers.1.type="dev" buffers.0.tensors.0.offset?
                      check.violations=[])
  tg_json_test(cli_json_check ARGS check ${tiny} --json EXPECT verb="check" check.violations=[] buffers.0.size?)
  tg_json_test(cli_json_check_idle_note ARGS check ${tl} --backends sim:gpu0,cpu --json EXPECT notes.0?)
  tg_json_test(cli_json_run ARGS run ${tiny} --json EXPECT mismatches=0 outputs.1.match=true)
  # two chunks: every tensor of the backend, numbered by chunk; the peak over both
  tg_json_test(cli_json_plan_chunks ARGS plan ${chunked} --json
               EXPECT buffers.0.backend="gpu0" buffers.0.peak_step=33 buffers.0.peak_live=43520000
                      buffers.0.tensors.0.chunk=0 buffers.0.tensors.225.chunk=1 buffers.1.tensors.0.chunk=0)
  tg_json_test(cli_json_run_uncomputable ARGS run tests/io/no_kernel.tg --json EXPECT exit_code=2)
  tg_json_test(cli_json_run_resource ARGS run ${tiny} --json --backends sim:gpu0:max=1K,cpu --layers-on gpu0:1
               EXPECT exit_code=3 status="resource")
  tg_json_test(cli_json_usage_error ARGS plan --json --frob ${tiny} EXPECT exit_code=2)
  tg_json_test(cli_json_unknown_verb ARGS frobnicate --json EXPECT verb="")
endif()

# The memory map as a person sees it: rendered to PNG by a real SVG renderer
# (rsvg-convert; ci/setup installs librsvg2-bin, skipped only outside CI
# without it), every label checked in the pixels, the legend complete.
if(Python3_FOUND)
  # name; a label that must be there (the tensors that make the peak, named with their sizes); tgsched args
  foreach(case "cpu;^kq-0 32.00 MiB, steps 23-24$;${tl}"
               "split;^kq-11 32.00 MiB, steps 433-434$;${tl};--backends;sim:gpu0,cpu;--layers-on;gpu0:11"
               "tiny;^ffn_silu-0 96.0 KiB, steps;${tiny}"
               "ggml;^size, reached by kq-0: 49.51 MiB$;${tl};--plan;ggml")
    list(POP_FRONT case name expect)
    add_test(NAME cli_svg_render_${name}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/cli/check_svg_render.py $<TARGET_FILE:tgsched-cli>
                     ${CMAKE_BINARY_DIR}/svg-render-${name} --expect "^fullest step [0-9]+$"
                     --expect "^live at the fullest step [0-9]+: " --expect "${expect}" -- plan ${case}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(cli_svg_render_${name} PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77
                         PASS_REGULAR_EXPRESSION "[1-9][0-9]* passed, 0 failed")
  endforeach()
endif()

# MiniMalloc CSV files: the interval planner (tools/plan_intervals.c), hand-derived
# answers.  Its example meets its bound of 12 and has no plan at 11.
tg_cli_test(cli_plan_csv ARGS plan corpus/dsa/example.12.csv EXPECT "peak 12 bytes, 1.0000 x the bound" EXIT 0)
# a .tg option on a CSV file: the hint names the CSV help, which lists the options that apply
tg_cli_test_exit(cli_plan_csv_bad_option "unknown option '--nodes' for a CSV file\n\\(see 'tgsched plan FILE\\.csv --help'\\).*exit=2"
                 plan corpus/dsa/example.12.csv --nodes)
tg_cli_test(cli_plan_csv_infeasible ARGS plan corpus/dsa/example.12.csv --capacity 11
            EXPECT "no plan fits the capacity \\(proved\\)" EXIT 1)
# a pre-placed 2-byte buffer at 4 leaves holes of 4 and 4 in 10 bytes: 3 fits below it, 5 only above (ends at 11)
tg_cli_test(cli_plan_csv_fixed ARGS plan tests/io/intervals_fixed.csv --json
            EXPECT "\"lower_bound\":10,\"capacity\":0,\"peak\":11,\"result\":\"planned\"" EXIT 0)
tg_cli_test(cli_plan_csv_fixed_capacity ARGS plan tests/io/intervals_fixed.csv --capacity 10 --exact 0.1
            EXPECT "no plan fits the capacity \\(proved\\)" EXIT 1)
# two 3-byte buffers aligned to 4: the second starts at 4, so 7, not the bound 6
tg_cli_test(cli_check_csv_aligned ARGS check tests/io/intervals_aligned.csv EXPECT "peak 7 bytes.*0 violations" EXIT 0)
# a plan read back (every offset given) whose B at 100 breaks its alignment of 64: a violation
tg_cli_test(cli_check_csv_plan_misaligned ARGS check tests/io/intervals_plan_misaligned.csv
            EXPECT "1 violation. the first: buffer 1 at 100, not a multiple of its alignment 64 \\(buffer 'B'\\)" EXIT 1)
# a challenging instance at its capacity, judged by the oracle; the plan written and read back as fixed offsets
tg_cli_test(cli_check_csv_challenging ARGS check corpus/dsa/C.1048576.csv --capacity 1048576
            --out ${CMAKE_BINARY_DIR}/cli_plan_C.csv EXPECT "fits the capacity.*0 violations" EXIT 0)
add_test(NAME cli_check_csv_written
         COMMAND sh -c "\"$0\" plan corpus/dsa/E.1048576.csv --out \"$1\" >/dev/null && \"$0\" check \"$1\""
                 $<TARGET_FILE:tgsched-cli> ${CMAKE_BINARY_DIR}/cli_plan_E.csv WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_check_csv_written PROPERTIES LABELS unit TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "215 buffers \\(215 pre-placed\\).*0 violations")
# a fuzz_sched graph's planning problem (76 blocks, 64-byte aligned): the local search after
# the canonical search at the bound reaches the bound; without it, that search with twice the
# work and the ladder after it end at 41,344 bytes
tg_cli_test(cli_plan_csv_local_search ARGS plan tests/io/intervals_local_search.csv
            EXPECT "peak 40960 bytes, 1.0000 x the bound" EXIT 0)
# the generated instances' known optimum (bench/gen_intervals.c --plan), judged by the oracle
add_test(NAME gen_intervals_optimum
         COMMAND sh ${CMAKE_SOURCE_DIR}/bench/check_gen_intervals.sh $<TARGET_FILE:gen_intervals>
                 $<TARGET_FILE:tgsched-cli> ${CMAKE_BINARY_DIR}/gen_intervals_optimum)
set_tests_properties(gen_intervals_optimum PROPERTIES LABELS unit TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "40 generated plans legal")
# two pre-placed buffers live together at [0,100) and [50,150): named, no plan; a third at 50 lives later
tg_cli_test(cli_plan_csv_fixed_overlap ARGS plan tests/io/intervals_fixed_overlap.csv
            EXPECT "pre-placed buffers 'kv' .0, 100. and 'scratch' .50, 150. are live together" EXIT 1)
# check has no plan to judge there, and never calls one legal
tg_cli_test(cli_check_csv_fixed_overlap ARGS check tests/io/intervals_fixed_overlap.csv
            EXPECT "are live together.*\ncheck +not run: there is no plan to check" EXIT 1)
set_tests_properties(cli_check_csv_fixed_overlap PROPERTIES FAIL_REGULAR_EXPRESSION "legal|0 violations")
tg_cli_test(cli_check_csv_fixed_overlap_json ARGS check tests/io/intervals_fixed_overlap.csv --json
            EXPECT "\"peak\":null,.*\"check\":null,.*\"exit_code\":1" EXIT 1)
tg_cli_test(cli_plan_csv_bad_lifetime ARGS plan tests/io/intervals_empty_lifetime.csv
            EXPECT "intervals_empty_lifetime.csv:3: the buffer must be live over .lower, upper. with lower < upper" EXIT 2)
tg_cli_test(cli_plan_csv_gaps ARGS plan tests/io/intervals_gaps.csv EXPECT "gaps column is not supported" EXIT 2)
# two buffers named 'scratch' (lines 3 and 6, a blank line between): the plan written could not tell them apart
tg_cli_test(cli_plan_csv_duplicate_ids ARGS plan tests/io/intervals_duplicate_ids.csv
            EXPECT "intervals_duplicate_ids.csv:6: id 'scratch' is taken by the buffer at line 3" EXIT 2)
# a pre-placed buffer at 3 with alignment 8 contradicts itself: refused by plan and by check
# (a plan written with it kept at 3 would fail the check of a whole plan)
tg_cli_test(cli_plan_csv_fixed_misaligned ARGS plan tests/io/intervals_fixed_misaligned.csv
            EXPECT "intervals_fixed_misaligned.csv:2: buffer 'a' is pre-placed at 3, not a multiple of its alignment 8" EXIT 2)
tg_cli_test(cli_check_csv_fixed_misaligned ARGS check tests/io/intervals_fixed_misaligned.csv
            EXPECT "buffer 'a' is pre-placed at 3, not a multiple of its alignment 8" EXIT 2)
# ids are written back whole: a 229-character id (a long tensor name) stays one
add_test(NAME cli_plan_csv_long_ids
         COMMAND sh -c "\"$0\" plan tests/io/intervals_long_ids.csv --out \"$1\" >/dev/null && cut -d, -f1 \"$1\" > \"$1.ids\" && cut -d, -f1 tests/io/intervals_long_ids.csv | cmp - \"$1.ids\" && echo same ids"
                 $<TARGET_FILE:tgsched-cli> ${CMAKE_BINARY_DIR}/cli_plan_long_ids.csv WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_plan_csv_long_ids PROPERTIES LABELS unit TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "same ids")
tg_cli_test(cli_plan_csv_bad_capacity ARGS plan corpus/dsa/example.12.csv --capacity lots EXIT 2)
tg_cli_test(cli_plan_csv_zero_capacity ARGS plan corpus/dsa/example.12.csv --capacity 0
            EXPECT "--capacity takes a number of bytes above 0" EXIT 2)
tg_cli_test(cli_plan_csv_bad_threads ARGS plan corpus/dsa/example.12.csv --threads 0 EXPECT "--threads takes 1..64" EXIT 2)
# the searches' turns on helper threads: the same plan, byte for byte, for 1, 2 and 3 threads, judged by the oracle
add_test(NAME cli_plan_csv_threads
         COMMAND sh -c "for t in 1 2 3; do \"$0\" check corpus/dsa/A.1048576.csv --threads $t --out \"$1.$t\" || exit 1; done && cmp \"$1.1\" \"$1.2\" && cmp \"$1.1\" \"$1.3\" && echo same plans"
                 $<TARGET_FILE:tgsched-cli> ${CMAKE_BINARY_DIR}/cli_plan_threads_A.csv WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_plan_csv_threads PROPERTIES LABELS unit TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "on 3 threads.*0 violations.*same plans")
