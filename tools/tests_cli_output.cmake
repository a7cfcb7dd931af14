# What `tgsched` writes (label unit), included by cmake/tg_tests.cmake after
# tools/tests_plan.cmake, whose tg_cli_test(NAME ARGS ... EXPECT "regex" EXIT n)
# these use: messages and exit status that say what happened, CSV fields read
# strictly, JSON and SVG that parse whatever bytes a name holds, output files
# written whole or not at all, and stdout write errors reported.
if(NOT TARGET tgsched-cli)
  return()
endif()
set(io tests/io)
set(tiny corpus/graphs/llama-tiny-prefill32.tg)
set(bin ${CMAKE_BINARY_DIR}/cli-output)
file(MAKE_DIRECTORY ${bin})

# A command run through sh, its output matched by one regular expression.
function(tg_output_sh_test name script regex)
  add_test(NAME ${name} COMMAND sh -c "${script}" $<TARGET_FILE:tgsched-cli> ${ARGN}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120 PASS_REGULAR_EXPRESSION "${regex}"
                       SKIP_RETURN_CODE 77)
endfunction()

# ---- a plan that passes the address space (the planner's peak saturates at SIZE_MAX) ----
# Two buffers of 2^64 - 1 bytes live together: no plan exists.  It said "written X" without
# writing, exit 0, check blamed pre-placed buffers there were none of, JSON "result":"planned".
tg_cli_test(cli_output_csv_past_address_space ARGS plan ${io}/cli_output_past_address_space.csv
            --out ${bin}/past.csv EXPECT "live at step 1 need more than [0-9]+ bytes \\(SIZE_MAX\\) together: no plan fits in the address space \\(--out: nothing written\\)" EXIT 2)
set_tests_properties(cli_output_csv_past_address_space PROPERTIES FAIL_REGULAR_EXPRESSION "written +[^ ]")
tg_cli_test(cli_output_csv_past_address_space_check ARGS check ${io}/cli_output_past_address_space.csv
            EXPECT "no plan fits in the address space" EXIT 2)
set_tests_properties(cli_output_csv_past_address_space_check PROPERTIES FAIL_REGULAR_EXPRESSION "clash|legal")
tg_output_sh_test(cli_output_csv_past_address_space_not_created
                  "rm -f \"$1\" && \"$0\" plan tests/io/cli_output_past_address_space.csv --out \"$1\"; echo exit=$? && test ! -e \"$1\" && echo absent"
                  "exit=2\nabsent" ${bin}/never.csv)
# the sizes fit, but a pre-placed buffer at 10 leaves 10 bytes below it and the other needs 2^64 - 16:
# any plan would wrap past SIZE_MAX; tg_plan_intervals refuses it (bad input, and never a clash)
tg_cli_test(cli_output_csv_no_room_below_max ARGS check ${io}/cli_output_no_room_below_max.csv
            EXPECT "cli_output_no_room_below_max.csv: .*past SIZE_MAX" EXIT 2)
set_tests_properties(cli_output_csv_no_room_below_max PROPERTIES FAIL_REGULAR_EXPRESSION "clash|legal|written")
# clashing pre-placed buffers: no plan, so nothing is written, and the report says so
tg_cli_test(cli_output_csv_clash_not_written ARGS plan tests/io/intervals_fixed_overlap.csv --out ${bin}/clash.csv
            EXPECT "\nnot written [^\n]*clash.csv: there is no plan" EXIT 1)
set_tests_properties(cli_output_csv_clash_not_written PROPERTIES FAIL_REGULAR_EXPRESSION "\nwritten ")

find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  # tests/cli/check_json.py: stdout one JSON document, its exit_code and status the process's
  function(tg_output_json_test name)
    cmake_parse_arguments(T "" "" "EXPECT;ARGS" ${ARGN})
    add_test(NAME ${name} COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/cli/check_json.py
             $<TARGET_FILE:tgsched-cli> ${T_EXPECT} -- ${T_ARGS} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120 PASS_REGULAR_EXPRESSION "1 passed, 0 failed")
  endfunction()
  tg_output_json_test(cli_output_json_past_address_space ARGS plan ${io}/cli_output_past_address_space.csv --json
                      EXPECT status="bad_input" exit_code=2)
  # `tgsched --json` without a verb: still one document (it printed none)
  tg_output_json_test(cli_output_json_no_verb ARGS --json EXPECT verb="" status="bad_input")
  # a meta key of 131 characters stays whole (keys were cut at 127, and these two became one)
  string(REPEAT "k" 130 long_key)
  tg_output_json_test(cli_output_json_long_meta_keys ARGS info --json ${io}/cli_output_long_meta.tg
                      EXPECT meta.${long_key}a="1" meta.${long_key}b="2")
  # two inputs of 2^63 bytes: the total saturates (it wrapped to 0 and read "16 bytes") and a note says so
  tg_output_json_test(cli_output_json_bytes_past ARGS info --json ${io}/cli_output_bytes_past.tg
                      EXPECT bytes.inputs=18446744073709551615 notes.0?)

  # every document valid UTF-8 JSON: a name with byte 0xff and a control character (the 0xff was
  # copied through), and a multi-byte name kept as it is
  tg_output_sh_test(cli_output_json_utf8
                    "\"$0\" plan tests/io/cli_output_name_bytes.tg --json > \"$1\" && \"$2\" -m json.tool \"$1\" > /dev/null && grep -q 'bad\\\\u00ffname\\\\u0001ctl' \"$1\" && \"$0\" info --json tests/io/cli_output_name_bytes.tg > \"$1\" && \"$2\" -m json.tool \"$1\" > /dev/null && \"$0\" plan tests/io/cli_output_name_multibyte.tg --json > \"$1\" && \"$2\" -m json.tool \"$1\" > /dev/null && grep -q '名名名名名名名名名名名名名名名名名名名名' \"$1\" && echo valid"
                    "^valid\n$" ${bin}/utf8.json ${Python3_EXECUTABLE})

  # the SVG is well-formed XML (xml.dom.minidom): a long UTF-8 name was cut inside a character,
  # and control characters and stray bytes were written raw
  set(parse_svg "print('well-formed', __import__('xml.dom.minidom').dom.minidom.parse(__import__('sys').argv[1]).documentElement.tagName)")
  foreach(case name_multibyte name_bytes)
    tg_output_sh_test(cli_output_svg_${case}
                      "\"$0\" plan tests/io/cli_output_${case}.tg --svg \"$1\" > /dev/null && \"$2\" -c \"$3\" \"$1\""
                      "well-formed svg" ${bin}/${case}.svg ${Python3_EXECUTABLE} "${parse_svg}")
  endforeach()
endif()

# ---- CSV fields: digits only, offsets inside the address space, every field counted ----
# " -5" read as 2^64 - 5 (strtoull skips the blank and takes the sign)
tg_cli_test(cli_output_csv_blank_minus_size ARGS plan ${io}/cli_output_blank_minus_size.csv
            EXPECT "cli_output_blank_minus_size.csv:2: size must be a whole number" EXIT 2)
tg_cli_test(cli_output_csv_blank_minus_alignment ARGS plan ${io}/cli_output_blank_minus_alignment.csv
            EXPECT "cli_output_blank_minus_alignment.csv:2: alignment must be a whole number" EXIT 2)
tg_cli_test(cli_output_csv_blank_minus_capacity ARGS plan corpus/dsa/example.12.csv --capacity " -5"
            EXPECT "--capacity takes a number of bytes above 0" EXIT 2)
# a pre-placed buffer that ends past SIZE_MAX: the file and line (it was the library's message, by index)
tg_cli_test(cli_output_csv_offset_past ARGS plan ${io}/cli_output_offset_past.csv
            EXPECT "cli_output_offset_past.csv:3: buffer 'kv' pre-placed at 18446744073709551610 with 10 bytes ends past the address space" EXIT 2)
# 11 fields were reported as 7
tg_cli_test(cli_output_csv_too_many_fields ARGS plan ${io}/cli_output_too_many_fields.csv
            EXPECT "cli_output_too_many_fields.csv:3: 11 fields where the header names 4" EXIT 2)

# ---- stdout write errors: a report that could not be printed is a failed write (exit 3) ----
tg_output_sh_test(cli_output_stdout_full
                  "test -w /dev/full || exit 77; for a in \"plan $1\" \"plan $1 --json\" \"info $1\" \"plan corpus/dsa/example.12.csv\" \"check corpus/dsa/example.12.csv --capacity 11\"; do \"$0\" $a > /dev/full 2>> \"$2\"; printf 'exit=%s ' $?; done; grep -c 'cannot write the output' \"$2\"; rm -f \"$2\""
                  "^exit=3 exit=3 exit=3 exit=3 exit=3 5\n$" ${tiny} ${bin}/stdout_full.err)

# ---- output files whole or not at all: a write that fails part way keeps the earlier file ----
# RLIMIT_FSIZE (ulimit -f, 1 KiB here) makes the write fail after the target was truncated; SIGXFSZ
# ignored, so the write returns EFBIG instead.  A coverage build's profile goes to /dev/null there (the
# limit would cut it short, and ci/coverage could not merge it)
foreach(case "svg;plan ${tiny} --svg" "csv;plan corpus/dsa/E.1048576.csv --out")
  list(GET case 0 kind)
  list(GET case 1 call)
  tg_output_sh_test(cli_output_${kind}_kept_on_failed_write
                    "printf 'earlier contents\\n' > \"$1\" && (trap '' XFSZ && ulimit -f 2 && LLVM_PROFILE_FILE=/dev/null exec \"$0\" ${call} \"$1\" > /dev/null 2>&1); echo exit=$? && cat \"$1\" && for t in \"$1\".tmp*; do test -e \"$t\" && echo \"left behind $t\"; done; echo end"
                    "^exit=3\nearlier contents\nend\n$" ${bin}/kept.${kind})
endforeach()
# a successful write still lands where asked, and only there
tg_output_sh_test(cli_output_csv_written_whole
                  "rm -f \"$1\" \"$1\".tmp* && \"$0\" plan corpus/dsa/example.12.csv --out \"$1\" > /dev/null && cat \"$1\" && ls \"$1\"*"
                  "^id,lower,upper,size,offset\nb1,0,3,4,[0-9]+\n.*b5,0,21,4,[0-9]+\n[^\n]*whole.csv\n$" ${bin}/whole.csv)
