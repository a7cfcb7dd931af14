# Runs EXE with ARGS (a ;-list) and fails unless its exit status is WANT.
execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL WANT)
  message(FATAL_ERROR "exit status ${rc}, want ${WANT}: ${err}")
endif()
