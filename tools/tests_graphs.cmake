# Real model graphs computed as a user runs them (label graphs): `tgsched run`
# on the decode graphs of corpus/graphs, the scheduler's plan on the CPU
# against the naive plan bit for bit, and split with the simulated GPU
# against the CPU alone.  Random weights are made on the fly (7B: 3.6 GiB of
# weights shared by both runs, 2 GiB of KV cache each), so these run one at
# a time, and the sanitizer and coverage builds leave them out (minutes under
# instrumentation, double the memory).  Prefill graphs run in bench/run.
if(NOT TARGET tgsched-cli OR TG_SANITIZE OR TG_COVERAGE)
  return()
endif()

function(tg_graph_run name graph)
  add_test(NAME graph_run_${name} COMMAND tgsched-cli run corpus/graphs/${graph}.tg ${ARGN}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(graph_run_${name} PROPERTIES LABELS graphs TIMEOUT 900 RUN_SERIAL TRUE
                       PASS_REGULAR_EXPRESSION "outputs? compared, 0 mismatches \\(")
endfunction()

tg_graph_run(tinyllama_decode tinyllama-1.1b-decode)
tg_graph_run(tinyllama_decode_sim tinyllama-1.1b-decode --backends sim:gpu0,cpu --layers-on gpu0:11)
tg_graph_run(llama7b_decode llama-7b-decode)
tg_graph_run(llama7b_decode_flash_sim llama-7b-decode-flash --backends sim:gpu0,cpu --layers-on gpu0:16)
