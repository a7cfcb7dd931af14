# The public API as a user's compiler sees it: a dropped status is a warning
# (an error with -Werror), checked by compiling tests/api/ignored_status.c.
if(NOT CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  return()
endif()
foreach(variant dropped used)
  set(defs "")
  if(variant STREQUAL "used")
    set(defs -DUSE_STATUS)
  endif()
  add_test(NAME api_status_${variant}
           COMMAND ${CMAKE_C_COMPILER} -std=c11 -c -o ${CMAKE_BINARY_DIR}/api_status_${variant}.o -Werror=unused-result ${defs}
                   -I${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/tests/api/ignored_status.c)
  set_tests_properties(api_status_${variant} PROPERTIES LABELS unit TIMEOUT 60)
endforeach()
# the dropped status must fail, and for that reason
set_tests_properties(api_status_dropped PROPERTIES PASS_REGULAR_EXPRESSION "unused.result|warn_unused_result"
                     FAIL_REGULAR_EXPRESSION "No such file|undeclared|implicit declaration")
